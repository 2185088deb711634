/* worker_io.c: the egress worker's two descriptors: waiting on them, its own refusals to the
 * workload, and the control channel to agenticd (the start packet, this host's addresses, a
 * route's secret). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress/worker.h"
#include "json/json.h"

/* Waits for ev on fd for at most ms, watching the control socket: agenticd gone (hangup) sets
 * w->ctl_lost. 1 when fd is ready, 0 on timeout, -1 when control is lost or poll failed. */
int worker_wait_fd(struct worker *w, int fd, short ev, int ms)
{
	int64_t deadline = ms < 0 ? INT64_MAX : clock_mono_ms() + ms;

	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = ev }, { .fd = FD_CTL, .events = 0 } };
		int64_t left = ms < 0 ? -1 : deadline - clock_mono_ms();
		int n;
		if (ms >= 0 && left < 0)
			left = 0;
		n = poll(p, 2, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)) {
			w->ctl_lost = true;
			return -1;
		}
		if (p[0].revents)
			return 1;
		if (n == 0 || left == 0)
			return 0;
	}
}

bool worker_send_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static const char *status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 429: return "Too Many Requests";
	default: return "Bad Gateway";
	}
}

/* Our own refusal: the status, Connection: close and the reason word as the body (never the
 * policy), then end of our side. */
void worker_refuse(struct worker *w, int status, enum egress_reason reason)
{
	char resp[256];
	const char *word = egress_reason_word(reason);
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: text/plain\r\n"
			 "Content-Length: %zu\r\n\r\n%s\n",
			 status, status_text(status), strlen(word) + 1, word);

	w->decision = D_DENY;
	w->reason = reason;
	if (n > 0 && (size_t)n < sizeof(resp) && worker_send_all(FD_DATA, resp, (size_t)n))
		w->status = status;
	shutdown(FD_DATA, SHUT_WR);
}

/* ---- the control channel ---- */

/* Receives one packet (at most CTL_MAX bytes; a longer one is an error) within ms. */
static long ctl_recv(struct worker *w, char *buf, size_t cap, int ms)
{
	ssize_t n;

	if (worker_wait_fd(w, FD_CTL, POLLIN, ms) != 1)
		return -1;
	do
		n = recv(FD_CTL, buf, cap, MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		w->ctl_lost = true;
	if (n <= 0 || (size_t)n >= cap)
		return -1;
	buf[n] = '\0';
	return (long)n;
}

/* The start packet: waited for without a timeout (agenticd starts workers ahead, and closes
 * the socket when it has no use for one), with, for a direct connection, the workload's own
 * socket or the sandbox's listener as its one descriptor, which replaces the data socket at
 * FD_DATA. More than one descriptor: refused. */
long worker_ctl_recv_start(struct worker *w, char *buf, size_t cap)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(2 * sizeof(int))];
	} cm;
	struct iovec iov = { buf, cap - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	struct cmsghdr *c;
	int data = -1, nfd = 0;
	struct stat st;
	ssize_t n;

	if (worker_wait_fd(w, FD_CTL, POLLIN, -1) != 1)
		return -1;
	do
		n = recvmsg(FD_CTL, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	/* every descriptor that came is counted, and closed unless it is one expected (room is
	 * made for one more than may come, so a third is seen, not cut) */
	for (c = CMSG_FIRSTHDR(&mh); n >= 0 && c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0; CMSG_LEN((k + 1) * sizeof(int)) <= c->cmsg_len; k++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
			if (nfd == 0)
				data = got;
			else
				close(got);
			nfd++;
		}
	}
	if (n <= 0 || nfd > 1 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (data >= 0 && (fstat(data, &st) != 0 || !S_ISSOCK(st.st_mode) ||
			   dup2(data, FD_DATA) != FD_DATA))) {
		if (data >= 0 && data != FD_DATA)
			close(data);
		if (n == 0)
			w->ctl_lost = true;
		return -1;
	}
	if (data >= 0 && data != FD_DATA)
		close(data);
	buf[n] = '\0';
	return (long)n;
}


/* This host's addresses, asked of agenticd when they are needed (at dial, so no older than
 * agenticd's view then): {"own": K} and, when K > 0, a packet of K records (OWN_RECORD bytes:
 * 4 or 6, then the address in 16 bytes). Sets w->own, or leaves it -1 (getifaddrs then). */
void worker_own_recv(struct worker *w)
{
	static char pkt[CTL_MAX + 1];
	struct json_token tok[8];
	struct json_doc d;
	int64_t v;
	long n;
	int i;

	w->own = -1;
	n = ctl_recv(w, pkt, sizeof(pkt), CTL_TIMEOUT_MS);
	if (n <= 0 || json_parse(&d, pkt, (size_t)n, tok, 8) != 0 || tok[0].type != JSON_OBJECT ||
	    (i = json_obj_get(&d, 0, "own")) < 0 || json_int(&d, i, &v) != 0 || v < 0 ||
	    v > (int64_t)OWN_MAX)
		return;
	/* none: no packet (SEQPACKET's empty packet reads as the end) */
	n = v ? ctl_recv(w, (char *)w->own_rec, sizeof(w->own_rec), CTL_TIMEOUT_MS) : 0;
	if (n != (long)(v * OWN_RECORD))
		return;
	for (long k = 0; k < v; k++)
		if (w->own_rec[k * OWN_RECORD] != 4 && w->own_rec[k * OWN_RECORD] != 6)
			return;
	w->own = (long)v;
	w->own_ms = clock_mono_ms();
}

void worker_ask_own(struct worker *w)
{
	w->own = -1;
	if (send(FD_CTL, "{\"own\":true}", 12, MSG_NOSIGNAL) != 12) {
		w->ctl_lost = true;
		return;
	}
	worker_own_recv(w);
}

static int b64_value(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Standard base64 with padding: the decoded length, or -1. */
static long b64_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
	size_t o = 0;

	if (len % 4 != 0)
		return -1;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			if (in[i + k] == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
			} else if (pad || (v[k] = b64_value((unsigned char)in[i + k])) < 0) {
				return -1;
			}
		}
		uint32_t t = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
			     (uint32_t)v[3];
		if (o + 3 - (size_t)pad > cap)
			return -1;
		out[o++] = (uint8_t)(t >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(t >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)t;
	}
	return (long)o;
}

/* Asks agenticd for route i's secret: its length in secret, or -1 (agenticd answered an
 * error, or is gone). Every buffer that held the secret is wiped before returning. */
long worker_ask_secret(struct worker *w, uint32_t i, uint8_t *secret, size_t cap)
{
	static char pkt[CTL_MAX + 1];
	static char b64[CTL_MAX];
	struct json_token tok[8];
	struct json_doc d;
	char req[64];
	long n, out = -1;
	int k, m;

	m = snprintf(req, sizeof(req), "{\"secret\":%u}", i);
	if (send(FD_CTL, req, (size_t)m, MSG_NOSIGNAL) != m) {
		w->ctl_lost = true;
		return -1;
	}
	n = ctl_recv(w, pkt, sizeof(pkt), CTL_TIMEOUT_MS);
	if (n > 0 && json_parse(&d, pkt, (size_t)n, tok, 8) == 0 && tok[0].type == JSON_OBJECT &&
	    (k = json_obj_get(&d, 0, "secret_b64")) >= 0 &&
	    (m = json_str(&d, k, b64, sizeof(b64))) > 0)
		out = b64_decode(b64, (size_t)m, secret, cap);
	explicit_bzero(pkt, sizeof(pkt));
	explicit_bzero(b64, sizeof(b64));
	if (out <= 0) {
		explicit_bzero(secret, cap);
		return -1;
	}
	return out;
}

