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
#include "init/guest.h"
#include "init/init.h"
#include "init/priv.h"

extern char **environ;

const char init_help[] =
	"usage: agentic-init\n"
	"\n"
	"PID 1 of a sandbox, started by agenticd as /sbin/agentic-init with User 0:0, only\n"
	"CAP_SETUID and CAP_SETGID, no-new-privileges and the AGENT_* environment. It\n"
	"refuses to start on anything odd, naming the variable or setting at fault\n"
	"(never a value); drops to the control uid with exactly SETUID and SETGID and checks\n"
	"that in /proc/self/status; checks that the workload uid can write /workspace; writes\n"
	"the setup sentinel on the control tmpfs; then registers with agenticd over the agent\n"
	"socket, sends READY heartbeats, redials with backoff when agenticd restarts, and reaps\n"
	"every child and orphan. It runs agenticd's commands as the workload uid with no\n"
	"capabilities, each under its own subreaper supervisor (which keeps the control uid, out\n"
	"of the workload's reach), and streams their output back. When agenticd consents it\n"
	"carries the workload's connections to 127.0.0.1:3128 to agenticd's egress proxy.\n"
	"SIGTERM, SIGINT or SIGQUIT, or a shutdown from agenticd: SIGTERM to each command,\n"
	"its whole tree killed 1.5 s later, their ends reported; then it exits 0.\n"
	"As PID 1 of a VM (AGENT_RUNTIME=vm on the kernel command line) it first does the\n"
	"container runtime's part: mounts, modules, sysctls, the workspace disk, the control\n"
	"port (a virtio serial port named agentic.control) and the same privileges; a clean\n"
	"stop then powers the VM off, anything else ends it in a kernel panic.\n"
	"Exit status: 0 stopped cleanly, 1 setup failed, 2 refused its environment or arguments.\n";


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

static void reap(struct init_cmds *cmds)
{
	pid_t pid;
	int status;

	/* supervisors are the commands'; anything else is an orphan that came to PID 1 */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		init_cmds_reaped(cmds, pid, status);
}

/* Returns 1 when the init should stop. */
static int signals_read(int sfd, struct init_cmds *cmds)
{
	struct signalfd_siginfo si;
	int stop = 0;

	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			reap(cmds);
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

static int loop_add(int epfd, int fd, uint64_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

static int serve(int epfd, int sfd, struct init_agent *agent, struct init_cmds *cmds,
		 struct init_egress *egress)
{
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	int64_t stop_by = 0;
	int stop = 0, r;

	if (tfd < 0)
		return fail("cannot set up the event loop", "timerfd", -errno);
	if ((r = loop_add(epfd, sfd, INIT_TAG_SIGNAL)) || (r = loop_add(epfd, tfd, INIT_TAG_TIMER)) ||
	    (r = loop_add(epfd, init_agent_fd(agent), INIT_TAG_AGENT)))
		return fail("cannot set up the event loop", "epoll_ctl", r);
	for (;;) {
		struct epoll_event ev[16];
		int64_t now = clock_mono_ms(), due, cdue, edue;
		int n;

		if (!stop_by && agent->shutdown_requested)
			stop = 1;
		if (stop && !stop_by) {
			stop_by = now + LIMIT_INIT_STOP_GRACE_MS;
			init_cmds_stop_all(cmds, now + LIMIT_INIT_STOP_TERM_MS);
		}
		/* stopping: the commands' trees are being killed; their ends are reported until
		 * they are all out or the grace is over */
		if (stop_by && (!init_cmds_busy(cmds) || now >= stop_by))
			break;
		due = init_agent_tick(agent, now);
		cdue = init_cmds_tick(cmds, now);
		edue = init_egress_tick(egress, now);
		if (cdue < due)
			due = cdue;
		if (edue < due)
			due = edue;
		if (stop_by && stop_by < due)
			due = stop_by;
		init_agent_flush(agent);
		timer_arm(tfd, due);
		n = epoll_wait(epfd, ev, ARRAY_LEN(ev), -1);
		if (n < 0 && errno != EINTR)
			return fail("event loop", "epoll_wait", -errno);
		for (int i = 0; i < n; i++) {
			uint64_t tag = ev[i].data.u64, ticks;

			if (tag == INIT_TAG_SIGNAL) {
				stop |= signals_read(sfd, cmds);
			} else if (tag == INIT_TAG_TIMER) {
				if (read(tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
					return fail("event loop", "timerfd", -errno);
			} else if (tag == INIT_TAG_AGENT) {
				init_agent_io(agent);
			} else if (tag < INIT_TAG_CMD_FIRST) {
				init_egress_io(egress, tag, ev[i].events);
			} else {
				init_cmds_io(cmds, tag, ev[i].events);
			}
		}
		init_agent_flush(agent);
	}
	init_egress_close_all(egress);
	init_agent_stop(agent, LIMIT_INIT_STOP_FLUSH_MS);
	log_info("stopped", "registrations=%llu unfinished_commands=%d",
		 (unsigned long long)agent->registrations, init_cmds_busy(cmds));
	return 0;
}

/* Maps the memory budget (bytes) and the exec area: 0, or fail()'s exit status. */
static int map_budget(size_t bytes, void **storage, void **exec_area)
{
	/* Every bound is fixed here, at start (the budget is logged by run and nothing is
	 * allocated after), but the pages are not touched until used: an idle init holds some
	 * 0.7 MiB resident of its 16 MiB budget, the command slots' buffers, the gRPC pools and
	 * the egress windows coming in as commands and connections use them. A page the init
	 * takes while a workload has filled the sandbox's memory limit makes the kernel reclaim or
	 * kill within the cgroup, and every workload process runs with oom_score_adj 1000
	 * (spawn.c), so the OOM killer takes a workload, never this process or a supervisor while
	 * one is left. */
	*storage = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	*exec_area = mmap(NULL, LIMIT_INIT_EXEC_BYTES, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*storage == MAP_FAILED || *exec_area == MAP_FAILED)
		return fail("cannot map the memory budget", "mmap", -errno);
	/* Each command's supervisor is a fork of this process and needs none of the storage
	 * (the exec area holds what it reads): without this, every fork copied the page tables
	 * of these megabytes, and every page the init then wrote took a copy-on-write fault
	 * while a supervisor lived. */
	if (madvise(*storage, bytes, MADV_WIPEONFORK) != 0)
		return fail("cannot keep the init's memory from its supervisors (Linux 4.14 or "
			    "later is needed)", "madvise(MADV_WIPEONFORK)", -errno);
	return 0;
}

/* The control identity taken, the workspace checked, the setup sentinel written: 0, or
 * fail()'s exit status. */
static int take_control(const struct init_env *env)
{
	const char *step;
	int r;

	r = priv_drop_to_control(env->control_uid, &step);
	if (r)
		return fail("cannot take the control identity", step, r);
	r = init_workspace_check(INIT_WORKSPACE, env->workload_uid, env->workload_gid, &step);
	if (r)
		return fail("the workspace " INIT_WORKSPACE " is not usable by the workload", step, r);
	r = init_sentinel_write(env->sentinel, env->control_uid, &step);
	if (r)
		return fail("cannot write the setup sentinel (AGENT_SETUP_SENTINEL)", step, r);
	return 0;
}

static int run(int argc, char **argv)
{
	static struct init_env env;
	static struct init_sysinfo si;
	static struct init_agent agent;
	struct init_cmds_config ccfg;
	struct init_cmds *cmds;
	struct init_egress *egress;
	char why[256];
	const char *step;
	sigset_t mask;
	size_t agent_bytes, cmds_bytes, bytes;
	void *storage, *exec_area;
	int sfd, epfd, r;

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
	agent_bytes = init_agent_storage_bytes(env.uds_path);
	cmds_bytes = init_cmds_storage_bytes();
	bytes = agent_bytes + cmds_bytes + init_egress_storage_bytes();
	if (!agent_bytes) {
		fprintf(stderr, "agentic-init: refusing to start: AGENT_GRPC_UDS_PATH is longer "
			"than a Unix socket path may be\n");
		return 2;
	}
	r = map_budget(bytes, &storage, &exec_area);
	if (r)
		return r;
	r = take_control(&env);
	if (r)
		return r;
	init_sysinfo_read(&si);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return fail("cannot set up the event loop", "epoll_create1", -errno);
	ccfg = (struct init_cmds_config){ epfd, env.workload_uid, env.workload_gid,
					  env.control_uid, environ, exec_area };
	r = init_cmds_setup(&ccfg, (uint8_t *)storage + agent_bytes, cmds_bytes, &cmds, &step);
	if (r)
		return fail("cannot set up the command table", step, r);
	r = init_agent_setup(&agent, &env, &si, cmds, storage, agent_bytes);
	if (r)
		return fail("cannot set up the agent channel", "grpc_client_init", r);
	/* the proxy port is ours before any workload runs: commands come only after the
	 * registration, in serve() */
	r = init_egress_setup(&egress, (uint8_t *)storage + agent_bytes + cmds_bytes,
			      bytes - agent_bytes - cmds_bytes, epfd, &agent);
	if (r)
		return fail("cannot set up the egress proxy", "init_egress_setup", r);
	alloc_seal();
	log_info("setup complete", "pid=%d budget_bytes=%zu", (int)getpid(),
		 bytes + LIMIT_INIT_EXEC_BYTES);
	return serve(epfd, sfd, &agent, cmds, egress);
}

int init_main(int argc, char **argv)
{
	int r;

	if (!init_guest_is_vm())
		return run(argc, argv);
	/* PID 1 of a VM: what the container runtime did is ours to do first */
	r = init_guest_prelude();
	return init_guest_exit(r ? r : run(argc, argv));
}
