/* fd.c: reading a whole small file (a config, a profile) into caller storage; Unix sockets
 * that take no descriptors, and processes that cannot send any. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <unistd.h>

#include "base.h"

int fd_read_all(int fd, void *buf, size_t cap, size_t *len)
{
	ssize_t r;

	*len = 0;
	while (*len < cap && (r = read(fd, (char *)buf + *len, cap - *len)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		*len += (size_t)r;
	}
	return *len == cap ? ERR_LIMIT : 0;
}

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83 /* Linux 6.16's, not in these headers yet */
#endif

int fd_refuse_rights(int fd)
{
	return setsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &(int){ 0 }, sizeof(int)) == 0 ? 0 : -errno;
}

/* sendmsg, sendmmsg and io_uring (which sends messages too) refused; x32 system calls too,
 * and any other arch killed. */
#define NP_ERRNO 10 /* the index of the filter's RET ERRNO */
static const struct sock_filter no_passing[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, NP_ERRNO - 5, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendmsg, NP_ERRNO - 6, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendmmsg, NP_ERRNO - 7, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, NP_ERRNO - 8, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_enter, NP_ERRNO - 9, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_register, 0, 1),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};
_Static_assert(sizeof(no_passing) / sizeof(no_passing[0]) == NP_ERRNO + 2,
	       "the jumps of no_passing count on its RET ERRNO at NP_ERRNO");

int fd_forbid_passing(void)
{
	static const struct sock_fprog prog = {
		.len = sizeof(no_passing) / sizeof(no_passing[0]),
		.filter = (struct sock_filter *)no_passing,
	};

	if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
		return -errno;
	return 0;
}

ssize_t file_read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;
	size_t n = 0;

	buf[0] = '\0';
	if (fd < 0)
		return -1;
	r = fd_read_all(fd, buf, cap - 1, &n);
	close(fd);
	buf[n] = '\0';
	return r < 0 ? -1 : (ssize_t)n;
}
