/* cmd.c: workload commands (docs/SECURITY.md): each runs as the workload uid under its own
 * subreaper supervisor, which keeps the control uid; its output is kept in a bounded buffer
 * until the agent channel takes it, and the pipes (or a tty command's pty master) are left
 * unread while that buffer is full. The environment and exec area are cmdenv.c's, the
 * pseudo-terminal pty.c's (the table: cmdtab.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "init/env.h"
#include "init/cmdtab.h"
#include "init/init.h"


static const char *const stage_names[] = {
	[INIT_STAGE_DROP] = "taking the workload identity",
	[INIT_STAGE_SUBREAPER] = "becoming the command's subreaper",
	[INIT_STAGE_FDS] = "setting up the command's stdio",
	[INIT_STAGE_FORK] = "forking the command",
	[INIT_STAGE_CHDIR] = "entering the working directory",
	[INIT_STAGE_EXEC] = "executing the command",
	[INIT_STAGE_TTY] = "taking the pseudo-terminal as its controlling terminal",
};

/* ---- storage ---- */


static size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

size_t init_cmds_storage_bytes(void)
{
	/* 128: the arena may pad the first pieces to their alignment */
	return 128 + align64(sizeof(struct init_cmds)) +
	       LIMIT_INIT_COMMANDS * align64(LIMIT_INIT_OUTPUT_BYTES + LIMIT_INIT_STDIN_BYTES) +
	       LIMIT_INIT_ENV_VARS * sizeof(char *);
}

int init_cmds_setup(const struct init_cmds_config *cfg, void *storage, size_t len,
		    struct init_cmds **out, const char **why)
{
	struct arena carve;
	struct init_cmds *c;

	*why = "the command table does not fit its storage";
	if (len < init_cmds_storage_bytes())
		return ERR_LIMIT;
	arena_init(&carve, storage, len);
	c = arena_alloc(&carve, sizeof(*c), 64);
	memset(c, 0, sizeof(*c));
	c->cfg = *cfg;
	for (int i = 0; i < LIMIT_INIT_COMMANDS; i++) {
		struct init_cmd *k = &c->cmd[i];

		buf_init(&k->out, arena_alloc(&carve, LIMIT_INIT_OUTPUT_BYTES, 64),
			 LIMIT_INIT_OUTPUT_BYTES);
		buf_init(&k->in, arena_alloc(&carve, LIMIT_INIT_STDIN_BYTES, 64),
			 LIMIT_INIT_STDIN_BYTES);
	}
	c->base_env = arena_alloc(&carve, LIMIT_INIT_ENV_VARS * sizeof(char *), 8);
	c->scratch = cfg->exec_area;
	c->environ = cfg->environ;
	if (cmd_base_env_fill(c, NULL, 0) != 0) {
		*why = "the container's environment has too many variables for workloads";
		return ERR_LIMIT;
	}
	if (init_passwd_lookup(cfg->workload_uid, c->user, sizeof(c->user), c->home,
			  sizeof(c->home)) != 0) {
		/* no passwd entry: the workspace is home and the uid is the name */
		strcpy(c->home, INIT_WORKSPACE);
		c->user[init_dec(cfg->workload_uid, c->user)] = '\0';
	} else if (!init_home_in_workspace(c->home)) {
		/* the root filesystem is read-only: a home outside the workspace could not be
		 * written, so the workspace is home */
		strcpy(c->home, INIT_WORKSPACE);
	}
	*out = c;
	return 0;
}

/* ---- the init's side ---- */

static uint64_t tag_of(const struct init_cmds *c, const struct init_cmd *k, int which)
{
	return INIT_TAG_CMD_FIRST + (uint64_t)(k - c->cmd) * INIT_FD_COUNT + (uint64_t)which;
}

static void watch(struct init_cmds *c, struct init_cmd *k, int which, int on)
{
	struct epoll_event ev = { .events = which == INIT_FD_IN ? EPOLLOUT : EPOLLIN,
				  .data.u64 = tag_of(c, k, which) };

	if (k->fd[which] < 0 || k->watched[which] == on)
		return;
	if (epoll_ctl(c->cfg.epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, k->fd[which], &ev) == 0)
		k->watched[which] = on;
	else
		log_error("cannot watch a command pipe", "err=%s", log_q(err_str(-errno)));
}

static void fd_close(struct init_cmds *c, struct init_cmd *k, int which)
{
	if (k->fd[which] < 0)
		return;
	watch(c, k, which, 0);
	close(k->fd[which]);
	k->fd[which] = -1;
}

/* Reads stdout/stderr only while a whole chunk fits the buffer. */
static void pipes_update(struct init_cmds *c, struct init_cmd *k)
{
	int room = k->out.cap - k->out.len >= REC_HDR + INIT_CHUNK_BYTES;

	watch(c, k, INIT_FD_OUT, room);
	watch(c, k, INIT_FD_ERR, room);
}

/* Appends the parts (up to three; NULL ends them) to the command's error. */
static void error_add(struct init_cmd *k, const char *a, const char *b, const char *c)
{
	const char *parts[3] = { a, b, c };
	size_t n = strlen(k->error);

	for (int i = 0; i < 3 && parts[i]; i++)
		for (const char *s = parts[i]; *s && n + 1 < sizeof(k->error); s++)
			k->error[n++] = *s;
	k->error[n] = '\0';
}

/* The first reason a command failed is the one reported. */
static void set_error(struct init_cmd *k, const char *a, const char *b)
{
	if (!k->error[0])
		error_add(k, a, b, NULL);
}

static void refuse(struct init_cmds *c, const char *id, const char *error)
{
	struct refusal *r;
	char q[96];

	log_warn("command refused", "why=%s", log_quote(q, sizeof(q), error));
	if (c->ref_len == LIMIT_INIT_REFUSALS) {
		log_error("command refusal dropped: too many unsent", "limit=%d",
			  LIMIT_INIT_REFUSALS);
		return;
	}
	r = &c->refusals[(c->ref_head + c->ref_len++) % LIMIT_INIT_REFUSALS];
	memset(r, 0, sizeof(*r));
	strncpy(r->id, id, sizeof(r->id) - 1);
	strncpy(r->error, error, sizeof(r->error) - 1);
}

static struct init_cmd *find(struct init_cmds *c, const char *id)
{
	for (int i = 0; i < LIMIT_INIT_COMMANDS; i++)
		if (c->cmd[i].used && strcmp(c->cmd[i].id, id) == 0)
			return &c->cmd[i];
	return NULL;
}

/* Signals a workload process: the control uid holds no CAP_KILL, so the init borrows the
 * workload uid as its effective uid for the one kill() (CAP_SETUID allows the switch, and
 * capabilities survive a change between two non-zero uids). */
static int kill_as_workload(const struct init_cmds *c, pid_t pid, int sig)
{
	int r;

	if (syscall(SYS_setresuid, -1, c->cfg.workload_uid, -1) != 0)
		return -errno;
	r = kill(pid, sig) == 0 ? 0 : -errno;
	if (syscall(SYS_setresuid, -1, c->cfg.control_uid, -1) != 0) {
		/* the init cannot go on with a borrowed identity */
		log_error("cannot return to the control uid", "err=%s", log_q(err_str(-errno)));
		_exit(1);
	}
	return r;
}

/* Tells the supervisor to kill the command's tree. It keeps the control uid (spawn.c), so
 * the init signals it as itself. */
static void stop_command(struct init_cmds *c, struct init_cmd *k)
{
	int r;

	if (k->sup_reaped || k->stopped)
		return;
	r = kill(k->sup, SIGTERM) == 0 ? 0 : -errno;
	if (r)
		log_error("cannot signal a command's supervisor", "err=%s", log_q(err_str(r)));
	k->stopped = 1;
}

static void slot_reset(struct init_cmd *k)
{
	struct buf out = k->out, in = k->in;

	memset(k, 0, sizeof(*k));
	k->out = out;
	k->in = in;
	k->out.len = k->in.len = 0;
	for (int i = 0; i < INIT_FD_COUNT; i++)
		k->fd[i] = -1;
}

/* Refuses req (and returns 0) when it may not start: the sandbox stopping, a bad or busy
 * command_id, another run_as, no command, a relative working_dir. 1 when it may. */
static int start_allowed(struct init_cmds *c, const Agentic__Sandbox__V1__CommandRequest *req)
{
	const char *why = NULL;

	if (c->kill_at) {
		why = "the sandbox is shutting down";
	} else if (strlen(req->command_id) == 0 || strlen(req->command_id) > LIMIT_INIT_COMMAND_ID) {
		refuse(c, "", "command_id must be 1 to 128 characters");
		return 0;
	} else if (find(c, req->command_id)) {
		why = "a command with this command_id is still running";
	} else if (req->run_as[0] && strcmp(req->run_as, "10001") != 0) {
		why = "run_as may only be empty or the workload uid 10001";
	} else if (!req->command[0]) {
		why = "command is empty";
	} else if (req->working_dir[0] && req->working_dir[0] != '/') {
		why = "working_dir must be an absolute path";
	}
	if (why)
		refuse(c, req->command_id, why);
	return !why;
}

/* The command's four pipes into p: 0, or -1 with none left open. */
static int pipes_make(int p[INIT_FD_COUNT][2])
{
	int made;

	for (made = 0; made < INIT_FD_COUNT; made++)
		if (pipe2(p[made], O_CLOEXEC) != 0)
			break;
	if (made == INIT_FD_COUNT)
		return 0;
	for (int i = 0; i < made; i++) {
		close(p[i][0]);
		close(p[i][1]);
	}
	return -1;
}

/* A tty command's stdio into p, laid out as pipes_make's: the child's ends are the pty's
 * slave (three descriptors), the init's its master (written as IN, read as OUT), no stderr,
 * and the ctl pipe. 0, or -1 with none left open. */
static int pty_make(const Agentic__Sandbox__V1__CommandRequest *req, int p[INIT_FD_COUNT][2])
{
	int m, s, ok;

	if (cmd_pty_open(req->rows, req->cols, &m, &s) != 0)
		return -1;
	p[INIT_FD_IN][0] = s;
	p[INIT_FD_IN][1] = m;
	p[INIT_FD_OUT][0] = fcntl(m, F_DUPFD_CLOEXEC, 0);
	p[INIT_FD_OUT][1] = fcntl(s, F_DUPFD_CLOEXEC, 0);
	p[INIT_FD_ERR][0] = -1;
	p[INIT_FD_ERR][1] = fcntl(s, F_DUPFD_CLOEXEC, 0);
	ok = p[INIT_FD_OUT][0] >= 0 && p[INIT_FD_OUT][1] >= 0 && p[INIT_FD_ERR][1] >= 0 &&
	     pipe2(p[INIT_FD_CTL], O_CLOEXEC) == 0;
	if (ok)
		return 0;
	for (int i = 0; i < INIT_FD_CTL; i++)
		for (int e = 0; e < 2; e++)
			if (p[i][e] >= 0)
				close(p[i][e]);
	return -1;
}

void init_cmds_start(struct init_cmds *c, const Agentic__Sandbox__V1__CommandRequest *req)
{
	int p[INIT_FD_COUNT][2], r;
	struct init_cmd *k = NULL;
	struct init_spawn sp;
	const char *why;
	pid_t pid;

	if (!start_allowed(c, req))
		return;
	for (int i = 0; i < LIMIT_INIT_COMMANDS && !k; i++)
		if (!c->cmd[i].used)
			k = &c->cmd[i];
	if (!k) {
		refuse(c, req->command_id, "too many commands running in this sandbox");
		return;
	}
	r = cmd_build_exec(c, req, &sp, &why);
	if (r) {
		memset(c->scratch, 0, LIMIT_INIT_EXEC_BYTES); /* what it wrote before it gave up */
		refuse(c, req->command_id, why);
		return;
	}
	if ((req->tty ? pty_make(req, p) : pipes_make(p)) != 0) {
		memset(c->scratch, 0, c->scratch_used);
		refuse(c, req->command_id, req->tty ? "cannot open a pseudo-terminal (/dev/ptmx)"
			  : "cannot create the command's pipes");
		return;
	}
	sp.fd[INIT_FD_IN] = p[INIT_FD_IN][0];
	sp.fd[INIT_FD_OUT] = p[INIT_FD_OUT][1];
	sp.fd[INIT_FD_ERR] = p[INIT_FD_ERR][1];
	sp.fd[INIT_FD_CTL] = p[INIT_FD_CTL][1];
	sp.uid = c->cfg.workload_uid;
	sp.gid = c->cfg.workload_gid;
	sp.control_uid = c->cfg.control_uid;
	sp.tty = req->tty;
	/* the supervisor gets no copy of the storage (MADV_WIPEONFORK, init.c): sp and the exec
	 * area are all it reads */
	pid = fork();
	if (pid == 0)
		init_spawn_supervise(&sp);
	/* the supervisor has its copy: wiped here, a request's env reaches no later one */
	memset(c->scratch, 0, c->scratch_used);
	slot_reset(k);
	k->fd[INIT_FD_IN] = p[INIT_FD_IN][1];
	k->fd[INIT_FD_OUT] = p[INIT_FD_OUT][0];
	k->fd[INIT_FD_ERR] = p[INIT_FD_ERR][0];
	k->fd[INIT_FD_CTL] = p[INIT_FD_CTL][0];
	close(sp.fd[INIT_FD_IN]);
	close(sp.fd[INIT_FD_OUT]);
	close(sp.fd[INIT_FD_ERR]);
	close(sp.fd[INIT_FD_CTL]);
	if (pid < 0) {
		for (int i = 0; i < INIT_FD_COUNT; i++)
			close(k->fd[i]);
		refuse(c, req->command_id, "cannot fork the command's supervisor");
		return;
	}
	for (int i = 0; i < INIT_FD_COUNT; i++)
		if (k->fd[i] >= 0)
			fcntl(k->fd[i], F_SETFL, O_NONBLOCK);
	k->used = 1;
	k->tty = req->tty;
	k->sup = pid;
	strcpy(k->id, req->command_id);
	k->started_ms = clock_mono_ms();
	k->started_us = clock_mono_us();
	k->timeout_s = req->timeout_seconds;
	k->deadline_ms = req->timeout_seconds > 0 ? k->started_ms + req->timeout_seconds * 1000LL
						  : INT64_MAX;
	watch(c, k, INIT_FD_CTL, 1);
	pipes_update(c, k);
}

/* Stdin has ended and all of it is written: a tty's EOF key typed (pty.c), then closed. */
static void stdin_end(struct init_cmds *c, struct init_cmd *k)
{
	if (k->tty && k->fd[INIT_FD_IN] >= 0)
		cmd_pty_eof(k->fd[INIT_FD_IN]);
	fd_close(c, k, INIT_FD_IN);
}

void init_cmds_stdin(struct init_cmds *c, const Agentic__Sandbox__V1__StdinChunk *in)
{
	struct init_cmd *k = find(c, in->command_id);

	if (!k || k->fd[INIT_FD_IN] < 0 || k->stdin_eof)
		return;
	if (buf_append(&k->in, in->data.data, in->data.len) != 0) {
		set_error(k, "stdin overflow: more than the init's stdin buffer arrived ahead of "
			  "the command reading it; stdin closed", NULL);
		k->in.len = 0;
		fd_close(c, k, INIT_FD_IN);
		return;
	}
	if (in->eof)
		k->stdin_eof = 1;
	if (k->in.len)
		watch(c, k, INIT_FD_IN, 1);
	else if (k->stdin_eof)
		stdin_end(c, k);
}

void init_cmds_signal(struct init_cmds *c, const Agentic__Sandbox__V1__PtyControl *pc)
{
	struct init_cmd *k = find(c, pc->command_id);
	/* a tty's master: OUT stays open after stdin's end closed IN */
	int m = !k || !k->tty ? -1 : k->fd[INIT_FD_OUT] >= 0 ? k->fd[INIT_FD_OUT] : k->fd[INIT_FD_IN];
	pid_t pg;
	int sig, r;

	if (m >= 0 && pc->action_case == AGENTIC__SANDBOX__V1__PTY_CONTROL__ACTION_RESIZE &&
	    (r = cmd_pty_resize(m, pc->resize->rows, pc->resize->cols)) != 0)
		log_warn("cannot resize a command's terminal", "err=%s", log_q(err_str(r)));
	if (!k || pc->action_case != AGENTIC__SANDBOX__V1__PTY_CONTROL__ACTION_SIGNAL)
		return;
	sig = pc->signal->signal_number;
	if (sig < 1 || sig > 64 || k->sup_reaped)
		return;
	if (k->pgid <= 0) {
		/* the supervisor has not named the group yet: kept (a SIGKILL is never replaced) */
		if (k->pending_sig != SIGKILL)
			k->pending_sig = sig;
		return;
	}
	/* a tty: its foreground job, as a key typed would reach it (the workload's to choose, and
	 * the kill is made as the workload uid: it reaches nothing else) */
	pg = m >= 0 ? cmd_pty_foreground(m) : 0;
	r = kill_as_workload(c, -(pg ? pg : k->pgid), sig);
	if (r && r != -ESRCH)
		log_warn("cannot signal a command", "signal=%d err=%s", sig, log_q(err_str(r)));
}

static void read_output(struct init_cmds *c, struct init_cmd *k, int which)
{
	uint8_t *hdr = k->out.data + k->out.len;
	size_t room = k->out.cap - k->out.len;
	ssize_t n;

	if (room < REC_HDR + INIT_CHUNK_BYTES)
		return;
	n = read(k->fd[which], hdr + REC_HDR, INIT_CHUNK_BYTES);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0)
		n = 0;
	hdr[0] = which == INIT_FD_OUT ? REC_STDOUT : REC_STDERR;
	memcpy(hdr + 1, &(uint32_t){ (uint32_t)n }, 4);
	k->out.len += REC_HDR + (size_t)n;
	if (n == 0)
		fd_close(c, k, which);
	pipes_update(c, k);
}

static void read_ctl(struct init_cmds *c, struct init_cmd *k)
{
	struct init_ctl r;
	ssize_t n;

	while ((n = read(k->fd[INIT_FD_CTL], &r, sizeof(r))) == (ssize_t)sizeof(r)) {
		if (r.tag == INIT_CTL_PID) {
			k->pgid = r.a;
			if (k->pending_sig > 0 && k->pgid > 0) {
				int e = kill_as_workload(c, -k->pgid, k->pending_sig);

				if (e && e != -ESRCH)
					log_warn("cannot signal a command", "signal=%d err=%s",
						 k->pending_sig, log_q(err_str(e)));
			}
			k->pending_sig = 0;
		} else if (r.tag == INIT_CTL_FAIL && !k->fail_stage && r.a >= INIT_STAGE_DROP &&
			   r.a <= INIT_STAGE_TTY) {
			k->fail_stage = r.a;
			k->fail_errno = r.b;
		}
	}
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		fd_close(c, k, INIT_FD_CTL);
}

static void write_stdin(struct init_cmds *c, struct init_cmd *k, uint32_t events)
{
	ssize_t n = 0;

	if (k->in.len)
		n = write(k->fd[INIT_FD_IN], k->in.data, k->in.len);
	if (n > 0) {
		buf_consume(&k->in, (size_t)n);
		k->stdin_written += (uint64_t)n;
	}
	if ((n < 0 && errno != EAGAIN && errno != EINTR) || (events & (EPOLLERR | EPOLLHUP))) {
		/* the command closed its stdin */
		k->in.len = 0;
		fd_close(c, k, INIT_FD_IN);
		return;
	}
	if (!k->in.len && k->stdin_eof) {
		stdin_end(c, k);
		return;
	}
	if (!k->in.len)
		watch(c, k, INIT_FD_IN, 0);
}

void init_cmds_io(struct init_cmds *c, uint64_t tag, uint32_t events)
{
	uint64_t rel = tag - INIT_TAG_CMD_FIRST;
	struct init_cmd *k;
	int which;

	if (tag < INIT_TAG_CMD_FIRST || rel >= (uint64_t)LIMIT_INIT_COMMANDS * INIT_FD_COUNT)
		return;
	k = &c->cmd[rel / INIT_FD_COUNT];
	which = (int)(rel % INIT_FD_COUNT);
	if (!k->used || k->fd[which] < 0)
		return;
	if (which == INIT_FD_CTL)
		read_ctl(c, k);
	else if (which == INIT_FD_IN)
		write_stdin(c, k, events);
	else
		read_output(c, k, which);
}

int init_cmds_reaped(struct init_cmds *c, pid_t pid, int status)
{
	for (int i = 0; i < LIMIT_INIT_COMMANDS; i++) {
		struct init_cmd *k = &c->cmd[i];

		if (k->used && !k->sup_reaped && k->sup == pid) {
			k->sup_reaped = 1;
			k->sup_status = status;
			k->reaped_ms = clock_mono_ms();
			k->reaped_us = clock_mono_us();
			/* the command's stdin has no reader left */
			k->in.len = 0;
			fd_close(c, k, INIT_FD_IN);
			return 1;
		}
	}
	return 0;
}

int64_t init_cmds_tick(struct init_cmds *c, int64_t now)
{
	int64_t due = c->kill_at && c->kill_at > now ? c->kill_at : INT64_MAX;

	for (int i = 0; i < LIMIT_INIT_COMMANDS; i++) {
		struct init_cmd *k = &c->cmd[i];

		if (!k->used)
			continue;
		if (k->shutdown && now >= c->kill_at)
			stop_command(c, k);
		if (!k->sup_reaped && !k->stopped && now >= k->deadline_ms) {
			k->timed_out = 1;
			stop_command(c, k);
		}
		if (!k->sup_reaped && !k->stopped && k->deadline_ms < due)
			due = k->deadline_ms;
		if (k->sup_reaped && (k->fd[INIT_FD_OUT] >= 0 || k->fd[INIT_FD_ERR] >= 0 ||
				      k->fd[INIT_FD_CTL] >= 0)) {
			if (now >= k->reaped_ms + LIMIT_INIT_LINGER_MS) {
				/* the tree is gone but a process outside it holds the pipes (another
				 * command's, which took them through /proc/<pid>/fd or a socket):
				 * the command is over, its output ends here */
				set_error(k, "output cut: processes outlived the command's "
					  "supervisor", NULL);
				for (int w = INIT_FD_OUT; w <= INIT_FD_ERR; w++) {
					if (k->fd[w] >= 0 &&
					    k->out.cap - k->out.len >= REC_HDR) {
						uint8_t *h = k->out.data + k->out.len;

						h[0] = w == INIT_FD_OUT ? REC_STDOUT : REC_STDERR;
						memset(h + 1, 0, 4);
						k->out.len += REC_HDR;
						fd_close(c, k, w);
					}
				}
				fd_close(c, k, INIT_FD_CTL);
			} else if (k->reaped_ms + LIMIT_INIT_LINGER_MS < due) {
				due = k->reaped_ms + LIMIT_INIT_LINGER_MS;
			}
		}
	}
	return due;
}

void init_cmds_stop_all(struct init_cmds *c, int64_t kill_at)
{
	c->kill_at = kill_at;
	for (int i = 0; i < LIMIT_INIT_COMMANDS; i++) {
		struct init_cmd *k = &c->cmd[i];
		int r;

		if (!k->used || k->sup_reaped || k->shutdown)
			continue;
		k->shutdown = 1;
		/* asked first; the supervisor kills what is left at kill_at */
		if (k->pgid > 0 && (r = kill_as_workload(c, -k->pgid, SIGTERM)) != 0 && r != -ESRCH)
			log_warn("cannot signal a command", "signal=%d err=%s", SIGTERM, log_q(err_str(r)));
	}
}

int init_cmds_busy(const struct init_cmds *c)
{
	int n = (int)c->ref_len;

	for (int i = 0; i < LIMIT_INIT_COMMANDS; i++)
		n += c->cmd[i].used;
	return n;
}

static int slot_finished(const struct init_cmd *k)
{
	return k->sup_reaped && k->fd[INIT_FD_OUT] < 0 && k->fd[INIT_FD_ERR] < 0 && k->fd[INIT_FD_CTL] < 0 &&
	       k->out.len == 0;
}

static void result_of(struct init_cmd *k, struct init_out *o)
{
	int st = k->sup_status;
	char num[16];

	o->kind = INIT_OUT_RESULT;
	o->exit_code = -1;
	if (k->timed_out) {
		/* the kill is ours: the timeout is the reason, whatever the tree said */
		num[init_dec((uint32_t)k->timeout_s, num)] = '\0';
		k->error[0] = '\0';
		error_add(k, "timed out after ", num, " s");
	} else if (k->shutdown) {
		set_error(k, "stopped: the sandbox is shutting down", NULL);
	}
	if (k->fail_stage) {
		o->exit_code = k->fail_stage == INIT_STAGE_EXEC && k->fail_errno == ENOENT ? 127 : 126;
		if (!k->error[0])
			error_add(k, stage_names[k->fail_stage], ": ", err_str(-k->fail_errno));
	} else if (WIFEXITED(st)) {
		o->exit_code = WEXITSTATUS(st);
	} else {
		num[init_dec((uint32_t)WTERMSIG(st), num)] = '\0';
		set_error(k, "the command's supervisor was killed by signal ", num);
	}
	o->error = k->error;
	o->duration_us = k->reaped_us - k->started_us;
	o->duration_ms = o->duration_us / 1000;
	o->success = o->exit_code == 0 && !k->error[0];
}

int init_cmds_peek(struct init_cmds *c, struct init_out *o)
{
	memset(o, 0, sizeof(*o));
	if (c->ref_len) {
		struct refusal *r = &c->refusals[c->ref_head];

		o->kind = INIT_OUT_RESULT;
		o->command_id = r->id;
		o->exit_code = -1;
		o->error = r->error;
		c->peek_slot = -1;
		return 1;
	}
	for (unsigned n = 0; n < LIMIT_INIT_COMMANDS; n++) {
		unsigned i = (c->cursor + n) % LIMIT_INIT_COMMANDS;
		struct init_cmd *k = &c->cmd[i];
		uint32_t len;

		if (!k->used)
			continue;
		o->command_id = k->id;
		c->peek_slot = (int)i;
		if (k->stdin_written != k->stdin_acked &&
		    (k->stdin_written - k->stdin_acked >= INIT_STDIN_ACK_BYTES || !k->in.len)) {
			o->kind = INIT_OUT_STDIN_ACK;
			o->consumed = k->stdin_written;
			c->peek_result = 2;
			return 1;
		}
		if (k->out.len >= REC_HDR) {
			memcpy(&len, k->out.data + 1, 4);
			o->kind = k->out.data[0] == REC_STDOUT ? INIT_OUT_STDOUT : INIT_OUT_STDERR;
			o->data = k->out.data + REC_HDR;
			o->len = len;
			o->eof = len == 0;
			c->peek_result = 0;
			return 1;
		}
		if (slot_finished(k)) {
			result_of(k, o);
			c->peek_result = 1;
			return 1;
		}
	}
	return 0;
}

void init_cmds_consume(struct init_cmds *c)
{
	struct init_cmd *k;
	uint32_t len;

	ASSERT(c->peek_slot < LIMIT_INIT_COMMANDS);
	if (c->peek_slot < 0) {
		ASSERT(c->ref_len > 0);
		c->ref_head = (c->ref_head + 1) % LIMIT_INIT_REFUSALS;
		c->ref_len--;
		c->peek_slot = 0;
		return;
	}
	k = &c->cmd[c->peek_slot];
	if (c->peek_result == 2) {
		k->stdin_acked = k->stdin_written;
		return;
	}
	c->cursor = (unsigned)(c->peek_slot + 1) % LIMIT_INIT_COMMANDS;
	if (c->peek_result) {
		int code = WIFEXITED(k->sup_status) ? WEXITSTATUS(k->sup_status) : -1;
		char q[256];

		/* A command that ran and exited is in agenticd's log and the transcript; one that
		 * could not start, timed out or was killed is told here as well. Not each one:
		 * every line of this log wakes the engine's log pipeline (containerd-shim, then
		 * dockerd writing its log file), which competed with the command for the CPU
		 * inside the exec round trip. */
		if (k->error[0])
			log_warn("command failed", "slot=%d supervisor=%d exit=%d duration_ms=%lld "
				 "timed_out=%d error=%s", c->peek_slot, (int)k->sup, code,
				 (long long)(k->reaped_ms - k->started_ms), k->timed_out,
				 log_quote(q, sizeof(q), k->error));
		for (int i = 0; i < INIT_FD_COUNT; i++)
			fd_close(c, k, i);
		k->used = 0;
		return;
	}
	memcpy(&len, k->out.data + 1, 4);
	buf_consume(&k->out, REC_HDR + len);
	pipes_update(c, k);
}
