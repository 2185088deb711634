/* broker_relay.c: a slot's life (its sockets closed, its end, the lines agenticd writes when
 * the worker's record cannot come) and its bytes both ways between the init's Egress call and
 * the worker's data socket, within the credit. */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "egress/audit.h"
#include "egress/broker_slot.h"

static void data_watch(struct eslot *s);

void broker_close_data(struct eslot *s)
{
	if (s->data >= 0) {
		if (s->data_watched)
			epoll_ctl(bst.epfd, EPOLL_CTL_DEL, s->data, NULL);
		close(s->data);
	}
	s->data = -1;
	s->data_events = 0;
	s->data_watched = false;
}

void broker_close_ctl(struct eslot *s)
{
	if (s->ctl >= 0) {
		epoll_ctl(bst.epfd, EPOLL_CTL_DEL, s->ctl, NULL);
		close(s->ctl);
	}
	s->ctl = -1;
}

/* Frees the slot once nothing of it is left: no call, worker reaped, control read out. */
void broker_slot_maybe_free(struct eslot *s)
{
	if (s->call || s->pid > 0 || s->ctl >= 0)
		return;
	broker_close_data(s);
	if (s->pidfd >= 0)
		close(s->pidfd);
	s->pidfd = -1;
	/* a slot is free again: a spare may be missing (all were taken when the last was); a
	 * connection's end is when one is started (its work is done, the next has not begun) */
	if (!s->spare)
		bst.spare_defer_until = 0;
	s->used = false;
	bst.spare_wanted = true;
	bst.arm_wanted = true;
}

/* The worker died without its record: agenticd's own line for it. */
void broker_worker_failed_line(struct eslot *s)
{
	struct sandbox *sb = s->sb;

	if (s->record_seen || s->quiet)
		return;
	s->record_seen = true;
	metrics_egress(1, 0, 0);
	log_warn("egress worker failed", "name=%s conn=%llu", log_q(s->name),
		 (unsigned long long)s->conn);
	if (!sb || sb->state == SB_FREE || sb->gen != s->sb_gen)
		return;
	broker_audit_refused(sb, s->name, s->instance, s->conn, "worker_failed", 0,
		      clock_mono_ms() - s->started_ms, "upstream_error", 0);
}

/* agenticd stops under a live connection: its control socket closes, so the worker's record
 * cannot come; agenticd's own line says what it knows (not the destination, which the worker
 * read). */
void broker_stopped_line(struct eslot *s)
{
	struct sandbox *sb = s->sb;
	const struct egress_audit f = { .kind = "unknown", .decision = "unknown",
					.reason = "agenticd_stopped", .end = "control_lost",
					.duration_ms = clock_mono_ms() - s->started_ms };

	if (s->record_seen || s->quiet || s->spare || s->armed || s->pid <= 0 || !sb ||
	    sb->state == SB_FREE || sb->gen != s->sb_gen)
		return;
	s->record_seen = true;
	broker_audit_line(sb, s->name, s->instance, s->conn, &f);
}

void broker_call_end(struct eslot *s, int status, const char *why)
{
	struct grpc_call *call = s->call;

	if (!call)
		return;
	s->call = NULL;
	grpc_call_set_user(call, NULL);
	grpc_call_finish(call, status, why, NULL, 0);
	broker_close_data(s);
	s->linger_until = clock_mono_ms() + bst.cfg->egress_io_timeout_ms + LINGER_GRACE_MS;
	broker_slot_maybe_free(s);
}

/* Sends what is due to the init: the chunk read from the worker, the eof, the consumed count.
 * Returns false when the call ended. */
static bool down_pump(struct eslot *s)
{
	Agentic__Sandbox__V1__EgressChunk m = AGENTIC__SANDBOX__V1__EGRESS_CHUNK__INIT;
	bool eof = s->down_eof_read && !s->down_eof_sent && !s->down_len;
	int r;

	if (!s->call)
		return false;
	if (!s->down_len && !eof && !s->report_owed && !egress_credit_report_due(&s->cr))
		return true;
	m.data.data = s->down;
	m.data.len = s->down_len;
	m.consumed = s->cr.up_consumed;
	m.eof = eof;
	r = grpc_call_send(s->call, &m.base);
	if (r == -EAGAIN) {
		s->report_owed = true;
		return true;        /* on_writable follows */
	}
	if (r < 0) {
		broker_call_end(s, GRPC_RESOURCE_EXHAUSTED, "no message buffer for the egress call");
		return false;
	}
	s->report_owed = false;
	s->cr.up_reported = s->cr.up_consumed;
	s->cr.down_sent += s->down_len;
	ASSERT(s->cr.down_sent - s->cr.down_acked <= EGRESS_WINDOW);
	s->down_len = 0;
	if (eof)
		s->down_eof_sent = true;
	return true;
}

/* Both ways ended (OK); or the worker ended the connection in order, its record sent after
 * all it wrote (OK: the init delivers every byte it holds before it closes, as after a
 * close); or the worker is gone without a record, and what it wrote went to the init
 * (UNAVAILABLE: the init closes at once). A workload reading a route's answer that ends with
 * the upstream's close keeps its own side open until it has read it all, so an UNAVAILABLE
 * there cut the answer's last window short. */
static void maybe_finish(struct eslot *s)
{
	if (!s->call || !s->down_eof_sent)
		return;
	if (s->up_shut || s->record_seen)
		broker_call_end(s, GRPC_OK, NULL);
	else if (s->up_dead || s->ctl_eof || s->pid == 0)
		broker_call_end(s, GRPC_UNAVAILABLE, "the egress worker is gone");
}

/* Writes what is held to the worker; shuts its side down after the init's eof. */
static void up_write(struct eslot *s)
{
	while (s->cr.up_len && !s->up_dead && s->data >= 0) {
		ssize_t n = send(s->data, s->up + s->cr.up_off, s->cr.up_len,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			s->up_dead = true;   /* the worker closed its side: no more goes up */
			/* dropped, and counted consumed as what arrives from now on is, so the
			 * init's credit stays */
			s->cr.up_consumed += s->cr.up_len;
			s->cr.up_len = 0;
			break;
		}
		s->cr.up_off += (uint32_t)n;
		s->cr.up_len -= (uint32_t)n;
		s->cr.up_consumed += (uint64_t)n;
		ASSERT(s->cr.up_consumed <= s->cr.up_in);
	}
	if (!s->cr.up_len)
		s->cr.up_off = 0;
	if (!s->cr.up_len && s->up_eof_in && !s->up_shut && !s->up_dead && s->data >= 0) {
		shutdown(s->data, SHUT_WR);
		s->up_shut = true;
	}
}

/* Reads one chunk from the worker when the init's credit allows and none is waiting. */
static void down_read(struct eslot *s)
{
	uint32_t room = egress_credit_down_room(&s->cr);
	ssize_t n;

	if (s->down_len || s->down_eof_read || !room || s->data < 0 || s->report_owed)
		return;
	do
		n = recv(s->data, s->down, room, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n < 0) {
		/* a reset: the worker's connection failed under it */
		s->down_eof_read = true;
		s->up_dead = true;
		return;
	}
	if (n == 0)
		s->down_eof_read = true;
	s->down_len = (uint32_t)n;
}

/* The data socket's interest: readable while a chunk may be read, writable while bytes are
 * held for the worker. */
static void data_watch(struct eslot *s)
{
	uint32_t ev = 0;
	struct epoll_event e;

	if (s->data < 0)
		return;
	if (!s->down_len && !s->down_eof_read && egress_credit_down_room(&s->cr) && !s->report_owed)
		ev |= EPOLLIN;
	if (s->cr.up_len && !s->up_dead)
		ev |= EPOLLOUT;
	if (ev == s->data_events && s->data_watched == (ev != 0))
		return;
	/* nothing wanted: out of the set, so that a hung-up worker socket cannot wake the loop
	 * over and over while the init holds its credit */
	if (!ev) {
		if (s->data_watched)
			epoll_ctl(bst.epfd, EPOLL_CTL_DEL, s->data, NULL);
		s->data_watched = false;
		s->data_events = 0;
		return;
	}
	e.events = ev;
	e.data.u64 = broker_tag(bst.tags.data, (uint32_t)(s - bst.slots));
	epoll_ctl(bst.epfd, s->data_watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s->data, &e);
	s->data_watched = true;
	s->data_events = ev;
}

/* Moves the slot on as far as it goes now. */
void broker_step(struct eslot *s)
{
	for (int i = 0; i < 64 && s->call; i++) {
		uint64_t sent = s->cr.down_sent, consumed = s->cr.up_consumed;
		bool eof_sent = s->down_eof_sent;

		up_write(s);
		down_read(s);
		if (!down_pump(s))
			return;
		if (sent == s->cr.down_sent && consumed == s->cr.up_consumed &&
		    eof_sent == s->down_eof_sent)
			break;
	}
	maybe_finish(s);
	if (s->call)
		data_watch(s);
}
