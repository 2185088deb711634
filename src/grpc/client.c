/* client.c: the gRPC client: one connection to a Unix socket, redialled when lost, calls with
 * metadata and deadlines, on its own epoll fd (stable across reconnects). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

struct grpc_client {
	struct grpc_client_config cfg;
	char path[108];
	struct grpc_env env;
	struct grpc_conn conn;
	int connected;
};

static int config_ok(const struct grpc_client_config *cfg)
{
	return cfg->path && strlen(cfg->path) < 108 && cfg->max_message_bytes >= GRPC_SMALL_MESSAGE &&
	       cfg->max_message_bytes <= LIMIT_ALLOC_MAX_BYTES / 4 && cfg->small_buffers >= 1;
}

size_t grpc_client_storage_bytes(const struct grpc_client_config *cfg)
{
	if (!config_ok(cfg))
		return 0;
	return sizeof(struct grpc_client) + 64 +
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

int grpc_client_connect(struct grpc_client *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, r;

	if (c->connected)
		return 0;
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
	grpc_conn_start(&c->conn, &c->env, H2_CLIENT, fd, H2_MAX_STREAMS, 0);
	if (c->conn.closing) {
		grpc_conn_teardown(&c->conn, GRPC_UNAVAILABLE);
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
	for (int i = 0; i < n && c->connected; i++)
		if (grpc_conn_io(&c->conn, ev[i].events))
			c->connected = 0;
	now = clock_mono_ms();
	if (c->connected && now >= c->env.next_deadline) {
		c->env.next_deadline = INT64_MAX;
		if (grpc_conn_expire(&c->conn, now))
			c->connected = 0;
	}
	return 0;
}

void grpc_client_close(struct grpc_client *c)
{
	if (c->connected)
		grpc_conn_teardown(&c->conn, GRPC_CANCELLED);
	c->connected = 0;
	if (c->env.epfd >= 0)
		close(c->env.epfd);
	c->env.epfd = -1;
}
