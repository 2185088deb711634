/* admin_create.c: the create routes (v1's here, v2's through admin_create_request). On a
 * fleet node a create goes where placement puts it (docs/FLEET.md "Placement"). The body is
 * parsed and checked here first, as for any create; then the
 * fleet's worker chooses the node and claims the name in etcd (fleet_link_place), and the
 * connection waits (AC_WAIT) for its answer: this node makes the sandbox itself, or relays the
 * create to the chosen node, which makes it as it would its own. `?node=NODE` pins a create
 * to a node; `?node=` this node's own name makes it here without etcd (what works while etcd
 * is out). A create with host mounts is made here only: their paths are this host's.
 *
 * Above admin_http.c and admin_sandbox.c (admin_create_start); calls fleet-link. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "admin/admin_conn.h"
#include "config/profiles.h"
#include "fleet/link.h"
#include "fleet/wire.h"
#include "sandbox/reqcheck.h"

static uint64_t wait_id(struct admin_conn *c)
{
	return ((uint64_t)(admin_conn_index(c) + 1) << 32) | c->gen;
}

static void log_placed(const struct admin_conn *c, const struct fleet_link_placed *p,
		       const char *how)
{
	log_info("create placed", "name=%s node=%s seq=%lld attempts=%d how=%s", log_q(c->req.name),
		 log_q(p->node), (long long)p->seq, p->attempts, log_q(how));
}

/* The create, relayed to node at addr: its head again (without its framing and Expect, which
 * this node answered), the placement's header, and the body as parsed. */
static void relay_create(struct admin_conn *c, const struct fleet_link_placed *p)
{
	static char pre[FLEET_RELAY_PREFIX_BYTES];
	const struct http_parser *hp = &c->parser;
	struct buf b;
	char m[200];
	int r;

	buf_init(&b, pre, sizeof(pre));
	r = http_head_rewrite(&b, hp, http_parser_str(hp, hp->target), NULL, fleet_placed_drop);
	r |= buf_printf(&b, "Agentic-Placement: %lld %s\r\nContent-Length: %u\r\n"
			"Connection: close\r\n\r\n", (long long)p->seq, c->req.name, c->body_len);
	r |= buf_append(&b, c->body, c->body_len);
	r = r < 0 ? ERR_LIMIT : fleet_relay_out(c->fd, p->node, p->addr, pre, b.len, false);
	explicit_bzero(pre, b.len); /* a create's body may hold env values */
	if (r < 0) {
		snprintf(m, sizeof(m), "placed on node %s, and this node cannot relay to it now: %s",
			 p->node, r == ERR_LIMIT ? "too many relayed requests" : strerror(-r));
		admin_respond_error(c, 503, "relay_busy", m);
		return;
	}
	log_placed(c, p, "relayed");
	admin_conn_close(c); /* the relay-out has the connection now */
}

/* A create placement put here, begun: refused at once, its name is released in etcd (a
 * create rolled back later is released by admin_finish_error). */
static void start_placed(struct admin_conn *c)
{
	c->placed = true;
	admin_create_start(c);
	if (c->phase != AC_WAIT) {
		c->placed = false;
		fleet_link_release(c->req.name);
	}
}

/* The placement's answer for c: a refusal, this node's create begun, or the create
 * relayed. */
static void placed(struct admin_conn *c, const struct fleet_link_placed *p)
{
	char m[256];

	if (p->error) {
		int status;
		const char *why = fleet_place_refusal(p->error, &status);

		if (why) {
			snprintf(m, sizeof(m), "sandbox %s: %s", c->req.name, why);
			admin_respond_error(c, status, p->error, m);
			return;
		}
		snprintf(m, sizeof(m), "the fleet's etcd did not answer (%s): a create that names no "
			 "node cannot be placed; ?node=%s makes it on this node", p->error,
			 fleet_link_node());
		admin_respond_error(c, 503, "fleet_unavailable", m);
		return;
	}
	if (strcmp(p->node, fleet_link_node()) == 0) {
		log_placed(c, p, "here");
		fleet_link_admitted(p->seq);
		start_placed(c);
		return;
	}
	relay_create(c, p);
}

void admin_placed(uint64_t id, const struct fleet_link_placed *p)
{
	struct admin_conn *c = admin_waiter((int32_t)(id >> 32) - 1, (uint32_t)id);

	if (!c || c->phase != AC_WAIT)
		return; /* its client went: the name is released by its owner's sweep */
	c->phase = AC_READ;
	placed(c, p);
	/* an answer written here goes out now: no event of the client's would send it */
	if (c->phase == AC_WRITE)
		admin_flush(c);
}

/* A create another node placed here: its placement's number and name, which the body's
 * name must be when it has one. false: answered (refused). */
static bool admit_relayed(struct admin_conn *c)
{
	const char *h = http_parser_header(&c->parser, FLEET_PLACEMENT_HEADER);
	char name[64];
	long long seq;

	if (fleet_placement_parse(h, &seq, name, sizeof(name)) != 0 ||
	    (c->req.name && strcmp(c->req.name, name) != 0)) {
		admin_respond_error(c, 403, "forbidden", "another node may relay a create here only "
			      "as placement chose it (Agentic-Placement)");
		return false;
	}
	snprintf(c->place_name, sizeof(c->place_name), "%s", name);
	c->req.name = c->place_name;
	fleet_link_admitted(seq);
	return true;
}

static void place_or_start(struct admin_conn *c, const char *query)
{
	char pin[64], m[256], node[64], addr[64];
	const char *self = fleet_link_node();
	int r;

	if (!fleet_link_on()) {
		admin_create_start(c);
		return;
	}
	if (c->relay_from[0]) {
		if (admit_relayed(c))
			start_placed(c);
		return;
	}
	admin_query_value(query, "node", pin, sizeof(pin));
	if (pin[0] && !fleet_node_name_ok(pin, strlen(pin))) {
		admin_respond_error(c, 400, "bad_request", "node is a node's name: 1 to 63 of a-z, "
			      "0-9 and '-'");
		return;
	}
	if (c->req.nmounts > 0 && pin[0] && strcmp(pin, self) != 0) {
		admin_respond_error(c, 400, "bad_request", "a create with host mounts is made on the "
			      "node it is sent to (their paths are that host's): no other node");
		return;
	}
	if (!c->req.name) {
		char hex[16];

		random_hex(hex, 8);
		snprintf(c->place_name, sizeof(c->place_name), "sbx-%s", hex);
		c->req.name = c->place_name;
	}
	if (sandbox_by_name(c->req.name) ||
	    fleet_link_owner(c->req.name, node, sizeof(node), addr, sizeof(addr)) != 0) {
		snprintf(m, sizeof(m), "a sandbox of the fleet is named %s already", c->req.name);
		admin_respond_error(c, 409, "name_taken", m);
		return;
	}
	if (strcmp(pin, self) == 0 || c->req.nmounts > 0) {
		admin_create_start(c);
		return;
	}
	c->phase = AC_WAIT;
	r = fleet_link_place(wait_id(c), c->req.name, pin, c->req.vm ? "vm" : "docker",
			     c->req.image ? c->req.image : admin_state.ac.cfg->default_image);
	if (r == 0)
		return;
	c->phase = AC_READ;
	snprintf(m, sizeof(m), "%s: a create that names no node cannot be placed now; "
		 "?node=%s (agentic create --node %s) makes it on this node",
		 r == ERR_LIMIT ? "too many creates wait for their placement"
				: "the fleet's etcd is not reachable", self, self);
	admin_respond_error(c, 503, "fleet_unavailable", m);
}

/* A create route: the body parsed into c->req as api reads it (route: its word in the log),
 * then placed (on a fleet node) or admitted and begun here (admin_create_start); 503 once
 * agenticd is stopping. */
void admin_create_request(struct admin_conn *c, enum request_api api, const char *route,
			  const char *query)
{
	struct request_error e = { 0 };

	if (admin_state.stopping) {
		admin_respond_error(c, 503, "shutting_down", "agenticd is shutting down");
		return;
	}
	if (request_create_parse(&c->req, admin_state.ac.cfg, profiles_current(), api,
				 c->body, c->body_len, &e) != 0) {
		if (e.status == 422)
			log_info("create refused", "route=%s code=%s", route, log_q(e.code));
		admin_respond_error(c, e.status, e.code, e.message);
		return;
	}
	place_or_start(c, query);
}

void admin_containers_create(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	admin_create_request(c, REQUEST_API_V1, "v1", query);
}
