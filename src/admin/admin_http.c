/* admin_http.c: HTTP/1.1 on the admin socket: the listener and its peers checked at accept,
 * requests read and parsed, routed through the table admin_init was handed, a connection that
 * opens with the HTTP/2 preface handed to the admin gRPC service, idle connections closed, the
 * stop. Above admin_conn.c, admin_exec.c and admin_grpc.c; the route handlers it reaches only
 * through the table. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin/admin_conn.h"
#include "fleet/link.h"
#include "fleet/wire.h"
#include "workspace/host.h"
#include "base/looptag.h"
#include "profile/credscan.h"

void admin_listen(int fd)
{
	admin_state.listen_fd = fd;
	admin_fd_watch(fd, EPOLLIN, TAG_ADMIN_LISTEN, 0);
}

static bool relay_maybe(struct admin_conn *c);

/* ---- routing ---- */

/* path against a route's: '*' matches one non-empty segment, copied (cut to size) to name. */
static bool path_match(const char *pat, const char *path, char *name, size_t size)
{
	while (*pat) {
		if (*pat == '*') {
			size_t n = strcspn(path, "/");

			if (n == 0)
				return false;
			snprintf(name, size, "%.*s", (int)n, path);
			path += n;
			pat++;
		} else if (*pat++ != *path++) {
			return false;
		}
	}
	return *path == '\0';
}

int admin_route_find(const char *method, const char *path, const struct admin_route **route,
		     char *name, size_t name_size, char *allow, size_t allow_size)
{
	const struct admin_route *routes = admin_state.hooks.routes;
	struct buf b;

	buf_init(&b, allow, allow_size);
	allow[0] = '\0';
	for (size_t i = 0; i < admin_state.hooks.nroutes; i++) {
		name[0] = '\0'; /* what a route that did not match wrote is no name */
		if (!path_match(routes[i].path, path, name, name_size))
			continue;
		if (strcmp(routes[i].method, method) == 0) {
			*route = &routes[i];
			allow[0] = '\0';
			return 0;
		}
		if (!strstr(allow, routes[i].method))
			buf_printf(&b, "%s%s", b.len ? ", " : "", routes[i].method);
	}
	name[0] = '\0';
	return b.len ? 405 : 404;
}

/* 405: the methods the path has, in Allow and in the message ("use GET or POST"). */
static void respond_405(struct admin_conn *c, const char *allow)
{
	const struct http_field fields[] = {
		{ "Content-Type", "application/json" },
		{ "Allow", allow },
		{ NULL, NULL },
	};
	char m[64];
	struct buf b;

	buf_init(&b, m, sizeof(m));
	buf_printf(&b, "use ");
	for (const char *p = allow; *p;) {
		size_t n = strcspn(p, ",");

		buf_printf(&b, "%s%.*s", p == allow ? "" : " or ", (int)n, p);
		p += n;
		p += strspn(p, ", ");
	}
	admin_respond_error_fields(c, 405, "method_not_allowed", m, fields);
}

static void dispatch(struct admin_conn *c)
{
	const struct http_parser *p = &c->parser;
	const char *method = http_parser_str(p, p->method);
	char target[512], *query, m[600], name[128], allow[64];
	const struct admin_route *route;
	struct sandbox *sb = NULL;

	/* a keep-alive connection's earlier placed create is no concern of this request's:
	 * a remove failing here must not release that create's name (admin_finish_error) */
	c->placed = false;
	snprintf(target, sizeof(target), "%s", http_parser_str(p, p->target));
	query = strchr(target, '?');
	if (query)
		*query++ = '\0';
	if (!c->allowed) {
		admin_respond_error(c, 403, "forbidden", "the admin API is for root and members of the "
			      "admin group");
		return;
	}
	if (c->body_too_big) {
		c->keep_alive = false;
		snprintf(m, sizeof(m), "request body over %u bytes", LIMIT_ADMIN_BODY_BYTES);
		admin_respond_error(c, 413, "too_large", m);
		return;
	}
	switch (admin_route_find(method, target, &route, name, sizeof(name), allow, sizeof(allow))) {
	case 0:
		break;
	case 405:
		respond_405(c, allow);
		return;
	default:
		snprintf(m, sizeof(m), "no route %.16s %.200s (see docs/API.md)", method,
			 credscan_value(target) ? "(a path shaped like a credential)" : target);
		admin_respond_error(c, 404, "not_found", m);
		return;
	}
	snprintf(c->segment, sizeof(c->segment), "%s", name);
	/* another node may act on this node's sandboxes, and ask nothing else of it but the
	 * creates placement sent here (admin_create.c checks their placement) */
	if (c->relay_from[0] && !route->create && (!name[0] || route->not_sandbox)) {
		admin_respond_error(c, 403, "forbidden", "a request relayed from another node may "
			      "act only on a sandbox of this node");
		return;
	}
	if (name[0] && !route->not_sandbox && !(sb = sandbox_by_name(name))) {
		snprintf(m, sizeof(m), "no sandbox is named %.64s",
			 credscan_value(name) ? "that (a name shaped like a credential)" : name);
		admin_respond_error(c, 404, "not_found", m);
		return;
	}
	route->handler(c, sb, query);
}

/* The request whose head is parsed goes to a streamed route (allowed peers only). */
static bool streamed_route(const struct admin_conn *c)
{
	const struct http_parser *p = &c->parser;
	char target[512], name[128], allow[64];
	const struct admin_route *route;

	snprintf(target, sizeof(target), "%s", http_parser_str(p, p->target));
	target[strcspn(target, "?")] = '\0';
	return c->allowed && admin_route_find(http_parser_str(p, p->method), target, &route, name,
					      sizeof(name), allow, sizeof(allow)) == 0 &&
	       admin_files_streamed(route);
}

/* ---- HTTP/2 on the admin socket: handed to the admin gRPC service ---- */

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* An allowed connection that opens with the HTTP/2 preface goes to the admin gRPC server,
 * bytes unread. Returns true when the connection is no longer ours to read: handed over, or
 * a prefix of the preface is all there is yet (the bytes stay queued; edge-triggered, epoll
 * wakes us when more arrive instead of at every turn of the loop; a client that stops there
 * is closed by admin_tick as idle). */
static bool sniff_http2(struct admin_conn *c)
{
	char p[sizeof(h2_preface) - 1];
	ssize_t n = recv(c->fd, p, sizeof(p), MSG_PEEK);
	int fd, r;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0 || memcmp(p, h2_preface, (size_t)n) != 0) {
		c->sniffed = true;
		return false;
	}
	if ((size_t)n < sizeof(p)) {
		admin_watch(c, EPOLLIN | EPOLLET);
		return true;
	}
	fd = c->fd;
	admin_fd_unwatch(fd);
	c->fd = -1;
	admin_conn_close(c);
	r = grpc_server_add_conn(admin_state.ac.grpc, fd, admin_grpc_methods,
				 admin_grpc_nmethods);
	if (r < 0) {
		log_warn("admin grpc connection refused", "error=%s", log_q(err_str(r)));
		close(fd);
	}
	return true;
}

/* ---- I/O ---- */

/* A body over its limit: answered at once (413), and the connection closes after. */
static void too_big(struct admin_conn *c)
{
	c->body_too_big = true;
	c->keep_alive = false;
	dispatch(c);
}

/* Feeds what is buffered to the parser; dispatches a complete request. */
static void parse_buffered(struct admin_conn *c)
{
	while (c->phase == AC_READ && c->roff < c->rlen) {
		struct http_slice s;
		size_t used;
		int ev = http_parser_feed(&c->parser, c->rbuf + c->roff, c->rlen - c->roff, &used, &s);

		c->roff += (uint32_t)used;
		if (ev == HTTP_ERR_BODY_TOO_BIG) {
			too_big(c);
			break;
		}
		if (ev < 0) {
			c->keep_alive = false;
			admin_respond_error(c, ev == HTTP_ERR_HEAD_TOO_BIG ? 413 : 400, "bad_http",
				      ev == HTTP_ERR_HEAD_TOO_BIG ? "request head too large"
								  : "malformed HTTP request");
			break;
		}
		if (ev == HTTP_EV_HEAD) {
			const char *expect = http_parser_header(&c->parser, "expect");

			c->keep_alive = c->parser.keep_alive && !c->relay_from[0];
			if (relay_maybe(c))
				break;
			/* curl asks before sending a body over 1 KiB; say yes at once */
			if (expect && strcasecmp(expect, "100-continue") == 0 && c->allowed &&
			    admin_send_now(c->fd, 100, NULL, NULL, 0) < 0)
				log_debug("100-continue not sent", "error=%s", log_q(strerror(errno)));
			/* a streamed route reads its body itself, unbounded */
			if (streamed_route(c)) {
				c->keep_alive = false; /* until its handler owns the body */
				dispatch(c);
				break;
			}
			if (c->parser.framing == HTTP_BODY_LENGTH &&
			    c->parser.content_length > LIMIT_ADMIN_BODY_BYTES) {
				too_big(c);
				break;
			}
			ev = http_parser_feed(&c->parser, NULL, 0, &used, &s);
		}
		if (ev == HTTP_EV_BODY) {
			if (s.len > sizeof(c->body) - c->body_len) {
				too_big(c);
				break;
			}
			memcpy(c->body + c->body_len, s.data, s.len);
			c->body_len += (uint32_t)s.len;
			ev = http_parser_feed(&c->parser, NULL, 0, &used, &s);
		}
		if (ev == HTTP_EV_DONE || ev == HTTP_EV_UPGRADE)
			dispatch(c);
	}
	if (c->roff == c->rlen)
		c->roff = c->rlen = 0;
}

void admin_event(uint32_t index, uint32_t events)
{
	struct admin_conn *c = &admin_state.ac.conns[index];

	ASSERT(index < admin_state.ac.nconns);
	if (c->phase == AC_FREE || c->phase == AC_ZOMBIE || c->fd < 0)
		return;
	if (c->phase == AC_FOLLOW && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
		admin_conn_close(c);
		return;
	}
	if (c->phase == AC_WRITE || c->phase == AC_LIST || c->phase == AC_FILE ||
	    c->phase == AC_FOLLOW) {
		admin_flush(c);
		return;
	}
	if (c->phase == AC_EXEC) {
		admin_exec_event(c, events);
		return;
	}
	if (c->phase == AC_FILEOP) {
		admin_files_event(c, events);
		return;
	}
	if (c->phase == AC_WAIT) {
		/* the client may hang up while its create runs; the create goes on */
		if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			admin_conn_close(c);
		return;
	}
	if (!c->sniffed && c->allowed && sniff_http2(c))
		return;
	parse_buffered(c);
	while (c->phase == AC_READ) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen, 0);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			admin_conn_close(c);
			return;
		}
		c->rlen += (uint32_t)n;
		c->idle_since = clock_mono_ms();
		parse_buffered(c);
	}
	if (c->phase == AC_WRITE || c->phase == AC_LIST || c->phase == AC_EXEC ||
	    c->phase == AC_FILE || c->phase == AC_FOLLOW)
		admin_flush(c);
	else if (c->phase == AC_WAIT)
		admin_watch(c, 0);
}

/* A connection there is no slot for: a 503 sent at once, and closed. */
static void refuse_busy(int fd)
{
	char body[160];
	struct buf b;

	buf_init(&b, body, sizeof(body));
	if (admin_error_json(&b, "capacity", "too many admin connections (max_admin_connections)") != 0 ||
	    admin_send_now(fd, 503, admin_json_fields, b.data, b.len) < 0)
		log_debug("admin connection refused", "reason=%s", "capacity");
	close(fd);
}

/* ---- the fleet's front door (docs/FLEET.md "One front door") ---- */

/* The request's head as it came, written again from the parsed fields (but for Expect, which
 * this node has answered), then what of its body is buffered: into b. 0, or ERR_LIMIT when it
 * does not fit (never a request cut short). */
static int relay_prefix(struct admin_conn *c, struct buf *b)
{
	static const char *const drop[] = { "expect", NULL };
	const struct http_parser *p = &c->parser;
	int r = http_head_rewrite(b, p, http_parser_str(p, p->target), NULL, drop);

	r |= buf_append(b, "\r\n", 2);
	r |= buf_append(b, c->rbuf + c->roff, c->rlen - c->roff);
	return r < 0 ? ERR_LIMIT : 0;
}

/* A request, its head just parsed, for a sandbox this node does not have and another node of
 * the fleet does: handed to a relay-out, which takes the connection from here (true), or
 * answered here when that node is lost or cannot take it (true). false: served here. */
static bool relay_maybe(struct admin_conn *c)
{
	static char pre[FLEET_RELAY_PREFIX_BYTES];
	const struct http_parser *p = &c->parser;
	char target[512], name[128], allow[64], node[64], addr[64], m[256];
	const struct admin_route *route;
	struct buf b;
	int r;

	if (!c->allowed || c->relay_from[0] || !fleet_link_on())
		return false;
	snprintf(target, sizeof(target), "%s", http_parser_str(p, p->target));
	target[strcspn(target, "?")] = '\0';
	if (admin_route_find(http_parser_str(p, p->method), target, &route, name, sizeof(name),
			     allow, sizeof(allow)) != 0 || !name[0] || route->not_sandbox ||
	    sandbox_by_name(name) || (r = fleet_link_owner(name, node, sizeof(node), addr,
							   sizeof(addr))) == 0)
		return false;
	c->keep_alive = false;
	if (r == FLEET_OWNER_TWICE) {
		snprintf(m, sizeof(m), "two nodes' records claim sandbox %.64s: nothing is relayed "
			 "for it until one of them is gone (see agentic ls --fleet)", name);
		admin_respond_error(c, 409, "name_claimed_twice", m);
		return true;
	}
	if (r != 1) {
		snprintf(m, sizeof(m), "sandbox %.64s is on node %s, which %s", name, node,
			 r == FLEET_OWNER_LOST ? "is lost (its lease ran out): it is out of reach "
			 "until that node is back" : "advertises no address (fleet_advertise)");
		admin_respond_error(c, 503, "node_lost", m);
		return true;
	}
	buf_init(&b, pre, sizeof(pre));
	r = relay_prefix(c, &b) < 0 || b.len >= sizeof(pre) - 1
		    ? ERR_LIMIT : fleet_relay_out(c->fd, node, addr, pre, b.len, false);
	explicit_bzero(pre, b.len); /* a create's body may hold env values */
	if (r < 0) {
		snprintf(m, sizeof(m), "sandbox %.64s is on node %s, and this node cannot relay to "
			 "it now: %s", name, node, r == ERR_LIMIT ? "too many relayed requests "
			 "or a request head too large" : strerror(-r));
		admin_respond_error(c, 503, "relay_busy", m);
		return true;
	}
	log_info("admin request relayed", "name=%s node=%s method=%s", log_q(name), log_q(node),
		 log_q(http_parser_str(p, p->method)));
	admin_conn_close(c); /* the relay-out has the connection now */
	return true;
}

/* A free connection for fd, reading its first request; NULL (fd answered 503 and closed) when
 * every one is taken. */
static struct admin_conn *conn_open(int fd)
{
	struct admin_conn *c = admin_conn_take();

	if (!c) {
		refuse_busy(fd);
		return NULL;
	}
	c->fd = fd;
	c->phase = AC_READ;
	c->idle_since = clock_mono_ms();
	http_parser_init(&c->parser, HTTP_PARSE_REQUEST, c->head, sizeof(c->head));
	/* LIMIT_ADMIN_BODY_BYTES is parse_buffered's to enforce, past the head: a streamed route
	 * (a file's PUT) takes a body of any length */
	c->parser.body_limit = UINT64_MAX;
	return c;
}

void admin_adopt_relayed(int fd, const char *node)
{
	struct admin_conn *c;
	uint32_t relayed = 0;

	/* the other nodes share half the admin connections at most: a node's stolen
	 * certificate cannot take the rest from this host's own admins */
	for (uint32_t i = 0; i < admin_state.ac.nconns; i++)
		relayed += admin_state.ac.conns[i].phase != AC_FREE &&
			   admin_state.ac.conns[i].relay_from[0];
	if (relayed >= admin_state.ac.nconns / 2) {
		refuse_busy(fd);
		return;
	}
	if (!(c = conn_open(fd)))
		return;
	/* the node's certificate was checked by the relay; it gets the sandbox routes only
	 * (dispatch), never the admin gRPC service, and one request per connection */
	c->allowed = true;
	c->sniffed = true;
	c->uid = admin_cfg()->fleet_uid; /* the relay's, the socketpair's other end */
	c->pid = 0;
	snprintf(c->relay_from, sizeof(c->relay_from), "%s", node);
	log_info("fleet relayed connection", "node=%s", log_q(node));
	admin_fd_watch(fd, EPOLLIN | EPOLLRDHUP, TAG_ADMIN_CONN, admin_conn_index(c));
}

void admin_accept(void)
{
	for (;;) {
		int fd = accept4(admin_state.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct admin_conn *c;
		char why[128], q[160];

		if (fd < 0)
			return;
		if (!(c = conn_open(fd)))
			continue;
		c->allowed = host_admin_peer_ok(fd, admin_state.ac.group_known, admin_state.ac.gid, &c->uid,
						&c->pid, why, sizeof(why)) == 0;
		if (!c->allowed) {
			admin_state.refused++;
			log_warn("admin refused", "uid=%u pid=%d reason=%s", (unsigned)c->uid,
				 (int)c->pid, log_quote(q, sizeof(q), why));
		}
		admin_fd_watch(fd, EPOLLIN | EPOLLRDHUP, TAG_ADMIN_CONN, admin_conn_index(c));
	}
}

void admin_tick(int64_t now)
{
	for (uint32_t i = 0; i < admin_state.ac.nconns; i++) {
		struct admin_conn *c = &admin_state.ac.conns[i];

		if ((c->phase == AC_READ || c->phase == AC_WRITE || c->phase == AC_LIST) &&
		    now - c->idle_since > LIMIT_ADMIN_IDLE_MS)
			admin_conn_close(c);
		else if (c->phase == AC_FOLLOW && c->out_off == c->out_len)
			admin_flush(c); /* what was appended since the last turn */
	}
}

bool admin_answering(void)
{
	for (uint32_t i = 0; i < admin_state.ac.nconns; i++) {
		enum admin_phase ph = admin_state.ac.conns[i].phase;

		if (ph == AC_WAIT || ph == AC_WRITE || ph == AC_LIST)
			return true;
	}
	return false;
}

void admin_shutdown(void)
{
	admin_state.stopping = true;
	if (admin_state.listen_fd >= 0) {
		admin_fd_unwatch(admin_state.listen_fd);
		close(admin_state.listen_fd);
		admin_state.listen_fd = -1;
	}
}
