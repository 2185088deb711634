/* grpc_client.c: the gRPC client: one connection to a Unix socket or a character device (a virtio
 * serial port), redialled when lost, calls with metadata and deadlines, on its own epoll fd
 * (stable across reconnects). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "grpc/grpc_internal.h"

/* A character device is carried through a socketpair: the connection speaks to a socket
 * (send with MSG_NOSIGNAL), and the client moves the bytes between the pair's other end and
 * the device, RELAY_BYTES at a time each way. */
#define RELAY_BYTES 16384
#define DEV_PREFIX "/dev/"

/* epoll tags in the client's own epoll fd: the connection's is grpc_conn_start's 0 */
enum { TAG_CONN, TAG_DEV, TAG_PAIR };
/* the relay's directions: what the connection sends, what the device brings */
enum { UP, DOWN };

struct relay {
	int dev, pair;            /* -1 while not dialled */
	uint8_t *buf[2];
	size_t off[2], len[2];
	uint32_t ev_dev, ev_pair; /* registered with epoll */
};

struct grpc_client {
	struct grpc_client_config cfg;
	char path[108];
	struct grpc_env env;
	struct grpc_conn conn;
	int connected;
	int is_dev;               /* path names a character device */
	struct relay relay;
};

static int is_dev_path(const char *path)
{
	return strncmp(path, DEV_PREFIX, sizeof(DEV_PREFIX) - 1) == 0;
}

static int config_ok(const struct grpc_client_config *cfg)
{
	return cfg->path && strlen(cfg->path) < 108 && cfg->max_message_bytes >= GRPC_SMALL_MESSAGE &&
	       cfg->max_message_bytes <= LIMIT_ALLOC_MAX_BYTES / 4 && cfg->small_buffers >= 1;
}

size_t grpc_client_storage_bytes(const struct grpc_client_config *cfg)
{
	if (!config_ok(cfg))
		return 0;
	return sizeof(struct grpc_client) + 64 + (is_dev_path(cfg->path) ? 2 * RELAY_BYTES : 0) +
	       grpc_env_bytes(cfg->max_message_bytes, cfg->small_buffers, cfg->large_buffers);
}

int grpc_client_init(const struct grpc_client_config *cfg, void *storage, size_t len,
		     struct grpc_client **out)
{
	struct arena carve;
	struct grpc_client *c;
	int r;

	if (!config_ok(cfg) || len < grpc_client_storage_bytes(cfg))
		return ERR_LIMIT;
	if (!cfg->zeroed)
		memset(storage, 0, len);
	arena_init(&carve, storage, len);
	c = arena_alloc(&carve, sizeof(*c), 64);
	c->cfg = *cfg;
	strcpy(c->path, cfg->path);
	c->cfg.path = c->path;
	c->conn.fd = -1;
	c->is_dev = is_dev_path(c->path);
	c->relay.dev = c->relay.pair = -1;
	if (c->is_dev) {
		c->relay.buf[UP] = arena_alloc(&carve, RELAY_BYTES, 1);
		c->relay.buf[DOWN] = arena_alloc(&carve, RELAY_BYTES, 1);
	}
	r = grpc_env_setup(&c->env, &carve, cfg->max_message_bytes, cfg->small_buffers,
			   cfg->large_buffers);
	if (r < 0)
		return r;
	c->env.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->env.epfd < 0)
		return -errno;
	*out = c;
	return 0;
}

static void relay_watch(struct grpc_client *c, int fd, uint32_t *have, uint32_t want)
{
	struct epoll_event ev = { .events = want, .data.u64 = fd == c->relay.dev ? TAG_DEV
										   : TAG_PAIR };

	if (want != *have && epoll_ctl(c->env.epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
		*have = want;
}

/* Moves what it can both ways without waiting, then watches for what it waits on. 0, or -1
 * when the device or the connection's end is gone (a read of 0: the host hung up, or the
 * connection closed its end). */
static int relay_pump(struct grpc_client *c)
{
	struct relay *r = &c->relay;

	for (int rounds = 0; rounds < 64; rounds++) {
		int moved = 0;

		for (int d = UP; d <= DOWN; d++) {
			int from = d == UP ? r->pair : r->dev;
			ssize_t n;

			if (!r->len[d]) {
				n = read(from, r->buf[d], RELAY_BYTES);
				if (n < 0 && (errno == EAGAIN || errno == EINTR))
					continue;
				if (n <= 0)
					return -1;
				r->off[d] = 0;
				r->len[d] = (size_t)n;
			}
			if (d == UP)
				n = write(r->dev, r->buf[d] + r->off[d], r->len[d] - r->off[d]);
			else
				n = send(r->pair, r->buf[d] + r->off[d], r->len[d] - r->off[d],
					 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (n < 0)
				return -1;
			r->off[d] += (size_t)n;
			if (r->off[d] == r->len[d])
				r->len[d] = 0;
			moved = 1;
		}
		if (!moved)
			break;
	}
	relay_watch(c, r->dev, &r->ev_dev, (r->len[DOWN] ? 0 : EPOLLIN) |
					  (r->len[UP] ? EPOLLOUT : 0));
	relay_watch(c, r->pair, &r->ev_pair, (r->len[UP] ? 0 : EPOLLIN) |
					    (r->len[DOWN] ? EPOLLOUT : 0));
	return 0;
}

/* After the connection's teardown: what it queued last (its GOAWAY) goes to the device if the
 * device takes it now, then both ends are closed. */
static void relay_close(struct grpc_client *c)
{
	struct relay *r = &c->relay;

	if (r->dev < 0)
		return;
	for (int rounds = 0; rounds < 4; rounds++) {
		ssize_t n;

		if (!r->len[UP]) {
			n = read(r->pair, r->buf[UP], RELAY_BYTES);
			if (n <= 0)
				break;
			r->off[UP] = 0;
			r->len[UP] = (size_t)n;
		}
		n = write(r->dev, r->buf[UP] + r->off[UP], r->len[UP] - r->off[UP]);
		if (n <= 0)
			break;
		r->off[UP] += (size_t)n;
		if (r->off[UP] == r->len[UP])
			r->len[UP] = 0;
	}
	epoll_ctl(c->env.epfd, EPOLL_CTL_DEL, r->dev, NULL);
	epoll_ctl(c->env.epfd, EPOLL_CTL_DEL, r->pair, NULL);
	close(r->dev);
	close(r->pair);
	r->dev = r->pair = -1;
	r->len[UP] = r->len[DOWN] = 0;
}

/* Opens the device. A virtio serial port whose host side is not connected polls POLLHUP
 * (reads give 0, writes EAGAIN): that is a refused dial, so the caller's backoff applies.
 * Else the connection's fd, the socketpair's end the relay serves. */
static int dev_dial(struct grpc_client *c)
{
	struct relay *r = &c->relay;
	struct pollfd p = { .events = POLLIN | POLLOUT };
	struct epoll_event ev = { .events = EPOLLIN };
	int sv[2], e;

	relay_close(c);
	p.fd = open(c->path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (p.fd < 0)
		return -errno;
	if (poll(&p, 1, 0) < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL))) {
		e = p.revents ? -ECONNREFUSED : -errno;
		close(p.fd);
		return e;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) {
		e = -errno;
		close(p.fd);
		return e;
	}
	r->dev = p.fd;
	r->pair = sv[1];
	r->ev_dev = r->ev_pair = EPOLLIN;
	ev.data.u64 = TAG_DEV;
	e = epoll_ctl(c->env.epfd, EPOLL_CTL_ADD, r->dev, &ev);
	ev.data.u64 = TAG_PAIR;
	if (e == 0)
		e = epoll_ctl(c->env.epfd, EPOLL_CTL_ADD, r->pair, &ev);
	if (e != 0) {
		e = -errno;
		close(sv[0]);
		relay_close(c);
		return e;
	}
	return sv[0];
}

static int socket_dial(struct grpc_client *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, r;

	strcpy(sa.sun_path, c->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A Unix socket connects at once or not at all: no need for a non-blocking dial. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    fcntl(fd, F_SETFL, O_NONBLOCK | O_RDWR) != 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

int grpc_client_connect(struct grpc_client *c)
{
	int fd;

	if (c->connected)
		return 0;
	fd = c->cfg.dial ? c->cfg.dial(c->cfg.dial_ctx) : c->is_dev ? dev_dial(c) : socket_dial(c);
	if (fd < 0)
		return fd;
	grpc_conn_start(&c->conn, &c->env, H2_CLIENT, fd, H2_MAX_STREAMS, TAG_CONN);
	if (c->conn.closing) {
		grpc_conn_teardown(&c->conn, GRPC_UNAVAILABLE);
		relay_close(c);
		return ERR_STATE;
	}
	c->connected = 1;
	return 0;
}

int grpc_client_connected(const struct grpc_client *c)
{
	return c->connected;
}

static void set(struct h2_field *f, const char *name, const char *value, size_t vlen)
{
	f->name = name;
	f->name_len = (uint32_t)strlen(name);
	f->value = value;
	f->value_len = (uint32_t)vlen;
}

int grpc_client_start(struct grpc_client *c, const struct grpc_method *m,
		      const struct grpc_md *md, size_t n, int timeout_ms, void *user,
		      struct grpc_call **out)
{
	struct h2_field f[GRPC_MAX_MD + 8];
	char timeout[16], enc[GRPC_MD_BYTES];
	size_t nf = 0, used = 0;
	struct h2_stream *s;
	struct grpc_call *call;
	int r;

	if (n > GRPC_MAX_MD)
		return ERR_LIMIT;
	if (c->connected && c->conn.closing)
		return ERR_STATE; /* inside the teardown of the lost connection */
	r = grpc_client_connect(c);
	if (r < 0)
		return r;
	set(&f[nf++], ":method", "POST", 4);
	set(&f[nf++], ":scheme", "http", 4);
	set(&f[nf++], ":path", m->path, strlen(m->path));
	set(&f[nf++], ":authority", "localhost", 9);
	set(&f[nf++], "content-type", "application/grpc", 16);
	set(&f[nf++], "te", "trailers", 8);
	if (timeout_ms > 0) {
		snprintf(timeout, sizeof(timeout), "%dm", timeout_ms);
		set(&f[nf++], "grpc-timeout", timeout, strlen(timeout));
	}
	for (size_t i = 0; i < n; i++) {
		size_t klen = strlen(md[i].key);

		if (klen > 4 && strcmp(md[i].key + klen - 4, "-bin") == 0) {
			long e = grpc_base64_encode(md[i].value, md[i].len, enc + used,
						    sizeof(enc) - used);

			if (e < 0)
				return ERR_LIMIT;
			set(&f[nf++], md[i].key, enc + used, (size_t)e);
			used += (size_t)e + 1;
		} else {
			set(&f[nf++], md[i].key, md[i].value, md[i].len);
		}
	}
	r = h2_stream_open(&c->conn.h2, f, nf, 0, NULL, &s);
	if (r == ERR_STATE) {
		/* the server is going away: its last streams finish, new ones need a new dial */
		return ERR_STATE;
	}
	if (r < 0)
		return r;
	call = &c->conn.calls[s - c->conn.h2.streams];
	memset(call, 0, sizeof(*call));
	call->conn = &c->conn;
	call->bufs = &c->env;
	call->stream = s;
	call->method = m;
	call->user = user;
	call->started = 1;
	call->hdrs_sent = 1;
	s->user = call;
	c->conn.ncalls++;
	c->env.calls++;
	if (timeout_ms > 0)
		grpc_call_note_deadline(call, clock_mono_ms() + timeout_ms);
	*out = call;
	grpc_conn_kick(&c->conn);
	return 0;
}

int grpc_client_fd(const struct grpc_client *c)
{
	return c->env.epfd;
}

int grpc_client_timeout(const struct grpc_client *c)
{
	int64_t left;

	if (c->env.next_deadline == INT64_MAX)
		return -1;
	left = c->env.next_deadline - clock_mono_ms();
	return left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

int grpc_client_run(struct grpc_client *c, int timeout_ms)
{
	struct epoll_event ev[4];
	int t = grpc_client_timeout(c), n;
	int64_t now;

	if (!c->connected)
		return ERR_STATE;
	if (t < 0 || (timeout_ms >= 0 && timeout_ms < t))
		t = timeout_ms;
	n = epoll_wait(c->env.epfd, ev, ARRAY_LEN(ev), t);
	if (n < 0 && errno != EINTR)
		return -errno;
	for (int i = 0; i < n && c->connected; i++) {
		if (ev[i].data.u64 == TAG_CONN) {
			if (grpc_conn_io(&c->conn, ev[i].events))
				c->connected = 0;
		} else if (ev[i].data.u64 == TAG_DEV && (ev[i].events & (EPOLLHUP | EPOLLERR))) {
			/* the host side hung up (agenticd went away): the connection is lost */
			grpc_conn_teardown(&c->conn, GRPC_UNAVAILABLE);
			c->connected = 0;
		}
	}
	now = clock_mono_ms();
	if (c->connected && now >= c->env.next_deadline) {
		c->env.next_deadline = INT64_MAX;
		if (grpc_conn_expire(&c->conn, now))
			c->connected = 0;
	}
	/* what the connection wrote this round goes out now; what the device brought is read
	 * from the pair at the next round */
	if (c->connected && c->is_dev && relay_pump(c) < 0) {
		grpc_conn_teardown(&c->conn, GRPC_UNAVAILABLE);
		c->connected = 0;
	}
	if (!c->connected)
		relay_close(c);
	return 0;
}

void grpc_client_close(struct grpc_client *c)
{
	if (c->connected)
		grpc_conn_teardown(&c->conn, GRPC_CANCELLED);
	c->connected = 0;
	relay_close(c);
	if (c->env.epfd >= 0)
		close(c->env.epfd);
	c->env.epfd = -1;
}
