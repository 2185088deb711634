/* runtime_vm_record.c: a VM on the host: its directory under state_dir/vm, its record
 * (vm.rec: QEMU's pid, start time and control uid, for the next agenticd) and a process's start
 * time, which tells a pid reused from the QEMU that started. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/runtime_vm_priv.h"

/* ---- paths and the record ---- */

int vm_dir(const struct runtime_vm *v, const char *instance, char *out, size_t size)
{
	if ((size_t)snprintf(out, size, "%s/vm/%s", v->c.cfg->state_dir, instance) >= size)
		return -ENAMETOOLONG;
	return 0;
}

int vm_path(const struct runtime_vm *v, const char *instance, const char *file, char *out,
		   size_t size)
{
	char dir[LIMIT_PATH_BYTES];
	int r = vm_dir(v, instance, dir, sizeof(dir));

	if (r == 0 && (size_t)snprintf(out, size, "%s/%s", dir, file) >= size)
		r = -ENAMETOOLONG;
	return r;
}

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot. */
uint64_t vm_proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (file_read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 0;
	/* after ") " comes field 3 */
	for (field = 3, p += 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (sscanf(p, "%llu", &v) != 1)
		return 0;
	return v;
}

int vm_write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int vm_record_write(const struct runtime_vm *v, const struct vm_slot *s)
{
	char path[LIMIT_PATH_BYTES], tmp[LIMIT_PATH_BYTES + 8], text[256];
	int fd, n, r = 0;

	if ((r = vm_path(v, s->instance, "vm.rec", path, sizeof(path))) != 0)
		return r;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	n = snprintf(text, sizeof(text), "pid %d\nstart %llu\ncontrol_uid %u\n", (int)s->pid,
		     (unsigned long long)s->start, s->control_uid);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, text, (size_t)n) != n || fsync(fd) != 0)
		r = -EIO;
	close(fd);
	if (r == 0 && rename(tmp, path) != 0)
		r = -errno;
	if (r != 0)
		unlink(tmp);
	return r;
}

int vm_record_read(const struct runtime_vm *v, const char *instance, pid_t *pid,
		       uint64_t *start, uint32_t *uid)
{
	char path[LIMIT_PATH_BYTES], text[256];
	unsigned long long st;
	unsigned int u;
	int p;

	if (vm_path(v, instance, "vm.rec", path, sizeof(path)) != 0)
		return -ENAMETOOLONG;
	if (file_read_small(path, text, sizeof(text)) <= 0)
		return errno == ENOENT ? -ENOENT : -EIO;
	/* pid 0: written before QEMU's start, which did not get as far as its own record */
	if (sscanf(text, "pid %d\nstart %llu\ncontrol_uid %u", &p, &st, &u) != 3 || p < 0)
		return -EINVAL;
	*pid = p;
	*start = st;
	*uid = u;
	return 0;
}

/* A pidfd of pid when it is still the process that started at start, else -1. */
int vm_pid_check(pid_t pid, uint64_t start)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd < 0)
		return -1;
	if (vm_proc_start(pid) != start || start == 0) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
}

/* What a VM's directory may hold: removed by name (no directory read: agenticd allocates
 * nothing once it serves). */
static const char *const vm_files[] = { "rootfs.cpio", "vm.rec", "vm.rec.tmp", "control.sock",
					"console.sock" };

/* Removes the VM's directory and what is in it. */
void vm_dir_remove(const struct runtime_vm *v, const char *instance)
{
	char dir[LIMIT_PATH_BYTES], p[LIMIT_PATH_BYTES + 32];

	if (vm_dir(v, instance, dir, sizeof(dir)) != 0)
		return;
	for (size_t i = 0; i < ARRAY_LEN(vm_files); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, vm_files[i]);
		unlink(p);
	}
	if (rmdir(dir) != 0 && errno != ENOENT)
		log_warn("vm directory not removed", "dir=%s errno=%d", log_q(dir), errno);
}
