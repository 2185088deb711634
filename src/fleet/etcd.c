/* etcd.c: the fleet worker's etcd client (etcd.h): the member's TCP connection under TLS,
 * carried to the gRPC client through a socketpair, and the few calls the fleet makes. */
#include "fleet/etcd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "etcd.pb-c.h"
#include "grpc/grpc.h"
#include "tls/tls.h"

/* The largest answer: a range of ETCD_RANGE_MAX pairs of the largest key and value. */
#define MESSAGE_BYTES (1u << 20)
_Static_assert(ETCD_RANGE_MAX * (ETCD_KEY_BYTES + ETCD_VALUE_BYTES + 64) <= MESSAGE_BYTES,
	       "a full range answer fits one message");
/* Bytes carried at a time each way between the socketpair and TLS. */
#define CARRY_BYTES 16384

static struct {
	struct sockaddr_storage addr[ETCD_ENDPOINTS_MAX];
	socklen_t addr_len[ETCD_ENDPOINTS_MAX];
	char text[ETCD_ENDPOINTS_MAX][64];
	size_t n, cur;
	const char *server_name;
	int timeout_ms;
	struct grpc_client *client;
	int tcp, pair;       /* the member's socket; our end of the gRPC client's socketpair */
	int handed;          /* the client's end, until the dial hook takes it */
	uint8_t up[CARRY_BYTES], down[CARRY_BYTES];
	size_t up_len, up_off, down_len, down_off;
	const char *error;
} e; /* zero, in .bss: etcd_init sets the descriptors to -1 */

static int64_t i64_max(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* A call in flight: what its answer is copied into, and how it ended. */
struct pending {
	void (*take)(const ProtobufCMessage *msg, void *out);
	void *out;
	bool done, answered;
	int status;
};

const char *etcd_endpoint(void)
{
	return e.n ? e.text[e.cur] : "";
}

const char *etcd_error(void)
{
	return e.error;
}

int etcd_endpoint_parse(const char *s, size_t len, struct sockaddr_storage *ss, socklen_t *sl)
{
	char text[64], host[64];
	const char *colon;
	unsigned long port;
	char *end;

	if (len > 8 && memcmp(s, "https://", 8) == 0) {
		s += 8;
		len -= 8;
	}
	if (len == 0 || len >= sizeof(text))
		return ERR_PARSE;
	memcpy(text, s, len);
	text[len] = '\0';
	colon = strrchr(text, ':');
	if (!colon || colon == text)
		return ERR_PARSE;
	port = strtoul(colon + 1, &end, 10);
	if (*end || colon[1] == '\0' || port == 0 || port > 65535)
		return ERR_PARSE;
	snprintf(host, sizeof(host), "%.*s", (int)(colon - text), text);
	memset(ss, 0, sizeof(*ss));
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		host[strlen(host) - 1] = '\0';
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		*sl = sizeof(*a);
		return inet_pton(AF_INET6, host + 1, &a->sin6_addr) == 1 ? 0 : ERR_PARSE;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	*sl = sizeof(*a);
	return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : ERR_PARSE;
}

int etcd_endpoints_parse(const char *list, struct sockaddr_storage *ss, socklen_t *sl,
			 char (*text)[64], size_t max)
{
	size_t n = 0, len;

	while (*list) {
		const char *comma = strchr(list, ',');

		len = comma ? (size_t)(comma - list) : strlen(list);
		if (n == max || etcd_endpoint_parse(list, len, &ss[n], &sl[n]) < 0)
			return ERR_PARSE;
		snprintf(text[n], 64, "%.*s", (int)len, list);
		n++;
		list += len + (comma ? 1 : 0);
	}
	return n ? (int)n : ERR_PARSE;
}

static int hand_over(void *ctx)
{
	int fd = e.handed;

	(void)ctx;
	e.handed = -1;
	return fd >= 0 ? fd : -ENOTCONN;
}

int etcd_init(const struct etcd_config *cfg)
{
	struct grpc_client_config gc = {
		.path = "etcd",
		.dial = hand_over,
		.max_message_bytes = MESSAGE_BYTES,
		.small_buffers = 4,
		.large_buffers = 2,
		.zeroed = true,
	};
	size_t len;
	void *mem;
	int r;

	e.tcp = e.pair = e.handed = -1;
	e.error = "none";
	r = etcd_endpoints_parse(cfg->endpoints, e.addr, e.addr_len, e.text, ETCD_ENDPOINTS_MAX);
	if (r < 0) {
		e.error = "bad_endpoint";
		return ERR_PARSE;
	}
	e.n = (size_t)r;
	e.server_name = cfg->server_name;
	tls_alpn_set("h2");
	e.timeout_ms = cfg->timeout_ms;
	if ((r = tls_load_anchors(cfg->ca_file)) < 0 ||
	    (r = tls_load_client(cfg->cert_file, cfg->key_file)) < 0) {
		e.error = tls_error_word();
		return r;
	}
	len = grpc_client_storage_bytes(&gc);
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		e.error = "no_memory";
		return -ENOMEM;
	}
	r = grpc_client_init(&gc, mem, len, &e.client);
	if (r < 0)
		e.error = "client_init";
	return r;
}

static void fd_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void etcd_close(void)
{
	int64_t until = clock_mono_ms() + 1000;

	if (e.tcp >= 0)
		tls_close();
	fd_close(&e.tcp);
	fd_close(&e.pair);
	fd_close(&e.handed);
	tls_wipe();
	e.up_len = e.up_off = e.down_len = e.down_off = 0;
	/* the client sees its end's EOF and ends what was in flight with UNAVAILABLE */
	while (e.client && grpc_client_connected(e.client) && clock_mono_ms() < until)
		grpc_client_run(e.client, 10);
}

/* TCP to endpoint i within the deadline: the socket, or -errno. */
static int tcp_dial(size_t i, int64_t deadline)
{
	int fd = socket(e.addr[i].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1, err = 0;
	socklen_t elen = sizeof(err);
	struct pollfd p;

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&e.addr[i], e.addr_len[i]) < 0 && errno != EINPROGRESS) {
		err = errno;
		close(fd);
		return -err;
	}
	p = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (poll(&p, 1, (int)i64_max(deadline - clock_mono_ms(), 0)) != 1) {
		close(fd);
		return -ETIMEDOUT;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err) {
		close(fd);
		return -(err ? err : EIO);
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* A member reached and under TLS, with the socketpair ready for the client: 0, or the last
 * endpoint's failure after each was tried once. */
static int member_connect(void)
{
	int r = -ECONNREFUSED;

	if (e.tcp >= 0)
		return 0;
	for (size_t tried = 0; tried < e.n; tried++, e.cur = (e.cur + 1) % e.n) {
		int64_t deadline = clock_mono_ms() + e.timeout_ms;
		int sv[2];

		r = tcp_dial(e.cur, deadline);
		if (r < 0) {
			e.error = r == -ETIMEDOUT ? "connect_timeout" : "connect_refused";
			continue;
		}
		e.tcp = r;
		if (tls_handshake(e.tcp, e.server_name, (int)i64_max(deadline - clock_mono_ms(), 1)) < 0) {
			e.error = tls_error_word();
			etcd_close();
			r = -ECONNABORTED;
			continue;
		}
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
			r = -errno;
			etcd_close();
			return r;
		}
		e.handed = sv[0];
		e.pair = sv[1];
		return 0;
	}
	return r;
}

/* Moves what is ready between the socketpair and TLS, both ways, until nothing moves: 0, or -1
 * when either side is gone. */
static int carry(void)
{
	for (int rounds = 0; rounds < 64; rounds++) {
		bool moved = false;
		long n;

		if (tls_pump(0) < 0)
			return -1;
		if (e.up_len == 0) {
			n = recv(e.pair, e.up, sizeof(e.up), MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				return -1;
			if (n > 0) {
				e.up_len = (size_t)n;
				e.up_off = 0;
			}
		}
		if (e.up_off < e.up_len) {
			size_t k = tls_send(e.up + e.up_off, e.up_len - e.up_off);

			e.up_off += k;
			if (e.up_off == e.up_len)
				e.up_len = e.up_off = 0;
			tls_flush();
			moved |= k > 0;
		}
		if (e.down_len == 0) {
			n = tls_recv(e.down, sizeof(e.down));
			if (n == 0 || n == -1)
				return -1;
			if (n > 0) {
				e.down_len = (size_t)n;
				e.down_off = 0;
			}
		}
		if (e.down_off < e.down_len) {
			n = send(e.pair, e.down + e.down_off, e.down_len - e.down_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return -1;
			if (n > 0) {
				e.down_off += (size_t)n;
				if (e.down_off == e.down_len)
					e.down_len = e.down_off = 0;
				moved = true;
			}
		}
		if (tls_pump(0) < 0)
			return -1;
		if (!moved)
			return 0;
	}
	return 0;
}

/* Runs the connection until p is done or the deadline passes. */
static void wait_done(struct pending *p, int64_t deadline)
{
	while (!p->done) {
		int64_t left = deadline - clock_mono_ms();
		struct pollfd fds[3] = {
			{ .fd = grpc_client_fd(e.client), .events = POLLIN },
			{ .fd = e.tcp, .events = tls_want_events() },
			{ .fd = e.pair, .events = (short)((e.up_len == 0 ? POLLIN : 0) |
							  (e.down_len ? POLLOUT : 0)) },
		};

		if (left <= 0 || carry() < 0) {
			if (left <= 0)
				e.error = "timeout";
			else if (strcmp(tls_error_word(), "none") != 0)
				e.error = tls_error_word();
			else
				e.error = "connection_lost";
			p->status = left <= 0 ? GRPC_DEADLINE_EXCEEDED : GRPC_UNAVAILABLE;
			etcd_close(); /* call() moves to the next member */
			break;
		}
		(void)poll(fds, 3, (int)(left < 1000 ? left : 1000));
		(void)carry();
		grpc_client_run(e.client, 0);
	}
}

static void on_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct pending *p = grpc_call_user(call);

	if (p && !p->answered) {
		p->answered = true;
		p->take(msg, p->out);
	}
}

static void on_done(struct grpc_call *call, int status, const char *message)
{
	struct pending *p = grpc_call_user(call);

	(void)message; /* etcd's words may quote a key; the status is what the log gets */
	if (p) {
		p->done = true;
		p->status = status;
	}
}

#define METHOD(path, req, resp, flags) \
	{ path, &agentic__etcd__v1__##req##__descriptor, &agentic__etcd__v1__##resp##__descriptor, \
	  flags, { .on_message = on_message, .on_done = on_done }, NULL }

static const struct grpc_method m_range = METHOD("/etcdserverpb.KV/Range", range_request,
						 range_response, 0);
static const struct grpc_method m_put = METHOD("/etcdserverpb.KV/Put", put_request,
					       put_response, 0);
static const struct grpc_method m_delete = METHOD("/etcdserverpb.KV/DeleteRange",
						  delete_range_request, delete_range_response, 0);
static const struct grpc_method m_grant = METHOD("/etcdserverpb.Lease/LeaseGrant",
						 lease_grant_request, lease_grant_response, 0);
static const struct grpc_method m_revoke = METHOD("/etcdserverpb.Lease/LeaseRevoke",
						  lease_revoke_request, lease_revoke_response, 0);
static const struct grpc_method m_txn = METHOD("/etcdserverpb.KV/Txn", txn_request,
					       txn_response, 0);
/* a stream in etcd's API; here one request and its one answer a call */
static const struct grpc_method m_keepalive =
	METHOD("/etcdserverpb.Lease/LeaseKeepAlive", lease_keep_alive_request,
	       lease_keep_alive_response, GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING);

/* One request, its answer handed to take: 0, or the error the status maps to. */
static int call(const struct grpc_method *m, const ProtobufCMessage *req,
		void (*take)(const ProtobufCMessage *msg, void *out), void *out)
{
	struct pending p = { .take = take, .out = out };
	int64_t deadline = clock_mono_ms() + e.timeout_ms;
	struct grpc_call *c;
	int r = member_connect();

	if (r < 0)
		return r;
	r = grpc_client_start(e.client, m, NULL, 0, e.timeout_ms, &p, &c);
	if (r < 0) {
		e.error = "call_refused";
		etcd_close();
		return -ECONNRESET;
	}
	if (grpc_call_send(c, req) < 0 || grpc_call_finish(c, GRPC_OK, NULL, NULL, 0) < 0) {
		e.error = "send_failed";
		etcd_close();
		return -ECONNRESET;
	}
	grpc_call_flush(c);
	wait_done(&p, deadline);
	if (!p.done) {
		e.cur = (e.cur + 1) % e.n;
		return -ETIMEDOUT;
	}
	switch (p.status) {
	case GRPC_OK:
		if (p.answered)
			return 0;
		e.error = "no_answer";
		return ETCD_ERR_FAILED;
	case GRPC_PERMISSION_DENIED:
	case GRPC_UNAUTHENTICATED:
		e.error = "permission_denied";
		return ETCD_ERR_DENIED;
	case GRPC_UNAVAILABLE:
	case GRPC_DEADLINE_EXCEEDED:
		/* the member lost its leader or its quorum, or the connection went: the next
		 * call tries the next member */
		if (strcmp(e.error, "timeout") != 0 && strcmp(e.error, "connection_lost") != 0)
			e.error = p.status == GRPC_UNAVAILABLE ? "unavailable" : "timeout";
		etcd_close();
		e.cur = (e.cur + 1) % e.n;
		return p.status == GRPC_UNAVAILABLE ? -ECONNRESET : -ETIMEDOUT;
	default:
		e.error = grpc_status_name(p.status);
		return ETCD_ERR_FAILED;
	}
}

static ProtobufCBinaryData bin(const void *p, size_t len)
{
	return (ProtobufCBinaryData){ .len = len, .data = (uint8_t *)p };
}

static void take_grant(const ProtobufCMessage *msg, void *out)
{
	const Agentic__Etcd__V1__LeaseGrantResponse *m = (const void *)msg;
	int64_t *v = out;

	v[0] = m->error && m->error[0] ? 0 : m->id;
	v[1] = m->ttl;
}

int etcd_lease_grant(int64_t ttl_s, int64_t *id, int64_t *granted_ttl)
{
	Agentic__Etcd__V1__LeaseGrantRequest req = AGENTIC__ETCD__V1__LEASE_GRANT_REQUEST__INIT;
	int64_t v[2] = { 0, 0 };
	int r;

	req.ttl = ttl_s;
	r = call(&m_grant, &req.base, take_grant, v);
	if (r == 0 && v[0] == 0) {
		e.error = "lease_refused";
		r = ETCD_ERR_FAILED;
	}
	*id = v[0];
	*granted_ttl = v[1];
	return r;
}

static void take_keepalive(const ProtobufCMessage *msg, void *out)
{
	*(int64_t *)out = ((const Agentic__Etcd__V1__LeaseKeepAliveResponse *)(const void *)msg)->ttl;
}

int etcd_lease_keepalive(int64_t id, int64_t *ttl)
{
	Agentic__Etcd__V1__LeaseKeepAliveRequest req =
		AGENTIC__ETCD__V1__LEASE_KEEP_ALIVE_REQUEST__INIT;

	req.id = id;
	*ttl = 0;
	return call(&m_keepalive, &req.base, take_keepalive, ttl);
}

static void take_nothing(const ProtobufCMessage *msg, void *out)
{
	(void)msg;
	(void)out;
}

int etcd_lease_revoke(int64_t id)
{
	Agentic__Etcd__V1__LeaseRevokeRequest req = AGENTIC__ETCD__V1__LEASE_REVOKE_REQUEST__INIT;

	req.id = id;
	return call(&m_revoke, &req.base, take_nothing, NULL);
}

int etcd_put(const char *key, const void *value, size_t len, int64_t lease)
{
	Agentic__Etcd__V1__PutRequest req = AGENTIC__ETCD__V1__PUT_REQUEST__INIT;

	req.key = bin(key, strlen(key));
	req.value = bin(value, len);
	req.lease = lease;
	return call(&m_put, &req.base, take_nothing, NULL);
}

int etcd_delete(const char *key)
{
	Agentic__Etcd__V1__DeleteRangeRequest req = AGENTIC__ETCD__V1__DELETE_RANGE_REQUEST__INIT;

	req.key = bin(key, strlen(key));
	return call(&m_delete, &req.base, take_nothing, NULL);
}

static void take_txn(const ProtobufCMessage *msg, void *out)
{
	*(bool *)out = ((const Agentic__Etcd__V1__TxnResponse *)(const void *)msg)->succeeded;
}

int etcd_txn(const struct etcd_cmp *cmp, size_t nc, const struct etcd_op *op, size_t no)
{
	static const Agentic__Etcd__V1__Compare__Target targets[] = {
		[ETCD_CMP_CREATE] = AGENTIC__ETCD__V1__COMPARE__TARGET__CREATE,
		[ETCD_CMP_MOD] = AGENTIC__ETCD__V1__COMPARE__TARGET__MOD,
		[ETCD_CMP_VALUE] = AGENTIC__ETCD__V1__COMPARE__TARGET__VALUE,
	};
	Agentic__Etcd__V1__TxnRequest req = AGENTIC__ETCD__V1__TXN_REQUEST__INIT;
	Agentic__Etcd__V1__Compare c[ETCD_TXN_MAX], *cp[ETCD_TXN_MAX];
	Agentic__Etcd__V1__RequestOp o[ETCD_TXN_MAX], *op_p[ETCD_TXN_MAX];
	Agentic__Etcd__V1__PutRequest put[ETCD_TXN_MAX];
	Agentic__Etcd__V1__DeleteRangeRequest del[ETCD_TXN_MAX];
	bool ok = false;
	int r;

	ASSERT(nc <= ETCD_TXN_MAX && no <= ETCD_TXN_MAX);
	for (size_t i = 0; i < nc; i++) {
		c[i] = (Agentic__Etcd__V1__Compare)AGENTIC__ETCD__V1__COMPARE__INIT;
		c[i].target = targets[cmp[i].target];
		c[i].key = bin(cmp[i].key, strlen(cmp[i].key));
		if (cmp[i].target == ETCD_CMP_VALUE) {
			c[i].target_union_case = AGENTIC__ETCD__V1__COMPARE__TARGET_UNION_VALUE;
			c[i].value = bin(cmp[i].value, cmp[i].len);
		} else if (cmp[i].target == ETCD_CMP_CREATE) {
			c[i].target_union_case = AGENTIC__ETCD__V1__COMPARE__TARGET_UNION_CREATE_REVISION;
			c[i].create_revision = cmp[i].rev;
		} else {
			c[i].target_union_case = AGENTIC__ETCD__V1__COMPARE__TARGET_UNION_MOD_REVISION;
			c[i].mod_revision = cmp[i].rev;
		}
		cp[i] = &c[i];
	}
	for (size_t i = 0; i < no; i++) {
		o[i] = (Agentic__Etcd__V1__RequestOp)AGENTIC__ETCD__V1__REQUEST_OP__INIT;
		if (op[i].value) {
			put[i] = (Agentic__Etcd__V1__PutRequest)AGENTIC__ETCD__V1__PUT_REQUEST__INIT;
			put[i].key = bin(op[i].key, strlen(op[i].key));
			put[i].value = bin(op[i].value, op[i].len);
			o[i].request_case = AGENTIC__ETCD__V1__REQUEST_OP__REQUEST_REQUEST_PUT;
			o[i].request_put = &put[i];
		} else {
			del[i] = (Agentic__Etcd__V1__DeleteRangeRequest)
				AGENTIC__ETCD__V1__DELETE_RANGE_REQUEST__INIT;
			del[i].key = bin(op[i].key, strlen(op[i].key));
			o[i].request_case = AGENTIC__ETCD__V1__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
			o[i].request_delete_range = &del[i];
		}
		op_p[i] = &o[i];
	}
	req.n_compare = nc;
	req.compare = cp;
	req.n_success = no;
	req.success = op_p;
	r = call(&m_txn, &req.base, take_txn, &ok);
	return r < 0 ? r : ok;
}

struct range_out {
	struct etcd_kv *kv;
	size_t max, n;
	bool more;
	int64_t rev;
	char last[ETCD_KEY_BYTES]; /* the answer's last key, where the next page starts */
	size_t last_len;           /* 0: none, or one too long to start a page at */
};

/* A pair of the answer into d: false when it is too large for the table (not one the fleet
 * wrote: left out). */
static bool kv_copy(const Agentic__Etcd__V1__KeyValue *kv, struct etcd_kv *d)
{
	if (kv->key.len >= sizeof(d->key) || kv->value.len > sizeof(d->value))
		return false;
	memcpy(d->key, kv->key.data, kv->key.len);
	d->key[kv->key.len] = '\0';
	d->key_len = kv->key.len;
	memcpy(d->value, kv->value.data, kv->value.len);
	d->value_len = kv->value.len;
	d->mod_revision = kv->mod_revision;
	d->lease = kv->lease;
	return true;
}

static void take_range(const ProtobufCMessage *msg, void *out)
{
	const Agentic__Etcd__V1__RangeResponse *m = (const void *)msg;
	struct range_out *o = out;

	o->more = m->more || m->n_kvs > o->max;
	o->rev = m->header ? m->header->revision : 0;
	o->last_len = 0;
	if (m->n_kvs && m->kvs[m->n_kvs - 1]->key.len < sizeof(o->last)) {
		o->last_len = m->kvs[m->n_kvs - 1]->key.len;
		memcpy(o->last, m->kvs[m->n_kvs - 1]->key.data, o->last_len);
	}
	for (size_t i = 0; i < m->n_kvs && o->n < o->max; i++)
		if (kv_copy(m->kvs[i], &o->kv[o->n]))
			o->n++;
}

int etcd_range(const char *key, const char *range_end, struct etcd_kv *out, size_t max,
	       bool *more, int64_t *rev)
{
	Agentic__Etcd__V1__RangeRequest req = AGENTIC__ETCD__V1__RANGE_REQUEST__INIT;
	char from[ETCD_KEY_BYTES + 1];
	size_t n = 0, from_len = strlen(key);
	int64_t at = rev ? *rev : 0;
	int r;

	memcpy(from, key, from_len);
	*more = false;
	/* pages of ETCD_RANGE_MAX, each from the last key's successor (the key and a zero byte),
	 * all at the first page's revision: one consistent read however many pages it takes */
	while (n < max) {
		struct range_out o = { .kv = out + n,
				       .max = max - n < ETCD_RANGE_MAX ? max - n : ETCD_RANGE_MAX };

		req.key = bin(from, from_len);
		if (range_end)
			req.range_end = bin(range_end, strlen(range_end));
		req.limit = (int64_t)o.max;
		req.revision = at;
		if ((r = call(&m_range, &req.base, take_range, &o)) < 0)
			return r;
		if (at == 0)
			at = o.rev;
		n += o.n;
		*more = o.more;
		if (!o.more || !range_end || o.last_len == 0)
			break;
		memcpy(from, o.last, o.last_len);
		from[o.last_len] = '\0';
		from_len = o.last_len + 1;
	}
	if (rev)
		*rev = at;
	return (int)n;
}

/* ---- the watch: one stream, one watch on it, its events handed on as they come ---- */

static struct {
	struct grpc_call *call; /* NULL: none open */
	struct pending p;       /* done once etcd said created (or the call ended first) */
	bool created, dead;     /* dead: etcd canceled it (ended by etcd_watch_stop) */
	void (*on_event)(const struct etcd_kv *kv, bool deleted, void *ctx);
	void *ctx;
	struct etcd_kv kv;      /* each event's pair, copied out */
} wt;

static void watch_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Etcd__V1__WatchResponse *m = (const void *)msg;

	(void)call;
	if (m->created && !wt.created) {
		wt.created = true;
		wt.p.done = true;
		wt.p.status = GRPC_OK;
	}
	if (m->canceled) {
		/* compacted past the revision asked, or refused: the caller reads afresh (the
		 * call is ended outside its own callback, by etcd_watch_stop) */
		e.error = m->compact_revision ? "watch_compacted" : "watch_canceled";
		wt.dead = true;
		wt.p.done = true;
		return;
	}
	for (size_t i = 0; i < m->n_events; i++) {
		const Agentic__Etcd__V1__Event *ev = m->events[i];

		if (ev->kv && kv_copy(ev->kv, &wt.kv))
			wt.on_event(&wt.kv, ev->type == 1, wt.ctx);
	}
}

static void watch_done(struct grpc_call *call, int status, const char *message)
{
	(void)message;
	if (call != wt.call)
		return;
	wt.call = NULL;
	wt.created = false;
	if (!wt.p.done) {
		wt.p.done = true;
		wt.p.status = status == GRPC_OK ? GRPC_UNAVAILABLE : status;
	}
}

static const struct grpc_method m_watch = {
	"/etcdserverpb.Watch/Watch", &agentic__etcd__v1__watch_request__descriptor,
	&agentic__etcd__v1__watch_response__descriptor, GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
	{ .on_message = watch_message, .on_done = watch_done }, NULL
};

int etcd_watch(const char *key, const char *range_end, int64_t from,
	       void (*on_event)(const struct etcd_kv *kv, bool deleted, void *ctx), void *ctx)
{
	Agentic__Etcd__V1__WatchRequest req = AGENTIC__ETCD__V1__WATCH_REQUEST__INIT;
	Agentic__Etcd__V1__WatchCreateRequest cr = AGENTIC__ETCD__V1__WATCH_CREATE_REQUEST__INIT;
	/* a member cut off from its leader ends the stream (etcd's "hasleader"), rather than
	 * keeping it open with no change to send: the worker then reads anew elsewhere */
	static const struct grpc_md leader = { "hasleader", "true", 4 };
	int r;

	etcd_watch_stop();
	if ((r = member_connect()) < 0)
		return r;
	memset(&wt, 0, sizeof(wt));
	wt.on_event = on_event;
	wt.ctx = ctx;
	if (grpc_client_start(e.client, &m_watch, &leader, 1, 0, &wt, &wt.call) < 0) {
		wt.call = NULL;
		e.error = "call_refused";
		etcd_close();
		return -ECONNRESET;
	}
	cr.key = bin(key, strlen(key));
	cr.range_end = bin(range_end, strlen(range_end));
	cr.start_revision = from;
	req.create_request = &cr;
	if (grpc_call_send(wt.call, &req.base) < 0) {
		e.error = "send_failed";
		etcd_close();
		return -ECONNRESET;
	}
	grpc_call_flush(wt.call);
	wait_done(&wt.p, clock_mono_ms() + e.timeout_ms);
	if (wt.created && !wt.dead)
		return 0;
	etcd_watch_stop();
	if (strcmp(e.error, "timeout") == 0)
		return -ETIMEDOUT;
	e.error = "watch_refused";
	return wt.p.status == GRPC_PERMISSION_DENIED ? ETCD_ERR_DENIED : ETCD_ERR_FAILED;
}

bool etcd_watching(void)
{
	return wt.call != NULL && wt.created && !wt.dead;
}

void etcd_watch_stop(void)
{
	int64_t until = clock_mono_ms() + 1000;

	if (!wt.call)
		return;
	(void)grpc_call_finish(wt.call, GRPC_CANCELLED, NULL, NULL, 0);
	while (wt.call && clock_mono_ms() < until)
		grpc_client_run(e.client, 10);
	if (wt.call)
		etcd_close(); /* ends every call, this one too */
	wt.call = NULL;
}

int etcd_wait(int fd, int timeout_ms)
{
	struct pollfd fds[4] = { { .fd = fd, .events = POLLIN } };
	nfds_t n = 1;

	if (e.tcp >= 0 && carry() == 0) {
		grpc_client_run(e.client, 0);
		(void)carry();
	}
	if (e.tcp >= 0) {
		fds[1] = (struct pollfd){ .fd = grpc_client_fd(e.client), .events = POLLIN };
		fds[2] = (struct pollfd){ .fd = e.tcp, .events = tls_want_events() };
		fds[3] = (struct pollfd){ .fd = e.pair, .events = (short)((e.up_len == 0 ? POLLIN : 0) |
									 (e.down_len ? POLLOUT : 0)) };
		n = 4;
	}
	(void)poll(fds, n, timeout_ms);
	if (e.tcp >= 0) {
		if (carry() < 0) {
			e.error = strcmp(tls_error_word(), "none") != 0 ? tls_error_word()
								      : "connection_lost";
			etcd_close(); /* the watch ends: the caller reads anew */
		} else {
			grpc_client_run(e.client, 0);
			(void)carry();
		}
	}
	return (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

void etcd_prefix_end(const char *key, char *out)
{
	size_t n = strlen(key);

	snprintf(out, ETCD_KEY_BYTES, "%s", key);
	if (n > 0 && n < ETCD_KEY_BYTES)
		out[n - 1]++;
}
