/* exec.h: the exec engine (exec.c): one CommandRequest per session on the sandbox's Connect
 * stream, its output written to the run's transcript first and then to the session's sink.
 *
 * A sink is the client's side, whatever carries it (the admin API's upgraded stream or NDJSON
 * answer, the admin gRPC Exec call): exec writes to it and knows nothing of it. A session
 * without a sink (detached: the create's cmd, or a client that left) runs on into its
 * transcript only. */
#ifndef AGENTIC_MGMT_EXEC_H
#define AGENTIC_MGMT_EXEC_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "base/base.h"
#include "sandbox/request.h"

struct sandbox;

struct exec_sink_ops {
	const char *client;  /* its word in the "exec started" log line: ndjson, stream, grpc */
	/* Output of stream 0 (stdout) or 1 (stderr). 0, or -errno: the sink takes no more and
	 * the session forgets it (the transcript is not affected). */
	int (*output)(void *ctx, int stream, const void *data, size_t len);
	/* The command ended (the session forgets the sink): its exit code and duration, why it
	 * failed (error, or NULL) and why the transcript is incomplete (or NULL). */
	void (*done)(void *ctx, int32_t exit_code, int64_t duration_ms, const char *error,
		     const char *transcript_error);
	/* The stdin given to exec_stdin was sent on: more may come. NULL: the client sends no
	 * stdin, and the command sees its end at once. */
	void (*stdin_taken)(void *ctx);
};

struct exec_sink {
	const struct exec_sink_ops *ops;
	void *ctx;
};

/* An internal client: stdout gathered into a bounded buffer (what does not fit is counted,
 * not kept; stderr only counted), then on_done once with the result. For agenticd's own
 * commands (the verifier's probe): nothing waits for it, the loop goes on. */
#define EXEC_COLLECT_BYTES LIMIT_EXEC_COLLECT_BYTES

struct exec_collect {
	char out[EXEC_COLLECT_BYTES + 1]; /* NUL-terminated */
	uint32_t len;
	uint64_t dropped;             /* stdout bytes past the buffer, and all of stderr */
	bool done;
	int32_t exit_code;
	bool failed;                  /* the command could not start or was stopped */
	void (*on_done)(struct exec_collect *c);
	void *ctx;
};
/* c's sink (c->on_done and ctx set by the caller; the rest cleared). */
void exec_collect_sink(struct exec_collect *c, struct exec_sink *sink);

/* Writes the command's start line, then sends the CommandRequest; the session feeds sink (a
 * copy is kept; NULL: detached). Returns the session index, or ERR_LIMIT (too many), ERR_STATE
 * (the agent is not connected), -EAGAIN (the agent's send queue is full), or another negative
 * errno: the transcript cannot be written (exec_transcript_error), nothing was started. */
int exec_begin(struct sandbox *sb, const struct exec_req *req, const struct exec_sink *sink);
static inline bool exec_transcript_error(int x)
{
	return x < 0 && x != ERR_LIMIT && x != ERR_STATE && x != -EAGAIN;
}
/* Stdin from the client: takes up to len bytes (0 when a chunk is still in flight: the sink's
 * stdin_taken says when to offer more). */
size_t exec_stdin(int32_t x, const void *data, size_t len, bool eof);
/* A tty session's new window size (req->tty: the session runs on a pseudo-terminal in the
 * init, its output all stream 0, its stdin typed into the terminal): sent to the init as
 * PtyControl.resize. 0, -ESRCH (no such session), -EINVAL (not a tty), -EAGAIN (the agent
 * cannot take it now: dropped; the next resize carries the size). */
int exec_resize(int32_t x, uint16_t rows, uint16_t cols);
/* The client is gone: the sink is forgotten, stdin ends, output goes on to the transcript. */
void exec_detach(int32_t x);
/* A session's command gets signal sig (PtyControl.signal: the init signals its process group
 * as the workload user): 0, -ESRCH (no such session), or the agent's send error. */
int exec_signal(int32_t x, int sig);
/* The session is running (its result has not come). */
bool exec_alive(int32_t x);
/* A command id as agenticd writes it, "x<slot>.<gen>", read back exactly: each number decimal
 * digits only (no sign, space or leading zero) and within 32 bits; 0 or -EINVAL. */
int exec_id_parse(const char *id, uint32_t *slot, uint32_t *gen);
/* The session table's size and slots (static; in the memory budget). */
size_t exec_table_bytes(void);
uint32_t exec_table_slots(void);
/* From the agent stream. Output goes to the transcript, then what of it was written (all of it
 * when exact is false) to the sink; returns how much the transcript took. A result is
 * written (seq > 0: the init's numbering) and then reported; false when its line could not
 * be written, and then nothing happened. */
size_t exec_output(struct sandbox *sb, const char *id, int stream, const void *data, size_t len,
		   bool exact);
/* command_us: the init's own measure of the command (duration_us), 0 when it sent none; the
 * log line "exec ended" says it beside init_us, the time from the request sent to the init
 * to its result here. */
bool exec_result(struct sandbox *sb, const char *id, int32_t code, int64_t duration_ms,
		 int64_t command_us, const char *error, uint64_t seq);
void exec_stdin_ack(struct sandbox *sb, const char *id, uint64_t consumed);
/* The agent can take messages again (on_writable, a reconnect). */
void exec_agent_writable(struct sandbox *sb);
/* The sandbox's init is gone for good (container stopped, removed): every session ends. */
void exec_sandbox_gone(struct sandbox *sb, const char *why);

#endif
