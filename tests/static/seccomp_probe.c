/* seccomp_probe.c: tries, as whoever runs it, the syscalls a sandbox's seccomp profile must
 * deny (and two it must allow) and prints one `name=result` line each: `ok`, or the errno's
 * name. Run as a sandbox workload by tests/security/test_seccomp, and under a plain `docker
 * run` as the positive control. Raw syscalls, so that no libc wrapper changes the answer. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#define KEYCTL_GET_KEYRING_ID 0
#define KEY_SPEC_SESSION_KEYRING -3

static void report(const char *name, long r)
{
	const char *e;

	if (r >= 0) {
		printf("%s=ok\n", name);
		return;
	}
	switch (errno) {
	case EPERM: e = "EPERM"; break;
	case ENOSYS: e = "ENOSYS"; break;
	case EACCES: e = "EACCES"; break;
	case EINVAL: e = "EINVAL"; break;
	case EAFNOSUPPORT: e = "EAFNOSUPPORT"; break;
	default: printf("%s=errno%d\n", name, errno); return;
	}
	printf("%s=%s\n", name, e);
}

static int child_main(void *arg)
{
	(void)arg;
	return 0;
}

/* clone(2) through libc's clone() (the SYS_clone syscall, as agentic-init starts commands),
 * with a child that exits at once. */
static long try_clone(int flags)
{
	static char stack[64 * 1024] __attribute__((aligned(16)));
	long pid = clone(child_main, stack + sizeof(stack), flags | SIGCHLD, NULL);

	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return pid;
}

/* i386's int 0x80 from this 64-bit process: syscall nr with up to three arguments. */
static long int80(long nr, long a, long b, long c)
{
	long r;

	__asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
	return r;
}

/* socketcall(SYS_SOCKET, {AF_VSOCK, SOCK_STREAM, 0}) through the i386 ABI, in a child that
 * the filter may kill: `ok`, `SIGSYS`, or the errno's name. The arguments live below 4 GiB,
 * where a 32-bit pointer reaches. */
static void try_i386_socketcall_vsock(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		uint32_t *args = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
		long r;

		if (args == MAP_FAILED)
			_exit(100);
		args[0] = AF_VSOCK;
		args[1] = SOCK_STREAM;
		args[2] = 0;
		r = int80(102 /* i386 socketcall */, 1 /* SYS_SOCKET */, (long)(uintptr_t)args, 0);
		_exit(r >= 0 ? 0 : r == -EPERM ? 1 : r == -ENOSYS ? 2 : r == -EAFNOSUPPORT ? 3 : 4);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		printf("i386_socketcall_vsock=nofork\n");
		return;
	}
	if (WIFSIGNALED(status))
		printf("i386_socketcall_vsock=%s\n", WTERMSIG(status) == SIGSYS ? "SIGSYS" : "signal");
	else
		printf("i386_socketcall_vsock=%s\n", (const char *[]){ "ok", "EPERM", "ENOSYS",
			"EAFNOSUPPORT", "other" }[WEXITSTATUS(status) < 5 ? WEXITSTATUS(status) : 4]);
}

static void seccomp_mode(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "Seccomp:", 8) == 0)
			printf("seccomp_mode=%d\n", atoi(line + 8));
	if (f)
		fclose(f);
}

int main(void)
{
	unsigned char params[120] = { 0 }; /* struct io_uring_params, zeroed */
	union bpf_attr battr;
	struct perf_event_attr pattr;
	long r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	seccomp_mode();
	r = syscall(SYS_io_uring_setup, 4, params);
	report("io_uring_setup", r);
	if (r >= 0)
		close((int)r);
	report("unshare_newuser", syscall(SYS_unshare, CLONE_NEWUSER));
	report("clone_newuser", try_clone(CLONE_NEWUSER));
	memset(&battr, 0, sizeof(battr));
	battr.map_type = BPF_MAP_TYPE_ARRAY;
	battr.key_size = 4;
	battr.value_size = 4;
	battr.max_entries = 1;
	report("bpf", syscall(SYS_bpf, BPF_MAP_CREATE, &battr, sizeof(battr)));
	report("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
	report("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
	memset(&pattr, 0, sizeof(pattr));
	pattr.type = PERF_TYPE_SOFTWARE;
	pattr.size = sizeof(pattr);
	pattr.config = PERF_COUNT_SW_TASK_CLOCK;
	pattr.exclude_kernel = 1;
	pattr.exclude_hv = 1;
	report("perf_event_open", syscall(SYS_perf_event_open, &pattr, 0, -1, -1, 0));
	report("socket_vsock", syscall(SYS_socket, AF_VSOCK, SOCK_STREAM, 0));
	try_i386_socketcall_vsock();
	/* what agentic-init and every shell need */
	report("clone_vm_vfork", try_clone(CLONE_VM | CLONE_VFORK));
	report("socket_inet", syscall(SYS_socket, AF_INET, SOCK_DGRAM, 0));
	return 0;
}
