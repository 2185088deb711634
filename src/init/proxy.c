/* proxy.c: the init's half of the egress path (docs/EGRESS.md): the proxy listener on
 * 127.0.0.1:EGRESS_PROXY_PORT inside the sandbox, and one Egress call on the agent connection
 * per accepted connection, carrying the workload's bytes both ways without looking at them.
 * (No <stdio.h> here, as in channel.c: its stdout/stderr macros clash with AgentMessage's.)
 *
 * Credit, per direction: up (workload → agenticd) never more than EGRESS_WINDOW bytes sent
 * and not reported consumed by agenticd, so the socket is not read while the window is full;
 * down (agenticd → workload) at most EGRESS_WINDOW bytes buffered here, reported consumed as
 * they are written to the workload's socket (at half a window, or when all is written). A
 * peer that sends past the credit it was given breaks the protocol: the call is cancelled.
 *
 * Memory: a table of LIMIT_INIT_EGRESS_CONNS slots, each with its up buffer (one chunk) and
 * down ring (one window), carved from the storage the applet maps at start; nothing is
 * allocated afterwards. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "base/base.h"
#include "init/init.h"

#define EGRESS_PATH "/agentic.sandbox.v1.AgentService/Egress"

_Static_assert(INIT_TAG_EGRESS_FIRST + LIMIT_INIT_EGRESS_CONNS <= INIT_TAG_CMD_FIRST,
	       "the egress tags stay below the commands'");

static const char busy_answer[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
				  "Content-Length: 0\r\n\r\n";

struct egress_conn {
	int fd;                   /* the workload's socket; -1: the slot is free */
	uint32_t events;          /* what epoll watches for it; 0: not registered */
	struct grpc_call *call;   /* NULL: not started yet, or over */
	int64_t due_ms;           /* starting: give up then; done: close then */
	uint8_t starting;         /* the call is to be started (the headers had no room) */
	uint8_t done;             /* the call ended OK: write what is left, then close */
	uint8_t up_eof;           /* the workload's read side ended */
	uint8_t up_eof_sent;
	uint8_t down_eof;         /* agenticd's eof came */
	uint8_t wr_shut;          /* shutdown(SHUT_WR) done */
	uint8_t down_any;         /* a data byte came down */
	uint32_t up_len;          /* bytes in up waiting to be sent */
	uint64_t up_sent, up_acked;                  /* up data bytes sent; consumed by agenticd */
	uint64_t down_in, down_written, down_reported;
	uint8_t *up;              /* EGRESS_CHUNK */
	uint8_t *down;            /* EGRESS_WINDOW, a ring indexed by the cumulative counts */
	struct init_egress *eg;   /* the table, for the call's callbacks */
};

struct init_egress {
	int epfd;
	int lfd;                  /* the listener; -1: none (the bind failed) */
	bool lwatched;            /* in the epoll set: accepted here, not by agenticd */
	struct init_agent *agent;
	struct egress_conn conn[LIMIT_INIT_EGRESS_CONNS];
	uint64_t accepted, refused, ended;
	int64_t refused_logged_ms;
	uint64_t refused_unlogged;
};

static void on_message(struct grpc_call *call, const ProtobufCMessage *msg);
static void on_writable(struct grpc_call *call);
static void on_done(struct grpc_call *call, int status, const char *message);

static const struct grpc_method egress_method = {
	EGRESS_PATH,
	&agentic__sandbox__v1__egress_chunk__descriptor,
	&agentic__sandbox__v1__egress_chunk__descriptor,
	GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
	{ .on_message = on_message, .on_writable = on_writable, .on_done = on_done },
	NULL,
};

#define TABLE_BYTES ((sizeof(struct init_egress) + 63) & ~(size_t)63)

size_t init_egress_storage_bytes(void)
{
	/* 64: the storage's start is aligned up to a cache line */
	return 64 + TABLE_BYTES + (size_t)LIMIT_INIT_EGRESS_CONNS * (EGRESS_CHUNK + EGRESS_WINDOW);
}

/* The listener: opened at start, before any workload runs, so no workload can take the port
 * first. Failure is logged and the sandbox goes on without egress. */
static int listener_open(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(EGRESS_PROXY_PORT),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, fd, r;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, LIMIT_INIT_EGRESS_CONNS * 2) != 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static int egress_listener(const struct init_egress *eg)
{
	return eg ? eg->lfd : -1;
}

static void egress_direct(struct init_egress *eg, bool direct)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = INIT_TAG_EGRESS };

	if (!eg || eg->lfd < 0)
		return;
	if (eg->lwatched == direct &&
	    (epoll_ctl(eg->epfd, direct ? EPOLL_CTL_DEL : EPOLL_CTL_ADD, eg->lfd, &ev) == 0 ||
	     direct))
		eg->lwatched = !direct;
	log_info("egress proxy", "accepted_by=%s", eg->lwatched ? "init" : "agenticd");
}

static const struct init_egress_hooks egress_hooks = {
	.listener = egress_listener,
	.direct = egress_direct,
};

int init_egress_setup(struct init_egress **out, void *storage, size_t len, int epfd,
		      struct init_agent *agent)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = INIT_TAG_EGRESS };
	struct init_egress *eg;
	uint8_t *p;

	if (len < init_egress_storage_bytes())
		return ERR_LIMIT;
	eg = (void *)(((uintptr_t)storage + 63) & ~(uintptr_t)63);
	p = (uint8_t *)eg + TABLE_BYTES;
	memset(eg, 0, sizeof(*eg));
	eg->epfd = epfd;
	eg->agent = agent;
	for (int i = 0; i < LIMIT_INIT_EGRESS_CONNS; i++) {
		eg->conn[i].fd = -1;
		eg->conn[i].up = p;
		eg->conn[i].down = p + EGRESS_CHUNK;
		eg->conn[i].eg = eg;
		p += EGRESS_CHUNK + EGRESS_WINDOW;
	}
	*out = eg;
	agent->egress = eg;
	agent->egress_hooks = &egress_hooks;
	eg->lfd = listener_open();
	if (eg->lfd < 0) {
		log_warn("egress proxy port unavailable, going on without egress", "port=%d err=%s",
			 EGRESS_PROXY_PORT, log_q(err_str(eg->lfd)));
		eg->lfd = -1;
		return 0;
	}
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, eg->lfd, &ev) != 0) {
		log_warn("egress proxy port unavailable, going on without egress", "port=%d err=%s",
			 EGRESS_PROXY_PORT, log_q(err_str(-errno)));
		close(eg->lfd);
		eg->lfd = -1;
		return 0;
	}
	eg->lwatched = true;
	log_info("egress proxy listening", "port=%d conns=%d", EGRESS_PROXY_PORT,
		 LIMIT_INIT_EGRESS_CONNS);
	return 0;
}

static uint64_t conn_tag(const struct init_egress *eg, const struct egress_conn *e)
{
	return INIT_TAG_EGRESS_FIRST + (uint64_t)(e - eg->conn);
}

static void conn_close(struct init_egress *eg, struct egress_conn *e)
{
	struct grpc_call *call = e->call;
	uint8_t *up = e->up, *down = e->down;

	/* the call pointer goes first: its on_done, which cancelling runs, finds nothing to do */
	e->call = NULL;
	if (call)
		grpc_call_finish(call, GRPC_CANCELLED, NULL, NULL, 0);
	/* out of the set first: a supervisor forked this instant holds the socket a moment
	 * longer, and close alone would leave the registration to it */
	if (e->events)
		epoll_ctl(eg->epfd, EPOLL_CTL_DEL, e->fd, NULL);
	if (e->fd >= 0)
		close(e->fd);
	memset(e, 0, sizeof(*e));
	e->fd = -1;
	e->up = up;
	e->down = down;
	e->eg = eg;
	eg->ended++;
}

/* The call could not be had, or ended badly before anything came back: the workload gets a
 * plain answer instead of a dead socket, then the close. */
static void conn_refuse(struct init_egress *eg, struct egress_conn *e)
{
	if (!e->down_any && !e->wr_shut) {
		ssize_t n = send(e->fd, busy_answer, sizeof(busy_answer) - 1,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)n; /* best effort: a fresh socket's buffer takes it whole */
	}
	conn_close(eg, e);
}

static uint32_t wanted(const struct egress_conn *e)
{
	uint32_t ev = 0;

	if (e->call && !e->done && !e->up_eof && e->up_len == 0 &&
	    e->up_sent - e->up_acked < EGRESS_WINDOW)
		ev |= EPOLLIN;
	if (e->down_in > e->down_written)
		ev |= EPOLLOUT;
	return ev;
}

static void watch(struct init_egress *eg, struct egress_conn *e)
{
	struct epoll_event ev = { .events = wanted(e), .data.u64 = conn_tag(eg, e) };
	int op;

	if (ev.events == e->events)
		return;
	/* nothing wanted: out of the set, or a hung-up socket would be reported without end */
	op = !ev.events ? EPOLL_CTL_DEL : e->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(eg->epfd, op, e->fd, &ev) == 0)
		e->events = ev.events;
}

/* Sends what is due up: the chunk read, the eof, the consumed count. 0, or -1 when the conn
 * was closed. */
static int send_up(struct init_egress *eg, struct egress_conn *e)
{
	Agentic__Sandbox__V1__EgressChunk m = AGENTIC__SANDBOX__V1__EGRESS_CHUNK__INIT;
	uint64_t unreported = e->down_written - e->down_reported;
	int report = unreported && (unreported >= EGRESS_WINDOW / 2 ||
				    e->down_written == e->down_in);
	int eof = e->up_eof && !e->up_eof_sent && e->up_len == 0;
	int r;

	if (!e->call || (!e->up_len && !report && !eof))
		return 0;
	m.data.data = e->up;
	m.data.len = e->up_len;
	/* the count is cumulative: sending it with every chunk costs a few bytes, says it again */
	m.consumed = e->down_written;
	m.eof = eof;
	r = grpc_call_send(e->call, &m.base);
	if (r == -EAGAIN)
		return 0; /* on_writable comes */
	if (r < 0) {
		log_warn("egress chunk not sent, connection closed", "err=%s", log_q(err_str(r)));
		conn_close(eg, e);
		return -1;
	}
	e->up_sent += e->up_len;
	e->up_len = 0;
	e->down_reported = e->down_written;
	if (eof)
		e->up_eof_sent = 1;
	return 0;
}

/* Writes what is buffered for the workload. 0, or -1 when the conn was closed. */
static int write_down(struct init_egress *eg, struct egress_conn *e)
{
	while (e->down_in > e->down_written) {
		size_t at = (size_t)(e->down_written % EGRESS_WINDOW);
		size_t n = (size_t)(e->down_in - e->down_written);
		ssize_t w;

		if (n > EGRESS_WINDOW - at)
			n = EGRESS_WINDOW - at;
		w = send(e->fd, e->down + at, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (w <= 0) {
			conn_close(eg, e); /* the workload is gone */
			return -1;
		}
		e->down_written += (uint64_t)w;
	}
	return 0;
}

/* Moves the connection on as far as it goes now: writes, reports, half-closes, closes,
 * watches. Every event ends here. */
static void advance(struct init_egress *eg, struct egress_conn *e)
{
	if (e->fd < 0)
		return;
	if (write_down(eg, e) < 0 || send_up(eg, e) < 0)
		return;
	if (e->down_eof && !e->wr_shut && e->down_in == e->down_written) {
		shutdown(e->fd, SHUT_WR);
		e->wr_shut = 1;
	}
	if (e->done && e->down_in == e->down_written) {
		conn_close(eg, e);
		return;
	}
	watch(eg, e);
}

static void read_up(struct init_egress *eg, struct egress_conn *e)
{
	uint64_t credit = EGRESS_WINDOW - (e->up_sent - e->up_acked);
	size_t want = credit < EGRESS_CHUNK ? (size_t)credit : EGRESS_CHUNK;
	ssize_t n;

	if (!e->call || e->done || e->up_eof || e->up_len || !want)
		return;
	n = recv(e->fd, e->up, want, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		conn_close(eg, e); /* reset by the workload */
		return;
	}
	if (n == 0)
		e->up_eof = 1;
	e->up_len = (uint32_t)n;
}

static void call_start(struct init_egress *eg, struct egress_conn *e)
{
	const struct init_env *env = eg->agent->env;
	const struct grpc_md md[] = {
		{ "x-agent-id", env->agent_id, strlen(env->agent_id) },
		{ "x-agent-instance-id", env->instance_id, strlen(env->instance_id) },
	};
	struct grpc_call *call;
	int r;

	r = grpc_client_start(eg->agent->client, &egress_method, md, ARRAY_LEN(md), 0, e, &call);
	if (r == -EAGAIN) {
		e->starting = 1; /* init_egress_tick tries again until due_ms */
		return;
	}
	e->starting = 0;
	if (r < 0) {
		log_warn("egress call not started", "err=%s", log_q(err_str(r)));
		conn_refuse(eg, e);
		return;
	}
	e->call = call;
	advance(eg, e);
}

static void note_refused(struct init_egress *eg, const char *why)
{
	int64_t now = clock_mono_ms();

	eg->refused++;
	/* a workload can connect in a loop: one line a second at most */
	if (now - eg->refused_logged_ms < 1000) {
		eg->refused_unlogged++;
		return;
	}
	log_info("egress connection refused", "reason=%s not_logged=%llu", log_q(why),
		 (unsigned long long)eg->refused_unlogged);
	eg->refused_logged_ms = now;
	eg->refused_unlogged = 0;
}

static void accept_all(struct init_egress *eg)
{
	/* a bounded batch: the rest waits for the next turn of the loop */
	for (int k = 0; k < 4 * LIMIT_INIT_EGRESS_CONNS; k++) {
		struct egress_conn *e = NULL;
		int fd = accept4(eg->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return; /* EAGAIN, or an aborted connection */
		/* a relay forwards what it has at once: Nagle would hold a small write back
		 * until the peer's ack (a 40 ms stall on a TLS 1.3 handshake's last flight) */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		if (!init_agent_egress(eg->agent)) {
			note_refused(eg, "no_consent");
			close(fd);
			continue;
		}
		for (int i = 0; i < LIMIT_INIT_EGRESS_CONNS && !e; i++)
			if (eg->conn[i].fd < 0)
				e = &eg->conn[i];
		if (!e) {
			note_refused(eg, "busy");
			close(fd);
			continue;
		}
		e->fd = fd;
		e->due_ms = clock_mono_ms() + LIMIT_INIT_EGRESS_START_MS;
		eg->accepted++;
		call_start(eg, e);
	}
}

void init_egress_io(struct init_egress *eg, uint64_t tag, uint32_t events)
{
	struct egress_conn *e;

	if (tag == INIT_TAG_EGRESS) {
		if (eg->lfd >= 0)
			accept_all(eg);
		return;
	}
	if (tag < INIT_TAG_EGRESS_FIRST || tag >= INIT_TAG_EGRESS_FIRST + LIMIT_INIT_EGRESS_CONNS)
		return;
	e = &eg->conn[tag - INIT_TAG_EGRESS_FIRST];
	if (e->fd < 0)
		return;
	if (events & EPOLLERR) {
		conn_close(eg, e);
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP))
		read_up(eg, e);
	advance(eg, e);
	/* the chunk goes now, not at the loop's next EPOLLOUT (see agenticd's egress_event) */
	if (e->fd >= 0 && e->call)
		grpc_call_flush(e->call);
}

int64_t init_egress_tick(struct init_egress *eg, int64_t now)
{
	int consent = init_agent_egress(eg->agent);
	int64_t due = INT64_MAX;

	for (int i = 0; i < LIMIT_INIT_EGRESS_CONNS; i++) {
		struct egress_conn *e = &eg->conn[i];

		if (e->fd < 0)
			continue;
		/* the Connect stream ended or agenticd withdrew: its calls go with it */
		if (!consent && (e->call || e->starting)) {
			conn_refuse(eg, e);
			continue;
		}
		if (e->starting) {
			if (now >= e->due_ms) {
				conn_refuse(eg, e);
				continue;
			}
			call_start(eg, e);
			if (e->fd >= 0 && e->starting && now + 10 < due)
				due = now + 10;
			continue;
		}
		if (e->done) {
			if (now >= e->due_ms) {
				conn_close(eg, e); /* the workload does not read what is left */
				continue;
			}
			if (e->due_ms < due)
				due = e->due_ms;
		}
	}
	return due;
}

void init_egress_close_all(struct init_egress *eg)
{
	for (int i = 0; i < LIMIT_INIT_EGRESS_CONNS; i++)
		if (eg->conn[i].fd >= 0)
			conn_close(eg, &eg->conn[i]);
}

/* ---- the call's callbacks ---- */

static void protocol_error(struct init_egress *eg, struct egress_conn *e, const char *what)
{
	log_warn("egress call broke the credit protocol, connection closed", "what=%s", log_q(what));
	conn_close(eg, e);
}

static void on_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct egress_conn *e = grpc_call_user(call);
	struct init_egress *eg = e->eg;
	const Agentic__Sandbox__V1__EgressChunk *m = (const void *)msg;
	size_t len = m->data.len;

	if (e->call != call)
		return;
	/* cumulative; 0 (a chunk that carries none) or an older count says nothing new */
	if (m->consumed > e->up_sent) {
		protocol_error(eg, e, "consumed_over_sent");
		return;
	}
	if (m->consumed > e->up_acked)
		e->up_acked = m->consumed;
	if (len) {
		size_t at = (size_t)(e->down_in % EGRESS_WINDOW), first;

		if (e->down_eof) {
			protocol_error(eg, e, "data_after_eof");
			return;
		}
		if (len > EGRESS_WINDOW - (e->down_in - e->down_reported)) {
			protocol_error(eg, e, "over_window");
			return;
		}
		first = len < EGRESS_WINDOW - at ? len : EGRESS_WINDOW - at;
		memcpy(e->down + at, m->data.data, first);
		memcpy(e->down, m->data.data + first, len - first);
		e->down_in += len;
		e->down_any = 1;
	}
	if (m->eof)
		e->down_eof = 1;
	/* the workload may have been waiting for credit: read now rather than next turn */
	read_up(eg, e);
	advance(eg, e);
}

static void on_writable(struct grpc_call *call)
{
	struct egress_conn *e = grpc_call_user(call);
	struct init_egress *eg = e->eg;

	if (e->call != call)
		return;
	advance(eg, e);
}

static void on_done(struct grpc_call *call, int status, const char *message)
{
	struct egress_conn *e = grpc_call_user(call);
	struct init_egress *eg = e->eg;
	char why[256];

	if (e->call != call)
		return; /* closed from our side already */
	e->call = NULL;
	if (status == GRPC_OK) {
		e->done = 1;
		e->due_ms = clock_mono_ms() + LIMIT_INIT_EGRESS_LINGER_MS;
		advance(eg, e);
		return;
	}
	if (status != GRPC_CANCELLED && status != GRPC_UNAVAILABLE)
		log_info("egress call ended", "status=%s message=%s bytes_down=%llu",
			 grpc_status_name(status), log_quote(why, sizeof(why), message ? message : ""),
			 (unsigned long long)e->down_in);
	conn_refuse(eg, e);
}
