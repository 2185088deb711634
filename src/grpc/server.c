/* server.c: the gRPC server: listeners, a fixed connection pool with SO_PEERCRED taken at
 * accept, admission (reserved slots for known peers, a small guest allowance for the rest),
 * dispatch on :path, grpc.health.v1.Health/Check, deadlines and preface timeouts, all on one
 * epoll fd that an outer loop can watch. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <fcntl.h>

#include "health.pb-c.h"
#include "grpc/grpc_internal.h"

#define TAG_LISTENER (1ull << 62)

struct grpc_listener {
	int fd;
	const struct grpc_method *methods;
	size_t n;
};

/* A line about refused or evicted connections, logged at most once a second. */
struct lognote {
	int64_t at;
	uint32_t held;  /* lines not logged since the last one */
};

struct grpc_server {
	struct grpc_server_config cfg;
	struct grpc_env env;
	struct grpc_env guest_env;  /* guests' own buffers and arena (admission only) */
	struct grpc_env own_env;    /* GRPC_OWN_POOL calls' buffers (own_buffers > 0) */
	struct pool conns;
	struct grpc_conn *slots;    /* max_connections pooled, then reserved_connections */
	uint32_t nslots;
	struct grpc_listener listeners[GRPC_MAX_LISTENERS];
	uint32_t nlisteners;
	uint64_t accepted, evicted, refused;
	uint32_t reserved_used;
	int64_t next_sweep;
	struct lognote refused_note, evicted_note;
};

/* 1 when the line may be logged now; *held is then how many were not since the last one. */
static int lognote_due(struct lognote *n, uint32_t *held)
{
	int64_t now = clock_mono_ms();

	if (n->at && now - n->at < 1000) {
		n->held++;
		return 0;
	}
	n->at = now;
	*held = n->held;
	n->held = 0;
	return 1;
}

/* ---- grpc.health.v1 ---- */

static void health_check(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Grpc__Health__V1__HealthCheckRequest *req = (const void *)msg;
	Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
	const struct grpc_listener *l = call->conn->listener;
	size_t len = strlen(req->service);
	int known = len == 0;

	for (size_t i = 0; i < l->n && !known; i++) {
		const char *p = l->methods[i].path;

		known = p[0] == '/' && strncmp(p + 1, req->service, len) == 0 && p[1 + len] == '/';
	}
	if (!known) {
		grpc_call_finish(call, GRPC_NOT_FOUND, "unknown service", NULL, 0);
		return;
	}
	resp.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
	call->conn->idle_from = clock_mono_ms();
	if (grpc_call_send(call, &resp.base) == 0)
		grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);
	else
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "no message buffer free", NULL, 0);
}

static const struct grpc_method health_method = {
	.path = "/grpc.health.v1.Health/Check",
	.request = &grpc__health__v1__health_check_request__descriptor,
	.response = &grpc__health__v1__health_check_response__descriptor,
	.handler = { .on_message = health_check },
};

/* Calls answered before any handler is involved (unknown method, bad request). */
static const struct grpc_method no_method = { .path = "" };

/* ---- dispatch ---- */

static const struct grpc_method *find_method(const struct grpc_listener *l, const char *path,
					     size_t len)
{
	for (size_t i = 0; i < l->n; i++)
		if (strlen(l->methods[i].path) == len && memcmp(l->methods[i].path, path, len) == 0)
			return &l->methods[i];
	if (len == strlen(health_method.path) && memcmp(health_method.path, path, len) == 0)
		return &health_method;
	return NULL;
}

static void refuse(struct grpc_call *call, int status, const char *message)
{
	call->method = &no_method;
	grpc_call_finish(call, status, message, NULL, 0);
}

/* A GRPC_OWN_POOL call takes its own buffers, and on a reserved connection a stream of its
 * own: when either is taken this call alone is refused (its status message from that pool
 * too). Returns 0, or -1 when the call was refused. */
static int own_pool_take(struct grpc_conn *c, struct grpc_call *call)
{
	call->bufs = c->env->own;
	if (c->reserved && c->nown >= c->env->own_streams) {
		refuse(call, GRPC_RESOURCE_EXHAUSTED, "no stream free for this method");
		return -1;
	}
	if (call->bufs->pools[GRPC_BUF_SMALL].pool.cap -
	    call->bufs->pools[GRPC_BUF_SMALL].pool.used < 2) {
		refuse(call, GRPC_RESOURCE_EXHAUSTED, "no message buffer free for this method");
		return -1;
	}
	call->own = 1;
	c->nown++;
	return 0;
}

/* A new stream's request headers: the env's dispatch hook. */
static void dispatch(struct grpc_conn *c, struct grpc_call *call, const struct h2_field *f,
		     size_t n, unsigned flags)
{
	struct h2_stream *s = call->stream;
	const struct grpc_method *m;
	const char *path, *v;
	size_t path_len, len;
	int64_t ms;
	char why[160];

	call->md = f;
	call->nmd = n;
	if (flags & H2_TOO_LARGE) {
		refuse(call, GRPC_RESOURCE_EXHAUSTED, "request headers over the limit");
		goto out;
	}
	v = grpc_call_md(call, "content-type", &len);
	if (!v || len < 16 || memcmp(v, "application/grpc", 16) != 0 ||
	    (len > 16 && v[16] != '+' && v[16] != ';')) {
		static const struct h2_field unsupported[] = { { ":status", "415", 7, 3 } };

		call->method = &no_method;
		if (h2_stream_send_headers(&c->h2, s, unsupported, 1, 1) < 0 || !s->remote_closed)
			h2_stream_reset(&c->h2, s, H2_NO_ERROR);
		goto out;
	}
	path = grpc_call_md(call, ":path", &path_len);
	v = grpc_call_md(call, ":method", &len);
	m = path ? find_method(c->listener, path, path_len) : NULL;
	if (!m || !v || len != 4 || memcmp(v, "POST", 4) != 0) {
		snprintf(why, sizeof(why), "unknown method %.*s", (int)(path_len > 120 ? 120 : path_len),
			 path ? path : "");
		refuse(call, GRPC_UNIMPLEMENTED, why);
		goto out;
	}
	v = grpc_call_md(call, "grpc-timeout", &len);
	if (v) {
		if (grpc_timeout_parse(v, len, &ms) < 0) {
			refuse(call, GRPC_INTERNAL, "malformed grpc-timeout");
			goto out;
		}
		grpc_call_note_deadline(call, clock_mono_ms() + ms);
	}
	call->method = m;
	if (m->flags & GRPC_OWN_POOL && c->env->own) {
		if (own_pool_take(c, call) < 0)
			goto out;
	} else if (c->reserved && c->other_streams && c->ncalls - c->nown > c->other_streams) {
		/* the streams beyond reserved_streams are the own-pool methods' alone; no status
		 * message, so the refusal holds no shared buffer */
		refuse(call, GRPC_RESOURCE_EXHAUSTED, NULL);
		goto out;
	}
	call->started = 1;
	/* a guest gets Health/Check and nothing else: the handler refuses the call, then the
	 * connection ends once the answer is out */
	if (c->guest && m != &health_method)
		c->closing = 1;
	if (m->handler.on_start)
		m->handler.on_start(call);
	if (call->stream == s && (flags & H2_END_STREAM)) {
		call->md = NULL;
		call->nmd = 0;
		grpc_call_remote_done(call);
	}
out:
	if (call->stream == s) {
		call->md = NULL;
		call->nmd = 0;
	}
}

/* ---- set-up ---- */

static int config_ok(const struct grpc_server_config *cfg)
{
	return cfg->max_connections >= 1 && cfg->max_connections <= 1000000 &&
	       cfg->reserved_connections <= 1000000 && (cfg->admit || !cfg->reserved_connections) &&
	       cfg->reserved_streams <= H2_MAX_STREAMS &&
	       cfg->own_streams <= H2_MAX_STREAMS && cfg->own_buffers <= 1000000 &&
	       (cfg->reserved_streams ? cfg->reserved_streams : cfg->max_streams_per_connection) +
	       cfg->own_streams <= H2_MAX_STREAMS &&
	       cfg->reserved_message_bytes <= cfg->max_message_bytes &&
	       cfg->max_streams_per_connection >= 1 &&
	       cfg->max_streams_per_connection <= H2_MAX_STREAMS &&
	       cfg->max_message_bytes >= GRPC_SMALL_MESSAGE &&
	       cfg->max_message_bytes <= LIMIT_ALLOC_MAX_BYTES / 4 && cfg->small_buffers >= 1;
}

/* Guests: a small and a meta buffer for what they receive and one each for what they send. */
static uint32_t guest_buffers(const struct grpc_server_config *cfg)
{
	return cfg->admit ? 2 * cfg->max_connections : 0;
}

size_t grpc_server_storage_bytes(const struct grpc_server_config *cfg)
{
	size_t n;

	if (!config_ok(cfg))
		return 0;
	n = sizeof(struct grpc_server) + 64 +
	    ((size_t)cfg->max_connections + cfg->reserved_connections) * sizeof(struct grpc_conn) +
	    (size_t)cfg->max_connections * sizeof(uint32_t) + 128 +
	    grpc_env_bytes(cfg->max_message_bytes, cfg->small_buffers, cfg->large_buffers);
	if (cfg->admit)
		n += grpc_env_bytes(GRPC_SMALL_MESSAGE, guest_buffers(cfg), 0);
	if (cfg->own_buffers)
		n += grpc_env_bytes(GRPC_SMALL_MESSAGE, cfg->own_buffers, 0);
	return n;
}

int grpc_server_init(const struct grpc_server_config *cfg, void *storage, size_t len,
		     struct grpc_server **out)
{
	struct arena carve;
	struct grpc_server *s;
	uint32_t *links;
	int r;

	if (!config_ok(cfg) || len < grpc_server_storage_bytes(cfg))
		return ERR_LIMIT;
	/* Touch every page now: the budget is resident from the start and stays flat. */
	memset(storage, 0, len);
	arena_init(&carve, storage, len);
	s = arena_alloc(&carve, sizeof(*s), 64);
	s->nslots = cfg->max_connections + cfg->reserved_connections;
	s->slots = arena_alloc(&carve, (size_t)s->nslots * sizeof(struct grpc_conn), 64);
	links = arena_alloc(&carve, cfg->max_connections * sizeof(uint32_t), 4);
	if (!s->slots || !links)
		return ERR_LIMIT;
	s->cfg = *cfg;
	if (!s->cfg.preface_timeout_ms)
		s->cfg.preface_timeout_ms = GRPC_PREFACE_TIMEOUT_MS;
	if (!s->cfg.guest_per_uid)
		s->cfg.guest_per_uid = cfg->max_connections;
	if (!s->cfg.guest_idle_ms)
		s->cfg.guest_idle_ms = s->cfg.preface_timeout_ms;
	pool_init(&s->conns, s->slots, links, sizeof(struct grpc_conn), cfg->max_connections);
	r = grpc_env_setup(&s->env, &carve, cfg->max_message_bytes, cfg->small_buffers,
			   cfg->large_buffers);
	if (r == 0 && cfg->admit)
		r = grpc_env_setup(&s->guest_env, &carve, GRPC_SMALL_MESSAGE, guest_buffers(cfg), 0);
	if (r == 0 && cfg->own_buffers) {
		r = grpc_env_setup(&s->own_env, &carve, GRPC_SMALL_MESSAGE, cfg->own_buffers, 0);
		s->env.own = &s->own_env;
		s->env.own_streams = cfg->own_streams;
	}
	if (r < 0)
		return r;
	s->env.dispatch = dispatch;
	s->guest_env.dispatch = dispatch;
	s->env.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->env.epfd < 0)
		return -errno;
	s->guest_env.epfd = s->env.epfd;
	s->guest_env.next_deadline = INT64_MAX;
	s->next_sweep = INT64_MAX;
	log_info("grpc server ready", "max_connections=%u reserved_connections=%u conn_bytes=%zu "
		 "budget_bytes=%zu max_message_bytes=%u max_streams=%u small_buffers=%u "
		 "large_buffers=%u guest_buffers=%u own_buffers=%u own_streams=%u",
		 cfg->max_connections,
		 cfg->reserved_connections, sizeof(struct grpc_conn),
		 grpc_server_storage_bytes(cfg), cfg->max_message_bytes,
		 cfg->max_streams_per_connection, cfg->small_buffers, cfg->large_buffers,
		 guest_buffers(cfg), cfg->own_buffers, cfg->own_streams);
	*out = s;
	return 0;
}

int grpc_server_add_listener(struct grpc_server *s, int fd, const struct grpc_method *methods,
			     size_t n)
{
	struct grpc_listener *l;
	struct epoll_event ev = { .events = EPOLLIN };
	int flags = fcntl(fd, F_GETFL);

	if (s->nlisteners == GRPC_MAX_LISTENERS)
		return ERR_LIMIT;
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	l = &s->listeners[s->nlisteners];
	ev.data.u64 = TAG_LISTENER | s->nlisteners;
	if (epoll_ctl(s->env.epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
		return -errno;
	l->fd = fd;
	l->methods = methods;
	l->n = n;
	s->nlisteners++;
	return 0;
}

int grpc_server_listen_unix(struct grpc_server *s, const char *path, mode_t mode,
			    const struct grpc_method *methods, size_t n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	/* Only a stale socket is replaced, never another kind of file. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	(void)fd_refuse_rights(fd); /* where the kernel can: see base.h */
	/* The socket is created with its mode: umask, not a chmod after the fact. */
	old = umask(~mode & 0777);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r != 0 || listen(fd, 1024) != 0) {
		r = -errno;
		close(fd);
		return r;
	}
	r = grpc_server_add_listener(s, fd, methods, n);
	if (r < 0)
		close(fd);
	return r;
}

/* ---- connections ---- */

static int is_reserved(const struct grpc_server *s, const struct grpc_conn *c)
{
	return c >= s->slots + s->cfg.max_connections;
}

/* Gives back the slot of a connection already torn down. */
static void conn_free(struct grpc_server *s, struct grpc_conn *c)
{
	c->env = NULL;
	if (is_reserved(s, c))
		s->reserved_used--;
	else
		pool_put(&s->conns, c);
}

static void conn_release(struct grpc_server *s, struct grpc_conn *c, int status)
{
	grpc_conn_teardown(c, status);
	conn_free(s, c);
}

/* The oldest pooled connection that has not finished its preface, or NULL. */
static struct grpc_conn *oldest_in_preface(struct grpc_server *s)
{
	struct grpc_conn *best = NULL;

	for (uint32_t i = 0; i < s->cfg.max_connections; i++) {
		struct grpc_conn *c = &s->slots[i];

		if (c->env && !c->h2.got_settings && (!best || c->born < best->born))
			best = c;
	}
	return best;
}

/* The oldest guest (of uid, or of anyone when all is set), and how many uid has. */
static struct grpc_conn *oldest_guest(struct grpc_server *s, uid_t uid, int all, uint32_t *n)
{
	struct grpc_conn *best = NULL;

	*n = 0;
	for (uint32_t i = 0; i < s->cfg.max_connections; i++) {
		struct grpc_conn *c = &s->slots[i];

		if (!c->env || (!all && c->peer.uid != uid))
			continue;
		(*n)++;
		if (!best || c->born < best->born)
			best = c;
	}
	return best;
}

static void note_evicted(struct grpc_server *s, const char *reason, uid_t uid)
{
	uint32_t held;

	s->evicted++;
	if (lognote_due(&s->evicted_note, &held))
		log_info("grpc connection evicted", "reason=%s uid=%u not_logged=%u", reason,
			 (unsigned)uid, held);
}

static void note_refused(struct grpc_server *s, uid_t uid)
{
	uint32_t held;

	s->refused++;
	if (lognote_due(&s->refused_note, &held))
		log_warn("grpc connection refused", "reason=connection_limit limit=%u uid=%u "
			 "not_logged=%u", s->cfg.max_connections, (unsigned)uid, held);
}

/* A guest slot for a peer of uid: its own oldest goes when it has its share, else the
 * oldest guest when all are taken. */
static struct grpc_conn *guest_slot(struct grpc_server *s, uid_t uid)
{
	uint32_t n;
	struct grpc_conn *victim = oldest_guest(s, uid, 0, &n);

	if (n >= s->cfg.guest_per_uid) {
		conn_release(s, victim, GRPC_CANCELLED);
		note_evicted(s, "guest_per_uid", uid);
	} else if (s->conns.used == s->cfg.max_connections) {
		victim = oldest_guest(s, uid, 1, &n);
		if (victim) {
			note_evicted(s, "guest_limit", victim->peer.uid);
			conn_release(s, victim, GRPC_CANCELLED);
		}
	}
	return pool_get(&s->conns);
}

/* Preface and guest idle timeouts are checked this often: a tenth of the shorter, at most a
 * second. */
static int64_t sweep_interval(const struct grpc_server *s)
{
	uint32_t t = s->cfg.preface_timeout_ms < s->cfg.guest_idle_ms ? s->cfg.preface_timeout_ms
								       : s->cfg.guest_idle_ms;

	t /= 10;

	return t < 1 ? 1 : t > 1000 ? 1000 : t;
}

/* A connection of listener l on fd, peer cred, taken from the pool as c: starts its HTTP/2
 * engine and handles the readiness already known (events). The connection owns fd from here,
 * whatever becomes of it. */
static void conn_begin(struct grpc_server *s, struct grpc_conn *c, struct grpc_listener *l,
		       int fd, const struct grpc_peer *peer, uint32_t events)
{
	int guest = s->cfg.admit && peer->slot < 0;
	uint32_t streams = guest ? 1 : is_reserved(s, c) && s->cfg.reserved_streams ?
			   s->cfg.reserved_streams : s->cfg.max_streams_per_connection;
	uint32_t own = !guest && is_reserved(s, c) && s->cfg.own_buffers ? s->cfg.own_streams : 0;

	s->accepted++;
	c->listener = l;
	c->peer = *peer;
	grpc_conn_start(c, guest ? &s->guest_env : &s->env, H2_SERVER, fd, streams + own,
			(uint64_t)(c - s->slots));
	c->guest = (uint8_t)guest;
	c->reserved = (uint8_t)(!guest && is_reserved(s, c));
	c->other_streams = own ? streams : 0;
	if (!guest && is_reserved(s, c))
		c->max_rx = s->cfg.reserved_message_bytes;
	c->idle_from = c->born;
	if (c->closing) {
		conn_release(s, c, GRPC_CANCELLED);
		return;
	}
	if (s->next_sweep == INT64_MAX)
		s->next_sweep = c->born + sweep_interval(s);
	if (grpc_conn_io(c, events))
		conn_free(s, c);
}

/* Settles who the peer of an accepted connection is, and finds it a slot (NULL: none). */
static struct grpc_conn *admit(struct grpc_server *s, int fd, struct grpc_peer *peer)
{
	struct grpc_conn *c;
	int slot;

	peer->slot = -1;
	peer->tag = 0;
	if (!s->cfg.admit) {
		c = pool_get(&s->conns);
		if (!c) {
			struct grpc_conn *victim = oldest_in_preface(s);

			if (victim) {
				conn_release(s, victim, GRPC_CANCELLED);
				note_evicted(s, "preface", victim->peer.uid);
				c = pool_get(&s->conns);
			}
		}
		return c;
	}
	slot = s->cfg.admit(s->cfg.admit_ctx, fd, peer);
	if (slot < 0 || (uint32_t)slot >= s->cfg.reserved_connections) {
		peer->slot = -1;
		return guest_slot(s, peer->uid);
	}
	peer->slot = slot;
	c = &s->slots[s->cfg.max_connections + (uint32_t)slot];
	if (c->env)
		conn_release(s, c, GRPC_CANCELLED);
	s->reserved_used++;
	return c;
}
static void accept_all(struct grpc_server *s, struct grpc_listener *l)
{
	for (;;) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		struct grpc_peer peer;
		struct grpc_conn *c;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warn("grpc accept failed", "errno=%d", errno);
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
			close(fd);
			continue;
		}
		peer = (struct grpc_peer){ .pid = cred.pid, .uid = cred.uid, .gid = cred.gid };
		c = admit(s, fd, &peer);
		if (!c) {
			note_refused(s, cred.uid);
			close(fd);
			continue;
		}
		conn_begin(s, c, l, fd, &peer, 0);
	}
}

int grpc_server_add_conn(struct grpc_server *s, int fd, const struct grpc_method *methods,
			 size_t n)
{
	struct grpc_listener *l = NULL;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	struct grpc_conn *c;
	int flags = fcntl(fd, F_GETFL);

	/* adopted connections share a listener slot with no socket of its own */
	for (uint32_t i = 0; i < s->nlisteners && !l; i++)
		if (s->listeners[i].fd < 0 && s->listeners[i].methods == methods)
			l = &s->listeners[i];
	if (!l) {
		if (s->nlisteners == GRPC_MAX_LISTENERS)
			return ERR_LIMIT;
		l = &s->listeners[s->nlisteners++];
		l->fd = -1;
		l->methods = methods;
		l->n = n;
	}
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0)
		return -errno;
	c = pool_get(&s->conns);
	if (!c) {
		note_refused(s, cred.uid);
		return ERR_LIMIT;
	}
	/* the caller saw bytes already waiting (the preface it peeked at) */
	conn_begin(s, c, l, fd, &(struct grpc_peer){ .pid = cred.pid, .uid = cred.uid,
		   .gid = cred.gid, .slot = -1 }, EPOLLIN);
	return 0;
}

int grpc_server_add_reserved(struct grpc_server *s, int fd, const struct grpc_method *methods,
			     size_t n, uint32_t slot, const struct grpc_peer *peer)
{
	struct grpc_listener *l = NULL;
	struct grpc_peer p = *peer;
	struct grpc_conn *c;
	int flags = fcntl(fd, F_GETFL);

	if (slot >= s->cfg.reserved_connections) {
		close(fd);
		return ERR_LIMIT;
	}
	for (uint32_t i = 0; i < s->nlisteners && !l; i++)
		if (s->listeners[i].fd < 0 && s->listeners[i].methods == methods)
			l = &s->listeners[i];
	if (!l) {
		if (s->nlisteners == GRPC_MAX_LISTENERS) {
			close(fd);
			return ERR_LIMIT;
		}
		l = &s->listeners[s->nlisteners++];
		l->fd = -1;
		l->methods = methods;
		l->n = n;
	}
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	c = &s->slots[s->cfg.max_connections + slot];
	if (c->env)
		conn_release(s, c, GRPC_CANCELLED);
	s->reserved_used++;
	p.slot = (int32_t)slot;
	conn_begin(s, c, l, fd, &p, 0);
	return 0;
}

bool grpc_server_reserved_busy(const struct grpc_server *s, uint32_t slot)
{
	return slot < s->cfg.reserved_connections &&
	       s->slots[s->cfg.max_connections + slot].env != NULL;
}

void grpc_server_drop_reserved(struct grpc_server *s, uint32_t slot)
{
	struct grpc_conn *c;

	if (slot >= s->cfg.reserved_connections)
		return;
	c = &s->slots[s->cfg.max_connections + slot];
	if (c->env)
		conn_release(s, c, GRPC_UNAVAILABLE);
}

static void sweep(struct grpc_server *s, int64_t now)
{
	int any = 0;

	s->env.next_deadline = INT64_MAX;
	s->guest_env.next_deadline = INT64_MAX;
	for (uint32_t i = 0; i < s->nslots; i++) {
		struct grpc_conn *c = &s->slots[i];

		if (!c->env)
			continue;
		if (!c->h2.got_settings && now - c->born >= s->cfg.preface_timeout_ms) {
			note_evicted(s, "preface_timeout", c->peer.uid);
			conn_release(s, c, GRPC_CANCELLED);
			continue;
		}
		if (c->guest && now - c->idle_from >= s->cfg.guest_idle_ms) {
			note_evicted(s, "guest_idle", c->peer.uid);
			conn_release(s, c, GRPC_CANCELLED);
			continue;
		}
		any |= !c->h2.got_settings || c->guest;
		if (c->ncalls && grpc_conn_expire(c, now))
			conn_free(s, c);
	}
	s->next_sweep = any ? now + sweep_interval(s) : INT64_MAX;
}


int grpc_server_fd(const struct grpc_server *s)
{
	return s->env.epfd;
}

int grpc_server_timeout(const struct grpc_server *s)
{
	int64_t next = s->env.next_deadline < s->next_sweep ? s->env.next_deadline : s->next_sweep;
	int64_t left;

	if (s->guest_env.next_deadline < next)
		next = s->guest_env.next_deadline;
	if (next == INT64_MAX)
		return -1;
	left = next - clock_mono_ms();
	return left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

int grpc_server_run(struct grpc_server *s, int timeout_ms)
{
	struct epoll_event ev[64];
	int t = grpc_server_timeout(s), n;
	int64_t now;

	if (t < 0 || (timeout_ms >= 0 && timeout_ms < t))
		t = timeout_ms;
	n = epoll_wait(s->env.epfd, ev, ARRAY_LEN(ev), t);
	if (n < 0 && errno != EINTR)
		return -errno;
	for (int i = 0; i < n; i++) {
		uint64_t tag = ev[i].data.u64;
		struct grpc_conn *c;

		if (tag & TAG_LISTENER) {
			accept_all(s, &s->listeners[tag & 0xff]);
			continue;
		}
		c = &s->slots[tag];
		if (c->env && grpc_conn_io(c, ev[i].events))
			conn_free(s, c);
	}
	now = clock_mono_ms();
	if (now >= s->env.next_deadline || now >= s->guest_env.next_deadline ||
	    now >= s->next_sweep)
		sweep(s, now);
	return 0;
}

void grpc_server_stats(const struct grpc_server *s, struct grpc_server_stats *out)
{
	out->connections = s->conns.used + s->reserved_used;
	out->calls = s->env.calls + s->guest_env.calls;
	out->small_free = s->env.pools[GRPC_BUF_SMALL].pool.cap -
			  s->env.pools[GRPC_BUF_SMALL].pool.used;
	out->large_free = s->env.pools[GRPC_BUF_LARGE].pool.cap -
			  s->env.pools[GRPC_BUF_LARGE].pool.used;
	out->own_free = s->cfg.own_buffers ? s->own_env.pools[GRPC_BUF_SMALL].pool.cap -
					     s->own_env.pools[GRPC_BUF_SMALL].pool.used : 0;
	out->accepted = s->accepted;
	out->evicted = s->evicted;
	out->refused = s->refused;
}

void grpc_server_close(struct grpc_server *s)
{
	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->slots[i].env)
			conn_release(s, &s->slots[i], GRPC_UNAVAILABLE);
	for (uint32_t i = 0; i < s->nlisteners; i++)
		if (s->listeners[i].fd >= 0)
			close(s->listeners[i].fd);
	s->nlisteners = 0;
	close(s->env.epfd);
	s->env.epfd = -1;
}
