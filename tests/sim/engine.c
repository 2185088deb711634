/* engine.c: the fake runtime (struct runtime, runtime.h) and the engine behind it. Each call
 * is answered after a seeded delay, so answers come back in any order; a call may fail to
 * begin, fail when answered (each outcome runtime.h names: RT_ENGINE, RT_UNREADABLE,
 * RT_IMAGE_MISSING, and RT_GONE, RT_NAME_TAKEN, RT_OVERLAPS where the engine's state says so),
 * or take effect and lose its answer. Containers and networks live here, not in agenticd:
 * they survive its restarts. The event stream opens from the second of the last event an
 * earlier runtime delivered (as the Docker runtime's kept time and Docker's `since` do); a
 * container's life from before the runtime's setup is not delivered (recovery read it), what
 * was done to it (exec, update) is. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.h"
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
static int64_t seen_ns;       /* the last event delivered: kept across restarts */
static int64_t setup_ns;      /* the runtime's setup */

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
#define DTICKETS 64
#define DCONNS 4           /* the fake client's connection pool (the real one has more) */
enum dfault { DF_NONE, DF_500, DF_404, DF_TRANSPORT, DF_REPLY, DF_LOST };
struct dticket {
	bool used, done;
	enum docker_op op;
	char arg[SB_NET_BYTES + RT_ID_BYTES];
	enum dfault fault;
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
	char rid[RT_ID_BYTES];
	bool list_ours;            /* a list filtered by our owner label */
};
static struct dticket dtickets[DTICKETS];


/* ---- the calls in flight: one per call slot ---- */
enum fault { F_NONE, F_ENGINE, F_IMAGE, F_UNREADABLE, F_LOST };
struct pending {
	struct rt_call *c;
	int64_t due;
	enum fault fault;
};
static struct pending pend[64];
static struct runtime fake;
static uint32_t ev_cursor;
static bool started;

static const char *op_name(enum rt_op op)
{
	static const char *n[] = { "?", "net-create", "net-scan", "ct-create", "ct-start",
				   "ct-inspect", "ct-logs", "ct-stop", "ct-remove", "net-remove" };
	return op < sizeof(n) / sizeof(n[0]) ? n[op] : "?";
}

static uint32_t dinflight(void);

uint32_t engine_inflight(void)
{
	uint32_t n = dinflight();

	for (int i = 0; i < 64; i++)
		n += pend[i].c != NULL;
	return n;
}

static void make_id(char id[RT_ID_BYTES])
{
	uint64_t a = ++next_id, b = rnd();

	snprintf(id, RT_ID_BYTES, "%016llx%016llx%016llx%016llx", (unsigned long long)a,
		 (unsigned long long)b, (unsigned long long)(a ^ 0x5a5a5a5aull),
		 (unsigned long long)(b >> 3));
}

/* ---- the engine's objects ---- */
static struct e_ct *ct_find(const char *ref)
{
	size_t n = ref ? strlen(ref) : 0;

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
	size_t n = ref ? strlen(ref) : 0;

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
	memset(pend, 0, sizeof(pend));
	memset(dtickets, 0, sizeof(dtickets));
	nevents = 0;
	ev_cursor = 0;
	seen_ns = 0;
	started = false;
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

static enum rt_outcome fail_with(struct rt_result *res, enum rt_outcome o, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static enum rt_outcome fail_with(struct rt_result *res, enum rt_outcome o, const char *fmt, ...)
{
	va_list ap;

	res->outcome = o;
	va_start(ap, fmt);
	vsnprintf(res->text, sizeof(res->text), fmt, ap);
	va_end(ap);
	return o;
}

/* The effect of c on the engine, now; its outcome. */
static enum rt_outcome apply(struct rt_call *c)
{
	struct rt_result *res = &c->res;
	struct sandbox *sb = c->sb;
	struct e_ct *ct;
	struct e_net *n;

	res->outcome = RT_OK;
	res->text[0] = '\0';
	switch (c->op) {
	case RT_NET_CREATE:
		if (engine_net_by_name(c->name))
			return fail_with(res, RT_NAME_TAKEN, "network with name %s already exists",
					 c->name);
		for (int i = 0; i < E_NETS; i++)
			if (e_nets[i].used && subnets_overlap(e_nets[i].subnet, c->subnet))
				return fail_with(res, RT_OVERLAPS, "invalid pool request: Pool "
						 "overlaps with other one on this address space");
		for (int i = 0; i < E_NETS; i++) {
			n = &e_nets[i];
			if (n->used)
				continue;
			n->used = true;
			make_id(n->id);
			snprintf(n->name, sizeof(n->name), "%s", c->name);
			snprintf(n->subnet, sizeof(n->subnet), "%s", c->subnet);
			n->ours = true;
			n->internal = true;
			memcpy(res->id, n->id, sizeof(res->id));
			return RT_OK;
		}
		return fail_with(res, RT_ENGINE, "fake engine: too many networks");
	case RT_NET_SCAN:
		for (int i = 0; i < E_NETS; i++)
			if (e_nets[i].used && e_nets[i].subnet[0] && c->each_subnet)
				c->each_subnet(NULL, e_nets[i].subnet, e_nets[i].ours);
		return RT_OK;
	case RT_NET_REMOVE:
		if (!(n = net_find(c->id)))
			return fail_with(res, RT_GONE, "network %s not found", c->id);
		for (int i = 0; i < E_CTS; i++)
			if (e_cts[i].used && strcmp(e_cts[i].netmode, n->name) == 0)
				return fail_with(res, RT_ENGINE, "error while removing network: network "
						 "%s has active endpoints", n->name);
		n->used = false;
		return RT_OK;
	case RT_CT_CREATE:
		if (ct_find(sb->name))
			return fail_with(res, RT_NAME_TAKEN, "Conflict. The container name \"/%s\" is "
					 "already in use", sb->name);
		if (!net_find(sb->network))
			return fail_with(res, RT_ENGINE, "network %s not found", sb->network);
		for (int i = 0; i < E_CTS; i++) {
			ct = &e_cts[i];
			if (ct->used)
				continue;
			memset(ct, 0, sizeof(*ct));
			ct->used = true;
			make_id(ct->id);
			snprintf(ct->name, sizeof(ct->name), "%s", sb->name);
			snprintf(ct->instance, sizeof(ct->instance), "%s", sb->instance_id);
			snprintf(ct->uid, sizeof(ct->uid), "%u", sb->uid);
			snprintf(ct->mnet, sizeof(ct->mnet), "%s", c->managed_net ? sb->network : "");
			snprintf(ct->netmode, sizeof(ct->netmode), "%s", sb->network);
			ct->ours = true;
			emit("create", ct);
			memcpy(res->id, ct->id, sizeof(res->id));
			return RT_OK;
		}
		return fail_with(res, RT_ENGINE, "fake engine: too many containers");
	case RT_CT_START:
		if (!(ct = ct_find(c->id)))
			return fail_with(res, RT_GONE, "No such container: %s", c->id);
		if (!ct->running)
			ct_start(ct);
		return RT_OK;
	case RT_CT_RENAME:
		if (!(ct = ct_find(c->id)))
			return fail_with(res, RT_GONE, "No such container: %s", c->id);
		if (ct_find(c->name) && ct_find(c->name) != ct)
			return fail_with(res, RT_NAME_TAKEN, "Conflict. The container name \"/%s\" is "
					 "already in use", c->name);
		snprintf(ct->name, sizeof(ct->name), "%s", c->name);
		return RT_OK;
	case RT_CT_STOP:
		if (!(ct = ct_find(c->id)))
			return fail_with(res, RT_GONE, "No such container: %s", c->id);
		ct_die(ct, 143);
		return RT_OK;
	case RT_CT_REMOVE:
		if (!(ct = ct_find(c->id)))
			return fail_with(res, RT_GONE, "No such container: %s", c->id);
		ct_destroy(ct);
		return RT_OK;
	case RT_CT_INSPECT:
		if (!(ct = ct_find(c->id)))
			return fail_with(res, RT_GONE, "No such container: %s", c->id);
		memcpy(res->id, ct->id, sizeof(res->id));
		snprintf(res->instance_id, sizeof(res->instance_id), "%s", ct->instance);
		res->running = ct->running;
		res->pid = ct->running ? ct->pid : 0;
		res->exit_code = ct->exit_code;
		if (c->check_net)
			res->net = (struct rt_netcheck){ .read = true, .ok = true, .why = "verified" };
		return RT_OK;
	case RT_CT_LOGS:
		if (!(ct = ct_find(c->id)))
			return fail_with(res, RT_GONE, "No such container: %s", c->id);
		if (sb) {
			sb->log_len = (uint32_t)snprintf(sb->init_log, sizeof(sb->init_log),
							 "agentic-init: fake init log line\n");
		}
		return RT_OK;
	}
	return fail_with(res, RT_ENGINE, "fake engine: unknown call %d", c->op);
}

static void complete(struct pending *p)
{
	struct rt_call *c = p->c;
	enum fault f = p->fault;

	p->c = NULL;
	switch (f) {
	case F_ENGINE:
		fail_with(&c->res, RT_ENGINE, "fake engine: internal error (500)");
		break;
	case F_IMAGE:
		if (c->op == RT_CT_CREATE)
			fail_with(&c->res, RT_IMAGE_MISSING, "No such image: fake");
		else
			fail_with(&c->res, RT_ENGINE, "connection reset by the engine");
		break;
	case F_UNREADABLE:
		fail_with(&c->res, RT_UNREADABLE, "the answer is not what the API documents");
		break;
	case F_LOST:
		apply(c);
		fail_with(&c->res, RT_ENGINE, "connection reset after the engine acted");
		break;
	default:
		apply(c);
	}
	trace("engine: %s %.40s -> %d %s", op_name(c->op),
	      c->id ? c->id : c->name ? c->name : c->sb ? c->sb->name : "", c->res.outcome,
	      c->res.text);
	if (!sim_crashing && fake.sink.call_done)
		fake.sink.call_done(fake.sink.ctx, c);
}

/* A start's recovery begins: a network an earlier one could not remove is its to settle. */
void engine_recovery_begins(void)
{
	for (int i = 0; i < E_NETS; i++)
		e_nets[i].stuck = false;
}

/* ---- the fake runtime's operations ---- */

static int f_call(void *self, struct rt_call *c)
{
	struct pending *p;

	SIM_CHECK(c->slot < 64, "runtime: call slot %u out of range", c->slot);
	p = &pend[c->slot];
	SIM_CHECK(!p->c, "runtime: a second call on slot %u while one runs (%s)", c->slot,
		  op_name(c->op));
	memset(&c->res, 0, sizeof(c->res));
	if (chance(knobs.fail / 4)) {
		trace("engine: %s cannot begin", op_name(c->op));
		fail_with(&c->res, RT_ENGINE, "cannot connect to the engine");
		return -ECONNREFUSED;
	}
	p->c = c;
	/* most answers are quick, some slow: their order across sandboxes is anyone's */
	p->due = sim_now + (chance(100) ? 200 + rnd_below(3000) : rnd_below(150));
	p->fault = F_NONE;
	if (chance(knobs.fail)) {
		uint32_t k = rnd_below(3);

		p->fault = k == 0 ? F_ENGINE : k == 1 ? F_IMAGE : F_UNREADABLE;
	} else if (c->op != RT_CT_INSPECT && c->op != RT_NET_SCAN && chance(knobs.lost)) {
		p->fault = F_LOST;
	}
	return 0;
}

static void deliver_events(void)
{
	while (started && ev_cursor < nevents) {
		const struct e_event *e = &events[ev_cursor++];
		struct rt_notice n = { .container_id = e->id, .source = e->action };

		n.ev = strcmp(e->action, "start") == 0 ? RT_EV_START
		       : strcmp(e->action, "die") == 0 ? RT_EV_DIE
		       : strcmp(e->action, "destroy") == 0 ? RT_EV_DESTROY
		       : strcmp(e->action, "exec_start") == 0 ? RT_EV_EXEC : RT_EV_CHANGED;
		seen_ns = e->time_ns;
		if (n.ev <= RT_EV_DESTROY && e->time_ns < setup_ns)
			continue;
		if (fake.sink.event)
			fake.sink.event(fake.sink.ctx, &n);
	}
}

static void f_tick(void *self, int64_t now)
{
	uint32_t order[64], n = 0;

	/* the stream broke and was opened again: the events of this second come again */
	if (started && chance(knobs.fail / 2)) {
		int64_t second = ((SIM_WALL_BASE + sim_now) / 1000) * 1000000000ll;

		while (ev_cursor > 0 && events[ev_cursor - 1].time_ns >= second)
			ev_cursor--;
		trace("engine: event stream reopened, replaying from this second");
	}
	deliver_events();
	for (uint32_t i = 0; i < 64; i++)
		if (pend[i].c && pend[i].due <= now)
			order[n++] = i;
	/* those due answer in a random order */
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = rnd_below(i), t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (pend[order[i]].c)
			complete(&pend[order[i]]);
		deliver_events();
	}
}

static int64_t f_next_deadline(void *self, int64_t now)
{
	int64_t next = INT64_MAX;

	if (started && ev_cursor < nevents)
		return now;
	for (int i = 0; i < 64; i++)
		if (pend[i].c && pend[i].due < next)
			next = pend[i].due;
	return next;
}

static void f_ready(void *self, uint32_t id)
{
}

static void f_start(void *self)
{
	int64_t second = ((SIM_WALL_BASE + sim_now) / 1000) * 1000000000ll;

	if (seen_ns)
		second = (seen_ns / 1000000000ll) * 1000000000ll;
	ev_cursor = 0;
	while (ev_cursor < nevents && events[ev_cursor].time_ns < second)
		ev_cursor++;
	started = true;
	trace("engine: event stream opened, replaying %u", nevents - ev_cursor);
}

static void f_stop(void *self)
{
	started = false;
}

/* recovery's calls: their own fault rate */
static int sync_fault(const char *what, char *err, size_t err_size)
{
	if (!chance(knobs.rfail))
		return 0;
	snprintf(err, err_size, "fake engine: %s failed (500)", what);
	trace("engine: recovery's %s fails", what);
	return -EIO;
}

static int f_containers(void *self, int (*fn)(void *ctx, const char *id), void *ctx, char *err,
			size_t err_size)
{
	int r;

	if ((r = sync_fault("container list", err, err_size)) != 0)
		return r;
	for (int i = 0; i < E_CTS; i++)
		if (e_cts[i].used && e_cts[i].ours && (r = fn(ctx, e_cts[i].id)) != 0)
			return r > 0 ? 0 : r;
	return 0;
}

static int f_inspect(void *self, const char *id, struct rt_container *out, char *err,
		     size_t err_size)
{
	struct e_ct *ct = ct_find(id);
	int r;

	if ((r = sync_fault("container inspect", err, err_size)) != 0)
		return r;
	if (!ct) {
		snprintf(err, err_size, "No such container: %s", id);
		return -ENOENT;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out->id, ct->id, sizeof(out->id));
	out->name = ct->name;
	out->running = ct->running;
	out->pid = ct->running ? ct->pid : 0;
	out->instance_id = ct->instance;
	out->control_uid = ct->uid;
	out->managed_network = ct->mnet[0] ? ct->mnet : NULL;
	return 0;
}

static int f_networks(void *self, int (*fn)(void *ctx, const char *id, const char *name),
		      void *ctx, char *err, size_t err_size)
{
	int r;

	if ((r = sync_fault("network list", err, err_size)) != 0)
		return r;
	for (int i = 0; i < E_NETS; i++)
		if (e_nets[i].used && e_nets[i].ours && (r = fn(ctx, e_nets[i].id, e_nets[i].name)) != 0)
			return r > 0 ? 0 : r;
	return 0;
}

static int f_net_inspect(void *self, const char *id, struct rt_network *out, char *err,
			 size_t err_size)
{
	struct e_net *n = net_find(id);
	int r;

	if ((r = sync_fault("network inspect", err, err_size)) != 0)
		return r;
	if (!n) {
		snprintf(err, err_size, "network %s not found", id);
		return -ENOENT;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out->id, n->id, sizeof(out->id));
	out->name = n->name;
	out->subnet = n->subnet;
	out->internal = n->internal;
	return 0;
}

static int f_remove_now(void *self, bool network, const char *id, char *err, size_t err_size)
{
	struct rt_call c = { .op = network ? RT_NET_REMOVE : RT_CT_REMOVE, .id = id };
	int r;

	if ((r = sync_fault(network ? "network remove" : "container remove", err, err_size)) != 0) {
		if (network && net_find(id))
			net_find(id)->stuck = true;
		return r;
	}
	apply(&c);
	trace("engine: recovery removes %s %.40s -> %d %s", network ? "network" : "container", id,
	      c.res.outcome, c.res.text);
	if (c.res.outcome == RT_OK || c.res.outcome == RT_GONE)
		return 0;
	snprintf(err, err_size, "%s", c.res.text);
	return -EIO;
}

static int f_scan_now(void *self, int (*each_subnet)(void *ctx, const char *cidr, bool ours),
		      void *ctx, char *err, size_t err_size)
{
	int r;

	if ((r = sync_fault("network scan", err, err_size)) != 0)
		return r;
	for (int i = 0; i < E_NETS; i++)
		if (e_nets[i].used && e_nets[i].subnet[0] &&
		    (r = each_subnet(ctx, e_nets[i].subnet, e_nets[i].ours)) != 0)
			return r;
	return 0;
}

/* The workspace: a plain directory, not an ext4 image on a loop device. */
/* The workspace of instance id (name: its sandbox's, for the trace). */
static int ws_make(const char *id, const char *name, char *err, size_t err_size)
{
	char dir[LIMIT_PATH_BYTES + 16];

	if (chance(knobs.fail / 4)) {
		snprintf(err, err_size, "the agentshare cannot hold the workspace (simulated)");
		trace("share: workspace of %s: no space", name);
		return -ENOSPC;
	}
	host_instance_dir(&agenticd->cfg, id, dir, sizeof(dir) - 16);
	strcat(dir, "/workspace");
	if (mkdir(dir, 0700) != 0) {
		snprintf(err, err_size, "mkdir %s: %s", dir, strerror(errno));
		return -errno;
	}
	return 0;
}

static int f_workspace_make(void *self, const struct sandbox *sb, char *err, size_t err_size)
{
	return ws_make(sb->instance_id, sb->name, err, err_size);
}

static int f_workspace_mount(void *self, const struct sandbox *sb, char *err, size_t err_size)
{
	return 0;
}

void sim_rmtree(const char *path);

/* The record part as share_retire does it; the workspace deleted here, not in a child. */
static void ws_retire(const char *id, const char *name, bool drop_workspace)
{
	char dir[LIMIT_PATH_BYTES], p[LIMIT_PATH_BYTES + 32];

	if (host_instance_dir(&agenticd->cfg, id, dir, sizeof(dir)) != 0)
		return;
	trace("share: retire %s instance=%.8s drop_workspace=%d", name, id, drop_workspace);
	snprintf(p, sizeof(p), "%s/sandbox.json", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/.sandbox.json.tmp", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/current", dir);
	unlink(p);
	if (!drop_workspace) {
		rmdir(dir);
		return;
	}
	snprintf(p, sizeof(p), "%s/workspace", dir);
	sim_rmtree(p);
	rmdir(dir);
}

static void f_workspace_retire(void *self, const struct sandbox *sb, bool drop_workspace)
{
	ws_retire(sb->instance_id, sb->name, drop_workspace);
}

static const struct runtime_ops fake_ops = {
	.call = f_call,
	.tick = f_tick,
	.next_deadline = f_next_deadline,
	.ready = f_ready,
	.start = f_start,
	.stop = f_stop,
	.containers = f_containers,
	.inspect = f_inspect,
	.networks = f_networks,
	.net_inspect = f_net_inspect,
	.remove_now = f_remove_now,
	.scan_now = f_scan_now,
	.workspace_make = f_workspace_make,
	.workspace_mount = f_workspace_mount,
	.workspace_retire = f_workspace_retire,
};

/* A fresh runtime for a fresh agenticd (its call slots empty; the engine stays). */
struct runtime *engine_runtime(void)
{
	memset(&fake, 0, sizeof(fake));
	fake.ops = &fake_ops;
	fake.name = "fake";
	started = false;
	setup_ns = (SIM_WALL_BASE + sim_now) * 1000000ll;
	return &fake;
}

static void dcrash(void);

/* ---- agenticd dies: each answer in flight is lost; the effect happened or did not ---- */
void engine_crash(void)
{
	dcrash();
	for (int i = 0; i < 64; i++) {
		struct pending *p = &pend[i];

		if (!p->c)
			continue;
		if (chance(500)) {
			trace("engine: in flight at the crash, took effect: %s", op_name(p->c->op));
			apply(p->c);
		}
		p->c = NULL;
	}
	started = false;
}

/* ---- behind agenticd's back ---- */
static void taint(struct e_ct *ct, bool exec);

void engine_chaos(void)
{
	uint32_t mine[E_CTS], n = 0, k = rnd_below(12);
	struct e_ct *ct;

	for (uint32_t i = 0; i < E_CTS; i++)
		if (e_cts[i].used && e_cts[i].ours)
			mine[n++] = i;
	if (!n)
		return;
	ct = &e_cts[mine[rnd_below(n)]];
	if (k < 5 && ct->running) {
		trace("chaos: the init of %s exits", ct->name);
		ct_die(ct, 1);
	} else if (k < 8 && !ct->running && ct->life) {
		trace("chaos: %s started again", ct->name);
		ct_start(ct);
	} else if (k == 8 || k == 9) {
		trace("chaos: docker rm -f %s", ct->name);
		ct_destroy(ct);
	} else if (k >= 10) {
		taint(ct, k == 10);
	}
}

/* A `docker exec` into a running container of ours, or a `docker update` of it. */
static void taint(struct e_ct *ct, bool exec)
{
	if (exec && ct->running) {
		trace("chaos: docker exec into %s", ct->name);
		ct->tainted |= E_TAINT_EXEC;
		emit("exec_start", ct);
	} else if (!exec) {
		trace("chaos: docker update %s", ct->name);
		ct->tainted |= E_TAINT_CHANGED;
		emit("update", ct);
	}
}

void engine_taint(void)
{
	uint32_t mine[E_CTS], n = 0;

	for (uint32_t i = 0; i < E_CTS; i++)
		if (e_cts[i].used && e_cts[i].ours)
			mine[n++] = i;
	if (n)
		taint(&e_cts[mine[rnd_below(n)]], chance(500));
}

/* ==== the same engine under the Docker client (SIM_RUNTIME=docker) ====
 * The lifecycle then drives the real runtime_docker.c and its engine call queue (engine.c),
 * whose Docker client calls are wrapped (-Wl,--wrap) to answer from this engine: each call
 * begun is a ticket answered after a seeded delay, failing with an API status, a transport
 * error or a busy pool at begin, or taking effect and losing its answer. */
static const char *dop_name(enum docker_op op)
{
	static const char *n[] = { "ping", "version", "info", "net-create", "net-inspect",
				   "net-list", "net-remove", "ct-create", "ct-start", "ct-inspect",
				   "ct-stop", "ct-kill", "ct-wait", "ct-logs", "ct-remove",
				   "ct-list", "events", "ct-rename", "image-list" };
	return op < sizeof(n) / sizeof(n[0]) ? n[op] : "?";
}

static uint32_t dinflight(void)
{
	uint32_t n = 0;

	for (int i = 0; i < DTICKETS; i++)
		n += dtickets[i].used && dtickets[i].op != DOCKER_OP_EVENTS;
	return n;
}

static struct dticket *dticket_of(const struct docker_call *c)
{
	if (c->state <= 0 || c->state > DTICKETS || !dtickets[c->state - 1].used)
		return NULL;
	return &dtickets[c->state - 1];
}


/* ---- the behaviour of each call: applied when it completes ---- */

static int dapi_error(struct docker_call *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int dapi_error(struct docker_call *c, int status, const char *fmt, ...)
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

static int dplain_error(struct docker_call *c, int code, const char *what)
{
	c->error.code = code;
	c->error.status = 0;
	c->error.op = c->op;
	snprintf(c->error.message, sizeof(c->error.message), "%s", what);
	return code;
}

/* The effect of t on the engine; 0 or the error the engine answers. */
static int dapply(struct docker_call *c, struct dticket *t)
{
	struct e_ct *ct;
	struct e_net *n;

	switch (t->op) {
	case DOCKER_OP_NETWORK_CREATE:
		if (engine_net_by_name(t->name))
			return dapi_error(c, 409, "network with name %s already exists", t->name);
		for (int i = 0; i < E_NETS; i++)
			if (e_nets[i].used && subnets_overlap(e_nets[i].subnet, t->subnet))
				return dapi_error(c, 400, "invalid pool request: Pool overlaps with "
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
		return dapi_error(c, 500, "fake engine: too many networks");
	case DOCKER_OP_NETWORK_REMOVE:
		if (!(n = net_find(t->arg)))
			return dapi_error(c, 404, "network %s not found", t->arg);
		for (int i = 0; i < E_CTS; i++)
			if (e_cts[i].used && strcmp(e_cts[i].netmode, n->name) == 0)
				return dapi_error(c, 403, "error while removing network: network %s "
						 "has active endpoints", n->name);
		n->used = false;
		return 0;
	case DOCKER_OP_CONTAINER_CREATE:
		if (ct_find(t->name))
			return dapi_error(c, 409, "Conflict. The container name \"/%s\" is already "
					 "in use", t->name);
		if (!net_find(t->netmode))
			return dapi_error(c, 404, "network %s not found", t->netmode);
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
		return dapi_error(c, 500, "fake engine: too many containers");
	case DOCKER_OP_CONTAINER_START:
		if (!(ct = ct_find(t->arg)))
			return dapi_error(c, 404, "No such container: %s", t->arg);
		if (!ct->running)
			ct_start(ct);
		return 0;
	case DOCKER_OP_CONTAINER_STOP:
		if (!(ct = ct_find(t->arg)))
			return dapi_error(c, 404, "No such container: %s", t->arg);
		ct_die(ct, 143);
		return 0;
	case DOCKER_OP_CONTAINER_REMOVE:
		if (!(ct = ct_find(t->arg)))
			return dapi_error(c, 404, "No such container: %s", t->arg);
		if (ct->running && !t->force)
			return dapi_error(c, 409, "You cannot remove a running container");
		ct_destroy(ct);
		return 0;
	case DOCKER_OP_CONTAINER_INSPECT:
	case DOCKER_OP_CONTAINER_LOGS:
		if (!(ct = ct_find(t->arg)))
			return dapi_error(c, 404, "No such container: %s", t->arg);
		memcpy(t->rid, ct->id, sizeof(t->rid));
		if (t->op == DOCKER_OP_CONTAINER_LOGS && c->on_log) {
			static const char line[] = "agentic-init: fake init log line\n";

			c->on_log(c->ctx, 2, (const uint8_t *)line, sizeof(line) - 1);
		}
		return 0;
	case DOCKER_OP_NETWORK_INSPECT:
		if (!(n = net_find(t->arg)))
			return dapi_error(c, 404, "network %s not found", t->arg);
		memcpy(t->rid, n->id, sizeof(t->rid));
		return 0;
	default:
		return 0;
	}
}

/* Completes t: its fault, or its effect. */
static int dcomplete(struct docker_call *c, struct dticket *t)
{
	int r;

	t->done = true;
	switch (t->fault) {
	case DF_500:
		r = dapi_error(c, 500, "fake engine: internal error");
		break;
	case DF_404:
		r = t->op == DOCKER_OP_CONTAINER_CREATE
			? dapi_error(c, 404, "No such image: fake")
			: dapply(c, t);
		break;
	case DF_TRANSPORT:
		r = dplain_error(c, -ECONNRESET, "connection reset by the engine");
		break;
	case DF_REPLY:
		r = dplain_error(c, DOCKER_ERR_REPLY, "the answer is not what the API documents");
		break;
	case DF_LOST:
		dapply(c, t);
		r = dplain_error(c, -ECONNRESET, "connection reset after the engine acted");
		break;
	default:
		r = dapply(c, t);
	}
	trace("engine: %s %.40s -> %d%s%s", dop_name(t->op), t->arg[0] ? t->arg : t->name, r,
	      r ? " " : "", r ? c->error.message : "");
	return r;
}

static bool d_in_blocking; /* recovery's blocking calls: their own fault rate */

static int dbegin(struct docker_call *c, struct docker_client *dc, enum docker_op op,
		 const char *arg)
{
	struct dticket *t = NULL;
	uint32_t busy = 0, fail = d_in_blocking ? knobs.rfail : knobs.fail;

	memset(c, 0, sizeof(*c));
	c->dc = dc;
	c->op = op;
	for (int i = 0; i < DTICKETS; i++)
		busy += dtickets[i].used;
	if (!d_in_blocking && (busy >= DCONNS + 1 /* the event stream holds one of its own */ ||
			     (op != DOCKER_OP_EVENTS && chance(knobs.busy)))) {
		trace("engine: %s busy", dop_name(op));
		return DOCKER_ERR_BUSY;
	}
	if (chance(fail / 4)) {
		trace("engine: %s cannot connect", dop_name(op));
		return dplain_error(c, -ECONNREFUSED, "cannot connect to the engine");
	}
	for (int i = 0; i < DTICKETS && !t; i++)
		if (!dtickets[i].used)
			t = &dtickets[i];
	SIM_CHECK(t, "engine: out of tickets");
	memset(t, 0, sizeof(*t));
	t->used = true;
	t->op = op;
	snprintf(t->arg, sizeof(t->arg), "%s", arg ? arg : "");
	/* most answers are quick, some slow: their order across sandboxes is anyone's */
	t->due = sim_now + (chance(100) ? 200 + rnd_below(3000) : rnd_below(150));
	if (op != DOCKER_OP_EVENTS && chance(fail)) {
		uint32_t k = rnd_below(4);

		t->fault = k == 0 ? DF_500 : k == 1 ? DF_404 : k == 2 ? DF_TRANSPORT : DF_REPLY;
	} else if (!d_in_blocking && op != DOCKER_OP_EVENTS && op != DOCKER_OP_CONTAINER_INSPECT &&
		   op != DOCKER_OP_NETWORK_LIST && chance(knobs.lost)) {
		t->fault = DF_LOST;
	}
	c->state = (int)(t - dtickets) + 1;
	return 0;
}

static bool dhas_owner(const struct docker_kv *kv)
{
	for (; kv && kv->key; kv++)
		if (strcmp(kv->key, "agentic-daemon") == 0 && strcmp(kv->value, owner) == 0)
			return true;
	return false;
}

static const char *dkv_get(const struct docker_kv *kv, const char *key)
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
	int r = dbegin(c, dc, DOCKER_OP_NETWORK_CREATE, NULL);
	struct dticket *t = dticket_of(c);

	if (r == 0) {
		snprintf(t->name, sizeof(t->name), "%s", spec->name);
		snprintf(t->subnet, sizeof(t->subnet), "%s", spec->subnet ? spec->subnet : "");
		t->ours = dhas_owner(spec->labels);
		t->internal = spec->internal;
	}
	return r;
}

int __wrap_docker_network_list_begin(struct docker_call *c, struct docker_client *dc,
				     const char *label)
{
	int r = dbegin(c, dc, DOCKER_OP_NETWORK_LIST, NULL);

	if (r == 0)
		dticket_of(c)->list_ours = label != NULL;
	return r;
}

int __wrap_docker_image_list_begin(struct docker_call *c, struct docker_client *dc)
{
	return dbegin(c, dc, DOCKER_OP_IMAGE_LIST, NULL);
}

int __wrap_docker_network_remove_begin(struct docker_call *c, struct docker_client *dc,
				       const char *id)
{
	return dbegin(c, dc, DOCKER_OP_NETWORK_REMOVE, id);
}

int __wrap_docker_container_create_begin(struct docker_call *c, struct docker_client *dc,
					 const struct docker_container_spec *spec)
{
	int r = dbegin(c, dc, DOCKER_OP_CONTAINER_CREATE, NULL);
	struct dticket *t = dticket_of(c);

	if (r == 0) {
		snprintf(t->name, sizeof(t->name), "%s", spec->name);
		snprintf(t->instance, sizeof(t->instance), "%s",
			 dkv_get(spec->labels, "agentic-instance-id"));
		snprintf(t->uid, sizeof(t->uid), "%s", dkv_get(spec->labels, "agentic-control-uid"));
		snprintf(t->mnet, sizeof(t->mnet), "%s",
			 dkv_get(spec->labels, "agentic-managed-network"));
		snprintf(t->netmode, sizeof(t->netmode), "%s", spec->network_mode);
		t->ours = dhas_owner(spec->labels);
	}
	return r;
}

int __wrap_docker_container_start_begin(struct docker_call *c, struct docker_client *dc,
					const char *id)
{
	return dbegin(c, dc, DOCKER_OP_CONTAINER_START, id);
}

int __wrap_docker_container_inspect_begin(struct docker_call *c, struct docker_client *dc,
					  const char *id)
{
	return dbegin(c, dc, DOCKER_OP_CONTAINER_INSPECT, id);
}

int __wrap_docker_container_stop_begin(struct docker_call *c, struct docker_client *dc,
				       const char *id, int timeout_s)
{
	return dbegin(c, dc, DOCKER_OP_CONTAINER_STOP, id);
}

int __wrap_docker_container_logs_begin(struct docker_call *c, struct docker_client *dc,
				       const char *id, bool follow, int tail, bool timestamps,
				       docker_log_fn fn, void *ctx)
{
	int r = dbegin(c, dc, DOCKER_OP_CONTAINER_LOGS, id);

	c->on_log = fn;
	c->ctx = ctx;
	return r;
}

int __wrap_docker_container_remove_begin(struct docker_call *c, struct docker_client *dc,
					 const char *id, bool force)
{
	int r = dbegin(c, dc, DOCKER_OP_CONTAINER_REMOVE, id);

	if (r == 0)
		dticket_of(c)->force = force;
	return r;
}

int __wrap_docker_container_list_begin(struct docker_call *c, struct docker_client *dc,
				       const char *label)
{
	int r;

	d_in_blocking = true; /* only recovery lists containers */
	r = dbegin(c, dc, DOCKER_OP_CONTAINER_LIST, NULL);
	d_in_blocking = false;

	if (r == 0)
		dticket_of(c)->list_ours = label != NULL;
	return r;
}

int __wrap_docker_events_begin(struct docker_call *c, struct docker_client *dc,
			       const char *filters, int64_t since, docker_event_fn fn, void *ctx)
{
	int r = dbegin(c, dc, DOCKER_OP_EVENTS, NULL);
	struct dticket *t = dticket_of(c);

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

/* A container event's Actor.Attributes: its labels, of which the owner's is read. */
static const struct json_doc *owner_attributes(void)
{
	static char text[64];
	static struct json_token tok[8];
	static struct json_doc doc;
	int n = snprintf(text, sizeof(text), "{\"agentic-daemon\":\"%s\"}", owner);

	SIM_CHECK(json_parse(&doc, text, (size_t)n, tok, 8) == 0, "harness: attributes");
	return &doc;
}

int __wrap_docker_network_inspect_begin(struct docker_call *c, struct docker_client *dc,
					const char *id)
{
	return dbegin(c, dc, DOCKER_OP_NETWORK_INSPECT, id);
}

/* ---- stepping ---- */

int __wrap_docker_call_step(struct docker_call *c)
{
	struct dticket *t = dticket_of(c);

	if (!t)
		return dplain_error(c, ERR_STATE, "no such call");
	if (t->done)
		return 0;
	if (t->op == DOCKER_OP_EVENTS) {
		if (chance(knobs.fail / 2)) {
			t->done = true;
			trace("engine: event stream broken");
			return dplain_error(c, -ECONNRESET, "event stream reset");
		}
		while (t->ev_cursor < nevents) {
			const struct e_event *e = &events[t->ev_cursor++];
			struct docker_event ev = { .time_nano = e->time_ns, .attributes = 0,
						   .doc = owner_attributes() };

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
	return dcomplete(c, t);
}

int __wrap_docker_call_run(struct docker_call *c)
{
	struct dticket *t = dticket_of(c);

	if (!t)
		return dplain_error(c, ERR_STATE, "no such call");
	return t->done ? 0 : dcomplete(c, t);
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
	const struct dticket *t = dticket_of(c);

	if (!t || t->op == DOCKER_OP_EVENTS)
		return -1;
	return t->due > sim_now ? (int)(t->due - sim_now) : 0;
}

void __wrap_docker_call_end(struct docker_call *c)
{
	struct dticket *t = dticket_of(c);

	if (t)
		t->used = false;
	c->state = 0;
}

/* ---- results ---- */

int __wrap_docker_result_id(struct docker_call *c, char id[RT_ID_BYTES])
{
	struct dticket *t = dticket_of(c);

	if (!t || !t->rid[0])
		return DOCKER_ERR_REPLY;
	memcpy(id, t->rid, RT_ID_BYTES);
	return 0;
}

static void dfill_network(const struct e_net *n, struct docker_network *out)
{
	memset(out, 0, offsetof(struct docker_network, text));
	memcpy(out->id, n->id, sizeof(out->id));
	snprintf(out->text, sizeof(out->text), "%s", n->name);
	out->name = out->text;
	snprintf(out->text + 100, sizeof(out->text) - 100, "%s", n->subnet);
	out->subnet = out->text + 100;
	out->internal = n->internal;
	out->driver = "bridge";
	if (n->ours) {
		out->options[0] = (struct docker_kv){ "com.docker.network.bridge.inhibit_ipv4",
						      "true" };
		out->noptions = 1;
	}
}

int __wrap_docker_result_network(struct docker_call *c, struct docker_network *out)
{
	struct dticket *t = dticket_of(c);
	struct e_net *n = t ? net_find(t->rid) : NULL;

	if (!n)
		return DOCKER_ERR_REPLY;
	dfill_network(n, out);
	return 0;
}

static void dfill_container(const struct e_ct *ct, struct docker_container *out)
{
	struct e_net *net = net_find(ct->netmode);

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
	if (net) {
		out->networks[0] = (struct docker_kv){ net->name, net->id };
		out->nnetworks = 1;
	}
}

int __wrap_docker_result_container(struct docker_call *c, struct docker_container *out)
{
	struct dticket *t = dticket_of(c);
	struct e_ct *ct = t ? ct_find(t->rid) : NULL;

	if (!ct)
		return DOCKER_ERR_REPLY;
	dfill_container(ct, out);
	return 0;
}

int __wrap_docker_result_each(struct docker_call *c,
			      int (*fn)(void *ctx, const struct docker_summary *s), void *ctx)
{
	struct dticket *t = dticket_of(c);
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

/* The fake engine has one image, the one every create names. */
int __wrap_docker_result_each_tag(struct docker_call *c, int (*fn)(void *ctx, const char *tag),
				  void *ctx)
{
	(void)c;
	return fn(ctx, "agentic/sim:local");
}

/* ---- the blocking forms recovery uses ---- */

static int dblocking(enum docker_op op, const char *arg, bool force, struct docker_error *err,
		    struct docker_call *c)
{
	struct dticket *t;
	int r;

	d_in_blocking = true;
	r = dbegin(c, NULL, op, arg);
	d_in_blocking = false;
	t = dticket_of(c);
	if (r == 0) {
		t->force = force;
		r = dcomplete(c, t);
	}
	if (r != 0 && err)
		*err = c->error;
	return r;
}

int __wrap_docker_container_inspect(struct docker_client *dc, const char *id,
				    struct docker_container *out, struct docker_error *err)
{
	struct docker_call c;
	int r = dblocking(DOCKER_OP_CONTAINER_INSPECT, id, false, err, &c);
	struct e_ct *ct = r == 0 ? ct_find(dticket_of(&c)->rid) : NULL;

	if (r == 0 && ct)
		dfill_container(ct, out);
	__wrap_docker_call_end(&c);
	return r;
}

int __wrap_docker_container_remove(struct docker_client *dc, const char *id, bool force,
				   struct docker_error *err)
{
	struct docker_call c;
	int r = dblocking(DOCKER_OP_CONTAINER_REMOVE, id, force, err, &c);

	__wrap_docker_call_end(&c);
	return r;
}

int __wrap_docker_network_remove(struct docker_client *dc, const char *id,
				 struct docker_error *err)
{
	struct docker_call c;
	int r = dblocking(DOCKER_OP_NETWORK_REMOVE, id, false, err, &c);

	if (r != 0 && net_find(id))
		net_find(id)->stuck = true;

	__wrap_docker_call_end(&c);
	return r;
}

int __wrap_docker_network_inspect(struct docker_client *dc, const char *id,
				  struct docker_network *out, struct docker_error *err)
{
	struct docker_call c;
	int r = dblocking(DOCKER_OP_NETWORK_INSPECT, id, false, err, &c);
	struct e_net *n = r == 0 ? net_find(dticket_of(&c)->rid) : NULL;

	if (r == 0 && n)
		dfill_network(n, out);
	__wrap_docker_call_end(&c);
	return r;
}

static void dcrash(void)
{
	for (int i = 0; i < DTICKETS; i++) {
		struct dticket *t = &dtickets[i];
		struct docker_call c;

		if (!t->used)
			continue;
		if (!t->done && t->op != DOCKER_OP_EVENTS && chance(500)) {
			memset(&c, 0, sizeof(c));
			c.op = t->op;
			t->fault = DF_NONE;
			trace("engine: in flight at the crash, took effect:");
			dcomplete(&c, t);
		}
		t->used = false;
	}
}

/* The name of the sandbox of instance id, for the trace (share.h knows an instance by its id
 * alone); the id when no sandbox in the table has it. */
static const char *instance_name(const char *id)
{
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		const struct sandbox *sb = sandbox_slot(i);

		if (sb->state != SB_FREE && strcmp(sb->instance_id, id) == 0)
			return sb->name;
	}
	return id;
}

/* runtime_docker's workspace: the same plain directories as the fake runtime's */
int __wrap_share_make_workspace(const struct config *cfg, const char *id, uint64_t disk_bytes,
				bool vm, uint64_t transcripts, char *err, size_t err_size)
{
	return ws_make(id, instance_name(id), err, err_size);
}

int __wrap_share_mount_workspace(const struct config *cfg, const char *id, bool vm, char *err,
				 size_t err_size)
{
	return 0;
}

void __wrap_share_retire(const struct config *cfg, const char *exe, const char *id,
			  bool drop_workspace)
{
	ws_retire(id, instance_name(id), drop_workspace);
}
