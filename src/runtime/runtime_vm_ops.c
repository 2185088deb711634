/* runtime_vm_ops.c: VM sandboxes under QEMU, in front of the Docker runtime (runtime_vm.h): the
 * runtime's ops, the adoption of running VMs at start, recovery's synchronous calls, the
 * runtime's set-up, and a VM's QEMU as the verifier reads it. The parts: runtime_vm_priv.h. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/runtime_vm_priv.h"

/* After recovery: each VM sandbox of the table takes its QEMU back, by its record. */
static void vm_start(void *self)
{
	struct runtime_vm *v = self;

	v->c.docker->sink = v->rt.sink;
	for (uint32_t i = 0; i < v->c.slots; i++) {
		struct sandbox *sb = sandbox_slot(i);
		struct vm_slot *s = &v->slot[i];
		pid_t pid;
		uint64_t st;
		uint32_t u;

		if (!sb || sb->state == SB_FREE || !sb->vm || !is_vm_id(sb->container_id) || s->live)
			continue;
		vm_forget(s);
		snprintf(s->id, sizeof(s->id), "%s", sb->container_id);
		memcpy(s->instance, sb->instance_id, sizeof(s->instance));
		s->control_uid = sb->uid;
		s->live = true;
		if (vm_record_read(v, sb->instance_id, &pid, &st, &u) == 0 &&
		    (s->pidfd = vm_pid_check(pid, st)) >= 0) {
			s->pid = pid;
			s->start = st;
			vm_watch(s, s->pidfd, K_PIDFD);
			log_info("vm adopted", "name=%s pid=%d", log_q(sb->name), (int)pid);
		} else {
			s->pidfd = -1;
			s->pid = pid > 0 ? pid : 1;
			s->exited = true;
			s->die_owed = true;
			log_warn("vm not running at start", "name=%s", log_q(sb->name));
		}
	}
	v->c.docker->ops->start(v->c.docker->self);
}

static void vm_stop(void *self)
{
	struct runtime_vm *v = self;

	v->c.docker->ops->stop(v->c.docker->self);
}

/* ---- synchronous: recovery ---- */

static int vm_containers(void *self, int (*fn)(void *ctx, const char *id), void *ctx, char *err,
			 size_t err_size)
{
	struct runtime_vm *v = self;
	char dir[LIMIT_PATH_BYTES], id[RT_ID_BYTES];
	struct dirent *de;
	DIR *d;
	int r = v->c.docker->ops->containers(v->c.docker->self, fn, ctx, err, err_size);

	if (r != 0)
		return r;
	snprintf(dir, sizeof(dir), "%s/vm", v->c.cfg->state_dir);
	if (!(d = opendir(dir)))
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || strlen(de->d_name) >= SB_ID_BYTES)
			continue;
		snprintf(id, sizeof(id), VM_PREFIX "%.36s", de->d_name);
		if (fn(ctx, id) != 0)
			break;
	}
	closedir(d);
	return 0;
}

static int vm_inspect(void *self, const char *id, struct rt_container *out, char *err,
		      size_t err_size)
{
	static char inst[SB_ID_BYTES], uid_s[16], name[8] = "";
	struct runtime_vm *v = self;
	pid_t pid;
	uint64_t st;
	uint32_t u;
	int fd, r;

	if (!is_vm_id(id))
		return v->c.docker->ops->inspect(v->c.docker->self, id, out, err, err_size);
	memset(out, 0, sizeof(*out));
	snprintf(inst, sizeof(inst), "%s", id + strlen(VM_PREFIX));
	if ((r = vm_record_read(v, inst, &pid, &st, &u)) != 0) {
		char dir[LIMIT_PATH_BYTES];
		struct stat sst;

		if (vm_dir(v, inst, dir, sizeof(dir)) != 0 || stat(dir, &sst) != 0) {
			snprintf(err, err_size, "no such VM: %s", id);
			return -ENOENT;
		}
		/* a VM whose QEMU never started (a create cut short): not running */
		u = 0;
		pid = 0;
	}
	snprintf(out->id, sizeof(out->id), "%s", id);
	snprintf(uid_s, sizeof(uid_s), "%u", u);
	out->name = name;
	out->instance_id = inst;
	out->control_uid = u ? uid_s : NULL;
	out->managed_network = NULL;
	out->net = (struct rt_netcheck){ .read = true, .ok = true, .why = "verified" };
	fd = pid > 0 ? vm_pid_check(pid, st) : -1;
	out->running = fd >= 0;
	out->pid = fd >= 0 ? pid : 0;
	if (fd >= 0)
		close(fd);
	return 0;
}

static int vm_networks(void *self, int (*fn)(void *ctx, const char *id, const char *name),
		       void *ctx, char *err, size_t err_size)
{
	struct runtime_vm *v = self;

	return v->c.docker->ops->networks(v->c.docker->self, fn, ctx, err, err_size);
}

static int vm_net_inspect(void *self, const char *id, struct rt_network *out, char *err,
			  size_t err_size)
{
	struct runtime_vm *v = self;

	return v->c.docker->ops->net_inspect(v->c.docker->self, id, out, err, err_size);
}

static int vm_remove_now(void *self, bool network, const char *id, char *err, size_t err_size)
{
	struct runtime_vm *v = self;
	pid_t pid;
	uint64_t st;
	uint32_t u;
	int fd;

	if (network || !is_vm_id(id))
		return v->c.docker->ops->remove_now(v->c.docker->self, network, id, err, err_size);
	if (vm_record_read(v, id + strlen(VM_PREFIX), &pid, &st, &u) == 0) {
		if (pid > 0 && (fd = vm_pid_check(pid, st)) >= 0) {
			syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
			/* gone before its directory is: nothing of it may run on */
			for (int i = 0; i < 100 && syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0) == 0;
			     i++)
				usleep(20000);
			close(fd);
		}
		/* and whatever runs under its QEMU's uid (a start cut short before its pid was
		 * recorded) */
		if (u >= v->c.cfg->control_uid_min && u <= v->c.cfg->control_uid_max)
			vm_id_kill_all(vm_uid(v, u));
	}
	vm_dir_remove(v, id + strlen(VM_PREFIX));
	return 0;
}

static int vm_scan_now(void *self, int (*each_subnet)(void *ctx, const char *cidr, bool ours),
		       void *ctx, char *err, size_t err_size)
{
	struct runtime_vm *v = self;

	return v->c.docker->ops->scan_now(v->c.docker->self, each_subnet, ctx, err, err_size);
}

static int vm_workspace_make(void *self, const struct sandbox *sb, char *err, size_t err_size)
{
	struct runtime_vm *v = self;

	return v->c.docker->ops->workspace_make(v->c.docker->self, sb, err, err_size);
}

static int vm_workspace_mount(void *self, const struct sandbox *sb, char *err, size_t err_size)
{
	struct runtime_vm *v = self;

	return v->c.docker->ops->workspace_mount(v->c.docker->self, sb, err, err_size);
}

static void vm_workspace_retire(void *self, const struct sandbox *sb, bool drop_workspace)
{
	struct runtime_vm *v = self;

	v->c.docker->ops->workspace_retire(v->c.docker->self, sb, drop_workspace);
}

static const struct runtime_ops vm_ops = {
	.call = vm_call,
	.tick = vm_tick,
	.next_deadline = vm_next_deadline,
	.ready = vm_ready,
	.start = vm_start,
	.stop = vm_stop,
	.containers = vm_containers,
	.inspect = vm_inspect,
	.networks = vm_networks,
	.net_inspect = vm_net_inspect,
	.remove_now = vm_remove_now,
	.scan_now = vm_scan_now,
	.workspace_make = vm_workspace_make,
	.workspace_mount = vm_workspace_mount,
	.workspace_retire = vm_workspace_retire,
};


size_t runtime_vm_storage_bytes(uint32_t slots)
{
	return (slots ? slots : 1) * (sizeof(struct vm_slot) + sizeof(struct vm_sb));
}

int runtime_vm_init(struct runtime_vm *v, const struct runtime_vm_config *c)
{
	char p[LIMIT_PATH_BYTES + 32];
	struct stat st;

	memset(v, 0, sizeof(*v));
	v->c = *c;
	v->slot = calloc(1, runtime_vm_storage_bytes(c->slots));
	if (!v->slot)
		return -ENOMEM;
	vm_sb_init((struct vm_sb *)(v->slot + (c->slots ? c->slots : 1)), c->slots);
	for (uint32_t i = 0; i < c->slots; i++) {
		struct vm_slot *s = &v->slot[i];

		s->v = v;
		s->index = i;
		s->pidfd = s->img_pidfd = s->out_fd = s->con_fd = -1;
	}
	vm_tsc_read(v);
	v->available = true;
	if (!c->kernel_dir || !c->kernel_dir[0]) {
		v->available = false;
		snprintf(v->why, sizeof(v->why), "the vm runtime has no guest kernel here "
			 "(vm_kernel_dir is empty; make vm-kernel builds one)");
	} else {
		snprintf(p, sizeof(p), "%s/vmlinuz", c->kernel_dir);
		if (stat(p, &st) != 0) {
			v->available = false;
			snprintf(v->why, sizeof(v->why), "the vm runtime has no guest kernel: %.160s "
				 "is missing (make vm-kernel)", p);
		} else if (access(VM_QEMU, X_OK) != 0) {
			v->available = false;
			snprintf(v->why, sizeof(v->why), "the vm runtime needs QEMU at %s "
				 "(apt-get install qemu-system-x86)", VM_QEMU);
		}
	}
	snprintf(p, sizeof(p), "%s/vm", c->cfg->state_dir);
	if (mkdir(p, 0700) != 0 && errno != EEXIST)
		return -errno;
	v->rt = (struct runtime){ .ops = &vm_ops, .self = v, .name = "docker" };
	vm_accel_decide(v);
	if (v->available &&
	    vm_range_subordinate((uint64_t)c->cfg->control_uid_min + c->cfg->vm_uid_offset,
			      (uint64_t)c->cfg->control_uid_max + c->cfg->vm_uid_offset + 1))
		log_warn("vm uid range overlaps /etc/subuid or /etc/subgid", "range=%u-%u note=%s",
			 c->cfg->control_uid_min + c->cfg->vm_uid_offset,
			 c->cfg->control_uid_max + c->cfg->vm_uid_offset + 1,
			 "\"a VM whose QEMU uid a local user may map is refused at its start: move "
			 "vm_uid_offset\"");
	return 0;
}

const char *runtime_vm_unavailable(const struct runtime_vm *v)
{
	return v->available ? NULL : v->why;
}

const char *runtime_vm_accel(const struct runtime_vm *v)
{
	return v->accel;
}

int runtime_vm_qemu_read(struct runtime_vm *v, const struct sandbox *sb, struct runtime_vm_qemu *q)
{
	const struct vm_slot *s = slot_of(v, sb);

	memset(q, 0, sizeof(*q));
	if (!s || !s->live || !sb->vm)
		return -ENOENT;
	q->uid = vm_uid(v, s->control_uid);
	if (s->pid > 0 && !s->exited && s->start && vm_proc_start(s->pid) == s->start)
		q->pid = s->pid;
	q->uid_other = vm_id_holder(q->uid, q->pid);
	q->uid_subordinate = vm_id_subordinate(q->uid);
	q->kvm = strcmp(v->accel, "kvm") == 0;
	return vm_dir(v, s->instance, q->dir, sizeof(q->dir));
}
