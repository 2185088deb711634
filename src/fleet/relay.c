/* relay.c: the fleet's node-to-node channel, both ends (docs/FLEET.md "One front door"). A
 * request to a node's admin API for a sandbox another node owns goes to that node over TLS,
 * each side showing a certificate of the fleet's CA; the owner serves it as it would a local
 * one, and the answer comes back the same way. Two programs, each one process per connection
 * (the TLS library holds one connection per process), started by agenticd (link_relay.c):
 *
 * agentic fleet-relay, the owner's side: fd 3 a SEQPACKET socket to agenticd, fd 4 the
 *   listening TCP socket agenticd bound (fleet_listen). It reads the settings, the CA and this
 *   node's certificate and key, becomes fleet_uid, and for each connection forks a child that
 *   runs the TLS server's handshake: the peer must show a certificate the fleet's CA signed
 *   whose common name is a node's name, not this node's. The child then makes a socketpair,
 *   sends agenticd one end with {"relay_from":NODE} (SCM_RIGHTS), and moves bytes between the
 *   TLS connection and its end. agenticd decides what that node may ask (link_relay.c).
 *
 * agentic fleet-relay-out, the front door's side, one per request: fd 0 the client's
 *   connection, fd 3 a SEQPACKET socket carrying the settings, then {"node","addr"}, then the
 *   request's bytes agenticd had read (its head written again, and what of the body came with
 *   it), then its end. It becomes fleet_uid, dials the owner, runs the TLS client's handshake
 *   with this node's certificate (the owner's must have the owner's name as its common name),
 *   sends those bytes
 *   and then moves bytes both ways. A failure before that is a 502 answer to the client.
 *
 * Either way the end of one direction (a TCP FIN, or TLS's close_notify) is passed on as a
 * half-close of the other side, and the process exits once both directions have ended. TCP
 * keep-alive finds a peer that vanished. Nothing here parses HTTP or logs a byte it moves. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "fleet/etcd.h"
#include "fleet/wire.h"
#include "json/json.h"
#include "tls/tls.h"

const char fleet_relay_help[] =
	"usage: agentic fleet-relay\n"
	"\n"
	"The node's end of the fleet's node-to-node channel (docs/FLEET.md), started by agenticd\n"
	"when fleet_listen is set, with fd 3 its control socket and fd 4 the listening socket. It\n"
	"takes no argument and is never an applet link.\n";

const char fleet_relay_out_help[] =
	"usage: agentic fleet-relay-out\n"
	"\n"
	"One request relayed to the node that owns its sandbox (docs/FLEET.md), started by\n"
	"agenticd with fd 0 the client's connection and fd 3 its control socket. It takes no\n"
	"argument and is never an applet link.\n";

#define FD_CTL 3
#define FD_LISTEN 4
#define HANDSHAKE_MS 5000
#define DIAL_MS 3000
#define PUMP_BYTES 16384
/* Connections one address may have at once, mid-handshake or relaying: a host that is no node
 * cannot take every place by opening connections and saying nothing (each has HANDSHAKE_MS). */
#define PER_ADDR_MAX 16

static struct fleet_settings set;

/* The process holds a key: no core, no ptrace by its uid; SIGPIPE is an error return. */
static int program_start(int argc, char **argv, const char *name)
{
	sigset_t none;

	if (argc > 1) {
		fprintf(stderr, "agentic-%s: unknown argument '%s' (see --help)\n", name, argv[1]);
		return 2;
	}
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || fcntl(FD_CTL, F_GETFD) < 0) {
		log_error("fleet relay without its control socket", "program=%s", log_q(name));
		return 2;
	}
	/* agenticd blocks the signals it reads from its signalfd, and exec keeps the mask */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (fleet_settings_recv(FD_CTL, &set) < 0) {
		log_error("fleet relay settings refused", "program=%s", log_q(name));
		return 1;
	}
	if (tls_load_anchors(set.ca_file) < 0 || tls_load_client(set.cert_file, set.key_file) < 0) {
		log_error("fleet relay cannot load its certificates", "program=%s error=%s",
			  log_q(name), log_q(tls_error_word()));
		return 1;
	}
	if (fleet_drop_root((uid_t)set.uid) < 0) {
		log_error("fleet relay cannot drop root", "program=%s uid=%lld", log_q(name),
			  (long long)set.uid);
		return 1;
	}
	return 0;
}

/* A peer that vanished (its host down, its link cut) is found within about a minute, and
 * every record leaves at once: with Nagle's wait a handshake's flights and an exec's frames
 * each waited for the peer's delayed ACK (40 ms a time on Linux). */
static void tcp_tune(int fd)
{
	int on = 1, idle = 30, intvl = 10, cnt = 3;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* One direction's bytes in flight. */
struct dir {
	unsigned char b[PUMP_BYTES];
	size_t len, off;
	bool eof;   /* its source ended */
	bool shut;  /* and that end was passed on */
};

/* Moves what can move now, both ways: false when the connection failed. The engine's records
 * move first in each round, so that data a record just brought is read in the same round. */
static bool pump_once(int pfd, struct dir *up, struct dir *down)
{
	bool moved;

	do {
		moved = false;
		if (tls_pump(0) < 0)
			return false;
		if (!up->eof && up->off == up->len) {
			ssize_t n = recv(pfd, up->b, sizeof(up->b), MSG_DONTWAIT);

			if (n > 0) {
				up->len = (size_t)n;
				up->off = 0;
			} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				up->eof = true;
			}
			moved |= n != -1 || up->eof;
		}
		if (up->off < up->len) {
			size_t k = tls_send(up->b + up->off, up->len - up->off);

			up->off += k;
			if (k) {
				tls_flush();
				moved = true;
			}
		}
		if (!down->eof && down->off == down->len) {
			long n = tls_recv(down->b, sizeof(down->b));

			if (n == -1)
				return false;
			if (n > 0) {
				down->len = (size_t)n;
				down->off = 0;
				moved = true;
			} else if (n == 0) {
				down->eof = moved = true;
			}
		}
		if (down->off < down->len) {
			ssize_t n = send(pfd, down->b + down->off, down->len - down->off,
					 MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				/* the reader is gone (an owner's agenticd closes once it has
				 * answered): what was for it is dropped, and the other direction
				 * still ends in order, so that the answer is not cut */
				down->off = down->len;
				down->eof = down->shut = true;
				moved = true;
			} else if (n > 0) {
				down->off += (size_t)n;
				moved = true;
			}
		}
	} while (moved);
	return true;
}

/* Bytes between the plain socket pfd and the TLS connection tfd until both directions have
 * ended: 0, or -1 when either side failed. */
static int pump(int pfd, int tfd)
{
	static struct dir up, down;
	bool plain_gone = false, tls_gone = false;

	up.len = up.off = down.len = down.off = 0;
	up.eof = up.shut = down.eof = down.shut = false;
	for (;;) {
		struct pollfd p[2] = { { .fd = plain_gone ? -1 : pfd }, { .fd = tls_gone ? -1 : tfd } };

		if (!pump_once(pfd, &up, &down))
			return -1;
		/* bytes the engine will never take: the peer closed TLS itself */
		if (up.off < up.len && tls_want_events() == 0) {
			up.off = up.len;
			up.eof = true;
		}
		/* an end is passed on once what came before it has gone out */
		if (up.eof && up.off == up.len && !up.shut && !(tls_want_events() & POLLOUT)) {
			(void)shutdown(tfd, SHUT_WR);
			up.shut = true;
		}
		if (down.eof && down.off == down.len && !down.shut) {
			(void)shutdown(pfd, SHUT_WR);
			down.shut = true;
		}
		if (up.shut && down.shut)
			return 0;
		if (!up.eof && up.off == up.len)
			p[0].events |= POLLIN;
		if (down.off < down.len)
			p[0].events |= POLLOUT;
		p[1].events = tls_want_events();
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return -1;
		/* a side that hung up for good takes nothing more: what was going to it is
		 * dropped, and it is polled no more (its hang-up would wake every poll) */
		if ((p[0].revents & (POLLHUP | POLLERR)) && !(p[0].events & POLLIN)) {
			plain_gone = down.eof = down.shut = true;
			down.off = down.len;
		}
		if ((p[1].revents & (POLLHUP | POLLERR)) && !p[1].events) {
			tls_gone = up.eof = up.shut = true;
			up.off = up.len;
		}
	}
}

/* ---- the owner's side ---- */

/* One connection from a node, in a child of its own. */
static _Noreturn void serve(int conn, const char *from)
{
	char peer[FLEET_NODE_NAME_MAX + 1], pkt[128];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm = { 0 };
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	int sv[2], n, r;

	close(FD_LISTEN);
	tcp_tune(conn);
	if (tls_accept(conn, HANDSHAKE_MS, peer, sizeof(peer)) < 0) {
		log_warn("fleet relay refused", "from=%s reason=%s", log_q(from),
			 log_q(tls_error_word()));
		_exit(1);
	}
	if (!fleet_node_name_ok(peer, strlen(peer)) || strcmp(peer, set.node) == 0) {
		log_warn("fleet relay refused", "from=%s reason=%s", log_q(from),
			 log_q("certificate_not_a_node"));
		_exit(1);
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		_exit(1);
	n = snprintf(pkt, sizeof(pkt), "{\"relay_from\":\"%s\"}", peer);
	iov = (struct iovec){ .iov_base = pkt, .iov_len = (size_t)n };
	cm.h.cmsg_level = SOL_SOCKET;
	cm.h.cmsg_type = SCM_RIGHTS;
	cm.h.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&cm.h), &sv[0], sizeof(int));
	if (sendmsg(FD_CTL, &mh, MSG_NOSIGNAL) != n)
		_exit(1);
	close(sv[0]);
	close(FD_CTL);
	r = pump(sv[1], conn);
	if (r < 0 && strcmp(tls_error_word(), "none") != 0)
		log_warn("fleet relay ended", "from=%s node=%s reason=%s", log_q(from), log_q(peer),
			 log_q(tls_error_word()));
	tls_wipe();
	_exit(r < 0);
}

static void addr_text(const struct sockaddr_storage *ss, char *out, size_t cap)
{
	const struct sockaddr_in *a = (const void *)ss;

	snprintf(out, cap, "?");
	if (ss->ss_family == AF_INET) {
		const unsigned char *b = (const void *)&a->sin_addr;

		snprintf(out, cap, "%u.%u.%u.%u:%u", b[0], b[1], b[2], b[3], ntohs(a->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		snprintf(out, cap, "[ipv6]:%u", ntohs(((const struct sockaddr_in6 *)(const void *)ss)->sin6_port));
	}
}

/* The children serving connections, by pid, with their peer's address. */
static struct {
	pid_t pid;
	struct sockaddr_storage from;
} kids[FLEET_RELAY_MAX];

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)(const void *)b)->sin_addr.s_addr;
	return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr, 16) == 0;
}

static void kids_reap(void)
{
	pid_t pid;

	while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
		for (int i = 0; i < FLEET_RELAY_MAX; i++)
			if (kids[i].pid == pid)
				kids[i].pid = 0;
}

/* A place for a connection from ss: its index, or -1 with why (all taken, or ss's share). */
static int kid_slot(const struct sockaddr_storage *ss, const char **why)
{
	int free_at = -1, same = 0;

	kids_reap();
	for (int i = 0; i < FLEET_RELAY_MAX; i++) {
		if (kids[i].pid == 0 && free_at < 0)
			free_at = i;
		else if (kids[i].pid && same_addr(&kids[i].from, ss))
			same++;
	}
	*why = free_at < 0 ? "busy" : "busy_for_this_address";
	return same >= PER_ADDR_MAX ? -1 : free_at;
}

int fleet_relay_main(int argc, char **argv)
{
	int r = program_start(argc, argv, "fleet-relay");

	if (r != 0)
		return r;
	if (fcntl(FD_LISTEN, F_GETFD) < 0) {
		log_error("fleet relay without its listening socket", "fd=%d", FD_LISTEN);
		return 2;
	}
	for (;;) {
		struct pollfd p[2] = { { .fd = FD_CTL, .events = POLLIN }, { .fd = FD_LISTEN, .events = POLLIN } };
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		const char *why;
		char from[64];
		pid_t pid;
		int conn, k;

		kids_reap();
		if (poll(p, 2, 1000) < 0 && errno != EINTR)
			return 1;
		if (p[0].revents) /* agenticd ended (it sends nothing after the settings) */
			return 0;
		if (!(p[1].revents & POLLIN))
			continue;
		conn = accept4(FD_LISTEN, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (conn < 0)
			continue;
		addr_text(&ss, from, sizeof(from));
		if ((k = kid_slot(&ss, &why)) < 0) {
			log_warn("fleet relay refused", "from=%s reason=%s", log_q(from), log_q(why));
			close(conn);
			continue;
		}
		pid = fork();
		if (pid == 0)
			serve(conn, from);
		close(conn);
		if (pid > 0) {
			kids[k].pid = pid;
			kids[k].from = ss;
		}
	}
}

/* ---- the front door's side ---- */

/* The client's answer when the owner could not be reached: a 502 with the node and why. */
static void answer_502(const char *node, const char *why)
{
	char body[256], head[160];
	int bn = snprintf(body, sizeof(body),
			  "{\"error\":{\"code\":\"relay_failed\",\"message\":\"node %s, which "
			  "owns the sandbox, cannot be reached: %s\"}}\n", node, why);
	int hn = snprintf(head, sizeof(head), "HTTP/1.1 502 Bad Gateway\r\nContent-Type: "
			  "application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", bn);

	(void)send(0, head, (size_t)hn, MSG_NOSIGNAL);
	(void)send(0, body, (size_t)bn, MSG_NOSIGNAL);
}

/* A TCP connection to addr within DIAL_MS: the socket, or -1. */
static int dial(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct pollfd p;
	int fd, err = 0;
	socklen_t el = sizeof(err);

	if (etcd_endpoint_parse(addr, strlen(addr), &ss, &sl) != 0)
		return -1;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, sl) != 0 && errno != EINPROGRESS)
		goto fail;
	p = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (poll(&p, 1, DIAL_MS) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 ||
	    err != 0)
		goto fail;
	tcp_tune(fd);
	return fd;
fail:
	close(fd);
	return -1;
}

/* The target packet and the request's first bytes, from agenticd, into pre. */
static int front_read(char *node, char *addr, unsigned char *pre, size_t cap, size_t *len)
{
	struct json_token tok[8];
	struct json_doc d;
	char pkt[256];
	long n = recv(FD_CTL, pkt, sizeof(pkt), 0);
	int i, j;

	if (n <= 0 || json_parse(&d, pkt, (size_t)n, tok, ARRAY_LEN(tok)) != 0 ||
	    (i = json_obj_get(&d, 0, "node")) < 0 || json_str(&d, i, node, 64) < 0 ||
	    (j = json_obj_get(&d, 0, "addr")) < 0 || json_str(&d, j, addr, 64) < 0)
		return ERR_PARSE;
	*len = 0;
	for (;;) {
		n = recv(FD_CTL, pre + *len, cap - *len, 0);
		if (n == 0)
			return 0;
		if (n < 0 || (size_t)n == cap - *len)
			return ERR_LIMIT;
		*len += (size_t)n;
	}
}

int fleet_relay_out_main(int argc, char **argv)
{
	static unsigned char pre[FLEET_RELAY_PREFIX_BYTES];
	char node[64], addr[64];
	size_t len, off = 0;
	int r = program_start(argc, argv, "fleet-relay-out"), fd;

	if (r != 0) {
		answer_502("?", "this node's relay could not start (see its log)");
		return r;
	}
	if (front_read(node, addr, pre, sizeof(pre), &len) < 0) {
		answer_502("?", "the relay's request was malformed");
		return 1;
	}
	close(FD_CTL);
	fd = dial(addr);
	if (fd < 0 || tls_handshake_cn(fd, node, HANDSHAKE_MS) < 0) {
		const char *why = fd < 0 ? "no_connection" : tls_error_word();

		log_warn("fleet relay failed", "node=%s addr=%s reason=%s", log_q(node), log_q(addr),
			 log_q(why));
		answer_502(node, why);
		return 1;
	}
	while (off < len) {
		struct pollfd p = { .fd = fd, .events = tls_want_events() };
		size_t k = tls_send(pre + off, len - off);

		off += k;
		tls_flush();
		if (tls_pump(0) < 0 || (k == 0 && poll(&p, 1, DIAL_MS) != 1)) {
			answer_502(node, "the request could not be sent");
			return 1;
		}
	}
	explicit_bzero(pre, len);
	r = pump(0, fd);
	tls_wipe();
	return r < 0;
}
