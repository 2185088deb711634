/* runtime_vm_create.c: a VM made: CT_CREATE builds the initramfs of the image (agentic
 * vm-image, a child), CT_START starts QEMU on it with its sockets, kernel and workspace. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "workspace/host.h"
#include "runtime/runtime_docker.h"
#include "runtime/runtime_vm_priv.h"

/* ---- CT_CREATE: the initramfs of the image ---- */

void vm_rootfs_begin(struct runtime_vm *v, struct vm_slot *s, struct rt_call *c)
{
	const struct sandbox *sb = c->sb;
	const struct create_req *req = sb->req;
	char dir[LIMIT_PATH_BYTES], out[LIMIT_PATH_BYTES + 32], cache[LIMIT_PATH_BYTES];
	char mods[LIMIT_PATH_BYTES], sock[LIMIT_PATH_BYTES];
	const char *dh = v->c.cfg->docker_host;
	char *argv[16];
	int pipefd[2], r;
	pid_t pid;

	vm_forget(s);
	snprintf(s->id, sizeof(s->id), VM_PREFIX "%s", sb->instance_id);
	memcpy(s->instance, sb->instance_id, sizeof(s->instance));
	s->control_uid = sb->uid;
	s->ring_len = 0;
	s->memory = req && req->memory_bytes ? req->memory_bytes : v->c.cfg->default_memory_bytes;
	s->cpus = (uint32_t)(((req && req->nano_cpus ? req->nano_cpus : v->c.cfg->default_nano_cpus) +
			      999999999) / 1000000000);
	if (s->cpus < 1)
		s->cpus = 1;
	s->writable_root = sb->writable_root;
	if ((r = vm_dir(v, sb->instance_id, dir, sizeof(dir))) != 0 ||
	    (mkdir(dir, 0700) != 0 && errno != EEXIST)) {
		vm_answer(s, RT_ENGINE, "cannot make the VM's directory under %s/vm: %s",
		       v->c.cfg->state_dir, strerror(r ? -r : errno));
		return;
	}
	snprintf(out, sizeof(out), "%s/rootfs.cpio", dir);
	unlink(out);
	snprintf(cache, sizeof(cache), "%s/vm-images", v->c.cfg->state_dir);
	snprintf(mods, sizeof(mods), "%s/modules", v->c.kernel_dir);
	snprintf(sock, sizeof(sock), "%s", strncmp(dh, "unix://", 7) == 0 ? dh + 7 : dh);
	argv[0] = "agentic"; /* the copy's name would select the init */
	argv[1] = "vm-image";
	argv[2] = "--docker";
	argv[3] = sock;
	argv[4] = "--image";
	argv[5] = (char *)sb->image;
	argv[6] = "--init";
	argv[7] = (char *)v->c.self_exe;
	argv[8] = "--modules";
	argv[9] = mods;
	argv[10] = "--cache";
	argv[11] = cache;
	argv[12] = "--out";
	argv[13] = out;
	argv[14] = NULL;
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
		vm_answer(s, RT_ENGINE, "cannot start the VM image builder: pipe: %s", strerror(errno));
		return;
	}
	pid = vm_spawn(v->c.self_exe, argv, NULL, 0, pipefd[1], 0, 0, 0, NULL, &s->img_pidfd);
	close(pipefd[1]);
	if (pid < 0) {
		close(pipefd[0]);
		s->img_pidfd = -1;
		vm_answer(s, RT_ENGINE, "cannot start the VM image builder: %s", strerror((int)-pid));
		return;
	}
	s->img_pid = pid;
	s->out_fd = pipefd[0];
	vm_watch(s, s->out_fd, K_OUT);
	vm_watch(s, s->img_pidfd, K_IMAGE);
	s->wait = W_IMAGE;
	s->deadline = now_ms() + VM_IMAGE_TIMEOUT_MS;
	s->live = true;
	log_info("vm image build started", "name=%s image=%s", log_q(sb->name), log_q(sb->image));
}

void vm_rootfs_done(struct vm_slot *s, int64_t status)
{
	char msg[RT_TEXT_BYTES];
	size_t n;

	vm_drain_fd(s, &s->out_fd);
	vm_close_fd(s, &s->out_fd);
	vm_close_fd(s, &s->img_pidfd);
	if (status == 0) {
		memcpy(s->call->res.id, s->id, sizeof(s->call->res.id));
		s->ring_len = 0;
		vm_answer(s, RT_OK, NULL);
		return;
	}
	/* its one-line error: the last line it wrote, printable text only */
	n = s->ring_len < sizeof(msg) - 1 ? s->ring_len : sizeof(msg) - 1;
	memcpy(msg, s->ring + s->ring_len - n, n);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		n--;
	msg[n] = '\0';
	{
		char *nl = strrchr(msg, '\n');

		if (nl) {
			n = strlen(nl + 1);
			memmove(msg, nl + 1, n + 1);
		}
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f)
				msg[i] = '?';
	}
	s->ring_len = 0;
	vm_answer(s, strstr(msg, "is not on the engine") ? RT_IMAGE_MISSING : RT_ENGINE,
	       "the VM's root filesystem was not made (status %lld): %s", (long long)status,
	       n ? msg : "no message");
}

/* ---- CT_START: QEMU ---- */

static int listen_at(const char *path, int *fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	unlink(path);
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0)
		return -errno;
	if (bind(*fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0600) != 0 ||
	    listen(*fd, 4) != 0) {
		int e = errno;

		close(*fd);
		*fd = -1;
		return -e;
	}
	return 0;
}

/* QEMU's descriptors, 3 + i in it: the kernel, the root filesystem, the console and control
 * sockets (bound here, served by QEMU), the workspace image read-write and read-only. 0, or
 * the call answered. */
static int start_open(struct runtime_vm *v, struct vm_slot *s, const char *dir, int fds[6])
{
	char p[LIMIT_PATH_BYTES + 64], ws[LIMIT_PATH_BYTES + 32];
	int r;

	host_instance_dir(v->c.cfg, s->instance, ws, sizeof(ws) - 16);
	strcat(ws, "/workspace.img");
	/* the uncompressed kernel when make vm-kernel made it (booted through its PVH entry:
	 * no emulated decompressor), else the bzImage */
	snprintf(p, sizeof(p), "%s/vmlinux", v->c.kernel_dir);
	fds[0] = open(p, O_RDONLY | O_CLOEXEC);
	if (fds[0] < 0) {
		snprintf(p, sizeof(p), "%s/vmlinuz", v->c.kernel_dir);
		fds[0] = open(p, O_RDONLY | O_CLOEXEC);
	}
	snprintf(p, sizeof(p), "%s/rootfs.cpio", dir);
	fds[1] = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	fds[4] = open(ws, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	fds[5] = open(ws, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fds[0] < 0 || fds[1] < 0 || fds[4] < 0 || fds[5] < 0) {
		r = -errno;
		vm_answer(s, RT_ENGINE, "cannot open the VM's %s: %s", fds[0] < 0 ? "kernel" :
			  fds[1] < 0 ? "root filesystem" : "workspace image", strerror(-r));
		return -1;
	}
	snprintf(p, sizeof(p), "%s/console.sock", dir);
	if ((r = listen_at(p, &fds[2])) == 0) {
		snprintf(p, sizeof(p), "%s/control.sock", dir);
		r = listen_at(p, &fds[3]);
	}
	if (r != 0)
		vm_answer(s, RT_ENGINE, "cannot make the VM's sockets in %s: %s", dir, strerror(-r));
	return r;
}

/* QEMU's uid is no one else's, and its record says it before QEMU starts (an agenticd killed
 * in between still knows the uid). 0, or the call answered. */
static int start_claim_uid(struct runtime_vm *v, struct vm_slot *s, const char *dir, uint32_t qu)
{
	pid_t pid;
	int r;

	if (vm_id_subordinate(qu)) {
		vm_answer(s, RT_ENGINE, "the VM's QEMU uid %u is in a subordinate range of "
			  "/etc/subuid or /etc/subgid, which a local user may map: change "
			  "vm_uid_offset", qu);
		return -EPERM;
	}
	if ((pid = vm_id_holder(qu, 0)) != 0) {
		vm_answer(s, RT_ENGINE, "the VM's QEMU uid %u is held by process %d already (no "
			  "process but its QEMU may have it: see vm_uid_offset)", qu, (int)pid);
		return -EBUSY;
	}
	s->pid = 0;
	s->start = 0;
	if ((r = vm_record_write(v, s)) != 0)
		vm_answer(s, RT_ENGINE, "cannot write the VM's record in %s: %s", dir, strerror(-r));
	return r;
}

/* QEMU's command line for the sandbox's VM (its strings in q). */
struct qemu_line {
	char mem[32], smp[16], append[1024], accel[32];
	char *argv[64];
};

static void qemu_line(const struct runtime_vm *v, const struct vm_slot *s,
		      const struct sandbox *sb, struct qemu_line *q)
{
	const struct config *cfg = v->c.cfg;
	char **argv = q->argv;
	const char *accel = q->accel;
	int n = 0;

	snprintf(q->mem, sizeof(q->mem), "%llum", (unsigned long long)(s->memory >> 20));
	snprintf(q->smp, sizeof(q->smp), "%u", s->cpus);
	snprintf(q->accel, sizeof(q->accel), "%s", v->accel);
	/* what the init's environment would be in a container; never a secret (the request's
	 * env and credentials go over the control channel once it registers) */
	snprintf(q->append, sizeof(q->append), "console=ttyS0 quiet panic=-1 AGENT_RUNTIME=vm "
		 "AGENT_ID=%s AGENT_INSTANCE_ID=%s AGENT_CONTROL_UID=%u AGENT_CONTROL_GID=%u "
		 "AGENT_CONTROL_UID_RANGE=%u-%u AGENT_WORKLOAD_UID=%u AGENT_WORKLOAD_GID=%u "
		 "AGENT_SETUP_SENTINEL=/run/agentic/setup-complete%s%s",
		 sb->agent_id, sb->instance_id, sb->uid,
		 sb->uid + (runtime_docker_fault_init_env() ? 1u : 0u), cfg->control_uid_min,
		 cfg->control_uid_max, cfg->workload_uid, cfg->workload_gid,
		 s->writable_root ? " AGENT_VM_WRITABLE_ROOT=1" : "",
		 strcmp(accel, "tcg") == 0 ? v->tsc_arg : "");
#define A(x) argv[n++] = (char *)(x)
	A(VM_QEMU);
	A("-name"); A(sb->name);
	A("-M"); A("microvm,acpi=on");
	A("-accel"); A(accel);
	if (strcmp(accel, "kvm") == 0) {
		A("-cpu"); A("host");
	}
	A("-m"); A(q->mem);
	A("-smp"); A(q->smp);
	A("-nodefaults"); A("-no-user-config"); A("-display"); A("none"); A("-no-reboot");
	A("-nic"); A("none");
	A("-sandbox"); A(RUNTIME_VM_SANDBOX);
	A("-kernel"); A("/proc/self/fd/3");
	A("-initrd"); A("/proc/self/fd/4");
	A("-append"); A(q->append);
	A("-chardev"); A("socket,id=con,fd=5,server=on,wait=off");
	A("-serial"); A("chardev:con");
	A("-device"); A("virtio-serial-device");
	A("-chardev"); A("socket,id=c0,fd=6,server=on,wait=off");
	A("-device"); A("virtserialport,chardev=c0,name=agentic.control");
	A("-add-fd"); A("fd=7,set=1");
	A("-add-fd"); A("fd=8,set=1");
	A("-drive"); A("file=/dev/fdset/1,format=raw,if=none,id=ws");
	A("-device"); A("virtio-blk-device,drive=ws");
	A(NULL);
#undef A
}

void vm_start_begin(struct runtime_vm *v, struct vm_slot *s, struct rt_call *c)
{
	const struct sandbox *sb = c->sb;
	struct qemu_line q;
	char dir[LIMIT_PATH_BYTES];
	int fds[6] = { -1, -1, -1, -1, -1, -1 }, pipefd[2] = { -1, -1 }, r = 0;
	uint32_t qu = vm_uid(v, sb->uid);
	pid_t pid;

	if (!s->live || s->pid > 0) {
		vm_answer(s, s->pid > 0 ? RT_OK : RT_GONE, "the VM %s was not made", c->id);
		return;
	}
	vm_dir(v, s->instance, dir, sizeof(dir));
	if (start_open(v, s, dir, fds) != 0 || start_claim_uid(v, s, dir, qu) != 0)
		goto out;
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
		vm_answer(s, RT_ENGINE, "cannot start QEMU: pipe: %s", strerror(errno));
		goto out;
	}
	qemu_line(v, s, sb, &q);
	pid = vm_spawn(VM_QEMU, q.argv, fds, 6, pipefd[1], qu, qu,
		       strcmp(q.accel, "kvm") == 0 ? v->kvm_gid : 0, dir, &s->pidfd);
	if (pid < 0) {
		s->pidfd = -1;
		vm_answer(s, RT_ENGINE, "cannot start QEMU (%s): %s", VM_QEMU, strerror((int)-pid));
		goto out;
	}
	s->pid = pid;
	s->start = vm_proc_start(pid);
	s->exited = false;
	s->out_fd = pipefd[0];
	pipefd[0] = -1;
	vm_watch(s, s->out_fd, K_OUT);
	vm_watch(s, s->pidfd, K_PIDFD);
	if ((r = vm_record_write(v, s)) != 0)
		log_warn("vm record not written; a restarted agenticd will not adopt the VM",
			 "name=%s errno=%d", log_q(sb->name), -r);
	log_info("vm started", "name=%s pid=%d uid=%u accel=%s memory_bytes=%llu cpus=%u",
		 log_q(sb->name), (int)pid, qu, log_q(q.accel), (unsigned long long)s->memory,
		 s->cpus);
	s->con_at = s->dial_at = 0;
	vm_try_dial(v, s, now_ms());
	vm_answer(s, RT_OK, NULL);
out:
	for (int i = 0; i < 6; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
}
