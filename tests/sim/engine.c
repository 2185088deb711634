/* engine.c: a fake Docker engine under the Docker client's own functions (-Wl,--wrap). Each
 * call begun becomes a ticket answered after a seeded delay, so answers come back in any
 * order; a ticket may fail (each error the client can report: an API status, a transport
 * error, a busy pool at begin), or take effect and lose its answer. Containers and networks
 * live here, not in agenticd: they survive its restarts, and the event stream replays them
 * from `since` as the real one does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct e_ct e_cts[E_CTS];
struct e_net e_nets[E_NETS];
static char owner[17];
static uint64_t next_id;
static int64_t next_pid;
static uint32_t next_life;

/* ---- the event log ---- */
#define E_EVENTS 65536
struct e_event {
	char action[16];
	char id[DOCKER_ID_SIZE];
	int64_t time_ns;
};
static struct e_event events[E_EVENTS];
static uint32_t nevents;

static void emit(const char *action, const struct e_ct *ct)
{
	struct e_event *e;

	if (!ct->ours)
		return;
	SIM_CHECK(nevents < E_EVENTS, "engine: event log full");
	e = &events[nevents++];
	snprintf(e->action, sizeof(e->action), "%s", action);
	memcpy(e->id, ct->id, sizeof(e->id));
	e->time_ns = (SIM_WALL_BASE + sim_now) * 1000000ll;
	trace("engine: event %s %.12s", action, ct->id);
}

/* ---- tickets: one per docker_call begun ---- */
#define TICKETS 64
#define CONNS 4           /* the fake client's connection pool (the real one has more) */
enum fault { F_NONE, F_500, F_404, F_TRANSPORT, F_REPLY, F_LOST };
struct ticket {
	bool used, done;
	enum docker_op op;
	char arg[SB_NET_BYTES + DOCKER_ID_SIZE];
	enum fault fault;
	int64_t due;
	bool force;
	uint32_t ev_cursor;
	/* container create */
	char name[SB_NAME_BYTES], instance[SB_ID_BYTES], uid[16], mnet[SB_NET_BYTES],
		netmode[SB_NET_BYTES];
	bool ours;
	/* network create */
	char subnet[20];
	bool internal;
	char rid[DOCKER_ID_SIZE];
	bool list_ours;            /* a list filtered by our owner label */
};
static struct ticket tickets[TICKETS];

static const char *op_name(enum docker_op op)
{
	static const char *n[] = { "ping", "version", "info", "net-create", "net-inspect",
				   "net-list", "net-remove", "ct-create", "ct-start", "ct-inspect",
				   "ct-stop", "ct-kill", "ct-wait", "ct-logs", "ct-remove",
				   "ct-list", "events" };
	return op < sizeof(n) / sizeof(n[0]) ? n[op] : "?";
}

uint32_t engine_inflight(void)
{
	uint32_t n = 0;

	for (int i = 0; i < TICKETS; i++)
		n += tickets[i].used && tickets[i].op != DOCKER_OP_EVENTS;
	return n;
}

static struct ticket *ticket_of(const struct docker_call *c)
{
	if (c->state <= 0 || c->state > TICKETS || !tickets[c->state - 1].used)
		return NULL;
	return &tickets[c->state - 1];
}

static void make_id(char id[DOCKER_ID_SIZE])
{
	uint64_t a = ++next_id, b = rnd();

	snprintf(id, DOCKER_ID_SIZE, "%016llx%016llx%016llx%016llx", (unsigned long long)a,
		 (unsigned long long)b, (unsigned long long)(a ^ 0x5a5a5a5aull),
		 (unsigned long long)(b >> 3));
}

/* ---- the engine's objects ---- */
static struct e_ct *ct_find(const char *ref)
{
	size_t n = strlen(ref);

	if (!n)
		return NULL;
	for (int i = 0; i < E_CTS; i++)
		if (e_cts[i].used && (strcmp(e_cts[i].name, ref) == 0 ||
				      (n >= 12 && strncmp(e_cts[i].id, ref, n) == 0)))
			return &e_cts[i];
	return NULL;
}

static struct e_net *net_find(const char *ref)
{
	size_t n = strlen(ref);

	if (!n)
		return NULL;
	for (int i = 0; i < E_NETS; i++)
		if (e_nets[i].used && (strcmp(e_nets[i].name, ref) == 0 ||
				       (n >= 12 && strncmp(e_nets[i].id, ref, n) == 0)))
			return &e_nets[i];
	return NULL;
}

struct e_ct *engine_ct_by_instance(const char *instance)
{
	for (int i = 0; i < E_CTS; i++)
		if (e_cts[i].used && e_cts[i].ours && strcmp(e_cts[i].instance, instance) == 0)
			return &e_cts[i];
	return NULL;
}

struct e_net *engine_net_by_name(const char *name)
{
	for (int i = 0; i < E_NETS; i++)
		if (e_nets[i].used && strcmp(e_nets[i].name, name) == 0)
			return &e_nets[i];
	return NULL;
}

struct e_ct *engine_ct_by_pid(int64_t pid)
{
	for (int i = 0; i < E_CTS; i++)
		if (e_cts[i].used && e_cts[i].running && e_cts[i].pid == pid)
			return &e_cts[i];
	return NULL;
}

bool engine_pid_alive(int64_t pid)
{
	return pid > 0 && engine_ct_by_pid(pid) != NULL;
}

static void ct_start(struct e_ct *ct)
{
	ct->running = true;
	ct->pid = ++next_pid;
	ct->life = ++next_life;
	ct->exit_code = 0;
	emit("start", ct);
	init_started(ct);
}

static void ct_die(struct e_ct *ct, int64_t code)
{
	if (!ct->running)
		return;
	ct->running = false;
	ct->exit_code = code;
	ct->pid = 0;
	emit("die", ct);
	init_died(ct);
}

static void ct_destroy(struct e_ct *ct)
{
	ct_die(ct, 137);
	emit("destroy", ct);
	ct->used = false;
}

void engine_reset(const char *own)
{
	memset(e_cts, 0, sizeof(e_cts));
	memset(e_nets, 0, sizeof(e_nets));
	memset(tickets, 0, sizeof(tickets));
	nevents = 0;
	next_id = 0;
	next_pid = 5000000; /* above pid_max: no /proc entry answers for a fake init */
	next_life = 0;
	snprintf(owner, sizeof(owner), "%s", own);
	/* networks agenticd did not make: a /28 and a /26 of its pool, one outside it */
	for (int i = 0; i < 3; i++) {
		struct e_net *n = &e_nets[i];

		if (i < 2 && !chance(600))
			continue;
		n->used = true;
		make_id(n->id);
		snprintf(n->name, sizeof(n->name), "operator-net-%d", i);
		if (i == 0)
			snprintf(n->subnet, sizeof(n->subnet), "10.213.0.%u/28", 16 * rnd_below(16));
		else if (i == 1)
			snprintf(n->subnet, sizeof(n->subnet), "10.213.0.%u/26", 64 * rnd_below(4));
		else
			snprintf(n->subnet, sizeof(n->subnet), "172.30.0.0/24");
		trace("engine: foreign network %s %s", n->name, n->subnet);
	}
}

static bool subnets_overlap(const char *a, const char *b)
{
	unsigned a1, a2, a3, a4, ap, b1, b2, b3, b4, bp;
	uint32_t x, y, mx, my;

	if (sscanf(a, "%u.%u.%u.%u/%u", &a1, &a2, &a3, &a4, &ap) != 5 ||
	    sscanf(b, "%u.%u.%u.%u/%u", &b1, &b2, &b3, &b4, &bp) != 5)
		return false;
	x = a1 << 24 | a2 << 16 | a3 << 8 | a4;
	y = b1 << 24 | b2 << 16 | b3 << 8 | b4;
	mx = ap ? 0xffffffffu << (32 - ap) : 0;
	my = bp ? 0xffffffffu << (32 - bp) : 0;
	return (x & mx & my) == (y & mx & my);
}

/* ---- the behaviour of each call: applied when it completes ---- */

static int api_error(struct docker_call *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int api_error(struct docker_call *c, int status, const char *fmt, ...)
{
	va_list ap;

	c->error.code = DOCKER_ERR_API;
	c->error.status = status;
	c->error.op = c->op;
	va_start(ap, fmt);
	vsnprintf(c->error.message, sizeof(c->error.message), fmt, ap);
	va_end(ap);
	return DOCKER_ERR_API;
}

static int plain_error(struct docker_call *c, int code, const char *what)
{
	c->error.code = code;
	c->error.status = 0;
	c->error.op = c->op;
	snprintf(c->error.message, sizeof(c->error.message), "%s", what);
	return code;
}

/* The effect of t on the engine; 0 or the error the engine answers. */
static int apply(struct docker_call *c, struct ticket *t)
{
	struct e_ct *ct;
	struct e_net *n;

	switch (t->op) {
	case DOCKER_OP_NETWORK_CREATE:
		if (engine_net_by_name(t->name))
			return api_error(c, 409, "network with name %s already exists", t->name);
		for (int i = 0; i < E_NETS; i++)
			if (e_nets[i].used && subnets_overlap(e_nets[i].subnet, t->subnet))
				return api_error(c, 400, "invalid pool request: Pool overlaps with "
						 "other one on this address space");
		for (int i = 0; i < E_NETS; i++) {
			n = &e_nets[i];
			if (n->used)
				continue;
			n->used = true;
			make_id(n->id);
			snprintf(n->name, sizeof(n->name), "%s", t->name);
			snprintf(n->subnet, sizeof(n->subnet), "%s", t->subnet);
			n->ours = t->ours;
			n->internal = t->internal;
			memcpy(t->rid, n->id, sizeof(t->rid));
			return 0;
		}
		return api_error(c, 500, "fake engine: too many networks");
	case DOCKER_OP_NETWORK_REMOVE:
		if (!(n = net_find(t->arg)))
			return api_error(c, 404, "network %s not found", t->arg);
		for (int i = 0; i < E_CTS; i++)
			if (e_cts[i].used && strcmp(e_cts[i].netmode, n->name) == 0)
				return api_error(c, 403, "error while removing network: network %s "
						 "has active endpoints", n->name);
		n->used = false;
		return 0;
	case DOCKER_OP_CONTAINER_CREATE:
		if (ct_find(t->name))
			return api_error(c, 409, "Conflict. The container name \"/%s\" is already "
					 "in use", t->name);
		if (!net_find(t->netmode))
			return api_error(c, 404, "network %s not found", t->netmode);
		for (int i = 0; i < E_CTS; i++) {
			ct = &e_cts[i];
			if (ct->used)
				continue;
			memset(ct, 0, sizeof(*ct));
			ct->used = true;
			make_id(ct->id);
			memcpy(ct->name, t->name, sizeof(ct->name));
			memcpy(ct->instance, t->instance, sizeof(ct->instance));
			memcpy(ct->uid, t->uid, sizeof(ct->uid));
			memcpy(ct->mnet, t->mnet, sizeof(ct->mnet));
			memcpy(ct->netmode, t->netmode, sizeof(ct->netmode));
			ct->ours = t->ours;
			emit("create", ct);
			memcpy(t->rid, ct->id, sizeof(t->rid));
			return 0;
		}
		return api_error(c, 500, "fake engine: too many containers");
	case DOCKER_OP_CONTAINER_START:
		if (!(ct = ct_find(t->arg)))
			return api_error(c, 404, "No such container: %s", t->arg);
		if (!ct->running)
			ct_start(ct);
		return 0;
	case DOCKER_OP_CONTAINER_STOP:
		if (!(ct = ct_find(t->arg)))
			return api_error(c, 404, "No such container: %s", t->arg);
		ct_die(ct, 143);
		return 0;
	case DOCKER_OP_CONTAINER_REMOVE:
		if (!(ct = ct_find(t->arg)))
			return api_error(c, 404, "No such container: %s", t->arg);
		if (ct->running && !t->force)
			return api_error(c, 409, "You cannot remove a running container");
		ct_destroy(ct);
		return 0;
	case DOCKER_OP_CONTAINER_INSPECT:
	case DOCKER_OP_CONTAINER_LOGS:
		if (!(ct = ct_find(t->arg)))
			return api_error(c, 404, "No such container: %s", t->arg);
		memcpy(t->rid, ct->id, sizeof(t->rid));
		if (t->op == DOCKER_OP_CONTAINER_LOGS && c->on_log) {
			static const char line[] = "agentic-init: fake init log line\n";

			c->on_log(c->ctx, 2, (const uint8_t *)line, sizeof(line) - 1);
		}
		return 0;
	case DOCKER_OP_NETWORK_INSPECT:
		if (!(n = net_find(t->arg)))
			return api_error(c, 404, "network %s not found", t->arg);
		memcpy(t->rid, n->id, sizeof(t->rid));
		return 0;
	default:
		return 0;
	}
}

/* Completes t: its fault, or its effect. */
static int complete(struct docker_call *c, struct ticket *t)
{
	int r;

	t->done = true;
	switch (t->fault) {
	case F_500:
		r = api_error(c, 500, "fake engine: internal error");
		break;
	case F_404:
		r = t->op == DOCKER_OP_CONTAINER_CREATE
			? api_error(c, 404, "No such image: fake")
			: apply(c, t);
		break;
	case F_TRANSPORT:
		r = plain_error(c, -ECONNRESET, "connection reset by the engine");
		break;
	case F_REPLY:
		r = plain_error(c, DOCKER_ERR_REPLY, "the answer is not what the API documents");
		break;
	case F_LOST:
		apply(c, t);
		r = plain_error(c, -ECONNRESET, "connection reset after the engine acted");
		break;
	default:
		r = apply(c, t);
	}
	trace("engine: %s %.40s -> %d%s%s", op_name(t->op), t->arg[0] ? t->arg : t->name, r,
	      r ? " " : "", r ? c->error.message : "");
	return r;
}

static bool in_blocking; /* recovery's blocking calls: their own fault rate */

static int begin(struct docker_call *c, struct docker_client *dc, enum docker_op op,
		 const char *arg)
{
	struct ticket *t = NULL;
	uint32_t busy = 0, fail = in_blocking ? knobs.rfail : knobs.fail;

	memset(c, 0, sizeof(*c));
	c->dc = dc;
	c->op = op;
	for (int i = 0; i < TICKETS; i++)
		busy += tickets[i].used;
	if (!in_blocking && (busy >= CONNS + 1 /* the event stream holds one of its own */ ||
			     (op != DOCKER_OP_EVENTS && chance(knobs.busy)))) {
		trace("engine: %s busy", op_name(op));
		return DOCKER_ERR_BUSY;
	}
	if (chance(fail / 4)) {
		trace("engine: %s cannot connect", op_name(op));
		return plain_error(c, -ECONNREFUSED, "cannot connect to the engine");
	}
	for (int i = 0; i < TICKETS && !t; i++)
		if (!tickets[i].used)
			t = &tickets[i];
	SIM_CHECK(t, "engine: out of tickets");
	memset(t, 0, sizeof(*t));
	t->used = true;
	t->op = op;
	snprintf(t->arg, sizeof(t->arg), "%s", arg ? arg : "");
	/* most answers are quick, some slow: their order across sandboxes is anyone's */
	t->due = sim_now + (chance(100) ? 200 + rnd_below(3000) : rnd_below(150));
	if (op != DOCKER_OP_EVENTS && chance(fail)) {
		uint32_t k = rnd_below(4);

		t->fault = k == 0 ? F_500 : k == 1 ? F_404 : k == 2 ? F_TRANSPORT : F_REPLY;
	} else if (!in_blocking && op != DOCKER_OP_EVENTS && op != DOCKER_OP_CONTAINER_INSPECT &&
		   op != DOCKER_OP_NETWORK_LIST && chance(knobs.lost)) {
		t->fault = F_LOST;
	}
	c->state = (int)(t - tickets) + 1;
	return 0;
}

static bool has_owner(const struct docker_kv *kv)
{
	for (; kv && kv->key; kv++)
		if (strcmp(kv->key, "agentic-daemon") == 0 && strcmp(kv->value, owner) == 0)
			return true;
	return false;
}

static const char *kv_get(const struct docker_kv *kv, const char *key)
{
	for (; kv && kv->key; kv++)
		if (strcmp(kv->key, key) == 0)
			return kv->value;
	return "";
}

/* ---- the wrapped client: begins ---- */

int __wrap_docker_network_create_begin(struct docker_call *c, struct docker_client *dc,
				       const struct docker_network_spec *spec)
{
	int r = begin(c, dc, DOCKER_OP_NETWORK_CREATE, NULL);
	struct ticket *t = ticket_of(c);

	if (r == 0) {
		snprintf(t->name, sizeof(t->name), "%s", spec->name);
		snprintf(t->subnet, sizeof(t->subnet), "%s", spec->subnet ? spec->subnet : "");
		t->ours = has_owner(spec->labels);
		t->internal = spec->internal;
	}
	return r;
}

int __wrap_docker_network_list_begin(struct docker_call *c, struct docker_client *dc,
				     const char *label)
{
	int r = begin(c, dc, DOCKER_OP_NETWORK_LIST, NULL);

	if (r == 0)
		ticket_of(c)->list_ours = label != NULL;
	return r;
}

int __wrap_docker_network_remove_begin(struct docker_call *c, struct docker_client *dc,
				       const char *id)
{
	return begin(c, dc, DOCKER_OP_NETWORK_REMOVE, id);
}

int __wrap_docker_container_create_begin(struct docker_call *c, struct docker_client *dc,
					 const struct docker_container_spec *spec)
{
	int r = begin(c, dc, DOCKER_OP_CONTAINER_CREATE, NULL);
	struct ticket *t = ticket_of(c);

	if (r == 0) {
		snprintf(t->name, sizeof(t->name), "%s", spec->name);
		snprintf(t->instance, sizeof(t->instance), "%s",
			 kv_get(spec->labels, "agentic-instance-id"));
		snprintf(t->uid, sizeof(t->uid), "%s", kv_get(spec->labels, "agentic-control-uid"));
		snprintf(t->mnet, sizeof(t->mnet), "%s",
			 kv_get(spec->labels, "agentic-managed-network"));
		snprintf(t->netmode, sizeof(t->netmode), "%s", spec->network_mode);
		t->ours = has_owner(spec->labels);
	}
	return r;
}

int __wrap_docker_container_start_begin(struct docker_call *c, struct docker_client *dc,
					const char *id)
{
	return begin(c, dc, DOCKER_OP_CONTAINER_START, id);
}

int __wrap_docker_container_inspect_begin(struct docker_call *c, struct docker_client *dc,
					  const char *id)
{
	return begin(c, dc, DOCKER_OP_CONTAINER_INSPECT, id);
}

int __wrap_docker_container_stop_begin(struct docker_call *c, struct docker_client *dc,
				       const char *id, int timeout_s)
{
	return begin(c, dc, DOCKER_OP_CONTAINER_STOP, id);
}

int __wrap_docker_container_logs_begin(struct docker_call *c, struct docker_client *dc,
				       const char *id, bool follow, int tail, bool timestamps,
				       docker_log_fn fn, void *ctx)
{
	int r = begin(c, dc, DOCKER_OP_CONTAINER_LOGS, id);

	c->on_log = fn;
	c->ctx = ctx;
	return r;
}

int __wrap_docker_container_remove_begin(struct docker_call *c, struct docker_client *dc,
					 const char *id, bool force)
{
	int r = begin(c, dc, DOCKER_OP_CONTAINER_REMOVE, id);

	if (r == 0)
		ticket_of(c)->force = force;
	return r;
}

int __wrap_docker_container_list_begin(struct docker_call *c, struct docker_client *dc,
				       const char *label)
{
	int r;

	in_blocking = true; /* only recovery lists containers */
	r = begin(c, dc, DOCKER_OP_CONTAINER_LIST, NULL);
	in_blocking = false;

	if (r == 0)
		ticket_of(c)->list_ours = label != NULL;
	return r;
}

int __wrap_docker_events_begin(struct docker_call *c, struct docker_client *dc,
			       const char *filters, int64_t since, docker_event_fn fn, void *ctx)
{
	int r = begin(c, dc, DOCKER_OP_EVENTS, NULL);
	struct ticket *t = ticket_of(c);

	c->on_event = fn;
	c->ctx = ctx;
	if (r == 0) {
		t->ev_cursor = 0;
		while (t->ev_cursor < nevents && events[t->ev_cursor].time_ns < since * 1000000000ll)
			t->ev_cursor++;
		trace("engine: event stream opened since=%lld replaying=%u", (long long)since,
		      nevents - t->ev_cursor);
	}
	return r;
}

/* ---- stepping ---- */

int __wrap_docker_call_step(struct docker_call *c)
{
	struct ticket *t = ticket_of(c);

	if (!t)
		return plain_error(c, ERR_STATE, "no such call");
	if (t->done)
		return 0;
	if (t->op == DOCKER_OP_EVENTS) {
		if (chance(knobs.fail / 2)) {
			t->done = true;
			trace("engine: event stream broken");
			return plain_error(c, -ECONNRESET, "event stream reset");
		}
		while (t->ev_cursor < nevents) {
			const struct e_event *e = &events[t->ev_cursor++];
			struct docker_event ev = { .time_nano = e->time_ns, .attributes = -1 };

			snprintf(ev.type, sizeof(ev.type), "container");
			snprintf(ev.action, sizeof(ev.action), "%s", e->action);
			memcpy(ev.id, e->id, sizeof(e->id));
			if (c->on_event)
				c->on_event(c->ctx, &ev);
		}
		return -EAGAIN;
	}
	if (sim_now < t->due)
		return -EAGAIN;
	return complete(c, t);
}

int __wrap_docker_call_run(struct docker_call *c)
{
	struct ticket *t = ticket_of(c);

	if (!t)
		return plain_error(c, ERR_STATE, "no such call");
	return t->done ? 0 : complete(c, t);
}

int __wrap_docker_call_fd(const struct docker_call *c)
{
	return -1;
}

short __wrap_docker_call_events(const struct docker_call *c)
{
	return 0;
}

int __wrap_docker_call_timeout_ms(const struct docker_call *c)
{
	const struct ticket *t = ticket_of(c);

	if (!t || t->op == DOCKER_OP_EVENTS)
		return -1;
	return t->due > sim_now ? (int)(t->due - sim_now) : 0;
}

void __wrap_docker_call_end(struct docker_call *c)
{
	struct ticket *t = ticket_of(c);

	if (t)
		t->used = false;
	c->state = 0;
}

/* ---- results ---- */

int __wrap_docker_result_id(struct docker_call *c, char id[DOCKER_ID_SIZE])
{
	struct ticket *t = ticket_of(c);

	if (!t || !t->rid[0])
		return DOCKER_ERR_REPLY;
	memcpy(id, t->rid, DOCKER_ID_SIZE);
	return 0;
}

static void fill_container(const struct e_ct *ct, struct docker_container *out)
{
	uint32_t n = 0;

	memset(out, 0, offsetof(struct docker_container, text));
	memcpy(out->id, ct->id, sizeof(out->id));
	out->name = ct->name;
	out->running = ct->running;
	out->pid = ct->running ? ct->pid : 0;
	out->exit_code = ct->exit_code;
	out->status = ct->running ? "running" : "exited";
	out->labels[n++] = (struct docker_kv){ "agentic-sandbox", "true" };
	if (ct->ours)
		out->labels[n++] = (struct docker_kv){ "agentic-daemon", owner };
	out->labels[n++] = (struct docker_kv){ "agentic-instance-id", ct->instance };
	out->labels[n++] = (struct docker_kv){ "agentic-control-uid", ct->uid };
	if (ct->mnet[0])
		out->labels[n++] = (struct docker_kv){ "agentic-managed-network", ct->mnet };
	out->nlabels = n;
	out->network_mode = ct->netmode;
}

int __wrap_docker_result_container(struct docker_call *c, struct docker_container *out)
{
	struct ticket *t = ticket_of(c);
	struct e_ct *ct = t ? ct_find(t->rid) : NULL;

	if (!ct)
		return DOCKER_ERR_REPLY;
	fill_container(ct, out);
	return 0;
}

int __wrap_docker_result_each(struct docker_call *c,
			      int (*fn)(void *ctx, const struct docker_summary *s), void *ctx)
{
	struct ticket *t = ticket_of(c);
	struct docker_summary s;
	int r;

	if (!t)
		return DOCKER_ERR_REPLY;
	if (t->op == DOCKER_OP_CONTAINER_LIST) {
		for (int i = 0; i < E_CTS; i++) {
			if (!e_cts[i].used || (t->list_ours && !e_cts[i].ours))
				continue;
			memset(&s, 0, sizeof(s));
			memcpy(s.id, e_cts[i].id, sizeof(s.id));
			snprintf(s.name, sizeof(s.name), "%s", e_cts[i].name);
			snprintf(s.state, sizeof(s.state), "%s", e_cts[i].running ? "running" : "exited");
			if ((r = fn(ctx, &s)) != 0)
				return r;
		}
		return 0;
	}
	for (int i = 0; i < E_NETS; i++) {
		if (!e_nets[i].used || (t->list_ours && !e_nets[i].ours))
			continue;
		memset(&s, 0, sizeof(s));
		memcpy(s.id, e_nets[i].id, sizeof(s.id));
		snprintf(s.name, sizeof(s.name), "%s", e_nets[i].name);
		if ((r = fn(ctx, &s)) != 0)
			return r;
	}
	return 0;
}

int __wrap_docker_result_each_subnet(struct docker_call *c, const char *label_key,
				     const char *label_value,
				     int (*fn)(void *ctx, const char *subnet, bool labelled),
				     void *ctx)
{
	int r;

	for (int i = 0; i < E_NETS; i++) {
		if (!e_nets[i].used || !e_nets[i].subnet[0])
			continue;
		if ((r = fn(ctx, e_nets[i].subnet, e_nets[i].ours)) != 0)
			return r;
	}
	return 0;
}

/* ---- the blocking forms recovery uses ---- */

static int blocking(enum docker_op op, const char *arg, bool force, struct docker_error *err,
		    struct docker_call *c)
{
	struct ticket *t;
	int r;

	in_blocking = true;
	r = begin(c, NULL, op, arg);
	in_blocking = false;
	t = ticket_of(c);
	if (r == 0) {
		t->force = force;
		r = complete(c, t);
	}
	if (r != 0 && err)
		*err = c->error;
	return r;
}

int __wrap_docker_container_inspect(struct docker_client *dc, const char *id,
				    struct docker_container *out, struct docker_error *err)
{
	struct docker_call c;
	int r = blocking(DOCKER_OP_CONTAINER_INSPECT, id, false, err, &c);
	struct e_ct *ct = r == 0 ? ct_find(ticket_of(&c)->rid) : NULL;

	if (r == 0 && ct)
		fill_container(ct, out);
	__wrap_docker_call_end(&c);
	return r;
}

int __wrap_docker_container_remove(struct docker_client *dc, const char *id, bool force,
				   struct docker_error *err)
{
	struct docker_call c;
	int r = blocking(DOCKER_OP_CONTAINER_REMOVE, id, force, err, &c);

	__wrap_docker_call_end(&c);
	return r;
}

int __wrap_docker_network_remove(struct docker_client *dc, const char *id,
				 struct docker_error *err)
{
	struct docker_call c;
	int r = blocking(DOCKER_OP_NETWORK_REMOVE, id, false, err, &c);

	__wrap_docker_call_end(&c);
	return r;
}

int __wrap_docker_network_inspect(struct docker_client *dc, const char *id,
				  struct docker_network *out, struct docker_error *err)
{
	struct docker_call c;
	int r = blocking(DOCKER_OP_NETWORK_INSPECT, id, false, err, &c);
	struct e_net *n = r == 0 ? net_find(ticket_of(&c)->rid) : NULL;

	if (r == 0 && n) {
		memset(out, 0, offsetof(struct docker_network, text));
		memcpy(out->id, n->id, sizeof(out->id));
		snprintf(out->text, sizeof(out->text), "%s", n->name);
		out->name = out->text;
		snprintf(out->text + 100, sizeof(out->text) - 100, "%s", n->subnet);
		out->subnet = out->text + 100;
		out->internal = n->internal;
		out->driver = "bridge";
	}
	__wrap_docker_call_end(&c);
	return r;
}

/* ---- agenticd dies: each answer in flight is lost; the effect happened or did not ---- */
void engine_crash(void)
{
	for (int i = 0; i < TICKETS; i++) {
		struct ticket *t = &tickets[i];
		struct docker_call c;

		if (!t->used)
			continue;
		if (!t->done && t->op != DOCKER_OP_EVENTS && chance(500)) {
			memset(&c, 0, sizeof(c));
			c.op = t->op;
			t->fault = F_NONE;
			trace("engine: in flight at the crash, took effect:");
			complete(&c, t);
		}
		t->used = false;
	}
}

/* ---- behind agenticd's back ---- */
void engine_chaos(void)
{
	struct e_ct *ct = &e_cts[rnd_below(E_CTS)];
	uint32_t k = rnd_below(10);

	if (!ct->used || !ct->ours)
		return;
	if (k < 5 && ct->running) {
		trace("chaos: the init of %s exits", ct->name);
		ct_die(ct, 1);
	} else if (k < 8 && !ct->running && ct->life) {
		trace("chaos: %s started again", ct->name);
		ct_start(ct);
	} else if (k >= 8) {
		trace("chaos: docker rm -f %s", ct->name);
		ct_destroy(ct);
	}
}
