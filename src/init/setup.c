/* setup.c: the init's one-time setup checks: what it starts with, the workspace as the
 * workload sees it, the sentinel on the control tmpfs, and what it reports about the system. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>

#include "base/base.h"
#include "init/init.h"
#include "init/priv.h"

#define TMPFS_MAGIC_NUMBER 0x01021994

int init_start_check(const char **step)
{
	struct priv_status st;
	int r = priv_status_read(0, &st);

	*step = "reading /proc/self/status";
	if (r)
		return r;
	*step = "the init must start as uid 0 and gid 0 (User \"0:0\")";
	for (int i = 0; i < 4; i++)
		if (st.uid[i] != 0 || st.gid[i] != 0)
			return -EPERM;
	*step = "the bounding set must be exactly SETUID and SETGID "
		"(--cap-drop ALL --cap-add SETUID --cap-add SETGID)";
	if (st.cap_bnd != PRIV_CONTROL_CAPS || (st.cap_prm & ~PRIV_CONTROL_CAPS) != 0)
		return -EPERM;
	*step = "no-new-privileges must be set (--security-opt no-new-privileges)";
	if (st.no_new_privs != 1)
		return -EPERM;
	return 0;
}

/* What the checking child reports through its pipe: the stage it failed at and errno. */
enum {
	CHECK_DROP = 1,
	CHECK_STATUS,
	CHECK_CREATE,
	CHECK_UNLINK,
};

static const char *const check_steps[] = {
	[CHECK_DROP] = "taking the workload identity",
	[CHECK_STATUS] = "checking the workload identity in /proc/self/status",
	[CHECK_CREATE] = "creating a file in the workspace as the workload",
	[CHECK_UNLINK] = "removing that file as the workload",
};

static _Noreturn void check_child(int fd, const char *dir, uint32_t uid, uint32_t gid)
{
	char path[LIMIT_PATH_BYTES];
	struct priv_status st;
	int report[2] = { 0, 0 };
	size_t n = strlen(dir);
	int f;

	if (priv_drop_to_workload(uid, gid) != 0) {
		report[0] = CHECK_DROP;
	} else if (priv_status_read(0, &st) != 0 || !priv_is_workload(&st, uid, gid)) {
		report[0] = CHECK_STATUS;
		errno = EPERM;
	} else if (n + 32 > sizeof(path)) {
		report[0] = CHECK_CREATE;
		errno = ENAMETOOLONG;
	} else {
		memcpy(path, dir, n);
		memcpy(path + n, "/.agentic-init-check", sizeof("/.agentic-init-check"));
		f = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (f < 0) {
			report[0] = CHECK_CREATE;
		} else {
			close(f);
			if (unlink(path) != 0)
				report[0] = CHECK_UNLINK;
		}
	}
	if (report[0]) {
		report[1] = errno;
		if (write(fd, report, sizeof(report)) < 0)
			_exit(3);
		_exit(1);
	}
	_exit(0);
}

int init_workspace_check(const char *dir, uint32_t uid, uint32_t gid, const char **step)
{
	int report[2] = { 0, 0 }, p[2], status;
	ssize_t n;
	pid_t pid;

	*step = "creating the report pipe";
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	*step = "forking the checking child";
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		close(p[0]);
		check_child(p[1], dir, uid, gid);
	}
	close(p[1]);
	do
		n = read(p[0], report, sizeof(report));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (n == (ssize_t)sizeof(report) && report[0] > 0 && report[0] <= CHECK_UNLINK) {
		*step = check_steps[report[0]];
		return report[1] > 0 ? -report[1] : -EPERM;
	}
	*step = "the checking child did not finish";
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -ECHILD;
	return 0;
}

/* The parent of the sentinel, as a NUL-terminated copy in out. */
static int parent_of(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (!slash || n == 0 || n >= cap || slash[1] == '\0')
		return -EINVAL;
	memcpy(out, path, n);
	out[n] = '\0';
	return 0;
}

int init_sentinel_write(const char *path, uint32_t uid, const char **step)
{
	static const char body[] = "setup-complete\n";
	char dir[LIMIT_PATH_BYTES];
	struct statvfs vfs;
	struct statfs fs;
	struct stat st;
	int fd, r;

	*step = "AGENT_SETUP_SENTINEL must name a file in a directory";
	if (parent_of(path, dir, sizeof(dir)) != 0)
		return -EINVAL;
	*step = "reading the sentinel's directory";
	if (lstat(dir, &st) != 0 || statfs(dir, &fs) != 0 || statvfs(dir, &vfs) != 0)
		return -errno;
	*step = "the sentinel's directory must be a tmpfs (the control tmpfs)";
	if (!S_ISDIR(st.st_mode) || fs.f_type != TMPFS_MAGIC_NUMBER)
		return -EPERM;
	*step = "the control tmpfs must be mounted noexec,nosuid,nodev";
	if ((vfs.f_flag & (ST_NOEXEC | ST_NOSUID | ST_NODEV)) != (ST_NOEXEC | ST_NOSUID | ST_NODEV))
		return -EPERM;
	*step = "the control tmpfs must be mode 0700 and owned by the control uid";
	if (st.st_uid != uid || st.st_gid != uid)
		return -EPERM;
	/* Docker 20.10 mounts the tmpfs again on a container restart with its root at 0755
	 * whatever mode= says (measured): ours, so tightened back, and checked again. */
	if ((st.st_mode & 07777) != 0700 && (chmod(dir, 0700) != 0 || lstat(dir, &st) != 0))
		return -EPERM;
	if ((st.st_mode & 07777) != 0700 || st.st_uid != uid || st.st_gid != uid)
		return -EPERM;
	*step = "creating the sentinel (O_EXCL: it must not exist yet)";
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	*step = "writing the sentinel";
	r = write(fd, body, sizeof(body) - 1) == (ssize_t)(sizeof(body) - 1) ? 0 : -EIO;
	if (close(fd) != 0 && r == 0)
		r = -errno;
	return r;
}

void init_sysinfo_read(struct init_sysinfo *si)
{
	struct utsname u;
	struct sysinfo s;
	cpu_set_t cpus;

	memset(si, 0, sizeof(*si));
	if (uname(&u) == 0) {
		memcpy(si->hostname, u.nodename, sizeof(si->hostname) - 1);
		memcpy(si->kernel, u.release, sizeof(si->kernel) - 1);
	}
	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0)
		si->cpu_cores = CPU_COUNT(&cpus);
	if (sysinfo(&s) == 0)
		si->memory_bytes = (int64_t)s.totalram * (int64_t)s.mem_unit;
}
