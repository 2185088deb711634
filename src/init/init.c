/* init.c: agentic-init, PID 1 of a sandbox: checks its environment, drops to the control
 * identity, proves the workspace and writes the sentinel, then serves the agent channel and
 * reaps every child until SIGTERM. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "init/env.h"
#include "init/init.h"
#include "init/priv.h"

extern char **environ;

const char init_help[] =
	"usage: agentic-init\n"
	"\n"
	"PID 1 of a sandbox, started by agenticd as /sbin/agentic-init with User 0:0, only\n"
	"CAP_SETUID and CAP_SETGID, no-new-privileges and the AGENT_* environment (DESIGN.md\n"
	"§6). It refuses to start on anything odd, naming the variable or setting at fault\n"
	"(never a value); drops to the control uid with exactly SETUID and SETGID and checks\n"
	"that in /proc/self/status; checks that the workload uid can write /workspace; writes\n"
	"the setup sentinel on the control tmpfs; then registers with agenticd over the agent\n"
	"socket, sends READY heartbeats, redials with backoff when agenticd restarts, and reaps\n"
	"every child and orphan. SIGTERM, SIGINT or SIGQUIT, or a shutdown from agenticd: exits 0.\n"
	"Exit status: 0 stopped cleanly, 1 setup failed, 2 refused its environment or arguments.\n";

/* How long the goodbye to agenticd may hold up the exit. */
#define STOP_FLUSH_MS 1000

static int fail(const char *what, const char *step, int err)
{
	fprintf(stderr, "agentic-init: %s: %s: %s\n", what, step, err_str(err));
	return 1;
}

static int signals_take(sigset_t *mask)
{
	sigemptyset(mask);
	sigaddset(mask, SIGCHLD);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGINT);
	sigaddset(mask, SIGHUP);
	sigaddset(mask, SIGQUIT);
	if (sigprocmask(SIG_BLOCK, mask, NULL) != 0)
		return -errno;
	/* a workload closing its end of a pipe must not kill the init */
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static void reap(void)
{
	int status;

	while (waitpid(-1, &status, WNOHANG) > 0)
		;
}

/* Returns 1 when the init should stop. */
static int signals_read(int sfd)
{
	struct signalfd_siginfo si;
	int stop = 0;

	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			reap();
			break;
		case SIGHUP:
			log_info("SIGHUP ignored", "from_pid=%u", si.ssi_pid);
			break;
		default:
			log_info("stopping", "signal=%u from_pid=%u", si.ssi_signo, si.ssi_pid);
			stop = 1;
			break;
		}
	}
	return stop;
}

static void timer_arm(int tfd, int64_t due_ms)
{
	struct itimerspec it = { { 0, 0 }, { due_ms / 1000, (due_ms % 1000) * 1000000 } };

	if (it.it_value.tv_sec == 0 && it.it_value.tv_nsec == 0)
		it.it_value.tv_nsec = 1;
	timerfd_settime(tfd, TFD_TIMER_ABSTIME, &it, NULL);
}

static int loop_add(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

static int serve(struct init_agent *agent, int sfd)
{
	int epfd = epoll_create1(EPOLL_CLOEXEC);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	int afd = init_agent_fd(agent);
	int r;

	if (epfd < 0 || tfd < 0)
		return fail("cannot set up the event loop", "epoll/timerfd", -errno);
	if ((r = loop_add(epfd, sfd)) || (r = loop_add(epfd, tfd)) || (r = loop_add(epfd, afd)))
		return fail("cannot set up the event loop", "epoll_ctl", r);
	for (;;) {
		struct epoll_event ev[8];
		int n;

		timer_arm(tfd, init_agent_tick(agent, init_now_ms()));
		if (agent->shutdown_requested)
			break;
		n = epoll_wait(epfd, ev, ARRAY_LEN(ev), -1);
		if (n < 0 && errno != EINTR)
			return fail("event loop", "epoll_wait", -errno);
		for (int i = 0; i < n; i++) {
			uint64_t ticks;

			if (ev[i].data.fd == sfd && signals_read(sfd))
				goto stop;
			if (ev[i].data.fd == tfd && read(tfd, &ticks, sizeof(ticks)) < 0 &&
			    errno != EAGAIN)
				return fail("event loop", "timerfd", -errno);
			if (ev[i].data.fd == afd)
				init_agent_io(agent);
		}
	}
stop:
	init_agent_stop(agent, STOP_FLUSH_MS);
	log_info("stopped", "registrations=%llu", (unsigned long long)agent->registrations);
	return 0;
}

int init_main(int argc, char **argv)
{
	static struct init_env env;
	static struct init_sysinfo si;
	static struct init_agent agent;
	char why[256];
	const char *step;
	sigset_t mask;
	size_t bytes;
	void *storage;
	int sfd, r;

	if (argc > 1) {
		fputs(init_help, stderr);
		return 2;
	}
	if (init_env_parse(environ, &env, why, sizeof(why)) != 0) {
		fprintf(stderr, "agentic-init: refusing to start: %s\n", why);
		return 2;
	}
	/* Outside a fresh pid namespace (a test harness) orphans must still come to us. */
	if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
		return fail("cannot become a subreaper", "prctl", -errno);
	r = signals_take(&mask);
	if (r == 0) {
		sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
		r = sfd < 0 ? -errno : 0;
	}
	if (r)
		return fail("cannot take the signals", "signalfd", r);
	r = init_start_check(&step);
	if (r) {
		fprintf(stderr, "agentic-init: refusing to start: %s\n", step);
		return 2;
	}
	bytes = init_agent_storage_bytes(env.uds_path);
	if (!bytes) {
		fprintf(stderr, "agentic-init: refusing to start: AGENT_GRPC_UDS_PATH is longer "
			"than a Unix socket path may be\n");
		return 2;
	}
	storage = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (storage == MAP_FAILED)
		return fail("cannot map the memory budget", "mmap", -errno);
	r = priv_drop_to_control(env.control_uid, &step);
	if (r)
		return fail("cannot take the control identity", step, r);
	r = init_workspace_check(INIT_WORKSPACE, env.workload_uid, env.workload_gid, &step);
	if (r)
		return fail("the workspace " INIT_WORKSPACE " is not usable by the workload", step, r);
	r = init_sentinel_write(env.sentinel, env.control_uid, &step);
	if (r)
		return fail("cannot write the setup sentinel (AGENT_SETUP_SENTINEL)", step, r);
	init_sysinfo_read(&si);
	r = init_agent_setup(&agent, &env, &si, storage, bytes);
	if (r)
		return fail("cannot set up the agent channel", "grpc_client_init", r);
	alloc_seal();
	log_info("setup complete", "pid=%d budget_bytes=%zu", (int)getpid(), bytes);
	return serve(&agent, sfd);
}
