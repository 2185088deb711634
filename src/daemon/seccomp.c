/* seccomp.c: the seccomp profile of every sandbox (built in, or an operator's file), and the
 * `agentic seccomp-profile` applet that prints it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "json/json.h"
#include "daemon/seccomp.h"

const char seccomp_profile_help[] =
	"usage: agentic seccomp-profile [-c FILE]\n"
	"\n"
	"Prints the seccomp profile agenticd gives every sandbox, as the compact JSON it sends the\n"
	"engine in SecurityOpt: the built-in one, or with -c FILE the profile file that agenticd\n"
	"configuration names (seccomp_profile), checked as agenticd checks it at start.\n"
	"Exit status: 0, or 2 when the configuration or the profile is not valid.\n";

/* The profile is modelled on the engine's default for x86_64 (moby's
 * profiles/seccomp/default.json): deny by default with EPERM, allow the syscalls below. What
 * it leaves out of the engine's default, and why:
 *  - the blocks the engine adds only for capabilities (CAP_SYS_ADMIN: mount, unshare, setns,
 *    bpf, perf_event_open, clone with namespace flags ...; CAP_SYS_PTRACE, CAP_SYS_MODULE,
 *    CAP_SYS_TIME, CAP_SYS_BOOT, CAP_SYS_CHROOT, CAP_SYS_NICE, CAP_SYS_RAWIO, CAP_BPF,
 *    CAP_PERFMON, CAP_SYSLOG, CAP_DAC_READ_SEARCH, CAP_SYS_PACCT, CAP_SYS_TTY_CONFIG): a
 *    sandbox's init holds only CAP_SETUID and CAP_SETGID and its workloads hold nothing, so the
 *    engine would not grant those blocks to our containers either;
 *  - io_uring_setup, io_uring_enter, io_uring_register: allowed by Docker 20.10's default
 *    (measured: io_uring_setup succeeds in a container), and a steady source of kernel
 *    privilege escalations; newer engines, ChromeOS, Android and Google's servers block it.
 *    Agents' tools (git, compilers, python, node's libuv, package managers) fall back to
 *    epoll and plain reads when io_uring is missing, so it answers ENOSYS, as a kernel built
 *    without io_uring does.
 * The other rules are the engine's: ptrace and process_vm_* stay allowed (debuggers; the
 * engine allows them on kernels from 4.8, where seccomp can no longer be bypassed through
 * ptrace, and Debian 12 runs 6.1); socket is allowed except for AF_VSOCK (the host's vsock
 * services); personality only with the values programs use; clone only without namespace
 * flags; clone3 answers ENOSYS so that libc falls back to clone, whose flags can be checked.
 * The i386 ABI is not in the architectures (the engine's default has it): on i386 libseccomp
 * turns the socket rule into socketcall(SYS_SOCKET, args), whose family lies in memory no
 * filter reads, so an int 0x80 socketcall got an AF_VSOCK socket; agents run 64-bit
 * programs, and a 32-bit one is killed at its first syscall.
 * Names the engine's libseccomp does not know are skipped by runc, so the list may run ahead
 * of the host's kernel. agentic-init runs under the same profile: everything it calls
 * (clone with CLONE_VM|CLONE_VFORK, capset, prctl, setresuid, signalfd, epoll, timerfd,
 * madvise, close_range) is in the list. */
static const char *const allowed[] = {
	"accept", "accept4", "access", "adjtimex", "alarm", "arch_prctl", "bind", "brk",
	"capget", "capset", "chdir", "chmod", "chown", "chown32", "clock_adjtime",
	"clock_adjtime64", "clock_getres", "clock_getres_time64", "clock_gettime",
	"clock_gettime64", "clock_nanosleep", "clock_nanosleep_time64", "close", "close_range",
	"connect", "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create",
	"epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2",
	"epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "execve", "execveat", "exit",
	"exit_group", "faccessat", "faccessat2", "fadvise64", "fadvise64_64", "fallocate",
	"fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchown", "fchown32", "fchownat",
	"fcntl", "fcntl64", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork",
	"fremovexattr", "fsetxattr", "fstat", "fstat64", "fstatat64", "fstatfs", "fstatfs64",
	"fsync", "ftruncate", "ftruncate64", "futex", "futex_time64", "futex_waitv", "futimesat",
	"getcpu", "getcwd", "getdents", "getdents64", "getegid", "getegid32", "geteuid",
	"geteuid32", "getgid", "getgid32", "getgroups", "getgroups32", "getitimer",
	"getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getrandom",
	"getresgid", "getresgid32", "getresuid", "getresuid32", "getrlimit", "get_robust_list",
	"getrusage", "getsid", "getsockname", "getsockopt", "get_thread_area", "gettid",
	"gettimeofday", "getuid", "getuid32", "getxattr", "inotify_add_watch", "inotify_init",
	"inotify_init1", "inotify_rm_watch", "io_cancel", "ioctl", "io_destroy", "io_getevents",
	"io_pgetevents", "io_pgetevents_time64", "ioprio_get", "ioprio_set", "io_setup",
	"io_submit", "ipc", "kill", "landlock_add_rule", "landlock_create_ruleset",
	"landlock_restrict_self", "lchown", "lchown32", "lgetxattr", "link", "linkat", "listen",
	"listxattr", "llistxattr", "_llseek", "lremovexattr", "lseek", "lsetxattr", "lstat",
	"lstat64", "madvise", "membarrier", "memfd_create", "memfd_secret", "mincore", "mkdir",
	"mkdirat", "mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap", "mmap2",
	"modify_ldt", "mprotect", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
	"mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64", "mq_unlink", "mremap",
	"msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall", "munmap",
	"name_to_handle_at", "nanosleep", "newfstatat", "_newselect", "open", "openat",
	"openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc",
	"pkey_free", "pkey_mprotect", "poll", "ppoll", "ppoll_time64", "prctl", "pread64",
	"preadv", "preadv2", "prlimit64", "process_mrelease", "process_vm_readv",
	"process_vm_writev", "pselect6", "pselect6_time64", "ptrace", "pwrite64", "pwritev",
	"pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "recv", "recvfrom",
	"recvmmsg", "recvmmsg_time64", "recvmsg", "remap_file_pages", "removexattr", "rename",
	"renameat", "renameat2", "restart_syscall", "rmdir", "rseq", "rt_sigaction",
	"rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend",
	"rt_sigtimedwait", "rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sched_getaffinity",
	"sched_getattr", "sched_getparam", "sched_get_priority_max", "sched_get_priority_min",
	"sched_getscheduler", "sched_rr_get_interval", "sched_rr_get_interval_time64",
	"sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler",
	"sched_yield", "seccomp", "select", "semctl", "semget", "semop", "semtimedop",
	"semtimedop_time64", "send", "sendfile", "sendfile64", "sendmmsg", "sendmsg", "sendto",
	"setfsgid", "setfsgid32", "setfsuid", "setfsuid32", "setgid", "setgid32", "setgroups",
	"setgroups32", "setitimer", "setpgid", "setpriority", "setregid", "setregid32",
	"setresgid", "setresgid32", "setresuid", "setresuid32", "setreuid", "setreuid32",
	"setrlimit", "set_robust_list", "setsid", "setsockopt", "set_thread_area",
	"set_tid_address", "setuid", "setuid32", "setxattr", "shmat", "shmctl", "shmdt",
	"shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4", "sigprocmask", "sigreturn",
	"socketcall", "socketpair", "splice", "stat", "stat64", "statfs", "statfs64", "statx",
	"symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill",
	"time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
	"timer_gettime64", "timer_settime", "timer_settime64", "timerfd_create",
	"timerfd_gettime", "timerfd_gettime64", "timerfd_settime", "timerfd_settime64", "times",
	"tkill", "truncate", "truncate64", "ugetrlimit", "umask", "uname", "unlink", "unlinkat",
	"utime", "utimensat", "utimensat_time64", "utimes", "vfork", "vmsplice", "wait4",
	"waitid", "waitpid", "write", "writev",
};

#define AF_VSOCK_FAMILY 40
#define ENOSYS_ERRNO 38 /* the engine reads a number; x86_64's ENOSYS */
/* CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
 * CLONE_NEWPID | CLONE_NEWNET */
#define CLONE_NS_FLAGS 0x7E020000
/* PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32, and 0xffffffff (query only) */
static const int64_t personalities[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffff };

static void names(struct json_writer *w, const char *const *list, size_t n)
{
	json_key(w, "names");
	json_arr_begin(w);
	for (size_t i = 0; i < n; i++)
		json_str_write(w, list[i]);
	json_arr_end(w);
}

/* {"names": [name], "action": ..., "args": [{"index": 0, "value": v, "valueTwo": v2, "op"}]} */
static void rule_arg0(struct json_writer *w, const char *name, int64_t value, int64_t two,
		      const char *op)
{
	json_obj_begin(w);
	names(w, &name, 1);
	json_key(w, "action");
	json_str_write(w, "SCMP_ACT_ALLOW");
	json_key(w, "args");
	json_arr_begin(w);
	json_obj_begin(w);
	json_key(w, "index");
	json_int_write(w, 0);
	json_key(w, "value");
	json_int_write(w, value);
	json_key(w, "valueTwo");
	json_int_write(w, two);
	json_key(w, "op");
	json_str_write(w, op);
	json_obj_end(w);
	json_arr_end(w);
	json_obj_end(w);
}

static void rule_enosys(struct json_writer *w, const char *const *list, size_t n)
{
	json_obj_begin(w);
	names(w, list, n);
	json_key(w, "action");
	json_str_write(w, "SCMP_ACT_ERRNO");
	json_key(w, "errnoRet");
	json_int_write(w, ENOSYS_ERRNO);
	json_obj_end(w);
}

int seccomp_profile_builtin(char *out, size_t size)
{
	/* no SCMP_ARCH_X86: a syscall through i386's int 0x80 kills the caller (SIGSYS) */
	static const char *const arches[] = { "SCMP_ARCH_X86_64", "SCMP_ARCH_X32" };
	static const char *const io_uring[] = { "io_uring_setup", "io_uring_enter",
						"io_uring_register" };
	static const char *const clone3[] = { "clone3" };
	struct buf b;
	struct json_writer w;
	int r;

	if (size == 0)
		return ERR_LIMIT;
	buf_init(&b, out, size - 1);
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "defaultAction");
	json_str_write(&w, "SCMP_ACT_ERRNO");
	json_key(&w, "defaultErrnoRet");
	json_int_write(&w, EPERM);
	json_key(&w, "architectures");
	json_arr_begin(&w);
	for (size_t i = 0; i < ARRAY_LEN(arches); i++)
		json_str_write(&w, arches[i]);
	json_arr_end(&w);
	json_key(&w, "syscalls");
	json_arr_begin(&w);
	json_obj_begin(&w);
	names(&w, allowed, ARRAY_LEN(allowed));
	json_key(&w, "action");
	json_str_write(&w, "SCMP_ACT_ALLOW");
	json_obj_end(&w);
	rule_arg0(&w, "socket", AF_VSOCK_FAMILY, 0, "SCMP_CMP_NE");
	for (size_t i = 0; i < ARRAY_LEN(personalities); i++)
		rule_arg0(&w, "personality", personalities[i], 0, "SCMP_CMP_EQ");
	/* allowed when (flags & CLONE_NS_FLAGS) == 0 */
	rule_arg0(&w, "clone", CLONE_NS_FLAGS, 0, "SCMP_CMP_MASKED_EQ");
	rule_enosys(&w, clone3, ARRAY_LEN(clone3));
	rule_enosys(&w, io_uring, ARRAY_LEN(io_uring));
	json_arr_end(&w);
	json_obj_end(&w);
	if ((r = json_writer_finish(&w)) != 0) {
		out[0] = '\0';
		return r;
	}
	out[b.len] = '\0';
	return (int)b.len;
}

/* "LINE:COLUMN" of byte off in text, both from 1. */
static void where(const char *text, size_t off, char *out, size_t size)
{
	unsigned line = 1, col = 1;

	for (size_t i = 0; i < off; i++) {
		if (text[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	snprintf(out, size, "%u:%u", line, col);
}

/* Copies validated JSON without the whitespace outside its strings; out may be in. */
static size_t compact(const char *in, size_t len, char *out)
{
	size_t n = 0;
	bool in_string = false, escape = false;

	for (size_t i = 0; i < len; i++) {
		char c = in[i];

		if (in_string) {
			if (escape)
				escape = false;
			else if (c == '\\')
				escape = true;
			else if (c == '"')
				in_string = false;
		} else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			continue;
		} else if (c == '"') {
			in_string = true;
		}
		out[n++] = c;
	}
	return n;
}

int seccomp_profile_load(const char *path, char *out, size_t size, char *err, size_t err_size)
{
	static char text[LIMIT_SECCOMP_FILE_BYTES + 1];
	static struct json_token tok[LIMIT_SECCOMP_TOKENS];
	struct json_doc doc;
	char at[32];
	size_t len = 0, n;
	ssize_t r;
	int fd, root = 0, v;

	if (size)
		out[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
		return (int)r;
	}
	r = fd_read_all(fd, text, sizeof(text), &len);
	close(fd);
	if (r == ERR_LIMIT) {
		snprintf(err, err_size, "%s: larger than %u bytes", path, LIMIT_SECCOMP_FILE_BYTES);
		return ERR_LIMIT;
	}
	if (r < 0) {
		snprintf(err, err_size, "%s: cannot read: %s", path, strerror((int)-r));
		return -EIO;
	}
	if ((r = json_parse(&doc, text, len, tok, LIMIT_SECCOMP_TOKENS)) != 0) {
		where(text, doc.err_offset, at, sizeof(at));
		snprintf(err, err_size, "%s:%s: not a seccomp profile: %s", path, at,
			 doc.err_what ? doc.err_what : "not valid JSON");
		return (int)r;
	}
	if (doc.tok[root].type != JSON_OBJECT) {
		snprintf(err, err_size, "%s:1:1: a seccomp profile is a JSON object", path);
		return ERR_PARSE;
	}
	v = json_obj_get(&doc, root, "defaultAction");
	if (v < 0 || doc.tok[v].type != JSON_STRING) {
		snprintf(err, err_size, "%s: a seccomp profile needs a string \"defaultAction\"", path);
		return ERR_PARSE;
	}
	v = json_obj_get(&doc, root, "syscalls");
	if (v >= 0 && doc.tok[v].type != JSON_ARRAY) {
		where(text, doc.tok[v].start, at, sizeof(at));
		snprintf(err, err_size, "%s:%s: \"syscalls\" must be an array", path, at);
		return ERR_PARSE;
	}
	n = compact(text, len, text);
	if (n >= size) {
		snprintf(err, err_size, "%s: %zu bytes once compacted, more than %zu", path, n,
			 size - 1);
		return ERR_LIMIT;
	}
	memcpy(out, text, n);
	out[n] = '\0';
	return (int)n;
}

/* Bytes s takes as the contents of a JSON string: the writer escapes '"' and '\' (compact
 * JSON holds no control characters). */
static size_t escaped_len(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += (*s == '"' || *s == '\\') ? 2 : 1;
	return n;
}

int seccomp_opt_for(const struct config *cfg, char *out, size_t size, char *err,
		    size_t err_size)
{
	size_t pre = sizeof(SECCOMP_OPT_PREFIX) - 1;
	int n;

	if (size <= pre)
		return ERR_LIMIT;
	memcpy(out, SECCOMP_OPT_PREFIX, pre);
	if (cfg->seccomp_profile[0]) {
		n = seccomp_profile_load(cfg->seccomp_profile, out + pre, size - pre, err, err_size);
	} else {
		n = seccomp_profile_builtin(out + pre, size - pre);
		if (n < 0)
			snprintf(err, err_size, "the built-in seccomp profile does not fit");
	}
	if (n < 0) {
		out[0] = '\0';
		return n;
	}
	/* the entry, escaped, and its two quotes */
	if (escaped_len(out) + 2 > LIMIT_SECCOMP_PROFILE_BYTES) {
		snprintf(err, err_size, "%s: the profile takes more than %u bytes in a create request "
			 "once compacted and escaped", cfg->seccomp_profile[0] ? cfg->seccomp_profile :
			 "built-in", LIMIT_SECCOMP_PROFILE_BYTES);
		out[0] = '\0';
		return ERR_LIMIT;
	}
	return n;
}

int seccomp_profile_main(int argc, char **argv)
{
	static struct config cfg;
	static char opt[SECCOMP_OPT_BYTES];
	const char *path = NULL;
	char err[1024];
	int n;

	if (argc == 3 && strcmp(argv[1], "-c") == 0) {
		path = argv[2];
	} else if (argc != 1) {
		fputs(seccomp_profile_help, stderr);
		return 2;
	}
	config_defaults(&cfg);
	if (path && config_load(&cfg, path, 1, err, sizeof(err)) != 0) {
		fprintf(stderr, "agentic seccomp-profile: %s\n", err);
		return 2;
	}
	n = seccomp_opt_for(&cfg, opt, sizeof(opt), err, sizeof(err));
	if (n < 0) {
		fprintf(stderr, "agentic seccomp-profile: %s\n", err);
		return 2;
	}
	printf("%s\n", opt + sizeof(SECCOMP_OPT_PREFIX) - 1);
	return fflush(stdout) == 0 ? 0 : 1;
}
