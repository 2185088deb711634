/* cmdtab.h: the workload command table (cmd.c), private to the init's command files: cmd.c
 * (slots, pipes, output, results), cmdenv.c (the environment and the exec area a supervisor
 * reads) and pty.c (pseudo-terminals). cmdenv.c and pty.c call nothing in cmd.c. */
#ifndef AGENTIC_INIT_CMDTAB_H
#define AGENTIC_INIT_CMDTAB_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "init/init.h"

#define REC_HDR 5                 /* an output record: kind byte, 32-bit length, data */
#define REC_STDOUT 1
#define REC_STDERR 2

struct init_cmd {
	int used;
	char id[LIMIT_INIT_COMMAND_ID + 1];
	pid_t sup;                /* the supervisor, until the init reaps it */
	pid_t pgid;               /* the command's process group, from the supervisor */
	int pending_sig;          /* a signal asked for before pgid came: sent when it comes */
	int sup_status;
	int sup_reaped;
	int fd[INIT_FD_COUNT];         /* init's ends; -1 once closed. A tty command's: the
					* pty's master in IN (writing) and OUT (reading), no ERR */
	int tty;                  /* it runs on a pseudo-terminal (pty.c) */
	int watched[INIT_FD_COUNT];    /* registered with the event loop */
	int stdin_eof;            /* close stdin once its buffer drains */
	uint64_t stdin_written, stdin_acked;
	int timed_out;
	int stopped;              /* its supervisor was told to kill the tree */
	int shutdown;             /* the sandbox is stopping: SIGTERM went to its group */
	int32_t timeout_s;
	int fail_stage, fail_errno;
	int64_t started_ms, deadline_ms, reaped_ms;
	int64_t started_us, reaped_us; /* the same, finer: the result's duration_us */
	char error[INIT_ERROR_BYTES];
	struct buf out, in;
};

struct refusal {
	char id[LIMIT_INIT_COMMAND_ID + 1];
	char error[INIT_ERROR_BYTES];
};

struct init_cmds {
	struct init_cmds_config cfg;
	struct init_cmd cmd[LIMIT_INIT_COMMANDS];
	struct refusal refusals[LIMIT_INIT_REFUSALS];
	unsigned ref_head, ref_len;
	unsigned cursor;
	int64_t kill_at;          /* stopping: when the trees still alive are killed (0: not) */
	/* what init_cmds_peek handed out: a refusal (-1) or a slot, and whether a result */
	int peek_slot, peek_result;
	const char **base_env;    /* environ without AGENT_*, HOME, USER, LOGNAME, then the
				   * claim's env (init_cmds_claim) */
	size_t nbase;
	char **environ;           /* the container's environment */
	char home[LIMIT_PATH_BYTES], user[64];
	uint8_t *scratch;         /* the exec area: what the supervisor of the command being
				   * started reads (argv, envp, their strings, cwd) */
	size_t scratch_used;      /* how much of it the last build_exec wrote */
};

/* ---- cmdenv.c ---- */
/* The base env: the container's (without AGENT_*, HOME, USER, LOGNAME), less what the claim's
 * nclaim entries ("K=V" each after the other) replace, then those. 0 or ERR_LIMIT (and then
 * nbase is 0: the caller refuses). */
int cmd_base_env_fill(struct init_cmds *c, const char *claim, size_t nclaim);
/* Builds what the supervisor needs from req in the exec area (argv, envp, PATH, cwd), every
 * string copied there. 0, or an error with *why on refusal. */
int cmd_build_exec(struct init_cmds *c, const Agentic__Sandbox__V1__CommandRequest *req,
		   struct init_spawn *sp, const char **why);

/* ---- pty.c ---- */
/* A new pseudo-terminal of rows x cols (0: 24 x 80), opened as the init's control uid:
 * *master (O_NONBLOCK, close-on-exec) and *slave (close-on-exec: the supervisor's dup2 makes
 * it the command's 0, 1 and 2). 0, or -errno with nothing left open. */
int cmd_pty_open(uint32_t rows, uint32_t cols, int *master, int *slave);
/* A new window size (the kernel sends SIGWINCH to the foreground process group). */
int cmd_pty_resize(int master, uint32_t rows, uint32_t cols);
/* The terminal's EOF character (c_cc[VEOF], ^D unless changed) typed once: stdin has ended. */
void cmd_pty_eof(int master);
/* The terminal's foreground process group, or 0 when it has none. */
pid_t cmd_pty_foreground(int master);

#endif
