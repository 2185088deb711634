/* relay.c: the fleet's node-to-node channel, both ends (docs/FLEET.md "One front door"). A
 * request to a node's admin API or E2B listener for a sandbox another node owns goes to that
 * node over TLS, each side showing a certificate of the fleet's CA (and, for the E2B
 * listener, the client offering ALPN agentic-e2b); the owner serves it as it would a local
 * one, and the answer comes back the same way. Two programs, each one process per connection
 * (the TLS library holds one connection per process), started by agenticd (link.c):
 *
 * agentic fleet-relay, the owner's side: fd 3 a SEQPACKET socket to agenticd, fd 4 the
 *   listening TCP socket agenticd bound (fleet_listen). It reads the settings, the CA and this
 *   node's certificate and key, becomes fleet_uid, and for each connection forks a child (with
 *   a SEQPACKET socket of its own to the listener) that runs the TLS server's handshake: the
 *   peer must show a certificate the fleet's CA signed whose common name is a node's name, not
 *   this node's. The child says {"relay_from":NODE,"api":"admin"|"e2b"} (e2b: the peer offered
 *   agentic-e2b); the listener passes that on to agenticd with the child's pid as its id;
 *   agenticd, when NODE is a node of the fleet, answers with one end of a socketpair it made
 *   (the other is its admin or E2B connection), which the listener hands the child, and the
 *   child moves bytes between the TLS connection and it. Descriptors only ever go from
 *   agenticd to the relay, never back (agenticd's ends refuse them): a relay process taken
 *   over cannot hand agenticd a socket whose close would hold its loop.
 *
 * agentic fleet-relay-out, the front door's side, one per request: fd 0 the client's
 *   connection, fd 3 a SEQPACKET socket carrying the settings, then {"node","addr"} (and
 *   "e2b" for the owner's E2B listener: offered by ALPN), then the request's bytes agenticd
 *   had read (its head written again, and what of the body came with it), then its end. It
 *   becomes fleet_uid, dials the owner, runs the TLS client's handshake with this node's
 *   certificate (the owner's must have the owner's name as its common name), sends those
 *   bytes and then moves bytes both ways. A failure before that is a 502 answer to the client.
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
	bool any;   /* a byte came from its source (read of the answer's direction) */
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
				down->any = moved = true;
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

static void answer_502(const char *node, const char *why);

/* Bytes between the plain socket pfd and the TLS connection tfd until both directions have
 * ended: 0, or -1 when either side failed. On the front door's side owner names the node at
 * the other end: when it ends the connection without a byte of answer (it turned this node
 * away: its log says why), the client gets a 502 saying so rather than a bare close. */
static int pump(int pfd, int tfd, const char *owner)
{
	static struct dir up, down;
	bool plain_gone = false, tls_gone = false;

	up.len = up.off = down.len = down.off = 0;
	up.eof = up.shut = down.eof = down.shut = down.any = false;
	for (;;) {
		struct pollfd p[2] = { { .fd = plain_gone ? -1 : pfd }, { .fd = tls_gone ? -1 : tfd } };

		if (!pump_once(pfd, &up, &down)) {
			if (owner && !down.any)
				answer_502(owner, strcmp(tls_error_word(), "none") != 0
							  ? tls_error_word()
							  : "closed_without_answer");
			return -1;
		}
		if (owner && down.eof && !down.any && !down.shut && !plain_gone) {
			answer_502(owner, "closed_without_answer");
			owner = NULL;
		}
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

/* One connection from a node, in a child of its own; ctl its socket to the listener. */
static _Noreturn void serve(int conn, int ctl, const char *from)
{
	char peer[FLEET_NODE_NAME_MAX + 1], pkt[128], ok[16];
	struct pollfd p = { .fd = ctl, .events = POLLIN };
	int n, r, fd = -1;

	close(FD_LISTEN);
	close(FD_CTL);
	/* it talks to a host before knowing who that is: taken over, it still cannot pass agenticd
	 * a descriptor on the stream it is given (its listener's program cannot take this filter:
	 * it passes the children theirs) */
	if (fd_forbid_passing() != 0)
		_exit(1);
	tcp_tune(conn);
	tls_alpn_set(FLEET_RELAY_E2B_ALPN); /* taken when offered: the request is the E2B API's */
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
	n = snprintf(pkt, sizeof(pkt), "{\"relay_from\":\"%s\",\"api\":\"%s\"}", peer,
		     tls_alpn_agreed() ? "e2b" : "admin");
	/* agenticd's end of the stream, or nothing (it refused the node: logged there) */
	if (send(ctl, pkt, (size_t)n, MSG_NOSIGNAL) != n || poll(&p, 1, HANDSHAKE_MS) != 1 ||
	    fleet_recv_fd(ctl, ok, sizeof(ok), &fd, 0) <= 0 || fd < 0)
		_exit(1);
	close(ctl);
	r = pump(fd, conn, NULL);
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

/* The children serving connections, by pid, with their peer's address and the listener's end
 * of their socket (-1 once it has been used). */
static struct {
	pid_t pid;
	int ctl;
	bool asked; /* its one question went to agenticd: nothing more is read from it */
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

static void kid_done(int k)
{
	if (kids[k].ctl >= 0)
		close(kids[k].ctl);
	kids[k].ctl = -1;
	kids[k].pid = 0;
	kids[k].asked = false;
}

static void kids_reap(void)
{
	pid_t pid;

	while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
		for (int i = 0; i < FLEET_RELAY_MAX; i++)
			if (kids[i].pid == pid)
				kid_done(i);
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

/* A child's word: its node, passed on to agenticd with the child's pid as its id. */
static void from_kid(int k)
{
	char pkt[128], node[FLEET_NODE_NAME_MAX + 1], api[8], out[160];
	ssize_t n = recv(kids[k].ctl, pkt, sizeof(pkt) - 1, MSG_DONTWAIT);
	int m;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	pkt[n > 0 ? n : 0] = '\0';
	if (n <= 0 ||
	    sscanf(pkt, "{\"relay_from\":\"%63[a-z0-9-]\",\"api\":\"%5[a-z0-9]\"}", node, api) != 2 ||
	    (m = snprintf(out, sizeof(out), "{\"relay_from\":\"%s\",\"api\":\"%s\",\"id\":%d}",
			  node, api, (int)kids[k].pid)) < 0 ||
	    send(FD_CTL, out, (size_t)m, MSG_NOSIGNAL) != m) {
		close(kids[k].ctl); /* the child sees the end and exits */
		kids[k].ctl = -1;
	}
	kids[k].asked = true;
}

/* agenticd's answer: {"id":PID} with its end of the stream for that child, or without one
 * (refused). The child gets the descriptor, or the end of its socket. */
static void from_agenticd(void)
{
	char pkt[64];
	int fd, id = 0;
	ssize_t n = fleet_recv_fd(FD_CTL, pkt, sizeof(pkt) - 1, &fd, MSG_DONTWAIT);

	if (n <= 0)
		return;
	pkt[n] = '\0';
	if (sscanf(pkt, "{\"id\":%d}", &id) == 1)
		for (int i = 0; i < FLEET_RELAY_MAX; i++)
			if (kids[i].pid == id && kids[i].ctl >= 0) {
				if (fd >= 0)
					(void)fleet_send_fd(kids[i].ctl, "ok", 2, fd);
				close(kids[i].ctl);
				kids[i].ctl = -1;
			}
	if (fd >= 0)
		close(fd);
}

/* A connection: a child of its own with a socket to this process, or refused. */
static void take(void)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	const char *why;
	char from[64];
	int conn = accept4(FD_LISTEN, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC), k, sv[2];
	pid_t pid;

	if (conn < 0)
		return;
	addr_text(&ss, from, sizeof(from));
	if ((k = kid_slot(&ss, &why)) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_warn("fleet relay refused", "from=%s reason=%s", log_q(from),
			 log_q(k < 0 ? why : "no_socket"));
		close(conn);
		return;
	}
	pid = fork();
	if (pid == 0) {
		/* the other children's sockets stay with the listener: a child taken over by its
		 * peer cannot read another's question or answer it */
		for (int i = 0; i < FLEET_RELAY_MAX; i++)
			if (kids[i].ctl >= 0)
				close(kids[i].ctl);
		close(sv[0]);
		serve(conn, sv[1], from);
	}
	close(conn);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return;
	}
	kids[k].pid = pid;
	kids[k].ctl = sv[0];
	kids[k].from = ss;
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
	for (int i = 0; i < FLEET_RELAY_MAX; i++)
		kids[i].ctl = -1;
	for (;;) {
		struct pollfd p[2 + FLEET_RELAY_MAX] = {
			{ .fd = FD_CTL, .events = POLLIN }, { .fd = FD_LISTEN, .events = POLLIN } };
		int at[FLEET_RELAY_MAX], np = 2;

		kids_reap();
		for (int i = 0; i < FLEET_RELAY_MAX; i++)
			if (kids[i].pid && kids[i].ctl >= 0 && !kids[i].asked) {
				at[np - 2] = i;
				p[np++] = (struct pollfd){ .fd = kids[i].ctl, .events = POLLIN };
			}
		if (poll(p, (nfds_t)np, 1000) < 0 && errno != EINTR)
			return 1;
		if (p[0].revents & (POLLHUP | POLLERR)) /* agenticd ended */
			return 0;
		if (p[0].revents & POLLIN)
			from_agenticd();
		for (int j = 2; j < np; j++)
			if (p[j].revents && kids[at[j - 2]].ctl >= 0 && !kids[at[j - 2]].asked)
				from_kid(at[j - 2]);
		if (p[1].revents & POLLIN)
			take();
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
	if (json_obj_get(&d, 0, "e2b") >= 0)
		tls_alpn_set(FLEET_RELAY_E2B_ALPN);
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
	r = pump(0, fd, node);
	tls_wipe();
	return r < 0;
}
