/* recover.c: start-up: rebuilds the sandbox table, the uid map and the subnet map from the
 * runtime (labels, IPAM) and the agentshare records, then settles what a crash left half done
 * (docs/AGENTICD.md: At start): ready sandboxes are kept, creates are rolled back, removes finished,
 * unrecorded containers rolled back. The runtime's synchronous calls: it runs before the loop
 * serves anyone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lifecycle/lifecycle.h"
#include "lifecycle/netpool.h"
#include "lifecycle/recover.h"
#include "sandbox/sandbox.h"
#include "workspace/share.h"

struct found {
	char id[RT_ID_BYTES];
	char name[256];
};

struct list {
	struct found *items;
	uint32_t n, cap;
	bool overflow;
};

static struct runtime *rt;  /* recover_state's, for the helpers below */
/* agenticd.c's, handed over at start (recover_init) */
static const struct config *cfg;
static struct netpool *pool;

void recover_init(const struct config *c, struct netpool *p)
{
	cfg = c;
	pool = p;
}

static int collect(void *ctx, const char *id, const char *name)
{
	struct list *l = ctx;

	if (l->n == l->cap) {
		l->overflow = true;
		return 1;
	}
	snprintf(l->items[l->n].id, sizeof(l->items[l->n].id), "%s", id);
	snprintf(l->items[l->n].name, sizeof(l->items[l->n].name), "%s", name ? name : "");
	l->n++;
	return 0;
}

static int collect_id(void *ctx, const char *id)
{
	return collect(ctx, id, NULL);
}

static int list_objects(bool networks, struct list *l, char *err, size_t err_size)
{
	int r = networks ? rt->ops->networks(rt->self, collect, l, err, err_size)
			 : rt->ops->containers(rt->self, collect_id, l, err, err_size);

	if (r == 0 && l->overflow) {
		snprintf(err, err_size, "more agentic %s than agenticd can track (%u)",
			 networks ? "networks" : "containers", l->cap);
		return ERR_LIMIT;
	}
	return r;
}

static void say(const char *what, const char *err)
{
	log_error(what, "error=%s", log_q(err));
}

/* A container that cannot be removed still runs with its uid: the start stops (err says why)
 * rather than free what it holds. */
static int remove_container(const char *id, const char *why, char *err, size_t err_size)
{
	char text[1024];
	int r;

	if ((r = rt->ops->remove_now(rt->self, false, id, text, sizeof(text))) != 0) {
		say("recovery: container not removed", text);
		snprintf(err, err_size, "container %.64s (%s) not removed: %s", id, why, text);
		return r;
	}
	log_info("recovery: container removed", "id=%s reason=%s", log_q(id), why);
	return 0;
}

static void remove_network(const char *id, const char *why)
{
	char text[1024];

	if (!id[0])
		return;
	if (rt->ops->remove_now(rt->self, true, id, text, sizeof(text)) != 0) {
		say("recovery: network not removed", text);
		return;
	}
	log_info("recovery: network removed", "network=%s reason=%s", log_q(id), why);
}

/* The records on disk, by instance id. */
struct rec {
	struct sandbox sb;  /* the fields sandbox.json holds */
	char state[16];
	bool matched;
};

struct recs {
	struct rec *items;
	uint32_t n, cap;
};

static int read_one(void *ctx, const char *id)
{
	struct recs *rs = ctx;
	struct rec *r;

	if (rs->n == rs->cap)
		return ERR_LIMIT;
	r = &rs->items[rs->n];
	memset(r, 0, sizeof(*r));
	r->sb.subnet = -1;
	if (sandbox_record_read(cfg, id, &r->sb, r->state, sizeof(r->state)) != 0 ||
	    strcmp(r->sb.instance_id, id) != 0) {
		log_error("recovery: unreadable sandbox record left alone", "instance=%s", log_q(id));
		return 0;
	}
	rs->n++;
	return 0;
}

static struct rec *record_for(struct recs *rs, const char *instance)
{
	for (uint32_t i = 0; i < rs->n; i++)
		if (instance[0] && strcmp(rs->items[i].sb.instance_id, instance) == 0)
			return &rs->items[i];
	return NULL;
}

/* Takes a ready sandbox's network: subnet from IPAM, id and name. A network that cannot be
 * read (other than not found) stops the start: its subnet would be free for the next create.
 * Read by the id its record kept: a name may be ambiguous (another network may take it). */
static int adopt_network(struct sandbox *sb, char *err, size_t err_size)
{
	struct rt_network net;
	char text[1024];
	int32_t idx;
	int r;

	if (!sb->net_managed)
		return 0;
	r = rt->ops->net_inspect(rt->self, sb->network_id[0] ? sb->network_id : sb->network, &net,
				 text, sizeof(text));
	if (r != 0) {
		if (r != -ENOENT) {
			snprintf(err, err_size, "network %s not inspected: %s", sb->network, text);
			return r;
		}
		say("recovery: a sandbox's network is missing", text);
		sb->net_exists = false;
		return 0;
	}
	sb->net_exists = true;
	memcpy(sb->network_id, net.id, sizeof(sb->network_id));
	snprintf(sb->subnet_text, sizeof(sb->subnet_text), "%s", net.subnet ? net.subnet : "");
	idx = subnet_index(net.subnet);
	if (idx >= 0 && idalloc_mark(subnet_map(), (uint32_t)idx) == 0)
		sb->subnet = idx;
	return 0;
}

/* A container of no record, or of one whose create or remove did not finish: removed, with
 * its network and its instance. 0, or an error (err) when it cannot be removed. */
static int settle_unfinished(const struct rt_container *ct, const char *net, struct rec *rec,
			     char *err, size_t err_size)
{
	const char *why = !rec ? "unrecorded" : strcmp(rec->state, "removing") == 0
		? "remove-unfinished" : "create-unfinished";
	int r;

	if ((r = remove_container(ct->id, why, err, err_size)) != 0)
		return r;
	if (net)
		remove_network(net, why);
	if (rec)
		rt->ops->workspace_retire(rt->self, &rec->sb,
					  strcmp(rec->state, "removing") != 0 ||
					  !rec->sb.keep_workspace);
	return 0;
}

/* A ready sandbox's record into its new slot: what it is and what it asked for. */
static void adopt_record(struct sandbox *sb, const struct rec *rec)
{
	memcpy(sb->name, rec->sb.name, sizeof(sb->name));
	/* a warm sandbox's record says so (it stays warm: nothing was claimed, or the record
	 * would say creating); a claimed one keeps its pool name */
	memcpy(sb->agent_id, rec->sb.agent_id, sizeof(sb->agent_id));
	sb->pool = rec->sb.pool;
	sb->claimed = rec->sb.claimed;
	/* its claim's env is not recorded: the init keeps its own, and none is sent again */
	memcpy(sb->instance_id, rec->sb.instance_id, sizeof(sb->instance_id));
	memcpy(sb->image, rec->sb.image, sizeof(sb->image));
	memcpy(sb->cmd, rec->sb.cmd, sizeof(sb->cmd));
	memcpy(sb->labels, rec->sb.labels, sizeof(sb->labels));
	memcpy(sb->mounts, rec->sb.mounts, sizeof(sb->mounts));
	sb->cmd_len = rec->sb.cmd_len;
	sb->labels_len = rec->sb.labels_len;
	sb->mounts_len = rec->sb.mounts_len;
	sb->ncmd = rec->sb.ncmd;
	sb->nlabels = rec->sb.nlabels;
	sb->nmounts = rec->sb.nmounts;
	sb->mount_ro = rec->sb.mount_ro;
	sb->created_ms = rec->sb.created_ms;
	sb->ready_ms = rec->sb.ready_ms;
	sb->expires_at = rec->sb.expires_at; /* its TTL: lifecycle_tick removes it then */
	sb->disk_bytes = rec->sb.disk_bytes;
	sb->transcript_bytes = rec->sb.transcript_bytes;
	memcpy(sb->e2b_json, rec->sb.e2b_json, sizeof(sb->e2b_json)); /* the E2B API's fields */
	sb->writable_root = rec->sb.writable_root;
	sb->vm = rec->sb.vm;     /* its runtime takes its QEMU back at start (runtime_vm.h) */
	sb->posture = rec->sb.posture;   /* its reasons at create and its taints: sticky */
	memcpy(sb->egress_json, rec->sb.egress_json, sizeof(sb->egress_json)); /* its policy */
}

/* The engine's view of a kept sandbox: its network taken back, its tier read again, an exec
 * running in it, its workspace mounted again after a reboot. 0, or an error (err) when its
 * network cannot be read. */
static int adopt_engine_view(struct sandbox *sb, const struct rt_container *ct, char *err,
			     size_t err_size)
{
	char text[1024];
	int r;

	if ((r = adopt_network(sb, err, err_size)) != 0)
		return r;
	/* the tier is the engine's view now, not the one the record had */
	lifecycle_network_read(sb, &ct->net);
	/* agenticd runs nothing through the engine's exec: one running now is out of band,
	 * whether or not the engine still has its event to replay */
	if (ct->execs)
		lifecycle_exec_seen(sb);
	/* after a reboot its workspace image is there but not mounted. A running container
	 * whose host mount was lost still holds the filesystem through its bind: mounted again,
	 * the image would have two ext4 instances writing it. */
	r = ct->running ? 0 : rt->ops->workspace_mount(rt->self, sb, text, sizeof(text));
	if (r > 0)
		log_info("recovery: workspace mounted again", "name=%s instance=%s", log_q(sb->name),
			 log_q(sb->instance_id));
	else if (r < 0)
		log_error("recovery: workspace not mounted; the sandbox cannot start again until "
			  "it is", "name=%s instance=%s error=%s", log_q(sb->name),
			  log_q(sb->instance_id), log_q(text));
	return 0;
}

/* One agentic container: kept as a sandbox, or rolled back / finished. A container that cannot
 * be read or removed may run on with its uid: that stops the start (err says why); only one
 * gone since it was listed is settled as missing. */
static int settle_container(const char *id, struct recs *rs, char *err, size_t err_size)
{
	struct rt_container ct;
	char text[1024], net_buf[SB_NET_BYTES];
	const char *inst, *uid_s, *net;
	struct rec *rec;
	struct sandbox *sb;
	uint64_t uid;
	int r;

	if ((r = rt->ops->inspect(rt->self, id, &ct, text, sizeof(text))) != 0) {
		say("recovery: container not inspected", text);
		if (r == -ENOENT)
			return 0;
		snprintf(err, err_size, "container %.64s not inspected: %s", id, text);
		return r;
	}
	inst = ct.instance_id;
	uid_s = ct.control_uid;
	net = NULL;
	if (ct.managed_network) {
		snprintf(net_buf, sizeof(net_buf), "%s", ct.managed_network);
		net = net_buf;
	}
	rec = inst ? record_for(rs, inst) : NULL;
	if (rec)
		rec->matched = true;
	if (!rec || strcmp(rec->state, "ready") != 0)
		return settle_unfinished(&ct, net, rec, err, err_size);
	sb = sandbox_new();
	if (!sb) {
		log_error("recovery: more sandboxes than max_sandboxes; one left untracked",
			  "name=%s", log_q(ct.name));
		return 0;
	}
	adopt_record(sb, rec);
	memcpy(sb->container_id, ct.id, sizeof(sb->container_id));
	sb->ct_exists = true;
	lifecycle_signal(sb, LC_EV_RECOVERED);
	sb->dir_made = true;
	sb->running = ct.running;
	sb->pid = ct.running ? ct.pid : 0;
	sandbox_read_pid_ns(sb);
	snprintf(sb->network, sizeof(sb->network), "%s", net ? net : rec->sb.network);
	sb->net_managed = net != NULL;
	if (strcmp(sb->network, rec->sb.network) == 0) /* its id, for adopt_network */
		memcpy(sb->network_id, rec->sb.network_id, sizeof(sb->network_id));
	if (!uid_s || parse_u64(uid_s, UINT32_MAX, &uid) != 0 || uid != rec->sb.uid) {
		log_error("recovery: container's uid label disagrees with its record; not trusted",
			  "name=%s", log_q(sb->name));
		lifecycle_signal(sb, LC_EV_CONFLICT);
	}
	sb->uid = (uint32_t)uid;
	sb->uid_taken = idalloc_mark(sandbox_uid_map(), sb->uid) == 0;
	return adopt_engine_view(sb, &ct, err, err_size);
}

/* Two containers claiming one uid: neither is trusted, both are reported. */
static void flag_conflicts(void)
{
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		struct sandbox *a = sandbox_slot(i);

		if (a->state == SB_FREE)
			continue;
		for (uint32_t k = i + 1; k < sandbox_slots(); k++) {
			struct sandbox *b = sandbox_slot(k);

			if (b->state == SB_FREE || b->uid != a->uid)
				continue;
			lifecycle_signal(a, LC_EV_CONFLICT);
			lifecycle_signal(b, LC_EV_CONFLICT);
			log_error("recovery: two containers claim one control uid; neither is trusted",
				  "uid=%u first=%s second=%s", a->uid, log_q(a->name), log_q(b->name));
			if (!b->uid_taken && a->uid_taken) {
				/* the map holds the uid once; both keep it reserved until removed */
				b->uid_taken = false;
			}
		}
	}
}

static void settle_records(struct recs *rs)
{
	for (uint32_t i = 0; i < rs->n; i++) {
		struct rec *r = &rs->items[i];
		/* a warm sandbox's workspace holds nothing of anyone's */
		bool keep_ws = strcmp(r->state, "removing") == 0 ? r->sb.keep_workspace
				: strcmp(r->state, "ready") == 0 && !r->sb.pool;

		if (r->matched)
			continue;
		if (r->sb.net_managed)
			remove_network(r->sb.network_id[0] ? r->sb.network_id : r->sb.network,
				       "container-missing");
		rt->ops->workspace_retire(rt->self, &r->sb, !keep_ws);
		log_info("recovery: record without a container settled", "name=%s instance=%s "
			 "state=%s workspace=%s", log_q(r->sb.name), log_q(r->sb.instance_id), log_q(r->state),
			 keep_ws ? "kept" : "deleted");
	}
}

static bool network_in_use(const char *name)
{
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		const struct sandbox *sb = sandbox_slot(i);

		if (sb->state != SB_FREE && sb->net_managed && strcmp(sb->network, name) == 0)
			return true;
	}
	return false;
}

/* Managed networks no sandbox uses: the warm pool takes what it can, the rest goes. */
static int settle_networks(char *err, size_t err_size)
{
	struct rt_network net;
	struct list l = { .cap = sandbox_slots() + LIMIT_WARM_NETWORKS + 64 };
	char text[1024];
	int r;

	l.items = calloc(l.cap, sizeof(*l.items));
	if (!l.items)
		return -ENOMEM;
	r = list_objects(true, &l, err, err_size);
	for (uint32_t i = 0; r == 0 && i < l.n; i++) {
		int32_t idx;

		if (network_in_use(l.items[i].name))
			continue;
		/* unused either way: the inspect only chooses between the pool and a remove */
		if (rt->ops->net_inspect(rt->self, l.items[i].id, &net, text, sizeof(text)) != 0) {
			say("recovery: network not inspected", text);
			remove_network(l.items[i].id, "unused");
			continue;
		}
		idx = subnet_index(net.subnet);
		if (pool->n < LIMIT_WARM_NETWORKS && idx >= 0 && net.internal &&
		    strncmp(l.items[i].name, "agentic-net-", 12) == 0 &&
		    idalloc_mark(subnet_map(), (uint32_t)idx) == 0) {
			netpool_keep(pool, l.items[i].name, net.id, idx);
			log_info("recovery: warm network kept", "network=%s subnet=%s",
				 log_q(pool->warm[pool->n - 1].name), log_q(net.subnet));
			continue;
		}
		remove_network(l.items[i].id, "unused");
	}
	free(l.items);
	return r;
}

/* Every network on the engine: the /28s of those agenticd did not make are foreign. */
static int scan_foreign(char *err, size_t err_size)
{
	char text[512];
	int r = rt->ops->scan_now(rt->self, subnet_foreign_add, NULL, text, sizeof(text));

	if (r != 0)
		snprintf(err, err_size, "cannot read the engine's networks: %s", text);
	return r;
}

size_t recover_scratch_bytes(uint32_t nsb)
{
	return (nsb * 2 + 64) * sizeof(struct found) + (nsb + 64) * sizeof(struct rec) +
	       (nsb + LIMIT_WARM_NETWORKS + 64) * sizeof(struct found);
}

int recover_state(struct runtime *runtime, char *err, size_t err_size)
{
	struct list l = { .cap = sandbox_slots() * 2 + 64 };
	struct recs rs = { .cap = sandbox_slots() + 64 };
	int r;

	rt = runtime;
	l.items = calloc(l.cap, sizeof(*l.items));
	rs.items = calloc(rs.cap, sizeof(*rs.items));
	if (!l.items || !rs.items) {
		free(l.items);
		free(rs.items);
		snprintf(err, err_size, "out of memory for recovery");
		return -ENOMEM;
	}
	r = list_objects(false, &l, err, err_size);
	if (r == 0 && (r = sandbox_record_each(cfg, read_one, &rs)) != 0)
		snprintf(err, err_size, "cannot read the sandbox records under %s/instances: %s",
			 cfg->agentshare_root, err_str(r));
	for (uint32_t i = 0; r == 0 && i < l.n; i++)
		r = settle_container(l.items[i].id, &rs, err, err_size);
	if (r == 0) {
		flag_conflicts();
		settle_records(&rs);
		share_sweep_workspaces(cfg);
		share_sweep_empty(cfg);
		r = settle_networks(err, err_size);
	}
	if (r == 0)
		r = scan_foreign(err, err_size);
	free(l.items);
	free(rs.items);
	if (r == 0)
		log_info("recovered", "sandboxes=%u uids_used=%u subnets_used=%u warm_networks=%u "
			 "foreign_subnets=%u", sandbox_live(), sandbox_uid_map()->used,
			 subnet_map()->used, pool->n, subnet_foreign_count());
	return r;
}
