/* worker_relay.c: the egress worker's relay: bytes both ways between the workload and the
 * upstream, within the policy's byte cap and io_timeout_ms, and how it ended. */
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/worker.h"

struct pipe_buf {
	uint8_t b[RELAY_BUF];
	size_t off, len;
	bool eof;      /* the source has ended */
	bool shut;     /* and the sink's write side is shut */
};

/* One relay's state: its two buffers are static (a worker holds one connection at a time). */
struct relay {
	struct worker *w;
	int up;
	bool status_sniff;
	char sniff[16];
	size_t nsniff;
	uint64_t cap;
	int64_t last;
	/* a side that reported a hangup while nothing was wanted of it: polled again only once
	 * something is (else poll would report the hangup at once, forever: a busy loop) */
	bool hung[2];
};

static struct pipe_buf a2u, u2a;

/* Shuts the sink of a side whose source ended and whose bytes are all written; true when the
 * relay is over (both shut, or the cap reached with nothing held), w->end said. */
static bool relay_settled(struct relay *r, bool capped)
{
	if (a2u.eof && a2u.len == 0 && !a2u.shut) {
		shutdown(r->up, SHUT_WR);
		a2u.shut = true;
	}
	if (u2a.eof && u2a.len == 0 && !u2a.shut) {
		shutdown(FD_DATA, SHUT_WR);
		u2a.shut = true;
	}
	if (a2u.shut && u2a.shut) {
		r->w->end = EE_CLOSED;
		return true;
	}
	if (capped && a2u.len == 0 && u2a.len == 0) {
		r->w->end = EE_BYTE_CAP;
		return true;
	}
	return false;
}

/* What each side is polled for now. */
static void relay_want(const struct relay *r, struct pollfd *p, bool capped)
{
	if (!capped && !a2u.eof && a2u.len == 0)
		p[0].events |= POLLIN;
	if (u2a.len > 0)
		p[0].events |= POLLOUT;
	if (!capped && !u2a.eof && u2a.len == 0)
		p[1].events |= POLLIN;
	if (a2u.len > 0)
		p[1].events |= POLLOUT;
	for (int i = 0; i < 2; i++)
		if (r->hung[i] && !p[i].events)
			p[i].fd = -1;
}

/* A side that hung up where nothing more is read from it would wake poll forever: the
 * workload gone entirely while the upstream still talks, an upstream reset or closed both
 * ways. true when the relay is over. */
static bool relay_hangup(struct relay *r, const struct pollfd *p)
{
	if ((p[0].revents & (POLLHUP | POLLERR)) && a2u.eof && !u2a.shut) {
		r->w->end = EE_CLIENT_GONE;
		return true;
	}
	if ((p[1].revents & POLLERR) && u2a.eof) {
		r->w->end = EE_UPSTREAM_ERROR;
		return true;
	}
	if ((p[1].revents & POLLHUP) && u2a.eof && u2a.len == 0) {
		r->w->end = EE_CLOSED;
		return true;
	}
	for (int i = 0; i < 2; i++)
		if (!p[i].events && (p[i].revents & (POLLHUP | POLLERR)))
			r->hung[i] = true;
	return false;
}

/* The upstream's status line, from its first bytes (a forwarded plain request). */
static void relay_sniff(struct relay *r, const uint8_t *b, size_t n)
{
	const char *sn = r->sniff;
	size_t k = sizeof(r->sniff) - r->nsniff < n ? sizeof(r->sniff) - r->nsniff : n;

	memcpy(r->sniff + r->nsniff, b, k);
	r->nsniff += k;
	if (r->nsniff >= 12 && memcmp(sn, "HTTP/1.", 7) == 0 && sn[8] == ' ' &&
	    isdigit((unsigned char)sn[9]) && isdigit((unsigned char)sn[10]) &&
	    isdigit((unsigned char)sn[11])) {
		int st = atoi((char[4]){ sn[9], sn[10], sn[11], 0 });
		if (st >= 100 && st <= 999)
			r->w->status = st;
	}
}

/* Writes what pb holds to fd at once, without waiting for poll's word that it may be: a
 * relay's round trip is what a workload's TLS handshake is made of. false on a failure
 * (w->end set to fail). */
static bool relay_flush(struct relay *r, struct pipe_buf *pb, int fd, enum egress_end fail)
{
	ssize_t s;

	if (pb->len == 0)
		return true;
	s = send(fd, pb->b + pb->off, pb->len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (s > 0) {
		ASSERT((size_t)s <= pb->len);
		pb->off += (size_t)s;
		pb->len -= (size_t)s;
		r->last = clock_mono_ms();
	} else if (s < 0 && errno != EAGAIN && errno != EINTR) {
		r->w->end = fail;
		return false;
	}
	return true;
}

/* Reads into pb (empty) from fd, at most the cap's rest; counted in *bytes. false on a
 * failure (w->end set to fail). */
static bool relay_fill(struct relay *r, struct pipe_buf *pb, int fd, uint64_t *bytes,
		       enum egress_end fail)
{
	uint64_t used = r->w->bytes_up + r->w->bytes_down;
	size_t want = RELAY_BUF;
	ssize_t n;

	ASSERT(pb->len == 0 && used <= r->cap);
	if (want > r->cap - used)
		want = (size_t)(r->cap - used);
	n = want ? recv(fd, pb->b, want, MSG_DONTWAIT) : -1;
	if (n > 0) {
		pb->off = 0;
		pb->len = (size_t)n;
		*bytes += (uint64_t)n;
		r->last = clock_mono_ms();
		if (pb == &u2a && r->status_sniff && r->nsniff < sizeof(r->sniff))
			relay_sniff(r, pb->b, (size_t)n);
	} else if (n == 0) {
		pb->eof = true;
	} else if (want && errno != EAGAIN && errno != EINTR) {
		r->w->end = fail;
		return false;
	}
	return true;
}

/* One turn's bytes, each way (read only when asked for: a hangup is reported anyway, and a
 * buffer may still hold bytes). false when the relay is over. */
static bool relay_move(struct relay *r, const struct pollfd *p)
{
	const short rd = POLLIN | POLLHUP | POLLERR;

	if ((p[0].events & POLLIN) && (p[0].revents & rd) &&
	    !relay_fill(r, &a2u, FD_DATA, &r->w->bytes_up, EE_CLIENT_GONE))
		return false;
	if (!relay_flush(r, &a2u, r->up, EE_UPSTREAM_ERROR))
		return false;
	if ((p[1].events & POLLIN) && (p[1].revents & rd) &&
	    !relay_fill(r, &u2a, r->up, &r->w->bytes_down, EE_UPSTREAM_ERROR))
		return false;
	return relay_flush(r, &u2a, FD_DATA, EE_CLIENT_GONE);
}

/* Moves bytes both ways until both have ended, the byte cap, an error, io_timeout_ms without
 * a byte, or agenticd's hangup. status_sniff: read the upstream's status line into w->status
 * (a forwarded plain request). */
void worker_relay(struct worker *w, int up, bool status_sniff)
{
	struct relay r = { .w = w, .up = up, .status_sniff = status_sniff,
			   .cap = w->policy.max_bytes, .last = clock_mono_ms() };

	/* the state only: clearing the buffers too would touch their 512 KiB, a page fault a
	 * page in a worker just started, on the handshake's path */
	a2u.off = a2u.len = u2a.off = u2a.len = 0;
	a2u.eof = a2u.shut = u2a.eof = u2a.shut = false;
	for (;;) {
		bool capped = w->bytes_up + w->bytes_down >= r.cap;
		struct pollfd p[3] = {
			{ .fd = FD_DATA, .events = 0 },
			{ .fd = up, .events = 0 },
			{ .fd = FD_CTL, .events = 0 },
		};
		int n, left;

		if (relay_settled(&r, capped))
			return;
		relay_want(&r, p, capped);
		left = (int)(r.last + w->io_timeout_ms - clock_mono_ms());
		if (left <= 0) {
			w->end = EE_TIMEOUT;
			return;
		}
		n = poll(p, 3, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			w->end = EE_UPSTREAM_ERROR;
			return;
		}
		if (p[2].revents & (POLLHUP | POLLERR | POLLNVAL)) {
			w->ctl_lost = true;
			w->end = EE_CONTROL_LOST;
			return;
		}
		if (n == 0)
			continue;
		if (relay_hangup(&r, p) || !relay_move(&r, p))
			return;
	}
}

/* fd 3 failed: the workload's side, unless agenticd (which carries it) has gone. A process
 * that dies has its descriptors closed one after the other, so fd 3 may hang up a moment
 * before the control socket does: give that a moment. */
void worker_settle_end(struct worker *w)
{
	struct pollfd p = { .fd = FD_CTL, .events = 0 };
	int wait = w->end == EE_CLIENT_GONE ? 200 : 0;

	if (w->ctl_lost || (poll(&p, 1, wait) == 1 && (p.revents & (POLLHUP | POLLERR)))) {
		w->ctl_lost = true;
		if (w->end == EE_CLIENT_GONE || w->end == EE_CLOSED)
			w->end = EE_CONTROL_LOST;
	}
}
