/* runtime_vm_call.c: the VM runtime's asynchronous calls (runtime.h's contract), one per
 * slot, answered from the tick; the tick, its deadline, and the loop's readiness. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/runtime_vm_priv.h"

static bool call_is_vm(const struct rt_call *c)
{
	switch (c->op) {
	case RT_NET_CREATE:
	case RT_NET_SCAN:
	case RT_NET_REMOVE:
		return false;
	default:
		return (c->sb && c->sb->vm) || is_vm_id(c->id);
	}
}

static void inspect_answer(struct vm_slot *s, struct rt_call *c)
{
	const struct sandbox *sb = c->sb;

	memcpy(c->res.id, s->id, sizeof(c->res.id));
	snprintf(c->res.instance_id, sizeof(c->res.instance_id), "%s", s->instance);
	c->res.running = s->pid > 0 && !s->exited;
	c->res.pid = c->res.running ? s->pid : 0;
	c->res.exit_code = s->exit_code;
	/* no network at all: nothing the engine could have attached */
	c->res.net = (struct rt_netcheck){ .read = true, .ok = true, .why = "verified" };
	(void)sb;
	vm_answer(s, RT_OK, NULL);
}

/* The init's last lines for a failed create: the console without the kernel's own lines
 * (a line "[ secs] ...") but the panic's, printable text only (the console is the guest's). */
static void logs_answer(struct vm_slot *s, struct rt_call *c)
{
	static char text[LIMIT_CREATE_LOG_BYTES];
	size_t cap = sizeof(text) - 1, n = 0, end = s->ring_len;

	vm_drain_fd(s, &s->con_fd);
	vm_drain_fd(s, &s->out_fd);
	end = s->ring_len;
	/* lines from the last one back, each kept whole while it fits */
	while (end > 0) {
		size_t b = end - 1, len;
		const char *line;
		bool keep;

		while (b > 0 && s->ring[b - 1] != '\n')
			b--;
		line = s->ring + b;
		len = end - b;
		keep = len > 1 && (line[0] != '[' || memmem(line, len, "Kernel panic", 12));
		if (keep && n + len > cap)
			break;
		if (keep) {
			memmove(text + len, text, n);
			for (size_t i = 0; i < len; i++) {
				char ch = line[i];

				text[i] = (ch >= 0x20 && ch < 0x7f) || ch == '\n' ? ch
						  : ch == '\r' ? ' ' : '?';
			}
			n += len;
		}
		end = b;
	}
	sandbox_init_log_set(c->sb, text, n);
	vm_answer(s, RT_OK, NULL);
}

static void stop_step(struct runtime_vm *v, struct vm_slot *s, int64_t now)
{
	if (s->exited || s->pid <= 0) {
		vm_answer(s, RT_OK, NULL);
		return;
	}
	if (now < s->deadline)
		return;
	if (s->stop_phase == 0) {
		vm_qemu_kill(s, SIGTERM);
		s->stop_phase = 1;
		s->deadline = now + VM_KILL_AFTER_MS;
	} else {
		vm_qemu_kill(s, SIGKILL);
		s->stop_phase = 2;
		s->deadline = now + VM_KILL_AFTER_MS;
	}
	(void)v;
}

static void stop_begin(struct runtime_vm *v, struct vm_slot *s, struct rt_call *c)
{
	struct sandbox *sb = c->sb;
	int grace = c->stop_grace_s > 0 ? c->stop_grace_s : 0;

	s->wait = W_STOP;
	s->stop_phase = 0;
	s->deadline = now_ms();
	if (s->exited || s->pid <= 0) {
		vm_answer(s, RT_OK, NULL);
		return;
	}
	/* the init first: it stops its commands and powers the guest off, and QEMU ends */
	if (grace && sb && v->c.shutdown && v->c.shutdown(v->c.ctx, sb, grace))
		s->deadline = now_ms() + grace * 1000;
}

static void remove_begin(struct runtime_vm *v, struct vm_slot *s, struct rt_call *c)
{
	if (!s->live || strcmp(s->id, c->id) != 0) {
		/* not this slot's: one a crash left, or gone already */
		if (is_vm_id(c->id)) {
			pid_t pid;
			uint64_t st;
			uint32_t u;
			int fd;

			if (vm_record_read(v, c->id + strlen(VM_PREFIX), &pid, &st, &u) == 0) {
				if (pid > 0 && (fd = vm_pid_check(pid, st)) >= 0) {
					syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
					close(fd);
				}
				if (u >= v->c.cfg->control_uid_min && u <= v->c.cfg->control_uid_max)
					vm_id_kill_all(vm_uid(v, u));
			}
			vm_dir_remove(v, c->id + strlen(VM_PREFIX));
		}
		vm_answer(s, RT_GONE, "no such VM: %s", c->id);
		return;
	}
	if (s->wait == W_IMAGE) {
		syscall(SYS_pidfd_send_signal, s->img_pidfd, SIGKILL, NULL, 0);
		vm_close_fd(s, &s->img_pidfd);
	}
	vm_qemu_kill(s, SIGKILL);
	s->wait = W_EXIT;
	s->deadline = now_ms() + 10000;
}

static void remove_finish(struct runtime_vm *v, struct vm_slot *s)
{
	vm_dir_remove(v, s->instance);
	vm_forget(s);
	s->instance[0] = '\0';
	vm_answer(s, RT_OK, NULL);
}

int vm_call(void *self, struct rt_call *c)
{
	struct runtime_vm *v = self;
	struct vm_slot *s;

	if (!call_is_vm(c)) {
		v->c.docker->sink = v->rt.sink;
		return runtime_call(v->c.docker, c);
	}
	s = c->sb ? slot_of(v, c->sb) : NULL;
	if (!s || s->call) {
		c->res.outcome = RT_ENGINE;
		snprintf(c->res.text, sizeof(c->res.text), s ? "a VM call is in progress"
			 : "a VM call without its sandbox");
		return ERR_STATE;
	}
	ASSERT(s->wait == W_NONE);
	memset(&c->res, 0, sizeof(c->res));
	s->call = c;
	switch (c->op) {
	case RT_CT_CREATE:
		if (!v->available)
			vm_answer(s, RT_ENGINE, "%s", v->why);
		else
			vm_rootfs_begin(v, s, c);
		break;
	case RT_CT_START:
		vm_start_begin(v, s, c);
		break;
	case RT_CT_INSPECT:
		if (!s->live || (strcmp(c->id, s->id) != 0 && strcmp(c->id, c->sb->name) != 0))
			vm_answer(s, RT_GONE, "no such VM: %s", c->id);
		else
			inspect_answer(s, c);
		break;
	case RT_CT_LOGS:
		logs_answer(s, c);
		break;
	case RT_CT_STOP:
		stop_begin(v, s, c);
		break;
	case RT_CT_REMOVE:
		remove_begin(v, s, c);
		break;
	default:
		vm_answer(s, RT_ENGINE, "the VM runtime has no such call (%d)", (int)c->op);
		break;
	}
	return 0;
}

static void deliver(struct runtime_vm *v, struct vm_slot *s)
{
	struct rt_call *c = s->call;

	ASSERT(c && s->wait == W_ANSWER);
	s->call = NULL;
	s->wait = W_NONE;
	if (v->rt.sink.call_done)
		v->rt.sink.call_done(v->rt.sink.ctx, c);
}

void vm_tick(void *self, int64_t now)
{
	struct runtime_vm *v = self;

	v->c.docker->sink = v->rt.sink;
	v->c.docker->ops->tick(v->c.docker->self, now);
	if (v->probing)
		vm_probe_tick(v, now);
	for (uint32_t i = 0; i < v->c.slots; i++) {
		struct vm_slot *s = &v->slot[i];

		if (s->pidfd >= 0 && !s->exited) {
			int64_t st = vm_reap(s->pidfd);

			if (st >= 0)
				vm_qemu_exited(s, st);
		}
		if (s->die_owed && v->rt.sink.event) {
			struct rt_notice n = { .ev = RT_EV_DIE, .container_id = s->id };

			s->die_owed = false;
			v->rt.sink.event(v->rt.sink.ctx, &n);
		}
		switch (s->wait) {
		case W_IMAGE:
			if (s->img_pidfd >= 0) {
				int64_t st = vm_reap(s->img_pidfd);

				if (st >= 0)
					vm_rootfs_done(s, st);
				else if (now >= s->deadline) {
					syscall(SYS_pidfd_send_signal, s->img_pidfd, SIGKILL, NULL, 0);
					s->deadline = now + 1000;
					vm_ring_add(s, "timed out", 9);
				}
			}
			break;
		case W_STOP:
			stop_step(v, s, now);
			break;
		case W_EXIT:
			if (s->exited || s->pid <= 0 || now >= s->deadline)
				remove_finish(v, s);
			break;
		default:
			break;
		}
		if (s->wait == W_ANSWER)
			deliver(v, s);
		if (s->live && s->pid > 0 && !s->exited)
			vm_try_dial(v, s, now);
	}
}

int64_t vm_next_deadline(void *self, int64_t now)
{
	struct runtime_vm *v = self;
	int64_t next = v->c.docker->ops->next_deadline(v->c.docker->self, now);

	if (v->probing && now + 100 < next)
		next = now + 100;

	for (uint32_t i = 0; i < v->c.slots; i++) {
		const struct vm_slot *s = &v->slot[i];

		if (s->wait == W_ANSWER || s->die_owed)
			return now;
		if ((s->wait == W_IMAGE || s->wait == W_STOP || s->wait == W_EXIT) &&
		    s->deadline < next)
			next = s->deadline;
		if (s->live && s->pid > 0 && !s->exited) {
			/* a dial already due waits for the next look a second on (the connection
			 * may well be up: vm_try_dial looks) */
			int64_t d = s->con_fd < 0 ? s->con_at : s->dial_at;

			if (d < now)
				d = now + VM_DIAL_MS;
			if (d < next)
				next = d;
		}
	}
	return next;
}

void runtime_vm_ready(struct runtime_vm *v, uint32_t id)
{
	struct vm_slot *s;
	int64_t st;

	if (id / 4 >= v->c.slots)
		return;
	s = &v->slot[id / 4];
	switch (id % 4) {
	case K_PIDFD:
		if (s->pidfd >= 0 && (st = vm_reap(s->pidfd)) >= 0)
			vm_qemu_exited(s, st);
		else if (s->pidfd >= 0 && !s->exited && syscall(SYS_pidfd_send_signal, s->pidfd, 0,
								  NULL, 0) != 0)
			vm_qemu_exited(s, -1); /* not our child (adopted): gone */
		break;
	case K_IMAGE:
		if (s->wait == W_IMAGE && s->img_pidfd >= 0 && (st = vm_reap(s->img_pidfd)) >= 0)
			vm_rootfs_done(s, st);
		break;
	case K_OUT:
		vm_drain_fd(s, &s->out_fd);
		break;
	case K_CON:
		vm_drain_fd(s, &s->con_fd);
		break;
	}
	vm_tick(v, now_ms());
}

void vm_ready(void *self, uint32_t id)
{
	struct runtime_vm *v = self;

	v->c.docker->sink = v->rt.sink;
	v->c.docker->ops->ready(v->c.docker->self, id);
}
