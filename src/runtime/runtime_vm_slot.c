/* runtime_vm_slot.c: a VM slot's descriptors on the loop, its console ring (the last lines,
 * never a file), its call's answer, and its QEMU's exit and signals. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/runtime_vm_priv.h"

/* ---- the loop's descriptors ---- */

void vm_watch(struct vm_slot *s, int fd, int kind)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = ((uint64_t)s->v->c.tag << 32) |
					      (s->index * 4u + (uint32_t)kind) };

	if (s->v->c.epfd >= 0)
		epoll_ctl(s->v->c.epfd, EPOLL_CTL_ADD, fd, &ev);
}

void vm_close_fd(struct vm_slot *s, int *fd)
{
	if (*fd < 0)
		return;
	if (s->v->c.epfd >= 0)
		epoll_ctl(s->v->c.epfd, EPOLL_CTL_DEL, *fd, NULL);
	close(*fd);
	*fd = -1;
}

/* The console and QEMU's output into the ring: the last lines, never a file. */
void vm_ring_add(struct vm_slot *s, const char *data, size_t len)
{
	size_t cap = sizeof(s->ring);

	if (len >= cap) {
		data += len - cap;
		len = cap;
	}
	if (s->ring_len + len > cap) {
		size_t drop = s->ring_len + len - cap;

		memmove(s->ring, s->ring + drop, s->ring_len - drop);
		s->ring_len -= drop;
	}
	ASSERT(s->ring_len + len <= cap);
	memcpy(s->ring + s->ring_len, data, len);
	s->ring_len += len;
}

void vm_drain_fd(struct vm_slot *s, int *fd)
{
	char buf[4096];

	for (int i = 0; i < 64 && *fd >= 0; i++) {
		ssize_t n = read(*fd, buf, sizeof(buf));

		if (n > 0) {
			vm_ring_add(s, buf, (size_t)n);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		vm_close_fd(s, fd);
		if (fd == &s->con_fd)
			s->con_at = now_ms() + VM_DIAL_MS;
	}
}

/* ---- answers ---- */

void vm_answer(struct vm_slot *s, enum rt_outcome o, const char *fmt, ...)
{
	struct rt_call *c = s->call;
	va_list ap;

	ASSERT(c);
	c->res.outcome = o;
	if (fmt && o != RT_OK) {
		va_start(ap, fmt);
		vsnprintf(c->res.text, sizeof(c->res.text), fmt, ap);
		va_end(ap);
	}
	s->wait = W_ANSWER;
	s->deadline = 0;
}

void vm_forget(struct vm_slot *s)
{
	vm_close_fd(s, &s->pidfd);
	vm_close_fd(s, &s->con_fd);
	vm_close_fd(s, &s->out_fd);
	s->live = s->exited = s->die_owed = false;
	s->pid = 0;
	s->id[0] = '\0';
}

void vm_qemu_exited(struct vm_slot *s, int64_t status)
{
	if (s->exited)
		return;
	s->exited = true;
	s->exit_code = status;
	s->die_owed = true;
	vm_drain_fd(s, &s->con_fd);
	vm_drain_fd(s, &s->out_fd);
	vm_close_fd(s, &s->pidfd);
	log_info("vm exited", "id=%s status=%lld", log_q(s->id), (long long)status);
}

void vm_qemu_kill(struct vm_slot *s, int sig)
{
	if (s->pidfd >= 0 && !s->exited)
		syscall(SYS_pidfd_send_signal, s->pidfd, sig, NULL, 0);
}
