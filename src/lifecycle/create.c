/* create.c: a create's steps (lifecycle.h): the request taken, the network chosen, the
 * instance made, then each create call's answer, up to WAIT_READY; a claim of a warm
 * sandbox. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime_vm.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/netpool.h"
#include "lifecycle/steps.h"
#include "sandbox/reqcheck.h"
#include "sandbox/posture.h"
#include "workspace/share.h"

/* A create step's call failed: the API status and code for what the runtime said. */
static void step_failed(struct sandbox *sb, const char *what)
{
	const struct rt_result *res = &lc_of(sb)->call.res;

	switch (res->outcome) {
	case RT_NAME_TAKEN:
		lc_fail_create(sb, 409, "name_taken", "%s failed: %s", what, res->text);
		break;
	case RT_ROOT_UNBOUNDED:
		lc_fail_create(sb, 422, "writable_root_unbounded", "this engine cannot bound a "
			    "writable root filesystem (StorageOpt size; overlay2 needs xfs with "
			    "pquota), so none is offered: %s", res->text);
		break;
	case RT_IMAGE_MISSING:
		lc_fail_create(sb, 400, "image_missing", "%s failed: %s", what, res->text);
		break;
	default:
		lc_fail_create(sb, 502, "engine", "%s failed: %s", what, res->text);
		break;
	}
}

/* A create that failed without the engine's word that nothing was made (the answer lost, or
 * unreadable) may have made its object. A refusal (name taken, overlap, no image, no bound
 * for a writable root) made nothing; a 409's container is another's. */
static bool may_exist(const struct rt_result *res)
{
	return res->outcome == RT_ENGINE || res->outcome == RT_UNREADABLE;
}

/* The request's image, sizes and runtime, else the config's. */
static void take_request(struct sandbox *sb, const struct create_req *req)
{
	const struct config *cfg = lc_conf.cfg;

	snprintf(sb->image, sizeof(sb->image), "%s", req->image ? req->image : cfg->default_image);
	sb->disk_bytes = req->disk_bytes ? req->disk_bytes : cfg->default_disk_bytes;
	sb->transcript_bytes = req->transcript_bytes ? req->transcript_bytes
			       : cfg->transcript_budget_bytes;
	sb->writable_root = req->writable_root;
	sb->vm = req->vm;
}

/* A VM has no network at all (-nic none); its env reaches the init over the control channel
 * once it registers, as a claim's does (agent_claim.c), never the command line. false: the create
 * failed. */
static bool take_vm(struct sandbox *sb, const struct create_req *req)
{
	sb->network[0] = '\0';
	sb->net_managed = false;
	for (uint32_t i = 0; i < req->nenv; i++)
		if (strrun_add(sb->claim_env, &sb->claim_env_len, sizeof(sb->claim_env),
			       req->env[i]) != 0) {
			lc_fail_create(sb, 422, "env_too_long", "a VM sandbox's env is at most %u "
				       "bytes in all", LIMIT_SANDBOX_CLAIM_ENV_BYTES);
			return false;
		}
	sb->nclaim_env = (uint16_t)req->nenv;
	/* the credentials' ids and targets; their secrets are read when sent (agent_claim.c) */
		runtime_vm_creds_set(sb, req);
	return true;
}

/* Its network: the operator's, a warm one, or a new one on the next free /28. false: the
 * create failed. */
static bool take_network(struct sandbox *sb, const struct create_req *req)
{
	struct warm_net w;
	char hex[16];

	if (req->network) {
		snprintf(sb->network, sizeof(sb->network), "%s", req->network);
	} else if (lc_conf.pool && netpool_take(lc_conf.pool, &w)) {
		memcpy(sb->network, w.name, sizeof(sb->network));
		memcpy(sb->network_id, w.id, sizeof(sb->network_id));
		sb->subnet = w.subnet;
		subnet_text(sb->subnet, sb->subnet_text, sizeof(sb->subnet_text));
		sb->net_managed = sb->net_exists = true;
	} else {
		/* with /28s taken as foreign, the engine's networks are read again first: some of
		 * those networks may be gone */
		if (sandbox_take_subnet(sb) != 0 && !subnet_foreign_count()) {
			lc_fail_create(sb, 503, "capacity", "no free /28 left in sandbox_subnet_pool");
			return false;
		}
		random_hex(hex, 12);
		snprintf(sb->network, sizeof(sb->network), "agentic-net-%s", hex);
		sb->net_managed = true;
	}
	return true;
}

/* Its instance on the agentshare: the directory, the record, the workspace. false: the
 * create failed. */
static bool make_instance(struct sandbox *sb)
{
	const struct config *cfg = lc_conf.cfg;
	char err[512];
	int r;

	if ((r = share_make(cfg, sb->instance_id, err, sizeof(err))) != 0) {
		lc_fail_create(sb, 500, "agentshare", "%s", err);
		return false;
	}
	sb->dir_made = true;
	if ((r = sandbox_record_write(cfg, sb)) != 0) {
		lc_fail_create(sb, 500, "agentshare", "cannot write sandbox.json: %s", err_str(r));
		return false;
	}
	if ((r = lc_conf.rt->ops->workspace_make(lc_conf.rt->self, sb, err, sizeof(err))) != 0) {
		if (r == -ENOSPC)
			lc_fail_create(sb, 507, "no_space", "%s", err);
		else
			lc_fail_create(sb, 500, "agentshare", "%s", err);
		return false;
	}
	return true;
}

int lc_on_create(struct sandbox *sb, struct create_req *req)
{
	const struct config *cfg = lc_conf.cfg;

	if (sb->lc != LC_NEW || !req)
		return ERR_STATE;
	sb->req = req;
	sb->created_ms = lc_wall();
	sb->t_begin = sb->t_net = lc_mono();
	/* its container and its init know it by the name it is made with */
	memcpy(sb->agent_id, sb->name, sizeof(sb->agent_id));
	if (uuid7(sb->instance_id) != 0 || sandbox_take_uid(sb) != 0) {
		lc_fail_create(sb, 503, "capacity", "no free control uid in %u-%u",
			       cfg->control_uid_min, cfg->control_uid_max);
		return 0;
	}
	take_request(sb, req);
	if (sb->vm ? !take_vm(sb, req) : !take_network(sb, req))
		return 0;
	log_info("create started", "name=%s instance=%s uid=%u network=%s subnet=%s warm=%d "
		 "disk_bytes=%llu", log_q(sb->name), log_q(sb->instance_id), sb->uid,
		 log_q(sb->network), lc_subnet_or_dash(sb), sb->net_exists,
		 (unsigned long long)sb->disk_bytes);
	if (!make_instance(sb))
		return 0;
	if (!sb->net_managed || sb->net_exists) {
		lc_enter(sb, LC_CT_CREATE);
	} else if (sb->subnet < 0) {
		sb->net_scans++;
		lc_enter(sb, LC_NET_SCAN);
	} else {
		lc_enter(sb, LC_NET_CREATE);
	}
	return 0;
}

/* Every network on the engine read again: what is not ours is foreign; the create moves on to
 * the next free /28 (the runtime fed each subnet to subnet_foreign_add before answering). */
static void scan_done(struct sandbox *sb)
{
	const struct rt_result *res = &lc_of(sb)->call.res;

	if (res->outcome == RT_UNREADABLE) {
		lc_fail_create(sb, 502, "engine", "network list unreadable: %s", res->text);
		return;
	}
	if (res->outcome != RT_OK) {
		step_failed(sb, "network list");
		return;
	}
	if (sandbox_take_subnet(sb) != 0) {
		lc_fail_create(sb, 503, "capacity", "no free /28 left in sandbox_subnet_pool (%u taken "
			    "by networks agenticd did not make)", subnet_foreign_count());
		return;
	}
	log_info("subnet moved past other networks", "name=%s subnet=%s foreign_subnets=%u",
		 log_q(sb->name), sb->subnet_text, subnet_foreign_count());
	lc_enter(sb, LC_NET_CREATE);
}

/* ---- a claim of a warm sandbox ---- */

/* The container has the claim's name: the claim is recorded (a restart finds a create, which
 * it rolls back), then told to the init. Unsynced when the create has no cmd: then nothing
 * runs before the ready record replaces it (lc_finish_create: synced right after the
 * answer), and a host that went down before finds the warm sandbox it had, its init without
 * the claim's env. A claim with a cmd is synced here, as a cold create's record is before its
 * cmd runs. */
static void claim_recorded(struct sandbox *sb)
{
	int r;

	sb->claimed = true;
	lc_set_state(sb, LC_CLAIM_INIT);
	if ((r = sb->ncmd ? sandbox_record_write(lc_conf.cfg, sb)
		 : sandbox_record_write_unsynced(lc_conf.cfg, sb)) != 0) {
		lc_fail_create(sb, 500, "agentshare", "cannot write sandbox.json: %s", err_str(r));
		return;
	}
	HOOK(claim_send, sb);
}

int lc_on_claim(struct sandbox *sb)
{
	if (sb->lc != LC_READY || !sb->pool || lc_of(sb)->call_active || !sb->running)
		return ERR_STATE;
	sb->pool = false;
	sb->created_ms = lc_wall();
	sb->t_begin = lc_mono();
	sb->deadline = lc_mono() + lc_conf.cfg->ready_timeout_ms;
	log_info("claim started", "name=%s pool_name=%s instance=%s uid=%u", log_q(sb->name),
		 log_q(sb->agent_id), log_q(sb->instance_id), sb->uid);
	if (strcmp(sb->name, sb->agent_id) == 0)
		claim_recorded(sb); /* it keeps the warm sandbox's name: nothing to rename */
	else
		lc_enter(sb, LC_CLAIM_RENAME);
	return 0;
}

/* The container renamed: the claim goes on. A name another container has leaves the warm
 * sandbox as it was, in the pool. */
static void claim_renamed(struct sandbox *sb)
{
	const struct rt_result *res = &lc_of(sb)->call.res;

	if (res->outcome == RT_NAME_TAKEN) {
		log_info("claim refused: another container has the name; the warm sandbox stays",
			 "name=%s pool_name=%s", log_q(sb->name), log_q(sb->agent_id));
		snprintf(sb->error, sizeof(sb->error), "container rename failed: %s", res->text);
		policy_redact(sb->error, sizeof(sb->error));
		sb->err_status = 409;
		sb->err_code = "name_taken";
		sandbox_claim_undo(sb);
		sb->pool = true;
		sb->deadline = 0;
		lc_set_state(sb, LC_READY);
		HOOK(claim_refused, sb);
		return;
	}
	if (res->outcome != RT_OK) {
		step_failed(sb, "container rename");
		return;
	}
	claim_recorded(sb);
}

/* ---- a create call answered ---- */

/* Its network made, or the /28 another network overlaps read again, or the rollback. */
static void net_created(struct sandbox *sb, const struct rt_result *res)
{
	if (res->outcome == RT_OVERLAPS && sb->net_scans < LIMIT_SUBNET_SCANS) {
		log_info("subnet overlaps another network; reading the engine's networks",
			 "name=%s subnet=%s", log_q(sb->name), sb->subnet_text);
		sb->net_scans++;
		subnet_refused((uint32_t)sb->subnet);
		sb->subnet = -1;
		sb->subnet_text[0] = '\0';
		lc_enter(sb, LC_NET_SCAN);
	} else if (res->outcome != RT_OK) {
		/* removed by its name, which is this create's own: RT_GONE is fine */
		sb->net_exists = may_exist(res);
		step_failed(sb, "network create");
	} else {
		memcpy(sb->network_id, res->id, sizeof(sb->network_id));
		sb->net_exists = true;
		sb->t_net = lc_mono();
		lc_enter(sb, LC_CT_CREATE);
	}
}

static void ct_created(struct sandbox *sb, const struct rt_result *res)
{
	char text[1024];

	if (res->outcome != RT_OK) {
		sb->ct_maybe = may_exist(res);
		step_failed(sb, "container create");
		return;
	}
	memcpy(sb->container_id, res->id, sizeof(sb->container_id));
	sb->ct_exists = true;
	sb->t_ct = lc_mono();
	sb->req = NULL;
	sandbox_record_write(lc_conf.cfg, sb);
	/* the engine binds the init's copy by its path at start: still agenticd's file */
	if (lc_conf.init_id && !sb->vm &&
	    policy_init_check(lc_conf.init_path, lc_conf.init_id, text, sizeof(text)) != 0) {
		lc_fail_create(sb, 500, "init_changed", "%s; the create was rolled back", text);
		return;
	}
	lc_enter(sb, LC_CT_START);
}

static void ct_started(struct sandbox *sb, const struct rt_result *res)
{
	if (res->outcome != RT_OK) {
		step_failed(sb, "container start");
		return;
	}
	sb->running = true;
	sb->t_start = lc_mono();
	/* ready_timeout_ms is the init's time: it starts with the container (a VM's
	 * with its QEMU: the guest's boot is in it) */
	sb->deadline = lc_mono() + (sb->vm ? lc_conf.cfg->vm_ready_timeout_ms
				       : lc_conf.cfg->ready_timeout_ms);
	lc_enter(sb, LC_CT_INSPECT);
}

/* Its init runs with the binds that were checked: WAIT_READY (or READY at once). */
static void ct_inspected(struct sandbox *sb, const struct rt_result *res)
{
	char text[1024];
	int r;

	if (res->outcome != RT_OK && res->outcome != RT_UNREADABLE) {
		step_failed(sb, "container inspect");
		return;
	}
	lc_take_inspect(sb);
	if (!sb->running) {
		lc_fail_create(sb, 500, "init_exited", "the sandbox's init exited (status %lld) "
			       "before it was ready", (long long)sb->exit_code);
		return;
	}
	/* before the agent is authed, so before READY and the workload's first command */
	if ((r = sandbox_check_binds(sb, sb->vm ? NULL : lc_conf.init_id, text,
				     sizeof(text))) != 0) {
		lc_fail_create(sb, r == -EPERM ? 422 : 500, r == -EPERM ? "refused" : "mount_check",
			       "%s; the create was rolled back", text);
		return;
	}
	lc_set_state(sb, LC_WAIT_READY);
	lifecycle_network_read(sb, &res->net);
	HOOK(pid_known, sb);  /* may bring AGENT_READY (nested) at once */
	if (sb->lc == LC_WAIT_READY && lifecycle_agent_ready(lc_conf.hooks, sb))
		lc_finish_create(sb);
}

/* A create step's call answered: the next step, or the rollback. */
void lc_create_step_done(struct sandbox *sb)
{
	const struct rt_result *res = &lc_of(sb)->call.res;

	switch (sb->lc) {
	case LC_NET_CREATE:
		net_created(sb, res);
		break;
	case LC_NET_SCAN:
		scan_done(sb);
		break;
	case LC_CLAIM_RENAME:
		claim_renamed(sb);
		break;
	case LC_CT_CREATE:
		ct_created(sb, res);
		break;
	case LC_CT_START:
		ct_started(sb, res);
		break;
	default: /* LC_CT_INSPECT */
		ct_inspected(sb, res);
		break;
	}
}
