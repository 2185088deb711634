/* verify_gather.c: what a verification reads of the host and of agenticd, at once (small local
 * reads): a container's init and control tmpfs through /proc, a sandbox's agentshare and
 * posture, a VM's QEMU and directory. Only facts: the verdicts are verify.c's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "sandbox/posture.h"
#include "sandbox/sandbox.h"
#include "runtime/runtime_vm.h"
#include "workspace/host.h"
#include "verify/verify.h"
#include "verify/verify_run.h"

/* what the gatherer keeps from start */
static struct verify_host G;

static void lsm_read(void)
{
	char buf[256] = "";
	int fd = open("/sys/kernel/security/lsm", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n > 0) {
		buf[n] = '\0';
		G.apparmor = strstr(buf, "apparmor") != NULL;
		G.selinux = strstr(buf, "selinux") != NULL;
		return;
	}
	G.apparmor = access("/sys/module/apparmor/parameters/enabled", R_OK) == 0;
	G.selinux = access("/sys/fs/selinux/enforce", F_OK) == 0;
}

void verify_gather_init(const struct verify_config *vc)
{
	const char *h = vc->cfg->docker_host;

	memset(&G, 0, sizeof(G));
	G.c = *vc;
	snprintf(G.docker_socket, sizeof(G.docker_socket), "%s",
		 strncmp(h, "unix://", 7) == 0 ? h + 7 : h);
	if (!realpath(G.docker_socket, G.docker_socket_real))
		G.docker_socket_real[0] = '\0';
	lsm_read();
}

/* fd's bytes into G.text (NUL-terminated, cut at its size), fd closed; how many. */
static size_t text_read(int fd)
{
	size_t len = 0;

	fd_read_all(fd, G.text, sizeof(G.text) - 1, &len);
	close(fd);
	G.text[len] = '\0';
	return len;
}

/* A small file into G.text; 0 or -errno. */
static int file_read(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	G.text[0] = '\0';
	if (fd < 0)
		return -errno;
	text_read(fd);
	return 0;
}

char *verify_file_text(const char *path)
{
	return file_read(path) == 0 ? G.text : NULL;
}

static int proc_read(int64_t pid, const char *name)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%lld/%s", (long long)pid, name);
	return file_read(path);
}

/* Modes under runs/: directories 0700, files 0600, all root's; symlinks are not followed.
 * Takes dirfd. */
static void walk(struct verify_facts *f, int dirfd, int depth)
{
	char buf[4096];
	long n;

	while (f->runs_checked < VERIFY_WALK_MAX &&
	       (n = syscall(SYS_getdents64, dirfd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct dirent64_raw *de = (void *)(buf + off);
			struct stat st;
			bool dir;

			off += de->reclen;
			if (strcmp(de->name, ".") == 0 || strcmp(de->name, "..") == 0)
				continue;
			if (fstatat(dirfd, de->name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
			    S_ISLNK(st.st_mode))
				continue;
			dir = S_ISDIR(st.st_mode);
			f->runs_checked++;
			if (((st.st_mode & 07777) != (dir ? 0700u : 0600u) || st.st_uid != 0) &&
			    !f->runs_bad++)
				snprintf(f->runs_why, sizeof(f->runs_why), "a %s of mode %o owned by %u",
					 dir ? "directory" : "file", (unsigned)(st.st_mode & 07777),
					 (unsigned)st.st_uid);
			if (dir && depth < 4) {
				int fd = openat(dirfd, de->name,
						O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

				if (fd >= 0)
					walk(f, fd, depth + 1);
			}
		}
	}
	close(dirfd);
}

static void sandbox_facts(struct vrun *v)
{
	struct verify_facts *f = &v->facts;
	const struct sandbox *sb = v->sb;
	char dir[LIMIT_PATH_BYTES], path[LIMIT_PATH_BYTES + 16];
	struct stat st;
	int fd;

	f->is_sandbox = true;
	for (uint32_t i = 0; i < f->ct.nnets && i < VERIFY_NETS; i++)
		if (strcmp(f->ct.net_name[i], sb->network) == 0)
			f->net_index = i;
	f->disk_bytes = sb->disk_bytes;
	f->writable_root = sb->writable_root;
	f->workspace_img_bytes = -1;
	if (host_instance_dir(G.c.cfg, sb->instance_id, dir, sizeof(dir)) == 0) {
		snprintf(v->workspace, sizeof(v->workspace), "%s/workspace", dir);
		f->workspace = v->workspace;
		snprintf(path, sizeof(path), "%s/workspace.img", dir);
		if (stat(path, &st) == 0)
			f->workspace_img_bytes = st.st_size;
		snprintf(path, sizeof(path), "%s/runs", dir);
		fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			walk(f, fd, 0);
	}
	f->t1 = posture_is_t1(&sb->posture);
	if (posture_text(&sb->posture, f->posture_text, sizeof(f->posture_text)) != 0)
		snprintf(f->posture_text, sizeof(f->posture_text), "%s", posture_tier(&sb->posture));
}

/* /run/agentic's inode, reached from the init's root one component at a time with no
 * symlink followed (an absolute link in a container's image would resolve on the host's /,
 * and its mode and owner would be a host path's). */
static void tmpfs_dir_read(struct verify_facts *f, int64_t pid)
{
	static const char *const parts[] = { "run", "agentic" };
	char path[64];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%lld/root", (long long)pid);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; fd >= 0 && i < ARRAY_LEN(parts); i++) {
		int next = openat(fd, parts[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		close(fd);
		fd = next;
	}
	if (fd >= 0 && fstat(fd, &st) == 0) {
		f->tmpfs_dir_read = true;
		f->tmpfs_dir_mode = st.st_mode & 07777;
		f->tmpfs_dir_uid = st.st_uid;
		f->tmpfs_dir_gid = st.st_gid;
	}
	if (fd >= 0)
		close(fd);
}

/* What the host and agenticd say, read at once (small local reads). */
void verify_host_facts(struct vrun *v)
{
	struct verify_facts *f = &v->facts;
	const struct config *cfg = G.c.cfg;
	struct stat a, b;
	int64_t pid = f->ct.pid;

	f->uid_min = cfg->control_uid_min;
	f->uid_max = cfg->control_uid_max;
	f->workload_uid = cfg->workload_uid;
	f->workload_gid = cfg->workload_gid;
	f->agent_socket_dir = cfg->agent_socket_dir;
	f->docker_socket = G.docker_socket;
	f->docker_socket_real = G.docker_socket_real[0] ? G.docker_socket_real : NULL;
	f->agentshare_root = cfg->agentshare_root;
	f->self_exe = G.c.self_exe;
	f->lsm_apparmor = G.apparmor;
	f->lsm_selinux = G.selinux;
	f->require_dedicated = v->require_dedicated;
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		const struct sandbox *o = sandbox_slot(i);

		if (o->state != SB_FREE && o != v->sb && o->uid_taken && o->uid == f->ct.control_uid)
			f->uid_taken_by_other = true;
	}
	for (uint32_t i = 0; i < f->ct.nnets && i < VERIFY_NETS; i++)
		if (f->ct.managed_network[0] && strcmp(f->ct.net_name[i], f->ct.managed_network) == 0)
			f->net_index = i;
	/* a sandbox's init is the process agenticd pinned, if it is still that one */
	if (v->sb && v->sb->init_pidfd >= 0 && sandbox_pidfd_pid(v->sb->init_pidfd) == v->sb->pid)
		pid = v->sb->pid;
	if (pid > 0 && proc_read(pid, "status") == 0)
		verify_status_parse(G.text, &f->init_host);
	if (v->sb && agent_of(v->sb)->self[0])
		verify_status_parse(agent_of(v->sb)->self, &f->init_self);
	if (pid > 0 && proc_read(pid, "mountinfo") == 0)
		verify_mountinfo_find(G.text, "/run/agentic", &f->tmpfs);
	if (pid > 0)
		tmpfs_dir_read(f, pid);
	if (stat(cfg->agentshare_root, &a) == 0 && stat("/", &b) == 0) {
		f->share_dev_known = true;
		f->share_same_dev = a.st_dev == b.st_dev;
	}
	if (v->sb)
		sandbox_facts(v);
}

/* Whether pid's namespace of kind ns is other than agenticd's; 0, or -1 unreadable. */
static int ns_other(int64_t pid, const char *ns, bool *other)
{
	char path[64], self[32];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%lld/ns/%s", (long long)pid, ns);
	snprintf(self, sizeof(self), "/proc/self/ns/%s", ns);
	if (stat(path, &a) != 0 || stat(self, &b) != 0)
		return -1;
	*other = a.st_ino != b.st_ino || a.st_dev != b.st_dev;
	return 0;
}

/* /proc/net/dev's interfaces but lo (two header lines, then "NAME: counters") */
static int ifaces_count(const char *text)
{
	int n = 0, at = 0;

	for (const char *line = text; line && *line; at++) {
		const char *end = strchr(line, '\n'), *name = line + strspn(line, " ");

		if (at >= 2 && memchr(line, ':', end ? (size_t)(end - line) : strlen(line)) &&
		    strncmp(name, "lo:", 3) != 0)
			n++;
		line = end ? end + 1 : NULL;
	}
	return n;
}

/* QEMU's command line holds `-sandbox RUNTIME_VM_SANDBOX` (NUL-separated arguments). */
static bool qemu_sandbox_on(int64_t pid)
{
	char path[64];
	bool prev = false, on = false;
	size_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%lld/cmdline", (long long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	len = text_read(fd);
	for (size_t at = 0; at < len; at += strlen(G.text + at) + 1) {
		on |= prev && strcmp(G.text + at, RUNTIME_VM_SANDBOX) == 0;
		prev = strcmp(G.text + at, "-sandbox") == 0;
	}
	return on;
}

/* A VM's host side: its QEMU (uid, namespaces, seccomp, command line) and its directory. */
void verify_vm_facts(struct vrun *v)
{
	struct verify_facts *f = &v->facts;
	struct verify_vm *vm = &f->vm;
	struct runtime_vm_qemu q;
	struct stat st, root;
	char path[64];

	f->is_vm = true;
	f->ct.has_uid_label = true;
	f->ct.control_uid = v->sb->uid;
	snprintf(f->ct.id, sizeof(f->ct.id), "%s", v->sb->container_id);
	vm->ifaces = -1;
	if (!G.c.vm || runtime_vm_qemu_read(G.c.vm, v->sb, &q) != 0)
		return;
	vm->uid = q.uid;
	vm->uid_other = q.uid_other;
	vm->uid_subordinate = q.uid_subordinate;
	vm->kvm = q.kvm;
	if (lstat(q.dir, &st) == 0 && S_ISDIR(st.st_mode)) {
		vm->dir_read = true;
		vm->dir_mode = st.st_mode & 07777;
		vm->dir_uid = st.st_uid;
		vm->dir_gid = st.st_gid;
	}
	if (!q.pid)
		return;
	vm->running = true;
	if (proc_read(q.pid, "status") == 0)
		verify_status_parse(G.text, &vm->qemu);
	snprintf(path, sizeof(path), "/proc/%d/root", (int)q.pid);
	vm->ns_read = ns_other(q.pid, "net", &vm->own_net) == 0 &&
		      ns_other(q.pid, "ipc", &vm->own_ipc) == 0 &&
		      ns_other(q.pid, "mnt", &vm->own_mnt) == 0 && stat(path, &st) == 0 &&
		      stat("/", &root) == 0;
	vm->own_root = vm->ns_read && (st.st_dev != root.st_dev || st.st_ino != root.st_ino);
	if (proc_read(q.pid, "net/dev") == 0)
		vm->ifaces = ifaces_count(G.text);
	vm->sandbox_on = qemu_sandbox_on(q.pid);
}
