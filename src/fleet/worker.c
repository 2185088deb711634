/* worker.c: `agentic fleet-worker`, the one process of a node that speaks to etcd
 * (docs/FLEET.md "The worker"). agenticd starts it when fleet_endpoints is set, with fd 3 a
 * SEQPACKET socket whose first packet is the fleet's settings (JSON); after that agenticd sends
 * this node's record and its list of sandboxes whenever they change, and the worker sends back
 * etcd's state and the fleet's nodes and sandboxes as it last read them. It holds the node's
 * certificate key (as fleet_uid, with no capability, once it has read it); agenticd's loop
 * never waits on etcd, and an unreachable etcd stops nothing but the fleet's own work.
 *
 * What it keeps in etcd (its user's roles allow it no other keys of a node):
 * - agentic/nodes/NODE: the node's record (no lease: a lost node stays listed, as lost);
 * - agentic/alive/NODE: under the node's lease, kept alive every third of its TTL. A node
 *   whose lease expires (its host, its agenticd or its network gone) is lost to the others;
 * - agentic/sandboxes/NODE/NAME: each sandbox's state and tier, set right after every join;
 * - agentic/names/NAME and agentic/placements/NODE: a placement's, for a create agenticd
 *   received (place.c); the name is released when its sandbox is gone. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "fleet/etcd.h"
#include "fleet/place.h"
#include "fleet/wire.h"
#include "json/json.h"
#include "tls/tls.h"

const char fleet_worker_help[] =
	"usage: agentic fleet-worker\n"
	"\n"
	"The node's client of the fleet's etcd (docs/FLEET.md), started by agenticd when\n"
	"fleet_endpoints is set, with fd 3 its control socket. It takes no argument and is never\n"
	"an applet link.\n";

#define FD_CTL 3
#define TICK_MS 1000
#define RETRY_MAX_MS 5000
#define SWEEP_EVERY_MS 15000
#define VIEW_SEND_MS 100

static struct {
	struct fleet_settings set;
	char alive_key[ETCD_KEY_BYTES], node_key[ETCD_KEY_BYTES];
	char record[FLEET_RECORD_BYTES];
	size_t record_len;
	bool record_dirty, read_refused;
	int64_t lease, lease_ttl, next_keepalive, next_read, next_try, retry_ms, next_sweep;
	char state[16], state_error[32];
	char sent[FLEET_SNAPSHOT_BYTES]; /* the last snapshot sent */
	size_t sent_len;
	/* the view: every node's record, the alive keys and every sandbox's record, in key
	 * order, read at one revision and kept by the watch's events after it (more: etcd had
	 * more than the table holds); sent to agenticd when it changed (dirty until it is), at
	 * most every VIEW_SEND_MS. A sandbox's record sits in a slot of sb_slot; view lists the
	 * slots in key order (a change moves pointers, not records), free the unused ones. */
	struct etcd_kv nodes[FLEET_NODES_MAX], alive[FLEET_NODES_MAX], sb_slot[FLEET_SANDBOXES_MAX];
	const struct etcd_kv *view[FLEET_SANDBOXES_MAX];
	struct etcd_kv *free_slot[FLEET_SANDBOXES_MAX];
	size_t nn, na, nview, nfree;
	bool nodes_more, alive_more, view_more, view_dirty, resync;
	int64_t next_send;
	/* this node's sandboxes as agenticd last said (want) and as etcd holds them (have) */
	struct own { char name[64]; char value[48]; } want[FLEET_SANDBOXES_MAX],
		have[FLEET_SANDBOXES_MAX];
	size_t nwant, nhave;
	bool want_known, have_known, sb_dirty;
	struct etcd_kv sbs[FLEET_SANDBOXES_MAX]; /* scratch: a read of the calls below */
	char sb_sent[FLEET_SB_PACKET_BYTES];
	size_t sb_sent_len;
} w;

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

/* true when agenticd has the packet; when its socket is full the caller sends it again later */
static bool ctl_send(const void *p, size_t len)
{
	return send(FD_CTL, p, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (long)len;
}

/* Tells agenticd etcd's state when it changed: "up", "down" (unreachable or without quorum)
 * or "denied" (this node's certificate is refused its keys). */
static void state_set(const char *state, const char *error)
{
	char pkt[256];
	int n;

	if (strcmp(state, w.state) == 0 && strcmp(error, w.state_error) == 0)
		return;
	n = snprintf(pkt, sizeof(pkt), "{\"etcd\":\"%s\",\"error\":\"%s\",\"endpoint\":\"%s\"}", state,
		     error, etcd_endpoint());
	if (!ctl_send(pkt, (size_t)n))
		return; /* the same state is sent again at the next turn */
	snprintf(w.state, sizeof(w.state), "%s", state);
	snprintf(w.state_error, sizeof(w.state_error), "%s", error);
	if (strcmp(state, "up") == 0)
		log_info("fleet etcd reachable", "node=%s endpoint=%s", log_q(w.set.node),
			 log_q(etcd_endpoint()));
	else
		log_warn("fleet etcd unreachable", "node=%s state=%s error=%s endpoint=%s",
			 log_q(w.set.node), log_q(state), log_q(error), log_q(etcd_endpoint()));
}

/* After a failed call: what state that leaves, and when to try again. */
static void failed(int r)
{
	state_set(r == ETCD_ERR_DENIED ? "denied" : "down", etcd_error());
	w.retry_ms = w.retry_ms ? (w.retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : w.retry_ms * 2)
				: TICK_MS / 4;
	w.next_try = clock_mono_ms() + w.retry_ms;
}

/* A lease, the alive key under it and the record: what a node does to (re)join. */
static int join(void)
{
	int r = etcd_lease_grant(w.set.lease_s, &w.lease, &w.lease_ttl);

	if (r == 0)
		r = etcd_put(w.alive_key, "1", 1, w.lease);
	if (r < 0 && w.lease) {
		/* a lease without its alive key would be kept alive while the others see this
		 * node lost: given back (it expires anyway if etcd is gone), and joined anew */
		(void)etcd_lease_revoke(w.lease);
		w.lease = 0;
	}
	if (r == 0) {
		w.next_keepalive = clock_mono_ms() + w.lease_ttl * 1000 / 3;
		w.record_dirty = w.record_len > 0;
		w.have_known = false; /* what etcd holds of ours is read again, then set right */
		w.sb_dirty = true;
	}
	return r;
}

static int keepalive(void)
{
	int64_t ttl;
	int r = etcd_lease_keepalive(w.lease, &ttl);

	if (r < 0)
		return r;
	if (ttl <= 0) {
		/* expired while we could not reach etcd: the others saw this node lost */
		log_warn("fleet lease expired", "node=%s", log_q(w.set.node));
		w.lease = 0;
		return join();
	}
	w.next_keepalive = clock_mono_ms() + w.lease_ttl * 1000 / 3;
	return 0;
}

/* What etcd holds of this node's own sandboxes, read after each join. */
static int have_read(void)
{
	char key[ETCD_KEY_BYTES], end[ETCD_KEY_BYTES];
	size_t plen;
	bool more;
	int n;

	plen = (size_t)snprintf(key, sizeof(key), "%s%s/", FLEET_SANDBOXES_PREFIX, w.set.node);
	etcd_prefix_end(key, end);
	n = etcd_range(key, end, w.sbs, FLEET_SANDBOXES_MAX, &more, NULL);
	if (n < 0)
		return n;
	w.nhave = 0;
	for (int i = 0; i < n; i++) {
		struct own *o = &w.have[w.nhave];
		size_t klen = w.sbs[i].key_len - plen, vlen = w.sbs[i].value_len;

		if (klen >= sizeof(o->name))
			continue; /* no name of ours is that long */
		if (vlen >= sizeof(o->value))
			vlen = 0; /* not a value we write: rewritten or deleted */
		memcpy(o->name, w.sbs[i].key + plen, klen);
		o->name[klen] = '\0';
		memcpy(o->value, w.sbs[i].value, vlen);
		o->value[vlen] = '\0';
		w.nhave++;
	}
	w.have_known = true;
	return 0;
}

static struct own *own_find(struct own *t, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(t[i].name, name) == 0)
			return &t[i];
	return NULL;
}

/* Makes etcd's records of this node's sandboxes what agenticd said: a put for each new or
 * changed one, a delete for each gone. */
static int sandboxes_sync(void)
{
	char key[ETCD_KEY_BYTES];
	int r;

	if (!w.have_known && (r = have_read()) < 0)
		return r;
	for (size_t i = 0; i < w.nwant; i++) {
		struct own *h = own_find(w.have, w.nhave, w.want[i].name);

		if (h && strcmp(h->value, w.want[i].value) == 0)
			continue;
		snprintf(key, sizeof(key), "%s%s/%s", FLEET_SANDBOXES_PREFIX, w.set.node, w.want[i].name);
		if ((r = etcd_put(key, w.want[i].value, strlen(w.want[i].value), 0)) < 0)
			return r;
		if (!h && w.nhave < FLEET_SANDBOXES_MAX)
			h = &w.have[w.nhave++];
		if (h)
			*h = w.want[i];
	}
	for (size_t i = 0; i < w.nhave;) {
		if (own_find(w.want, w.nwant, w.have[i].name)) {
			i++;
			continue;
		}
		snprintf(key, sizeof(key), "%s%s/%s", FLEET_SANDBOXES_PREFIX, w.set.node, w.have[i].name);
		if ((r = etcd_delete(key)) < 0 || (r = fleet_name_release(w.set.node, w.have[i].name)) < 0)
			return r;
		w.have[i] = w.have[--w.nhave];
	}
	w.sb_dirty = false;
	return 0;
}

/* Sends agenticd the view (the nodes' snapshot, then the sandboxes') where it differs from
 * what was sent last: true when agenticd has it all. */
static bool view_send(void)
{
	static char snap[FLEET_SNAPSHOT_BYTES], pkt[FLEET_SB_PACKET_BYTES];
	long len = fleet_snapshot_write(w.nodes, w.nn, w.alive, w.na, snap, sizeof(snap));

	if (len < 0) {
		log_warn("fleet snapshot too large", "nodes=%zu", w.nn);
	} else if ((size_t)len != w.sent_len || memcmp(snap, w.sent, (size_t)len) != 0) {
		if (!ctl_send(snap, (size_t)len))
			return false;
		memcpy(w.sent, snap, (size_t)len);
		w.sent_len = (size_t)len;
	}
	len = fleet_sandboxes_write(w.view, w.nview, w.view_more, w.alive, w.na, pkt, sizeof(pkt));
	if (len < 0 || ((size_t)len == w.sb_sent_len && memcmp(pkt, w.sb_sent, (size_t)len) == 0))
		return true;
	if (!ctl_send(pkt, (size_t)len))
		return false;
	memcpy(w.sb_sent, pkt, (size_t)len);
	w.sb_sent_len = (size_t)len;
	return true;
}

static const char *kv_key(const void *t, size_t i)
{
	return ((const struct etcd_kv *)t)[i].key;
}

static const char *ptr_key(const void *t, size_t i)
{
	return ((const struct etcd_kv *const *)t)[i]->key;
}

/* Where key is, or would go, among t's n entries in key order (key_of reads the i-th
 * entry's key); *found when it is there. */
static size_t key_find(const void *t, size_t n, const char *(*key_of)(const void *t, size_t i),
		       const char *key, bool *found)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(key_of(t, mid), key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < n && strcmp(key_of(t, lo), key) == 0;
	return lo;
}

/* A change the watch saw to a node's record or alive key: t holds n of cap, in key order,
 * the first cap keys as a read would (more: etcd has others). A delete while more is set
 * makes room for one that was left out, so the view is read again. */
static void table_apply(struct etcd_kv *t, size_t *n, size_t cap, bool *more,
			const struct etcd_kv *kv, bool deleted)
{
	bool found;
	size_t at = key_find(t, *n, kv_key, kv->key, &found);

	if (found && !deleted) {
		t[at] = *kv;
	} else if (found) {
		memmove(&t[at], &t[at + 1], (*n - at - 1) * sizeof(*t));
		(*n)--;
		w.resync |= *more;
	} else if (!deleted && (*n < cap || at < *n)) {
		/* full: the last key leaves for one before it */
		*more |= *n == cap;
		*n -= *n == cap;
		memmove(&t[at + 1], &t[at], (*n - at) * sizeof(*t));
		t[at] = *kv;
		(*n)++;
	} else if (!deleted) {
		*more = true;
	}
}

/* A change the watch saw to a sandbox's record. A record past a full view sets more; a
 * delete while more is set makes room for one that was left out, so the view is read again. */
static void view_apply(const struct etcd_kv *kv, bool deleted)
{
	bool found;
	size_t at = key_find(w.view, w.nview, ptr_key, kv->key, &found);
	struct etcd_kv *slot;

	if (found && !deleted) {
		*(struct etcd_kv *)w.view[at] = *kv;
	} else if (found) {
		w.free_slot[w.nfree++] = (struct etcd_kv *)w.view[at];
		memmove(&w.view[at], &w.view[at + 1], (w.nview - at - 1) * sizeof(w.view[0]));
		w.nview--;
		w.resync |= w.view_more;
	} else if (!deleted && w.nfree == 0) {
		w.view_more = true;
	} else if (!deleted) {
		slot = w.free_slot[--w.nfree];
		*slot = *kv;
		memmove(&w.view[at + 1], &w.view[at], (w.nview - at) * sizeof(w.view[0]));
		w.view[at] = slot;
		w.nview++;
	}
}

static bool has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The watch's handler: names and placements are placement's, read when it places. */
static void on_change(const struct etcd_kv *kv, bool deleted, void *ctx)
{
	(void)ctx;
	if (has_prefix(kv->key, FLEET_NODES_PREFIX))
		table_apply(w.nodes, &w.nn, FLEET_NODES_MAX, &w.nodes_more, kv, deleted);
	else if (has_prefix(kv->key, FLEET_ALIVE_PREFIX))
		table_apply(w.alive, &w.na, FLEET_NODES_MAX, &w.alive_more, kv, deleted);
	else if (has_prefix(kv->key, FLEET_SANDBOXES_PREFIX))
		view_apply(kv, deleted);
	else
		return;
	w.view_dirty = true;
}

/* Reads the whole view at one revision, then watches agentic/ from the next: each change
 * after the read comes as an event, once, and nothing is read again until the watch ends. */
static int read_fleet(void)
{
	char end[ETCD_KEY_BYTES];
	int64_t rev = 0;
	bool more;
	int n;

	etcd_prefix_end(FLEET_NODES_PREFIX, end);
	if ((n = etcd_range(FLEET_NODES_PREFIX, end, w.nodes, FLEET_NODES_MAX, &more, &rev)) < 0)
		return n;
	w.nn = (size_t)n;
	w.nodes_more = more;
	etcd_prefix_end(FLEET_ALIVE_PREFIX, end);
	if ((n = etcd_range(FLEET_ALIVE_PREFIX, end, w.alive, FLEET_NODES_MAX, &more, &rev)) < 0)
		return n;
	w.na = (size_t)n;
	w.alive_more = more;
	/* into the scratch first: a read that fails in its second page leaves the view whole */
	etcd_prefix_end(FLEET_SANDBOXES_PREFIX, end);
	if ((n = etcd_range(FLEET_SANDBOXES_PREFIX, end, w.sbs, FLEET_SANDBOXES_MAX, &more, &rev)) < 0)
		return n;
	memcpy(w.sb_slot, w.sbs, (size_t)n * sizeof(w.sbs[0]));
	w.view_more = more;
	w.nview = (size_t)n;
	w.nfree = 0;
	for (size_t i = 0; i < FLEET_SANDBOXES_MAX; i++) {
		if (i < w.nview)
			w.view[i] = &w.sb_slot[i];
		else
			w.free_slot[w.nfree++] = &w.sb_slot[FLEET_SANDBOXES_MAX - 1 - i + w.nview];
	}
	w.view_dirty = true;
	w.resync = false;
	etcd_prefix_end(FLEET_PREFIX, end);
	return etcd_watch(FLEET_PREFIX, end, rev + 1, on_change, NULL);
}

/* Sends the view when it changed, at most every VIEW_SEND_MS: a burst of changes (a fleet's
 * creates at once) is one packet, not one per change. */
static void view_flush(int64_t now)
{
	if (!w.view_dirty || now < w.next_send)
		return;
	/* a packet agenticd's socket could not take now is tried again then too, not at once:
	 * the loop would spin on it */
	w.next_send = now + VIEW_SEND_MS;
	if (view_send())
		w.view_dirty = false;
}

/* A name one of this node's sandboxes has, as agenticd last said. */
static bool held(const char *name)
{
	return own_find(w.want, w.nwant, name) != NULL;
}

/* One turn: join when out, keep the lease, write the record when it changed, read the fleet.
 * The lease is renewed when due even while other calls back off: a call that keeps failing
 * (another node's record too large to read, say) must not make this node lost. A read refused
 * by etcd leaves the view as it was, said once in the log; only the transport marks etcd down. */
static void tick(void)
{
	int64_t now = clock_mono_ms();
	int r = 0;

	view_flush(now);
	if (w.lease && now >= w.next_keepalive && (r = keepalive()) < 0) {
		w.next_keepalive = now + TICK_MS / 4;
		failed(r);
		return;
	}
	if (now < w.next_try)
		return;
	if (w.lease == 0)
		r = join();
	if (r == 0 && w.record_dirty) {
		r = etcd_put(w.node_key, w.record, w.record_len, 0);
		if (r == 0)
			w.record_dirty = false;
	}
	if (r == 0 && w.sb_dirty && w.want_known)
		r = sandboxes_sync();
	if (r == 0 && w.resync) {
		etcd_watch_stop();
		w.resync = false;
	}
	if (r == 0 && !etcd_watching() && now >= w.next_read) {
		w.next_read = now + TICK_MS;
		r = read_fleet();
		if (r == ETCD_ERR_FAILED) {
			if (!w.read_refused)
				log_warn("fleet read refused", "node=%s error=%s", log_q(w.set.node),
					 log_q(etcd_error()));
			w.read_refused = true;
			r = 0;
		} else if (r == 0) {
			w.read_refused = false;
		}
	}
	if (r == 0 && w.want_known && now >= w.next_sweep) {
		w.next_sweep = now + SWEEP_EVERY_MS;
		r = fleet_names_sweep(w.set.node, held, now, w.sbs, FLEET_SANDBOXES_MAX);
		if (r == ETCD_ERR_FAILED)
			r = 0; /* refused: tried again at the next sweep */
	}
	if (r < 0) {
		failed(r);
		return;
	}
	view_flush(clock_mono_ms());
	w.retry_ms = 0;
	state_set("up", "none");
}

/* A create agenticd received, {"place":ID,"name","pin","runtime","image"}: placed (place.c), and the
 * answer sent back, {"placed":ID,"node","addr","seq"} or {"placed":ID,"error":WORD}. */
static void place(const char *pkt, size_t len)
{
	struct json_token tok[16];
	struct json_doc d;
	char name[64], pin[FLEET_NODE_NAME_MAX + 1] = "", runtime[16] = "docker", out[256];
	char image[256] = "";
	struct fleet_placed p;
	int64_t id;
	int i, n, r;

	if (json_parse(&d, pkt, len, tok, ARRAY_LEN(tok)) != 0 || tok[0].type != JSON_OBJECT ||
	    (i = json_obj_get(&d, 0, "place")) < 0 || json_int(&d, i, &id) != 0 ||
	    (i = json_obj_get(&d, 0, "name")) < 0 || json_str(&d, i, name, sizeof(name)) <= 0)
		return;
	if ((i = json_obj_get(&d, 0, "pin")) >= 0)
		(void)json_str(&d, i, pin, sizeof(pin));
	if ((i = json_obj_get(&d, 0, "runtime")) >= 0)
		(void)json_str(&d, i, runtime, sizeof(runtime));
	if ((i = json_obj_get(&d, 0, "image")) >= 0)
		(void)json_str(&d, i, image, sizeof(image));
	if (!fleet_sandbox_name_ok(name, strlen(name))) {
		p = (struct fleet_placed){ .error = "bad_name" };
		r = 0;
	} else if (!etcd_watching() && (r = read_fleet()) < 0) {
		p = (struct fleet_placed){ .error = NULL }; /* placement chooses from the view */
	} else {
		r = fleet_place(&(struct fleet_place_req){ .self = w.set.node, .name = name,
							   .pin = pin, .runtime = runtime,
							   .image = image },
				w.nodes, &w.nn, w.alive, &w.na, &p);
	}
	if (r < 0) {
		failed(r);
		p.error = r == ETCD_ERR_DENIED ? "etcd_denied" : "etcd_down";
	}
	if (p.error)
		n = snprintf(out, sizeof(out), "{\"placed\":%lld,\"error\":\"%s\"}", (long long)id,
			     p.error);
	else
		n = snprintf(out, sizeof(out), "{\"placed\":%lld,\"node\":\"%s\",\"addr\":\"%s\","
			     "\"seq\":%lld,\"attempts\":%d}", (long long)id, p.node, p.addr,
			     (long long)p.seq, p.attempts);
	/* agenticd's socket is drained by its loop: an answer it cannot take now is lost, and
	 * its create answers "fleet_unavailable" when its wait ends */
	if (n > 0 && (size_t)n < sizeof(out))
		(void)ctl_send(out, (size_t)n);
}

/* agenticd's list of this node's sandboxes, {"sandboxes":[{"name","state","tier"}...]}, into
 * want: false when it does not parse (the list is then kept as it was). */
static bool want_parse(const char *pkt, size_t len)
{
	static struct json_token tok[8 + 7 * FLEET_SANDBOXES_MAX];
	struct json_doc d;
	int arr;
	size_t n = 0;

	if (json_parse(&d, pkt, len, tok, ARRAY_LEN(tok)) != 0 || tok[0].type != JSON_OBJECT ||
	    (arr = json_obj_get(&d, 0, "sandboxes")) < 0 || d.tok[arr].type != JSON_ARRAY)
		return false;
	for (int i = json_first(&d, arr); i >= 0 && n < FLEET_SANDBOXES_MAX; i = json_next(&d, arr, i)) {
		char state[16], tier[4];
		int a = json_obj_get(&d, i, "name"), b = json_obj_get(&d, i, "state"),
		    c = json_obj_get(&d, i, "tier");

		if (a < 0 || b < 0 || c < 0 || json_str(&d, a, w.want[n].name, sizeof(w.want[n].name)) <= 0 ||
		    json_str(&d, b, state, sizeof(state)) <= 0 || json_str(&d, c, tier, sizeof(tier)) <= 0)
			continue;
		snprintf(w.want[n].value, sizeof(w.want[n].value), "{\"state\":\"%s\",\"tier\":\"%s\"}",
			 state, tier);
		n++;
	}
	w.nwant = n;
	return true;
}

/* {"release":NAME}: a create placed here failed; its name goes (when it names this node). */
static void release(const char *pkt, size_t len)
{
	char name[64];
	int r;

	if (sscanf(pkt, "{\"release\":\"%63[a-z0-9-]\"}", name) != 1 || len < 14)
		return;
	if ((r = fleet_name_release(w.set.node, name)) < 0)
		failed(r); /* the sweep releases it later */
	else if (r == 1)
		log_info("fleet name released", "node=%s name=%s reason=%s", log_q(w.set.node),
			 log_q(name), log_q("create_failed"));
}

/* A packet from agenticd after the settings: this node's record, its sandboxes, or a create
 * to place. 0, or -1 when agenticd is gone. */
static int ctl_read(void)
{
	static char pkt[FLEET_SB_PACKET_BYTES + 1];
	static const char sb_head[] = "{\"sandboxes\":", place_head[] = "{\"place\":",
			  release_head[] = "{\"release\":";
	long n = recv(FD_CTL, pkt, sizeof(pkt), MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return -1;
	if (n <= 0)
		return 0;
	if ((size_t)n > sizeof(sb_head) && memcmp(pkt, sb_head, sizeof(sb_head) - 1) == 0) {
		if ((size_t)n <= FLEET_SB_PACKET_BYTES && want_parse(pkt, (size_t)n)) {
			w.want_known = true;
			w.sb_dirty = true;
		}
		return 0;
	}
	if ((size_t)n > sizeof(place_head) && memcmp(pkt, place_head, sizeof(place_head) - 1) == 0) {
		place(pkt, (size_t)n);
		return 0;
	}
	if ((size_t)n > sizeof(release_head) && (size_t)n < 96 &&
	    memcmp(pkt, release_head, sizeof(release_head) - 1) == 0) {
		release(pkt, (size_t)n);
		return 0;
	}
	if ((size_t)n > FLEET_RECORD_BYTES) {
		log_warn("fleet record too large", "bytes=%ld", n);
		return 0;
	}
	if ((size_t)n != w.record_len || memcmp(pkt, w.record, (size_t)n) != 0) {
		memcpy(w.record, pkt, (size_t)n);
		w.record_len = (size_t)n;
		w.record_dirty = true;
	}
	return 0;
}

int fleet_worker_main(int argc, char **argv)
{
	struct etcd_config ec;
	struct sigaction sa = { .sa_handler = on_term };
	int r;

	if (argc > 1) {
		fprintf(stderr, "agentic-fleet-worker: unknown argument '%s' (see --help)\n", argv[1]);
		return 2;
	}
	/* its key is in its memory: no core dump, no ptrace by another process of its uid */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || fcntl(FD_CTL, F_GETFD) < 0) {
		log_error("fleet worker without its control socket", "fd=%d", FD_CTL);
		return 2;
	}
	/* agenticd blocks the signals it reads from its signalfd, and exec keeps the mask */
	sigemptyset(&sa.sa_mask);
	sigprocmask(SIG_SETMASK, &sa.sa_mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if ((r = fleet_settings_recv(FD_CTL, &w.set)) < 0) {
		log_error("fleet worker settings refused", "error=%d", r);
		return 1;
	}
	snprintf(w.alive_key, sizeof(w.alive_key), "%s%s", FLEET_ALIVE_PREFIX, w.set.node);
	snprintf(w.node_key, sizeof(w.node_key), "%s%s", FLEET_NODES_PREFIX, w.set.node);
	ec = (struct etcd_config){ .endpoints = w.set.endpoints, .server_name = w.set.server_name,
				   .ca_file = w.set.ca_file, .cert_file = w.set.cert_file,
				   .key_file = w.set.key_file, .timeout_ms = FLEET_CALL_MS };
	if ((r = etcd_init(&ec)) < 0) {
		log_error("fleet worker cannot start", "node=%s error=%s", log_q(w.set.node),
			  log_q(etcd_error()));
		state_set("down", etcd_error());
		return 1;
	}
	if ((r = fleet_drop_root((uid_t)w.set.uid)) < 0) {
		log_error("fleet worker cannot drop root", "uid=%lld error=%s", (long long)w.set.uid,
			  log_q(strerror(-r)));
		return 1;
	}
	while (!stopping) {
		int64_t now = clock_mono_ms(), next = w.next_try > now ? w.next_try : now + TICK_MS;

		if (w.lease && w.next_keepalive < next)
			next = w.next_keepalive;
		if (w.view_dirty && w.next_send < next)
			next = w.next_send;
		/* the watch's events arrive while this waits (on_change) */
		if (etcd_wait(FD_CTL, (int)(next > now ? next - now : 0)) > 0 && ctl_read() < 0)
			break;
		tick();
	}
	/* agenticd stopped (or was killed): the others see this node lost now, not a TTL later */
	if (w.lease)
		(void)etcd_lease_revoke(w.lease);
	tls_forget_client();
	return 0;
}
