/* cli_internal.h: private to src/cli/: what the verbs' files share: the options every verb
 * takes, the one request to agenticd and its answer (cli_api.c), and each verb with its help
 * text, for the table in cli.c. cli.c calls the verbs; the verbs call cli_api.c; nothing
 * calls back up. */
#ifndef AGENTIC_CLI_INTERNAL_H
#define AGENTIC_CLI_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"
#include "http/frame.h"
#include "http/http.h"
#include "json/json.h"
#include "profile/profile.h"

#define DEFAULT_SOCKET "/run/agentic/admin.sock"
#define BODY_MAX LIMIT_CLI_BODY_BYTES
#define MAX_ENV LIMIT_SANDBOX_ENV
#define MAX_MOUNTS LIMIT_SANDBOX_MOUNTS
#define MAX_CMD LIMIT_SANDBOX_CMD_ARGS
/* cli_read_answer: out_fd could not be written */
#define ANSWER_OUT_FAILED (ERR_RANGE_CLI - 1)

struct opts {
	bool json;
	const char *socket;
};

/* ---- cli_api.c ---- */

/* --json and --socket, for every verb's help. */
extern const char cli_common_help[];
/* The one connection to agenticd, the answer's body (NUL-terminated) and the JSON tokens. */
extern struct http_conn cli_conn;
extern char cli_body[BODY_MAX + 1];
extern struct json_token cli_tok[65536];

/* Reads agenticd's answer on cli_conn until it ends or upgrades. The body is gathered into
 * cli_body (NUL-terminated, at most BODY_MAX bytes; the parser refuses more), except that a
 * 200 body is written to out_fd instead when out_fd >= 0. Returns the last http_conn_wait
 * event: HTTP_EV_DONE, HTTP_EV_UPGRADE, or an error (ANSWER_OUT_FAILED). */
int cli_read_answer(int out_fd);
/* cli_body holds len bytes of an answer read some other way (cp's upload). */
void cli_body_taken(size_t len);
/* Prints an error answer; returns the exit status 1. */
int cli_api_error(int status);
/* One request that must be answered with status want. Returns 0 with the answer parsed into
 * doc (when doc is not NULL); -1 when --json printed it as it came; else the exit status. */
int cli_call(const struct opts *o, const char *method, const char *target, const char *data,
	     size_t len, int want, struct json_doc *doc);
/* argv[*i] as --json or --socket PATH: 1 taken, 0 not one of them, -1 PATH missing. */
int cli_common_opt(struct opts *o, int argc, char **argv, int *i);
/* Prints help and the common options; returns the exit status 2. */
int cli_usage_error(const char *help);
/* obj's member key as text into out ("" when absent, "-" for null). */
const char *cli_field(const struct json_doc *doc, int obj, const char *key, char *out,
		      size_t size);
/* "key": [v[0], ... v[n-1]] */
void cli_json_strs(struct json_writer *w, const char *key, const char *const *v, int n);
/* The API path of sandbox name into out; -1 (said why) when name is not a sandbox name. */
int cli_name_target(const char *name, char *out, size_t size);
/* Writes all of data (EINTR retried); 0 or -1. */
int cli_write_all(int fd, const void *data, size_t len);

/* ---- the verbs in their own files: each run, and its help text ---- */

int cli_verb_create(int argc, char **argv, struct opts *o);   /* cli_create.c */
extern const char cli_create_help[];
int cli_verb_posture(int argc, char **argv, struct opts *o);  /* cli_posture.c */
extern const char cli_posture_help[];
/* The tier of the sandbox at obj ("-" when its answer has none). */
const char *cli_posture_tier(const struct json_doc *doc, int obj, char *out, size_t size);
/* "T0 (env_credential, network_unverified)": the posture object at p, on one line. */
const char *cli_posture_line(const struct json_doc *doc, int p, char *out, size_t size);
int cli_verb_egress(int argc, char **argv, struct opts *o);
extern const char cli_egress_help[];
int cli_verb_exec(int argc, char **argv, struct opts *o);     /* cli_exec.c */
/* ---- cli_tty.c: the caller's terminal, for exec -t ---- */
/* fd (a terminal) into raw mode, put back by cli_tty_restore, at exit and by the signals that
 * end this process; SIGWINCH noted (cli_tty_winched). 0 or -errno. */
int cli_tty_raw(int fd);
void cli_tty_restore(void);
/* True once per window change since the last call. */
bool cli_tty_winched(void);
/* The terminal's size: 0, or -1. */
int cli_tty_size(uint16_t *rows, uint16_t *cols);

extern const char cli_exec_help[];
int cli_verb_logs(int argc, char **argv, struct opts *o);
extern const char cli_logs_help[];
int cli_verb_cp(int argc, char **argv, struct opts *o);       /* cli_cp.c */
extern const char cli_cp_help[];
int cli_verb_e2bkey(int argc, char **argv, struct opts *o);   /* cli_e2bkey.c */
extern const char cli_e2bkey_help[];
int cli_verb_fleet(int argc, char **argv, struct opts *o);    /* cli_fleet.c */
int cli_fleet_ls_sandboxes(struct opts *o);                   /* cli_fleet.c: ls --fleet */
extern const char cli_fleet_help[];

#endif
