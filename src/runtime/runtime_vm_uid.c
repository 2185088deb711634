/* runtime_vm_uid.c: QEMU's uid, never one anyone else holds or may take: the subordinate
 * ranges of /etc/subuid and /etc/subgid, the processes holding a uid (read from /proc with
 * getdents64: nothing allocated), and their kill. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/runtime_vm_priv.h"

/* ---- QEMU's uid: never one anyone else holds or may take ---- */

/* Whether id lies in a range of /etc/subuid or /etc/subgid: a local user who holds that
 * range maps it into a user namespace of theirs (newuidmap), and a process of QEMU's uid owns
 * the VM (it may ptrace QEMU and read the guest's memory). */
bool vm_range_subordinate(uint64_t lo, uint64_t hi)
{
	static char text[65536];
	static const char *const files[] = { "/etc/subuid", "/etc/subgid" };

	for (size_t f = 0; f < ARRAY_LEN(files); f++) {
		if (file_read_small(files[f], text, sizeof(text)) <= 0)
			continue;
		for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
			unsigned long long start, count;
			char *c1 = strchr(line, ':'), *nl = strchr(line, '\n');

			if (!c1 || (nl && c1 > nl) || sscanf(c1 + 1, "%llu:%llu", &start, &count) != 2)
				continue;
			if (count && start <= hi && start + count - 1 >= lo)
				return true;
		}
	}
	return false;
}

bool vm_id_subordinate(uint32_t id)
{
	return vm_range_subordinate(id, id);
}

/* The first process but except whose real, effective, saved or filesystem uid or gid is id
 * (read with getdents64 into static memory: nothing is allocated), else 0. */
pid_t vm_id_holder(uint32_t id, pid_t except)
{
	static char dents[16384] __attribute__((aligned(8))), st[2048];
	char path[64];
	int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n;

	if (dfd < 0)
		return 0;
	while ((n = syscall(SYS_getdents64, dfd, dents, sizeof(dents))) > 0) {
		for (long off = 0; off < n;) {
			const struct dirent64_raw *de = (const void *)(dents + off);
			const char *name = de->name;
			unsigned u[4], g[4];
			char *p;

			off += de->reclen;
			if (name[0] < '1' || name[0] > '9' || strtol(name, NULL, 10) == except)
				continue;
			snprintf(path, sizeof(path), "/proc/%s/status", name);
			if (file_read_small(path, st, sizeof(st)) <= 0)
				continue;
			if ((p = strstr(st, "\nUid:")) && sscanf(p + 5, "%u %u %u %u", &u[0], &u[1], &u[2],
								    &u[3]) == 4 &&
			    (p = strstr(st, "\nGid:")) && sscanf(p + 5, "%u %u %u %u", &g[0], &g[1], &g[2],
								    &g[3]) == 4)
				for (int i = 0; i < 4; i++)
					if (u[i] == id || g[i] == id) {
						close(dfd);
						return (pid_t)strtol(name, NULL, 10);
					}
		}
	}
	close(dfd);
	return 0;
}

/* Kills every process holding id: what is left of a VM whose record did not say its pid (an
 * agenticd killed between QEMU's start and its record). Its uid is that VM's alone. */
void vm_id_kill_all(uint32_t id)
{
	for (int round = 0; round < 50; round++) {
		pid_t pid = vm_id_holder(id, 0);
		int fd;

		if (!pid)
			return;
		fd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (fd >= 0) {
			syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
			close(fd);
		}
		usleep(20000);
	}
}
