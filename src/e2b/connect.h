/* connect.h: the Connect protocol as the E2B SDK speaks it (JSON codec over HTTP/1.1), and the
 * proto3-JSON messages of envd's process.Process service (spec/envd process.proto). Pure code:
 * bytes in, structs out, and envelopes written into a caller's struct buf; no I/O.
 *
 * Envelope: flags u8, length u32 big-endian, then length bytes of JSON. A request stream is one
 * message envelope; a response stream is message envelopes (flags 0) and one end-stream
 * envelope (flags CONNECT_END) last. Compressed envelopes are refused: the SDK sends none and
 * accepts none.
 *
 * Decoding follows proto3 JSON: unknown fields and null values are ignored, uint32/int64 come
 * as a number or a decimal string, enums as their name or number, bytes as standard base64
 * (padded or not). Every field of these messages has one word, so its camelCase
 * and snake_case names are the same. Strings land in the caller's text storage. */
#ifndef AGENTIC_E2B_CONNECT_H
#define AGENTIC_E2B_CONNECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define CONNECT_HDR 5             /* flags + length */
#define CONNECT_COMPRESSED 0x01
#define CONNECT_END 0x02
#define CONNECT_TAG_BYTES 64      /* a process tag, with its NUL */
#define CONNECT_MAX_ARGS (LIMIT_SANDBOX_CMD_ARGS - 1) /* beside cmd */
#define CONNECT_MAX_ENVS LIMIT_SANDBOX_ENV

/* The one message envelope of a streamed request's body. 0 with *msg and *msg_len (the JSON);
 * -ENOTSUP: compressed; ERR_PARSE: short, longer than one envelope, an end-stream, or
 * flags no envelope has (a bare JSON body);
 * ERR_LIMIT: its length is over max. */
int connect_envelope_decode(const uint8_t *body, size_t len, size_t max, const uint8_t **msg,
			    size_t *msg_len);

/* ---- requests ---- */

struct connect_start {
	const char *cmd;
	const char *args[CONNECT_MAX_ARGS];
	uint32_t nargs;
	const char *env_key[CONNECT_MAX_ENVS], *env_val[CONNECT_MAX_ENVS];
	uint32_t nenv;
	const char *cwd;      /* NULL: not given */
	bool with_stdin;      /* stdin; absent: true, as envd (older SDKs send none) */
	bool pty;
	uint16_t rows, cols;
	char tag[CONNECT_TAG_BYTES]; /* "" when none */
};

/* StartRequest{process:{cmd,args,envs,cwd}, pty?{size{cols,rows}}, tag?, stdin?} into s, its
 * strings copied into text. 0, ERR_PARSE (not JSON, a field of the wrong type, no cmd), or
 * ERR_LIMIT (more args or envs than the limits, text too small, tag too long); *why says
 * which, for the client. */
int connect_start_parse(const char *json, size_t len, struct connect_start *s, char *text,
			size_t cap, const char **why);

enum connect_signal { CONNECT_SIG_NONE = 0, CONNECT_SIG_TERM = 15, CONNECT_SIG_KILL = 9 };

/* The requests that name a process: Connect, SendInput, SendSignal, CloseStdin, Update. */
struct connect_proc {
	bool has_pid;
	uint32_t pid;
	char tag[CONNECT_TAG_BYTES];   /* selector by tag when !has_pid and tag[0] */
	int signal;                    /* SendSignal: 9, 15, or another number given */
	bool has_input, input_pty;     /* SendInput: input{stdin|pty} */
	size_t input_len;              /* the decoded bytes, in the caller's data buffer */
	bool has_size;                 /* Update: pty{size{cols,rows}} */
	uint16_t rows, cols;
};

/* Any of those requests into r (input bytes decoded into data[0..cap)). 0, ERR_PARSE or
 * ERR_LIMIT (input over cap), with *why. A request naming no process is ERR_PARSE. */
int connect_proc_parse(const char *json, size_t len, struct connect_proc *r, uint8_t *data,
		       size_t cap, const char **why);

/* ---- responses (each a whole envelope appended to out: 0 or ERR_LIMIT, out unchanged) ---- */

enum connect_out { CONNECT_STDOUT, CONNECT_STDERR, CONNECT_PTY };

struct connect_end_event {
	int32_t exit_code;
	bool exited;          /* ended by exit(), not by a signal */
	const char *status;   /* "exit status 3", "signal: killed" */
	const char *error;    /* NULL: none */
};

int connect_event_start(struct buf *out, uint32_t pid);
int connect_event_data(struct buf *out, enum connect_out which, const void *data, size_t len);
int connect_event_keepalive(struct buf *out);
int connect_event_end(struct buf *out, const struct connect_end_event *e);
/* The end-stream envelope: {} when code is NULL, else {"error":{"code","message"}}. */
int connect_end_stream(struct buf *out, const char *code, const char *message);
/* The envelope bytes a data event of len bytes takes, at most. */
size_t connect_data_bytes(size_t len);

/* ProcessConfig JSON {"cmd","args","envs","cwd"} of s into out, no envelope (for List): the
 * whole config when it fits in cap; else without envs; else cmd and args cut to fit. 0, or
 * ERR_LIMIT when not even cmd fits. */
int connect_config_encode(struct buf *out, size_t cap, const struct connect_start *s);
/* One ListResponse: {"processes":[...]} from n items (config: from connect_config_encode). */
struct connect_info {
	uint32_t pid;
	const char *config;
	size_t config_len;
	const char *tag;      /* "" or NULL: none */
};
int connect_list_encode(struct buf *out, const struct connect_info *items, uint32_t n);

/* base64 (standard alphabet, padded) of len bytes: the characters it takes. */
static inline size_t connect_b64_len(size_t len)
{
	return (len + 2) / 3 * 4;
}

#endif
