/* admin.c: the admin API on the admin socket: HTTP/1.1 + JSON, peers checked at accept, routed
 * by the table `routes` below (docs/API.md):
 *
 *   GET    /api/v1/containers          list
 *   POST   /api/v1/containers          create (answers when ready: 201 + the sandbox)
 *   GET    /api/v1/containers/NAME     inspect
 *   DELETE /api/v1/containers/NAME     remove (?force=1, ?keep_workspace=1)
 *   POST   /api/v1/containers/NAME/exec  run a command: chunked NDJSON, or with
 *                                        `Connection: Upgrade` + `Upgrade: tcp` the framed
 *                                        bidirectional stream (docs/API.md)
 *   GET    /api/v1/containers/NAME/logs  a run's transcript (?run=, ?stream=stdout|stderr)
 *   GET    /api/v1/containers/NAME/posture          its tier and why
 *   POST   /api/v1/containers/NAME/posture/taints   an operator's taint {"reason": WORD}
 *   GET    /api/v1/containers/NAME/egress   its egress policy and the last audit lines
 *   PUT    /api/v1/containers/NAME/egress   replaces the policy (docs/EGRESS.md "Policy")
 *                                           (both also as /api/v2/admin/instances/NAME/egress)
 *   GET    /api/v1/info                the daemon
 *   GET    /metrics                    Prometheus text
 *   GET,POST /api/v1/containers/NAME/verify   the verifier (verify.c); POST /api/v1/verify?container=ID
 *   /api/v2/admin/instances[/NAME], /api/v2/admin/profiles[/ID]: admin-v2, in admin_v2.c
 *
 * Errors are {"error": {"code": ..., "message": ...}}; a path no route has is 404, a path
 * with other methods 405 with Allow. The exec route and its sinks are admin_exec.c's; a
 * connection that opens with the HTTP/2 preface goes to the admin gRPC service
 * (admin_grpc.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json/json.h"
#include "admin/admin.h"
#include "daemon/daemon.h"
#include "egress/view.h"
#include "metrics/metrics.h"
#include "config/profiles.h"
#include "lifecycle/taint.h"
#include "verify/verify.h"
#include "profile/credscan.h"
#include "version.h"

#define API "/api/v1"
#define API2 "/api/v2/admin"

_Static_assert(AGENT_REFUSAL_REASONS <= METRICS_REFUSAL_REASONS, "every refusal is counted");

static char item[16384]; /* one sandbox rendered, for a streamed list */

/* The fields of every response that carries JSON; the writer adds its framing. */
static const struct http_field json_fields[] = {
	{ "Content-Type", "application/json" },
	{ NULL, NULL },
};

/* What agenticd.c hands over at start (admin_init), the listener (admin_listen), and the
 * counts admin.c keeps itself. */
static struct {
	struct admin_config ac;
	int listen_fd;
	bool stopping;                /* admin_shutdown: no new creates */
	uint64_t refused;             /* peers refused (not root, not in admin_group) */
} A = { .listen_fd = -1 };

void admin_init(const struct admin_config *ac)
{
	A.ac = *ac;
	A.listen_fd = -1;
	A.stopping = false;
	A.refused = 0;
	for (uint32_t i = 0; i < ac->nconns; i++)
		ac->conns[i].fd = -1;
}

void admin_listen(int fd)
{
	A.listen_fd = fd;
	agenticd_watch(fd, EPOLLIN, TAG_ADMIN_LISTEN, 0);
}

const struct config *admin_cfg(void)
{
	return A.ac.cfg;
}

static uint32_t conn_index(const struct admin_conn *c)
{
	return (uint32_t)(c - A.ac.conns);
}

static struct admin_conn *conn_at(int32_t i, uint32_t gen)
{
	struct admin_conn *c;

	if (i < 0 || (uint32_t)i >= A.ac.nconns)
		return NULL;
	c = &A.ac.conns[i];
	return c->phase != AC_FREE && c->gen == gen ? c : NULL;
}

struct admin_conn *admin_conn_take(void)
{
	struct admin_conn *c = NULL;

	for (uint32_t i = 0; i < A.ac.nconns && !c; i++)
		if (A.ac.conns[i].phase == AC_FREE)
			c = &A.ac.conns[i];
	if (!c)
		return NULL;
	c->gen++;
	c->fd = -1;
	c->rlen = c->roff = c->body_len = c->out_len = c->out_off = 0;
	c->body_too_big = false;
	c->exec = -1;
	c->upgraded = false;
	c->sniffed = false;
	c->call = NULL;
	c->spill_fd = c->file_fd = -1;
	c->dropped = false;
	c->exit_code = -1;
	c->error[0] = '\0';
	frame_reader_init(&c->fr);
	return c;
}

void admin_conn_close(struct admin_conn *c)
{
	if (c->fd >= 0) {
		agenticd_unwatch(c->fd);
		close(c->fd);
		c->fd = -1;
	}
	if (c->phase == AC_EXEC && c->exec >= 0)
		exec_detach(c->exec);
	c->exec = -1;
	if (c->spill_fd >= 0)
		close(c->spill_fd);
	if (c->file_fd >= 0)
		close(c->file_fd);
	c->spill_fd = c->file_fd = -1;
	/* a create still reads its request from here: the slot waits for it */
	c->phase = c->phase == AC_WAIT ? AC_ZOMBIE : AC_FREE;
}

void admin_watch(struct admin_conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events | EPOLLRDHUP };

	ev.data.u64 = ((uint64_t)TAG_ADMIN_CONN << 32) | conn_index(c);
	epoll_ctl(A.ac.epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* ---- responses: every one is written by src/http's writer, which sets the framing ---- */

/* {"error":{"code":..,"message":..}} and a newline, into b. */
static int error_json(struct buf *b, const char *code, const char *msg)
{
	struct json_writer w;

	json_writer_init(&w, b);
	json_obj_begin(&w);
	json_key(&w, "error");
	json_obj_begin(&w);
	json_key(&w, "code");
	json_str_write(&w, code);
	json_key(&w, "message");
	json_str_write(&w, msg);
	json_obj_end(&w);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0)
		return ERR_LIMIT;
	return buf_append(b, "\n", 1);
}

/* Starts the output with a whole response (fields NULL: JSON); on failure, a bodiless 500. */
static void respond_raw(struct admin_conn *c, int status, const struct http_field *fields,
			const void *body, size_t body_len)
{
	struct buf b;

	buf_init(&b, c->out, sizeof(c->out));
	if (http_response_write(&b, status, fields ? fields : json_fields, !c->keep_alive, body,
				body_len) != 0) {
		c->keep_alive = false;
		http_response_write(&b, 500, json_fields, true, NULL, 0);
	}
	c->out_len = (uint32_t)b.len;
	c->out_off = 0;
	c->phase = AC_WRITE;
}

/* A response sent at once, beside the connection's output: 100 Continue, or the refusal of a
 * connection there is no slot for (it closes then). */
static ssize_t send_now(int fd, int status, const struct http_field *fields, const void *body,
			size_t len)
{
	char out[512];
	struct buf b;

	buf_init(&b, out, sizeof(out));
	if ((status < 200 ? http_response_head_write(&b, status, NULL, HTTP_NO_BODY, false)
			  : http_response_write(&b, status, fields, true, body, len)) != 0)
		return -1;
	return send(fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Sends a whole JSON body built into `body`, with a newline after it. */
void admin_respond(struct admin_conn *c, int status, struct buf *body)
{
	if (buf_append(body, "\n", 1) != 0) {
		c->keep_alive = false;
		respond_raw(c, 500, NULL, NULL, 0);
		return;
	}
	respond_raw(c, status, NULL, body->data, body->len);
}

/* An error answer; fields NULL: JSON's alone (a 405 adds Allow). */
static void respond_error_fields(struct admin_conn *c, int status, const char *code,
				 const char *msg, const struct http_field *fields)
{
	static char text[8192];
	struct buf b;

	buf_init(&b, text, sizeof(text));
	if (error_json(&b, code, msg) != 0) {
		c->keep_alive = false;
		respond_raw(c, 500, NULL, NULL, 0);
		return;
	}
	respond_raw(c, status, fields, b.data, b.len);
}

void admin_respond_error(struct admin_conn *c, int status, const char *code, const char *msg)
{
	respond_error_fields(c, status, code, msg, NULL);
}

void admin_respond_sandbox(struct admin_conn *c, int status, const struct sandbox *sb)
{
	struct buf b;
	struct json_writer w;

	buf_init(&b, item, sizeof(item));
	json_writer_init(&w, &b);
	sandbox_json(&w, sb);
	if (json_writer_finish(&w) != 0) {
		admin_respond_error(c, 500, "internal", "the sandbox does not fit the response buffer");
		return;
	}
	admin_respond(c, status, &b);
}

/* The connection waiting at (i, gen) for a create or remove to end, or NULL: gone, or a
 * zombie (its client left), whose slot is freed now that nothing will answer it. */
static struct admin_conn *waiter(int32_t i, uint32_t gen)
{
	struct admin_conn *c = conn_at(i, gen);

	if (c && c->phase == AC_ZOMBIE) {
		c->phase = AC_FREE;
		return NULL;
	}
	return c;
}

void admin_finish_sandbox(int32_t i, uint32_t gen, const struct sandbox *sb, int status)
{
	struct admin_conn *c = waiter(i, gen);

	/* the created sandbox's policy is in its audit from the start (its run is open now) */
	if (status == 201 && sb->egress_json[0])
		egress_audit_policy((struct sandbox *)sb, "create");
	if (!c)
		return;
	if (status == 201 && c->req.nprobes) {
		admin_probes_start(c, sb);
		return;
	}
	admin_respond_sandbox(c, status, sb);
	admin_flush(c);
}

void admin_finish_error(int32_t i, uint32_t gen, int status, const char *code,
			const char *message)
{
	struct admin_conn *c = waiter(i, gen);

	if (!c)
		return;
	admin_respond_error(c, status, code, message);
	admin_flush(c);
}

/* ---- lists, streamed one item per chunk ---- */

/* Fills the output with as many items as fit; ends the list after the last. */
static void list_fill(struct admin_conn *c)
{
	struct buf out;

	buf_init(&out, c->out, sizeof(c->out));
	out.len = c->out_len;
	while (c->list_cursor < c->list_n) {
		struct buf b;
		struct json_writer w;

		buf_init(&b, item, sizeof(item));
		if (!c->list_first)
			buf_append(&b, ",", 1);
		json_writer_init(&w, &b);
		if (!c->list_item(&w, c->list_cursor)) {
			c->list_cursor++;
			continue;
		}
		if (json_writer_finish(&w) != 0 || http_chunk_write(&out, b.data, b.len) != 0)
			break; /* room comes back as the socket drains */
		c->list_first = false;
		c->list_cursor++;
	}
	if (c->list_cursor == c->list_n) {
		size_t at = out.len;

		if (http_chunk_write(&out, "]}\n", 3) == 0 && http_chunk_end(&out) == 0)
			c->phase = AC_WRITE;
		else
			out.len = at; /* the end goes out whole, once there is room */
	}
	c->out_len = (uint32_t)out.len;
}

void admin_list_start(struct admin_conn *c, const char *head, size_t head_len,
		      bool (*item_fn)(struct json_writer *w, uint32_t i), uint32_t n)
{
	struct buf b;

	buf_init(&b, c->out, sizeof(c->out));
	http_response_head_write(&b, 200, json_fields, HTTP_CHUNKED, !c->keep_alive);
	http_chunk_write(&b, head, head_len);
	c->out_len = (uint32_t)b.len;
	c->out_off = 0;
	c->list_cursor = 0;
	c->list_first = true;
	c->list_item = item_fn;
	c->list_n = n;
	c->phase = AC_LIST;
	list_fill(c);
}

bool admin_sandbox_item(struct json_writer *w, uint32_t i)
{
	const struct sandbox *sb = sandbox_slot(i);

	if (sb->state == SB_FREE || sb->pool)
		return false;
	sandbox_json(w, sb);
	return true;
}

static void route_list(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static const char head[] = "{\"containers\":[";

	admin_list_start(c, head, sizeof(head) - 1, admin_sandbox_item, sandbox_slots());
}

/* ---- info ---- */

/* Sandboxes by state (creating, ready, removing, conflict) and with a ready agent. */
static void count_sandboxes(uint32_t by_state[4], uint32_t *connected, uint32_t *warm)
{
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		const struct sandbox *sb = sandbox_slot(i);

		if (sb->pool && sb->state != SB_FREE) {
			(*warm)++;
			continue;
		}
		if (sb->state >= SB_CREATING && sb->state <= SB_CONFLICT)
			by_state[sb->state - SB_CREATING]++;
		*connected += sb->agent_ready;
	}
}

static void route_info(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static char text[4096];
	const struct admin_config *d = &A.ac;
	const struct config *cfg = d->cfg;
	struct buf b;
	struct json_writer w;
	char pool[24];
	uint32_t a = cfg->subnet_pool_base;
	uint32_t by_state[4] = { 0 }, connected = 0, warm = 0;

	count_sandboxes(by_state, &connected, &warm);
	snprintf(pool, sizeof(pool), "%u.%u.%u.%u/%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255,
		 a & 255, cfg->subnet_pool_prefix);
	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "version");
	json_str_write(&w, AGENTIC_VERSION);
	json_key(&w, "engine_version");
	json_str_write(&w, d->engine_version);
	json_key(&w, "api_version");
	json_str_write(&w, d->api_version);
	json_key(&w, "container");
	json_bool_write(&w, d->in_container);
	json_key(&w, "engine_place");
	json_str_write(&w, d->engine_place ? d->engine_place : "");
	json_key(&w, "sandboxes");
	json_int_write(&w, sandbox_live() - warm);
	/* warm sandboxes (made or being made), not claimed: they are in no list */
	json_key(&w, "warm_sandboxes");
	json_int_write(&w, warm);
	json_key(&w, "sandboxes_ready");
	json_int_write(&w, by_state[SB_READY - SB_CREATING]);
	json_key(&w, "agents_ready");
	json_int_write(&w, connected);
	json_key(&w, "max_sandboxes");
	json_int_write(&w, cfg->max_sandboxes);
	json_key(&w, "warm_networks");
	json_int_write(&w, d->pool->n);
	json_key(&w, "control_uid_range");
	json_obj_begin(&w);
	json_key(&w, "min");
	json_int_write(&w, cfg->control_uid_min);
	json_key(&w, "max");
	json_int_write(&w, cfg->control_uid_max);
	json_key(&w, "used");
	json_int_write(&w, sandbox_uid_map()->used);
	json_obj_end(&w);
	json_key(&w, "subnet_pool");
	json_obj_begin(&w);
	json_key(&w, "cidr");
	json_str_write(&w, pool);
	json_key(&w, "used");
	json_int_write(&w, subnet_map()->used - subnet_foreign_count());
	json_key(&w, "foreign");
	json_int_write(&w, subnet_foreign_count());
	json_obj_end(&w);
	json_key(&w, "memory_budget_bytes");
	json_int_write(&w, (int64_t)d->budget);
	json_key(&w, "agent_socket");
	json_str_write(&w, cfg->agent_socket_dir);
	json_key(&w, "agentshare_root");
	json_str_write(&w, cfg->agentshare_root);
	json_key(&w, "refused_agents");
	json_int_write(&w, (int64_t)agent_refused());
	json_key(&w, "refused_admins");
	json_int_write(&w, (int64_t)A.refused);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0) {
		admin_respond_error(c, 500, "internal", "info does not fit its buffer");
		return;
	}
	admin_respond(c, 200, &b);
}

/* ---- create ---- */

/* The request's cmd, labels and mounts, kept with the sandbox. */
static int keep_request(struct sandbox *sb, const struct create_req *req)
{
	int r = 0;

	for (uint32_t i = 0; r == 0 && i < req->ncmd; i++)
		r = strrun_add(sb->cmd, &sb->cmd_len, sizeof(sb->cmd), req->cmd[i]);
	for (uint32_t i = 0; r == 0 && i < req->nlabels; i++) {
		r = strrun_add(sb->labels, &sb->labels_len, sizeof(sb->labels), req->labels[i].key);
		if (r == 0)
			r = strrun_add(sb->labels, &sb->labels_len, sizeof(sb->labels),
				       req->labels[i].value);
	}
	for (uint32_t i = 0; r == 0 && i < req->nmounts; i++) {
		r = strrun_add(sb->mounts, &sb->mounts_len, sizeof(sb->mounts), req->mounts[i].source);
		if (r == 0)
			r = strrun_add(sb->mounts, &sb->mounts_len, sizeof(sb->mounts),
				       req->mounts[i].target);
		if (req->mounts[i].read_only)
			sb->mount_ro |= 1u << i;
		sb->mount_id[i] = req->mount_id[i];
	}
	posture_from_request(&sb->posture, req);
	if (req->vm && A.ac.vm && strcmp(runtime_vm_accel(A.ac.vm), "kvm") == 0)
		sb->posture.isolation = POSTURE_VM_HARDWARE;
	memcpy(sb->egress_json, req->egress_json, sizeof(sb->egress_json));
	/* report mode lets out what enforce would not: T0 from the first connection on */
	if (req->egress_json[0] && req->egress_report)
		posture_taint(sb, POSTURE_EGRESS_REPORT_ONLY, "create");
	sb->ncmd = (uint16_t)req->ncmd;
	sb->nlabels = (uint16_t)req->nlabels;
	sb->nmounts = (uint16_t)req->nmounts;
	return r;
}

/* Admission by tier: a create that would be T0 (posture_request_reasons: a raw credential in
 * its env, an operator network) while T1 is required (its require_tier, or min_tier = T1) is
 * refused, naming the reasons (fixed words, never a value), before a slot is taken or the
 * engine is asked anything. */
static int tier_refused(struct admin_conn *c, const struct create_req *req)
{
	uint16_t why = posture_request_reasons(req);
	char m[320], words[192];
	struct buf b;

	if (!why || !(req->require_t1 || A.ac.cfg->min_tier_t1))
		return 0;
	buf_init(&b, words, sizeof(words));
	for (int i = 0; i < POSTURE_REASONS; i++)
		if (why & POSTURE_BIT(i))
			buf_printf(&b, "%s%s", b.len ? ", " : "", posture_reason_name(i));
	snprintf(m, sizeof(m), "T1 is required (%s) and this create would be T0: %s",
		 req->require_t1 ? "require_tier" : "min_tier", words);
	log_info("create refused", "reason=tier_refused required_by=%s reasons=%s",
		 req->require_t1 ? "require_tier" : "min_tier", log_q(words));
	admin_respond_error(c, 422, "tier_refused", m);
	return -1;
}

/* ---- a claim of a warm sandbox (docs/WARM_POOL.md) ---- */

/* The create asks for nothing a warm sandbox lacks: the default image and resources, no
 * mounts, network, writable root, egress policy or readiness probes, and an env that fits. */
static bool claim_fits(const struct create_req *req, const struct config *cfg)
{
	uint32_t env_bytes = 0;

	for (uint32_t i = 0; i < req->nenv; i++)
		env_bytes += (uint32_t)strlen(req->env[i]) + 1;
	return cfg->warm_sandboxes && (!req->image || strcmp(req->image, cfg->default_image) == 0) &&
	       !req->vm && !req->network && !req->nmounts && !req->writable_root &&
	       !req->egress_json[0] &&
	       !req->nprobes && env_bytes <= LIMIT_SANDBOX_CLAIM_ENV_BYTES &&
	       (!req->disk_bytes || req->disk_bytes == cfg->default_disk_bytes) &&
	       (!req->transcript_bytes || req->transcript_bytes == cfg->transcript_budget_bytes) &&
	       (!req->memory_bytes || req->memory_bytes == cfg->default_memory_bytes) &&
	       (!req->pids || req->pids == cfg->default_pids_limit) &&
	       (!req->nano_cpus || req->nano_cpus == cfg->default_nano_cpus);
}

/* A warm sandbox ready to be claimed: T1, its init connected and ready, nothing running. */
static struct sandbox *warm_pick(void)
{
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		struct sandbox *sb = sandbox_slot(i);

		if (sb->pool && sb->lc == LC_READY && !lc_of(sb)->call_active && sb->running && sb->agent &&
		    sb->agent_ready && !sb->posture.taints && posture_is_t1(&sb->posture))
			return sb;
	}
	return NULL;
}

/* The claim's request kept with the sandbox, as a cold create keeps it (keep_request), but
 * the engine's view of its network, read when it was made, stays; its env is kept to be
 * given to the init. 0, or -1 (too long to keep: nothing is claimed). */
static int keep_claim(struct sandbox *sb, const struct create_req *req)
{
	struct posture was = sb->posture;
	int r = keep_request(sb, req);

	sb->posture.net_checked = was.net_checked;
	sb->posture.net_ok = was.net_ok;
	sb->posture.taints = was.taints;
	memcpy(sb->posture.taint_ms, was.taint_ms, sizeof(was.taint_ms));
	for (uint32_t i = 0; r == 0 && i < req->nenv; i++)
		r = strrun_add(sb->claim_env, &sb->claim_env_len, sizeof(sb->claim_env), req->env[i]);
	sb->nclaim_env = (uint16_t)req->nenv;
	if (r != 0) {
		sandbox_claim_undo(sb);
		return -1;
	}
	return 0;
}

/* The create's name, else sbx-<8 hex> that no other sandbox has (sb may be a warm one, which
 * sandbox_by_name never finds). */
static void name_sandbox(struct sandbox *sb, const char *name)
{
	const struct sandbox *o;
	char hex[16];

	if (name) {
		snprintf(sb->name, sizeof(sb->name), "%s", name);
		return;
	}
	do {
		random_hex(hex, 8);
		snprintf(sb->name, sizeof(sb->name), "sbx-%s", hex);
	} while ((o = sandbox_by_name(sb->name)) && o != sb);
}

static bool claim_start(struct admin_conn *c, struct sandbox *sb, const struct create_req *req)
{
	if (keep_claim(sb, req) != 0)
		return false;
	name_sandbox(sb, req->name);
	if (lifecycle_signal(sb, LC_EV_CLAIM) != 0) {
		sandbox_claim_undo(sb);
		return false;
	}
	sb->waiter = (int32_t)conn_index(c);
	sb->waiter_gen = c->gen;
	c->phase = AC_WAIT;
	return true;
}

/* A VM's credentials can be sent: each secret file readable as egress_secret_read wants it,
 * in a directory of root's no one else may write, and the claim with them all within one
 * message to the init. Refused with 422 naming the credential's id (never a byte of it). */
static int vm_creds_refused(struct admin_conn *c, const struct create_req *req)
{
	static uint8_t buf[EGRESS_SECRET_BYTES + 1];
	const struct config *cfg = A.ac.cfg;
	char path[LIMIT_PATH_BYTES], m[LIMIT_PATH_BYTES + 256];
	size_t total = 0;
	struct stat st;

	for (uint32_t i = 0; i < req->nenv; i++)
		total += strlen(req->env[i]) + 8;
	if (lstat(cfg->vm_credentials_dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 022)) {
		snprintf(m, sizeof(m), "vm_credentials_dir %s is missing, or not a directory of root's "
			 "that only root may write", cfg->vm_credentials_dir);
		admin_respond_error(c, 422, "credential_unavailable", m);
		return -1;
	}
	for (uint32_t i = 0; i < req->ncreds; i++) {
		long n;

		snprintf(path, sizeof(path), "%s/%s", cfg->vm_credentials_dir, req->creds[i].id);
		n = egress_secret_read(path, buf);
		memset(buf, 0, sizeof(buf));
		if (n < 0) {
			snprintf(m, sizeof(m), "credential %s: its secret file %s is missing, or not a "
				 "regular file of root's with mode 0600 or 0400 of at most %u bytes",
				 req->creds[i].id, path, EGRESS_SECRET_BYTES);
			log_info("create refused", "reason=credential_unavailable credential=%s",
				 log_q(req->creds[i].id));
			admin_respond_error(c, 422, "credential_unavailable", m);
			return -1;
		}
		total += (size_t)n + strlen(req->creds[i].name) + 16;
	}
	if (total > LIMIT_VM_CLAIM_BYTES) {
		snprintf(m, sizeof(m), "the VM's env and credentials together are %zu bytes; at most "
			 "%u go to its init in one message", total, LIMIT_VM_CLAIM_BYTES);
		admin_respond_error(c, 422, "credentials_too_large", m);
		return -1;
	}
	return 0;
}

/* A route's secret_file outside secret_dir (egress_secret_check): refused 422, as a PUT of
 * the policy is. */
static int egress_secrets_refused(struct admin_conn *c, const struct create_req *req)
{
	static struct egress_policy pol;
	char why[LIMIT_PATH_BYTES + 256];

	if (egress_policy_parse(req->egress_json, strlen(req->egress_json), &pol, why,
				sizeof(why)) == 0 &&
	    egress_secret_check(A.ac.cfg, &pol, why, sizeof(why)) == 0)
		return 0;
	log_info("create refused", "reason=egress_invalid");
	admin_respond_error(c, 422, "egress_invalid", why);
	return -1;
}

void admin_create_start(struct admin_conn *c)
{
	const struct config *cfg = A.ac.cfg;
	struct create_req *req = &c->req;
	struct sandbox *sb;

	if (tier_refused(c, req) != 0)
		return;
	if (req->vm && A.ac.vm && runtime_vm_unavailable(A.ac.vm)) {
		log_info("create refused", "reason=runtime_unavailable runtime=vm");
		admin_respond_error(c, 422, "runtime_unavailable", runtime_vm_unavailable(A.ac.vm));
		return;
	}
	if (req->ncreds && vm_creds_refused(c, req) != 0)
		return;
	if (req->egress_json[0] && egress_secrets_refused(c, req) != 0)
		return;
	if (req->name && sandbox_by_name(req->name)) {
		admin_respond_error(c, 409, "name_taken", "a sandbox with that name exists");
		return;
	}
	if (claim_fits(req, cfg) && (sb = warm_pick()) && claim_start(c, sb, req))
		return;
	sb = sandbox_new();
	if (!sb) {
		char m[160];

		snprintf(m, sizeof(m), "at capacity: %u sandboxes exist (max_sandboxes)",
			 cfg->max_sandboxes);
		log_warn("create refused", "reason=capacity max_sandboxes=%u", cfg->max_sandboxes);
		admin_respond_error(c, 503, "capacity", m);
		return;
	}
	name_sandbox(sb, req->name);
	memcpy(sb->agent_id, sb->name, sizeof(sb->agent_id));
	if (keep_request(sb, req) != 0) {
		sandbox_free(sb);
		admin_respond_error(c, 400, "bad_request", "cmd, labels or mounts too long to keep");
		return;
	}
	sb->waiter = (int32_t)conn_index(c);
	sb->waiter_gen = c->gen;
	c->phase = AC_WAIT;
	lifecycle_create(sb, req);
}

bool admin_stopping(void)
{
	return A.stopping;
}

static void route_create(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	struct request_error e = { 0 };

	if (A.stopping) {
		admin_respond_error(c, 503, "shutting_down", "agenticd is shutting down");
		return;
	}
	if (request_create_parse(&c->req, A.ac.cfg, profiles_current(), REQUEST_API_V1,
				 c->body, c->body_len, &e) != 0) {
		if (e.status == 422)
			log_info("create refused", "route=v1 code=%s", log_q(e.code));
		admin_respond_error(c, e.status, e.code, e.message);
		return;
	}
	admin_create_start(c);
}

/* ---- inspect and remove ---- */

static void route_inspect(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	admin_respond_sandbox(c, 200, sb);
}

static bool query_flag(const char *query, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = query; p && *p;) {
		if (strncmp(p, name, n) == 0 && (p[n] == '=' || p[n] == '&' || !p[n]))
			return p[n] != '=' || (p[n + 1] == '1' || strncmp(p + n + 1, "true", 4) == 0);
		p = strchr(p, '&');
		if (p)
			p++;
	}
	return false;
}

void admin_remove_start(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	if (sb->state == SB_CREATING) {
		admin_respond_error(c, 409, "busy", "the sandbox is still being created");
		return;
	}
	if (sb->state == SB_REMOVING) {
		admin_respond_error(c, 409, "busy", "the sandbox is already being removed");
		return;
	}
	sb->waiter = (int32_t)conn_index(c);
	sb->waiter_gen = c->gen;
	c->phase = AC_WAIT;
	lifecycle_remove(sb, query_flag(query, "force"), query_flag(query, "keep_workspace"));
}

/* ---- posture: the tier and its reasons; an operator's taint ---- */

/* The taints: what can happen to a sandbox after its create (docs/POSTURE.md, kind "taint").
 * An operator may declare any of them: a manual login inside it, or an exec or network change
 * made where the engine's event stream could not show it. The reasons known at create
 * (env_credential, operator_network, platform_compatibility) are facts of the create request
 * and its network, which agenticd reads itself: declared later they would misstate how the
 * sandbox was made (a credential put in by hand afterwards is operator_declared).
 * network_unverified is no taint: it is the engine's view, read again at each start. */
static const enum posture_reason taint_reasons[] = {
	POSTURE_DIRECT_DOCKER_EXEC,
	POSTURE_NETWORK_ATTACHED,
	POSTURE_CONTAINER_CHANGED,
	POSTURE_OPERATOR_DECLARED,
};

static bool is_taint(enum posture_reason r)
{
	for (size_t i = 0; i < ARRAY_LEN(taint_reasons); i++)
		if (taint_reasons[i] == r)
			return true;
	return false;
}

/* {"name", "posture": {...}} plus, for a taint's answer, "reason" and "already_held". */
static void respond_posture(struct admin_conn *c, const struct sandbox *sb,
			    const char *reason, bool held)
{
	static char text[4096];
	struct buf b;
	struct json_writer w;

	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "name");
	json_str_write(&w, sb->name);
	json_key(&w, "posture");
	posture_json(&w, &sb->posture);
	if (reason) {
		json_key(&w, "reason");
		json_str_write(&w, reason);
		json_key(&w, "already_held");
		json_bool_write(&w, held);
	}
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0) {
		admin_respond_error(c, 500, "internal", "the posture does not fit its buffer");
		return;
	}
	admin_respond(c, 200, &b);
}

static void route_posture(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	respond_posture(c, sb, NULL, false);
}

/* The body's reason: 0 and *r, or an answer sent (400) and -1. Nothing but "reason". */
static int taint_body(struct admin_conn *c, enum posture_reason *r)
{
	static struct json_token tokens[16];
	struct json_doc doc;
	char word[40], m[256];
	struct buf b;
	int k, v;

	if (json_parse(&doc, (const char *)c->body, c->body_len, tokens, ARRAY_LEN(tokens)) != 0) {
		admin_respond_error(c, 400, "bad_json", "the body is not valid JSON; send "
				    "{\"reason\": \"operator_declared\"}");
		return -1;
	}
	if (doc.tok[0].type != JSON_OBJECT) {
		admin_respond_error(c, 400, "bad_request", "the body is a JSON object; send "
				    "{\"reason\": \"operator_declared\"}");
		return -1;
	}
	for (k = json_first(&doc, 0); k >= 0; k = json_next(&doc, 0, json_next(&doc, 0, k)))
		if (!json_str_eq(&doc, k, "reason")) {
			admin_respond_error(c, 400, "bad_request", "the body has one field, reason");
			return -1;
		}
	v = json_obj_get(&doc, 0, "reason");
	if (v >= 0 && json_str(&doc, v, word, sizeof(word)) >= 0 &&
	    posture_reason_parse(word, r) == 0 && is_taint(*r))
		return 0;
	buf_init(&b, m, sizeof(m));
	buf_printf(&b, "reason is one of:");
	for (size_t i = 0; i < ARRAY_LEN(taint_reasons); i++)
		buf_printf(&b, "%s %s", i ? "," : "", posture_reason_name(taint_reasons[i]));
	admin_respond_error(c, 400, "bad_reason", m);
	return -1;
}

/* A sandbox being created has no record or run yet to hold the taint (and may be rolled
 * back); one being removed is going with its record: both 409, nothing recorded. */
static void route_taint(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	enum posture_reason r;
	int held;

	if (sb->state == SB_CREATING || sb->state == SB_REMOVING) {
		admin_respond_error(c, 409, "busy", sb->state == SB_CREATING
				    ? "the sandbox is still being created: declare the taint once it is ready"
				    : "the sandbox is being removed");
		return;
	}
	if (taint_body(c, &r) != 0)
		return;
	held = posture_taint(sb, r, "operator");
	if (held < 0) {
		admin_respond_error(c, 500, "internal", "the taint was not recorded");
		return;
	}
	/* who declared it: the posture's own line says what changed */
	log_info("posture taint declared", "name=%s reason=%s uid=%u pid=%d already_held=%s",
		 log_q(sb->name), posture_reason_name(r), (unsigned)c->uid, (int)c->pid,
		 held == 0 ? "true" : "false");
	respond_posture(c, sb, posture_reason_name(r), held == 0);
}

/* ---- egress: the policy, and what its audit says ---- */

static void query_value(const char *query, const char *name, char *out, size_t size);

/* {"name", "policy": POLICY or null, "posture": {...}, "audit": [the last lines]}: as many of
 * the last lines (up to tail) as fit the answer. */
static void respond_egress(struct admin_conn *c, const struct sandbox *sb, uint32_t tail)
{
	static char text[LIMIT_ADMIN_OUT_BYTES - 1024];

	for (uint32_t k = tail;; k = k > 10 ? k - 10 : 0) {
		struct buf b;
		struct json_writer w;

		buf_init(&b, text, sizeof(text));
		json_writer_init(&w, &b);
		json_obj_begin(&w);
		json_key(&w, "name");
		json_str_write(&w, sb->name);
		json_key(&w, "policy");
		egress_view_policy(&w, sb->egress_json);
		json_key(&w, "posture");
		posture_json(&w, &sb->posture);
		json_key(&w, "audit");
		egress_view_audit(&w, sb, k);
		json_obj_end(&w);
		if (json_writer_finish(&w) == 0) {
			admin_respond(c, 200, &b);
			return;
		}
		if (k == 0)
			break;
	}
	admin_respond_error(c, 500, "internal", "the policy does not fit its buffer");
}

static void route_egress_get(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	char v[16];
	long tail = EGRESS_VIEW_AUDIT_MAX;

	query_value(query, "tail", v, sizeof(v));
	if (v[0]) {
		char *end;

		tail = strtol(v, &end, 10);
		if (*end || tail < 0 || tail > EGRESS_VIEW_AUDIT_MAX) {
			admin_respond_error(c, 400, "bad_request", "tail is a number from 0 to 100");
			return;
		}
	}
	respond_egress(c, sb, (uint32_t)tail);
}

/* A new policy, for the connections that start from now on: read strictly (400 when the body
 * is no JSON, 422 with the reader's message when it is no policy: nothing changes then),
 * kept, recorded in sandbox.json and the audit, and the posture follows (report mode is a
 * sticky T0). */
static void route_egress_put(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	static struct egress_policy pol;
	static struct json_token tok[4];
	static char old_json[EGRESS_POLICY_BYTES];
	char why[512], norm[EGRESS_POLICY_BYTES];
	struct json_doc doc;
	int r;

	if (sb->state == SB_CREATING || sb->state == SB_REMOVING) {
		admin_respond_error(c, 409, "busy", sb->state == SB_CREATING
				    ? "the sandbox is still being created: set its policy once it is ready"
				    : "the sandbox is being removed");
		return;
	}
	r = json_parse(&doc, (const char *)c->body, c->body_len, tok, ARRAY_LEN(tok));
	if (r == ERR_PARSE || c->body_len == 0) {
		admin_respond_error(c, 400, "bad_json", "the body is not valid JSON: send a policy "
				    "(docs/EGRESS.md \"Policy\")");
		return;
	}
	if (egress_policy_parse((const char *)c->body, c->body_len, &pol, why, sizeof(why)) != 0 ||
	    egress_secret_check(A.ac.cfg, &pol, why, sizeof(why)) != 0) {
		log_info("egress policy refused", "name=%s", log_q(sb->name));
		admin_respond_error(c, 422, "egress_invalid", why);
		return;
	}
	if (egress_policy_write(&pol, norm, sizeof(norm)) < 0) {
		admin_respond_error(c, 422, "egress_invalid", "egress: the normalised policy does "
				    "not fit");
		return;
	}
	/* kept first: a policy in force that a restart would not bring back (the old one, maybe
	 * looser, would come back instead) is no change to answer 200 for */
	memcpy(old_json, sb->egress_json, sizeof(old_json));
	memcpy(sb->egress_json, norm, sizeof(sb->egress_json));
	if (sb->dir_made && (r = sandbox_record_write(A.ac.cfg, sb)) != 0) {
		memcpy(sb->egress_json, old_json, sizeof(sb->egress_json));
		log_warn("cannot write sandbox.json", "name=%s error=%s", log_q(sb->name),
			 log_q(err_str(r)));
		admin_respond_error(c, 507, "record_unwritable", "the sandbox's record cannot be "
				    "written (is the agentshare full?): the policy is unchanged");
		return;
	}
	posture_egress_policy(&sb->posture, true);
	if (pol.mode == EGRESS_REPORT)
		posture_taint(sb, POSTURE_EGRESS_REPORT_ONLY, "api");
	egress_audit_policy(sb, "api");
	egress_policy_changed(sb);
	log_info("egress policy replaced", "name=%s uid=%u pid=%d mode=%s allow=%u routes=%u",
		 log_q(sb->name), (unsigned)c->uid, (int)c->pid,
		 pol.mode == EGRESS_REPORT ? "report" : "enforce", pol.nallow, pol.nroutes);
	respond_egress(c, sb, 0);
}

/* ---- logs: a run's stdout.log or stderr.log, as it is now ---- */

static void query_value(const char *query, const char *name, char *out, size_t size)
{
	size_t n = strlen(name);

	out[0] = '\0';
	for (const char *p = query; p && *p;) {
		if (strncmp(p, name, n) == 0 && p[n] == '=') {
			size_t l = strcspn(p + n + 1, "&");

			snprintf(out, size, "%.*s", (int)(l < size ? l : size - 1), p + n + 1);
			return;
		}
		p = strchr(p, '&');
		if (p)
			p++;
	}
}

/* Refills an empty `out` from the transcript file of a logs answer. */
static void file_refill(struct admin_conn *c)
{
	ssize_t n;

	c->out_off = c->out_len = 0;
	if (c->file_fd < 0 || !c->file_left)
		return;
	n = read(c->file_fd, c->out, c->file_left < sizeof(c->out) ? c->file_left : sizeof(c->out));
	if (n <= 0) {
		c->file_left = 0; /* the size was promised: the connection closes short */
		c->keep_alive = false;
		return;
	}
	c->out_len = (uint32_t)n;
	c->file_left -= (uint64_t)n;
}

/* Sends the whole file fd (taken) as the answer, from the loop as the socket drains. */
static void respond_file(struct admin_conn *c, int fd, const struct http_field *fields)
{
	struct stat st;
	struct buf b;

	if (fstat(fd, &st) != 0) {
		close(fd);
		admin_respond_error(c, 500, "internal", "cannot read the file");
		return;
	}
	c->file_fd = fd;
	c->file_left = (uint64_t)st.st_size;
	buf_init(&b, c->out, sizeof(c->out));
	http_response_head_write(&b, 200, fields, st.st_size, !c->keep_alive);
	c->out_off = 0;
	c->out_len = (uint32_t)b.len;
	c->phase = AC_FILE;
}

static void route_logs(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	static const struct http_field fields[] = {
		{ "Content-Type", "application/octet-stream" },
		{ NULL, NULL },
	};
	char run[64], stream[16];
	int fd, r, s;

	query_value(query, "run", run, sizeof(run));
	query_value(query, "stream", stream, sizeof(stream));
	if (stream[0] && strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0) {
		admin_respond_error(c, 400, "bad_request", "stream is stdout or stderr");
		return;
	}
	s = strcmp(stream, "stderr") == 0;
	r = runlog_open(sb, run, s, &fd);
	if (r == -EINVAL) {
		admin_respond_error(c, 400, "bad_request", "run names a directory under runs/ (run-...)");
		return;
	}
	if (r != 0) {
		admin_respond_error(c, 404, "not_found", run[0] ? "no such run" : "the sandbox has no run yet");
		return;
	}
	respond_file(c, fd, fields);
}

/* ---- verify: run the verifier, or its last result ---- */

static void verify_answer(int32_t i, uint32_t gen, int status, const char *code,
			  const char *message, const char *json, size_t len)
{
	struct admin_conn *c = waiter(i, gen);

	if (!c)
		return;
	if (status == 200)
		respond_raw(c, 200, NULL, json, len);
	else
		admin_respond_error(c, status, code, message);
	admin_flush(c);
}

/* {"require_dedicated_agentshare": bool}, or no body: 0, or -1 (answered 400). */
static int verify_body(struct admin_conn *c, bool *dedicated)
{
	static struct json_token t[16];
	struct json_doc d;
	int v;

	*dedicated = false;
	if (!c->body_len)
		return 0;
	if (json_parse(&d, (const char *)c->body, c->body_len, t, ARRAY_LEN(t)) != 0 ||
	    d.tok[0].type != JSON_OBJECT) {
		admin_respond_error(c, 400, "bad_json", "the body is a JSON object");
		return -1;
	}
	for (int k = json_first(&d, 0); k >= 0; k = json_next(&d, 0, json_next(&d, 0, k)))
		if (!json_str_eq(&d, k, "require_dedicated_agentshare")) {
			admin_respond_error(c, 400, "bad_request",
					    "the only field is require_dedicated_agentshare");
			return -1;
		}
	v = json_obj_get(&d, 0, "require_dedicated_agentshare");
	if (v >= 0 && json_bool(&d, v, dedicated) != 0) {
		admin_respond_error(c, 400, "bad_request", "require_dedicated_agentshare is a boolean");
		return -1;
	}
	return 0;
}

static void verify_begin(struct admin_conn *c, struct sandbox *sb, const char *container)
{
	struct verify_client vc = { verify_answer, (int32_t)conn_index(c), c->gen };
	const char *code = NULL, *message = NULL;
	bool dedicated;
	int status;

	if (verify_body(c, &dedicated) != 0)
		return;
	status = verify_start(sb, container, dedicated, &vc, &code, &message);
	if (status != 0) {
		admin_respond_error(c, status, code, message);
		return;
	}
	c->phase = AC_WAIT;
}

static void route_verify(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	verify_begin(c, sb, NULL);
}

/* POST /api/v1/verify?container=ID: any container on the engine, by id or name. */
static void route_verify_container(struct admin_conn *c, struct sandbox *unused,
				   const char *query)
{
	char id[160];

	query_value(query, "container", id, sizeof(id));
	if (!id[0] || strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789_.-") != strlen(id)) {
		admin_respond_error(c, 400, "bad_request",
				    "container=ID: a container's id or name ([A-Za-z0-9_.-])");
		return;
	}
	verify_begin(c, NULL, id);
}

static void route_verify_last(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	int fd;

	if (verify_last_open(sb, &fd) != 0) {
		admin_respond_error(c, 404, "no_result", "the sandbox's current run has no verify result");
		return;
	}
	respond_file(c, fd, json_fields);
}

/* ---- /metrics ---- */

static void route_metrics(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static const struct http_field text_fields[] = {
		{ "Content-Type", "text/plain; version=0.0.4" },
		{ NULL, NULL },
	};
	static char text[16384];
	static const char *names[AGENT_REFUSAL_REASONS];
	/* every taint: the declarable ones, and the one an egress policy in report mode leaves */
	static const char *taint_names[ARRAY_LEN(taint_reasons) + 1];
	static uint64_t taints[ARRAY_LEN(taint_reasons) + 1];
	struct metrics_view v = { .refusal_names = names, .nrefusals = AGENT_REFUSAL_REASONS };
	struct buf b;

	count_sandboxes(v.sandboxes, &v.agents_connected, &v.warm);
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		const struct sandbox *sb = sandbox_slot(i);

		if (sb->state != SB_FREE && !sb->pool)
			v.tiers[posture_is_t1(&sb->posture)]++;
	}
	for (size_t i = 0; i < ARRAY_LEN(taint_reasons); i++) {
		taint_names[i] = posture_reason_name(taint_reasons[i]);
		taints[i] = posture_taints_total(taint_reasons[i]);
	}
	taint_names[ARRAY_LEN(taint_reasons)] = posture_reason_name(POSTURE_EGRESS_REPORT_ONLY);
	taints[ARRAY_LEN(taint_reasons)] = posture_taints_total(POSTURE_EGRESS_REPORT_ONLY);
	v.taint_names = taint_names;
	v.taints = taints;
	v.ntaints = ARRAY_LEN(taint_reasons) + 1;
	for (int i = 0; i < AGENT_REFUSAL_REASONS; i++)
		names[i] = agent_refusal_name(i);
	v.refused_admins = A.refused;
	v.budget = A.ac.budget;
	v.resident = metrics_resident_bytes();
	buf_init(&b, text, sizeof(text));
	if (metrics_render(&b, &v) != 0) {
		admin_respond_error(c, 500, "internal", "metrics do not fit the response buffer");
		return;
	}
	respond_raw(c, 200, text_fields, b.data, b.len);
}

/* ---- routing ---- */

/* GET before POST and DELETE: a 405 lists them in this order ("use GET or POST"). */
static const struct admin_route routes[] = {
	{ "GET", API "/containers", route_list, false },
	{ "POST", API "/containers", route_create, false },
	{ "GET", API "/containers/", route_list, false },
	{ "POST", API "/containers/", route_create, false },
	{ "GET", API "/containers/*", route_inspect, false },
	{ "DELETE", API "/containers/*", admin_remove_start, false },
	{ "POST", API "/containers/*/exec", admin_exec_route, false },
	{ "GET", API "/containers/*/logs", route_logs, false },
	{ "GET", API "/containers/*/posture", route_posture, false },
	{ "POST", API "/containers/*/posture/taints", route_taint, false },
	{ "GET", API "/containers/*/egress", route_egress_get, false },
	{ "PUT", API "/containers/*/egress", route_egress_put, false },
	{ "GET", API "/containers/*/verify", route_verify_last, false },
	{ "POST", API "/containers/*/verify", route_verify, false },
	{ "POST", API "/verify", route_verify_container, false },
	{ "GET", API "/info", route_info, false },
	{ "GET", "/metrics", route_metrics, false },
	{ "GET", API2 "/instances", admin_v2_instances_list, false },
	{ "POST", API2 "/instances", admin_v2_instances_create, false },
	{ "GET", API2 "/instances/*", admin_v2_instance_get, false },
	{ "DELETE", API2 "/instances/*", admin_v2_instance_delete, false },
	{ "GET", API2 "/instances/*/egress", route_egress_get, false },
	{ "PUT", API2 "/instances/*/egress", route_egress_put, false },
	{ "GET", API2 "/profiles", admin_v2_profiles_list, false },
	{ "GET", API2 "/profiles/*", admin_v2_profile_get, true },
};

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
	struct buf b;

	buf_init(&b, allow, allow_size);
	allow[0] = '\0';
	for (size_t i = 0; i < ARRAY_LEN(routes); i++) {
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
	respond_error_fields(c, 405, "method_not_allowed", m, fields);
}

static void dispatch(struct admin_conn *c)
{
	const struct http_parser *p = &c->parser;
	const char *method = http_parser_str(p, p->method);
	char target[512], *query, m[600], name[128], allow[64];
	const struct admin_route *route;
	struct sandbox *sb = NULL;

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
	if (name[0] && !route->not_sandbox && !(sb = sandbox_by_name(name))) {
		snprintf(m, sizeof(m), "no sandbox is named %.64s",
			 credscan_value(name) ? "that (a name shaped like a credential)" : name);
		admin_respond_error(c, 404, "not_found", m);
		return;
	}
	route->handler(c, sb, query);
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
	agenticd_unwatch(fd);
	c->fd = -1;
	admin_conn_close(c);
	r = grpc_server_add_conn(A.ac.grpc, fd, admin_grpc_methods,
				 admin_grpc_nmethods);
	if (r < 0) {
		log_warn("admin grpc connection refused", "error=%s", log_q(err_str(r)));
		close(fd);
	}
	return true;
}

/* ---- I/O ---- */

void admin_flush(struct admin_conn *c)
{
	if (c->call) {
		admin_grpc_pump(c);
		return;
	}
	for (;;) {
		ssize_t n;

		if (c->phase == AC_LIST && c->out_off == c->out_len) {
			c->out_off = c->out_len = 0;
			list_fill(c);
		}
		if (c->phase == AC_EXEC && c->out_off == c->out_len)
			admin_exec_refill(c);
		if (c->phase == AC_FILE && c->out_off == c->out_len)
			file_refill(c);
		if (c->out_off == c->out_len)
			break;
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			/* an exec reads stdin on while its output waits: a client blocked writing
			 * stdin reads no output, and both would wait for each other forever */
			admin_watch(c, EPOLLOUT | (c->phase == AC_EXEC && c->exec >= 0 && c->roff == c->rlen
						     ? EPOLLIN : 0));
			return;
		}
		if (n <= 0) {
			admin_conn_close(c);
			return;
		}
		c->out_off += (uint32_t)n;
	}
	if (c->phase == AC_EXEC && c->exec >= 0) {
		/* all sent: read stdin (or notice a hang-up) while the command runs */
		if (c->roff == c->rlen)
			admin_watch(c, EPOLLIN);
		return;
	}
	if (c->phase == AC_EXEC || (c->phase == AC_FILE && !c->file_left)) {
		if (c->file_fd >= 0)
			close(c->file_fd);
		c->file_fd = -1;
		c->phase = AC_WRITE;
	}
	if (c->phase != AC_WRITE)
		return;
	if (!c->keep_alive) {
		admin_conn_close(c);
		return;
	}
	/* next request on the same connection */
	http_parser_reset(&c->parser);
	c->body_len = 0;
	c->body_too_big = false;
	c->out_off = c->out_len = 0;
	c->phase = AC_READ;
	c->upgraded = false;
	c->idle_since = clock_mono_ms();
	admin_watch(c, EPOLLIN);
	admin_event(conn_index(c), 0);
}

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

			c->keep_alive = c->parser.keep_alive;
			/* curl asks before sending a body over 1 KiB; say yes at once */
			if (expect && strcasecmp(expect, "100-continue") == 0 && c->allowed &&
			    send_now(c->fd, 100, NULL, NULL, 0) < 0)
				log_debug("100-continue not sent", "error=%s", log_q(strerror(errno)));
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
	struct admin_conn *c = &A.ac.conns[index];

	if (c->phase == AC_FREE || c->phase == AC_ZOMBIE || c->fd < 0)
		return;
	if (c->phase == AC_WRITE || c->phase == AC_LIST || c->phase == AC_FILE) {
		admin_flush(c);
		return;
	}
	if (c->phase == AC_EXEC) {
		admin_exec_event(c, events);
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
	    c->phase == AC_FILE)
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
	if (error_json(&b, "capacity", "too many admin connections (max_admin_connections)") != 0 ||
	    send_now(fd, 503, json_fields, b.data, b.len) < 0)
		log_debug("admin connection refused", "reason=%s", "capacity");
	close(fd);
}

void admin_accept(void)
{
	for (;;) {
		int fd = accept4(A.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct admin_conn *c;
		char why[128], q[160];

		if (fd < 0)
			return;
		c = admin_conn_take();
		if (!c) {
			refuse_busy(fd);
			continue;
		}
		c->fd = fd;
		c->phase = AC_READ;
		c->idle_since = clock_mono_ms();
		http_parser_init(&c->parser, HTTP_PARSE_REQUEST, c->head, sizeof(c->head));
		c->parser.body_limit = LIMIT_ADMIN_BODY_BYTES;
		c->allowed = host_admin_peer_ok(fd, A.ac.group_known, A.ac.gid, &c->uid,
						&c->pid, why, sizeof(why)) == 0;
		if (!c->allowed) {
			A.refused++;
			log_warn("admin refused", "uid=%u pid=%d reason=%s", (unsigned)c->uid,
				 (int)c->pid, log_quote(q, sizeof(q), why));
		}
		agenticd_watch(fd, EPOLLIN | EPOLLRDHUP, TAG_ADMIN_CONN, conn_index(c));
	}
}

void admin_tick(int64_t now)
{
	for (uint32_t i = 0; i < A.ac.nconns; i++) {
		struct admin_conn *c = &A.ac.conns[i];

		if ((c->phase == AC_READ || c->phase == AC_WRITE || c->phase == AC_LIST) &&
		    now - c->idle_since > LIMIT_ADMIN_IDLE_MS)
			admin_conn_close(c);
	}
}

bool admin_answering(void)
{
	for (uint32_t i = 0; i < A.ac.nconns; i++) {
		enum admin_phase ph = A.ac.conns[i].phase;

		if (ph == AC_WAIT || ph == AC_WRITE || ph == AC_LIST)
			return true;
	}
	return false;
}

void admin_shutdown(void)
{
	A.stopping = true;
	if (A.listen_fd >= 0) {
		agenticd_unwatch(A.listen_fd);
		close(A.listen_fd);
		A.listen_fd = -1;
	}
}
