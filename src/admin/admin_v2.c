/* admin_v2.c: the admin-v2 routes (docs/API.md: admin-v2), in admin_routes.c's route table:
 *
 *   POST   /api/v2/admin/instances       create from a startup profile (201 + the sandbox)
 *   GET    /api/v2/admin/instances       list
 *   GET    /api/v2/admin/instances/NAME  one sandbox
 *   DELETE /api/v2/admin/instances/NAME  remove (v1's DELETE: ?force=1, ?keep_workspace=1)
 *   GET    /api/v2/admin/profiles        the profiles of profiles_dir, valid or not
 *   GET    /api/v2/admin/profiles/ID     one profile; env values are never shown
 *
 * An instance is a sandbox: a create goes through the same request checks, admission and
 * lifecycle as v1's, with the profile as its base (request.h). A profile's readiness probes
 * run once the sandbox is ready, as execs one after another, and the create's answer says
 * how they ended (whichever route made it). */
#include <stdio.h>
#include <string.h>

#include "json/json.h"
#include "admin/admin.h"
#include "admin/admin_conn.h"
#include "egress/view.h"
#include "config/profiles.h"
#include "profile/credscan.h"
#include "profile/profile.h"

/* one profile, or the list's head, rendered (a profile's strings fit PROFILE_FILE_BYTES,
 * escaped at most six times over: what does not fit is a 500, never a cut answer) */
static char text[LIMIT_ADMIN_OUT_BYTES - 1024];

void admin_v2_instances_create(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	admin_create_request(c, REQUEST_API_V2, "v2", query);
}

void admin_v2_instances_list(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static const char head[] = "{\"instances\":[";

	admin_list_start(c, head, sizeof(head) - 1, admin_sandbox_item, sandbox_slots());
}

void admin_v2_instance_get(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	admin_respond_sandbox(c, 200, sb);
}

void admin_v2_instance_delete(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	admin_remove_start(c, sb, query);
}

/* ---- profiles ---- */

/* Every string a profile gives is shown, but none shaped like a credential: a token pasted
 * into a cmd, a path or a name stays in the file. */
static void shown_write(struct json_writer *w, const char *s)
{
	json_str_write(w, credscan_value(s) ? "(hidden: shaped like a credential)" : s);
}

static void str_or_null(struct json_writer *w, const char *key, const char *s)
{
	json_key(w, key);
	if (s && *s)
		shown_write(w, s);
	else
		json_null_write(w);
}

static void strs(struct json_writer *w, const char *key, const char *const *v, uint32_t n)
{
	json_key(w, key);
	json_arr_begin(w);
	for (uint32_t i = 0; i < n; i++)
		shown_write(w, v[i]);
	json_arr_end(w);
}

/* What the list and the full view share: id, file, valid, and the error of an invalid one. */
static void entry_head(struct json_writer *w, const struct profile_entry *en)
{
	str_or_null(w, "id", en->id);
	str_or_null(w, "file", en->file);
	json_key(w, "valid");
	json_bool_write(w, en->valid);
	if (!en->valid) {
		json_key(w, "error");
		json_str_write(w, en->error);
	}
}

static bool profile_item(struct json_writer *w, uint32_t i)
{
	const struct profile_set *set = profiles_current();
	const struct profile_entry *en;

	if (i >= set->n)
		return false; /* a reload since the list began has fewer */
	en = &set->e[i];
	json_obj_begin(w);
	entry_head(w, en);
	if (en->valid) {
		str_or_null(w, "image", en->p.image);
		str_or_null(w, "runtime", en->p.runtime ? en->p.runtime : "docker");
		json_key(w, "egress");
		json_int_write(w, en->p.negress);
		json_key(w, "credential_refs");
		json_int_write(w, en->p.ncreds);
	}
	json_obj_end(w);
	return true;
}

void admin_v2_profiles_list(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	const struct profile_set *set = profiles_current();
	uint32_t invalid = 0;
	struct buf b;
	struct json_writer w;

	for (uint32_t i = 0; i < set->n; i++)
		invalid += !set->e[i].valid;
	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "dir");
	json_str_write(&w, admin_cfg()->profiles_dir);
	str_or_null(&w, "dir_error", set->dir_error);
	json_key(&w, "invalid");
	json_int_write(&w, invalid);
	json_key(&w, "skipped");
	json_int_write(&w, set->skipped);
	json_key(&w, "profiles");
	json_arr_begin(&w);
	/* the writer is left open: the items and "]}" follow as chunks */
	if (w.err != 0) {
		admin_respond_error(c, 500, "internal", "the profile list does not fit its buffer");
		return;
	}
	admin_list_start(c, (const char *)b.data, b.len, profile_item, set->n);
}

static void resources_write(struct json_writer *w, const struct profile *p)
{
	json_key(w, "resources");
	json_obj_begin(w);
	json_key(w, "memory");
	json_int_write(w, (int64_t)p->memory_bytes);
	json_key(w, "pids");
	json_int_write(w, p->pids);
	json_key(w, "nano_cpus");
	json_int_write(w, (int64_t)p->nano_cpus);
	json_key(w, "disk");
	json_int_write(w, (int64_t)p->disk_bytes);
	json_obj_end(w);
}

/* env: the keys alone. Values are non-secret by the format's contract, but one that looks
 * like a credential must never be echoed, and showing none is the rule that cannot slip. */
static void env_keys_write(struct json_writer *w, const struct profile *p)
{
	json_key(w, "env_keys");
	json_arr_begin(w);
	for (uint32_t i = 0; i < p->nenv; i++) {
		char key[256];

		snprintf(key, sizeof(key), "%.*s", (int)strcspn(p->env[i], "="), p->env[i]);
		shown_write(w, key);
	}
	json_arr_end(w);
}

static void lists_write(struct json_writer *w, const struct profile *p)
{
	json_key(w, "mounts");
	json_arr_begin(w);
	for (uint32_t i = 0; i < p->nmounts; i++) {
		json_obj_begin(w);
		str_or_null(w, "source", p->mounts[i].source);
		str_or_null(w, "target", p->mounts[i].target);
		json_key(w, "read_only");
		json_bool_write(w, p->mounts[i].read_only);
		json_obj_end(w);
	}
	json_arr_end(w);
	/* the policy normalised: its secret_file paths show, a secret's bytes are never in it */
	json_key(w, "egress");
	egress_view_policy(w, p->egress_json);
	json_key(w, "credential_refs");
	json_arr_begin(w);
	for (uint32_t i = 0; i < p->ncreds; i++) {
		const struct profile_cred_ref *r = &p->creds[i];

		json_obj_begin(w);
		str_or_null(w, "id", r->id);
		str_or_null(w, "provider", r->provider);
		str_or_null(w, "allowed_use", r->allowed_use);
		json_key(w, "target");
		json_obj_begin(w);
		str_or_null(w, "type", r->target_type);
		str_or_null(w, "name", r->target_name);
		json_obj_end(w);
		json_obj_end(w);
	}
	json_arr_end(w);
	json_key(w, "readiness_probes");
	json_arr_begin(w);
	for (uint32_t i = 0; i < p->nprobes; i++) {
		json_obj_begin(w);
		strs(w, "cmd", p->probes[i].cmd, p->probes[i].ncmd);
		json_key(w, "timeout_s");
		json_int_write(w, p->probes[i].timeout_s);
		json_obj_end(w);
	}
	json_arr_end(w);
}

/* The full view of a valid profile, and whether a create may use it here. */
static void profile_write(struct json_writer *w, const struct profile_entry *en)
{
	const struct profile *p = &en->p;
	struct request_error e = { 0 };

	str_or_null(w, "description", p->description);
	str_or_null(w, "image", p->image);
	str_or_null(w, "runtime", p->runtime ? p->runtime : "docker");
	env_keys_write(w, p);
	strs(w, "cmd", p->cmd, p->ncmd);
	resources_write(w, p);
	str_or_null(w, "network", p->network);
	lists_write(w, p);
	json_key(w, "usable");
	if (request_profile_check(p, &e) == 0) {
		json_bool_write(w, true);
		return;
	}
	json_bool_write(w, false);
	json_key(w, "refusal");
	json_obj_begin(w);
	json_key(w, "code");
	json_str_write(w, e.code);
	json_key(w, "message");
	json_str_write(w, e.message);
	json_obj_end(w);
}

void admin_v2_profile_get(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	const struct profile_entry *en = NULL;
	struct buf b;
	struct json_writer w;
	char m[160];

	profile_set_find(profiles_current(), c->segment, &en);
	if (!en) {
		/* the id is echoed only when it has a profile id's shape and no token's */
		if (strlen(c->segment) < PROFILE_ID_BYTES && !credscan_value(c->segment) &&
		    strspn(c->segment, "abcdefghijklmnopqrstuvwxyz0123456789_.-") ==
			    strlen(c->segment))
			snprintf(m, sizeof(m), "no startup profile has the id %s", c->segment);
		else
			snprintf(m, sizeof(m), "no startup profile has that id");
		admin_respond_error(c, 404, "not_found", m);
		return;
	}
	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	entry_head(&w, en);
	if (en->valid)
		profile_write(&w, en);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0) {
		admin_respond_error(c, 500, "internal", "the profile does not fit the response buffer");
		return;
	}
	admin_respond(c, 200, &b);
}

/* ---- readiness probes: a create from a profile that has them answers once they ran ---- */

_Static_assert(sizeof(((struct admin_conn *)0)->probe_sandbox) >= SB_NAME_BYTES,
	       "a sandbox's name fits the probe state");

static void probes_next(struct admin_conn *c);

/* Their output is in the run's transcript; the answer says only how they ended. */
static int probe_output(void *ctx, int stream, const void *data, size_t len)
{
	return 0;
}

static void probe_done(void *ctx, int32_t exit_code, int64_t duration_ms, const char *error,
		       const char *transcript_error)
{
	struct admin_conn *c = ctx;
	bool failed = exit_code != 0 || (error && *error);

	if (c->phase == AC_ZOMBIE) {
		c->phase = AC_FREE; /* its client left: nothing to answer, no probe to run */
		return;
	}
	log_info("readiness probe", "name=%s probe=%u exit_code=%d duration_ms=%lld failed=%d",
		 log_q(c->probe_sandbox), c->probe_next, exit_code, (long long)duration_ms,
		 failed);
	if (failed && c->probe_failed < 0) {
		c->probe_failed = (int32_t)c->probe_next;
		c->probe_exit = exit_code;
	}
	c->probe_next++;
	probes_next(c);
}

static const struct exec_sink_ops probe_ops = {
	.client = "probe",
	.output = probe_output,
	.done = probe_done,
};

/* The sandbox's JSON with how its probes ended: {..., "probes": "passed"|"failed",
 * "probe_failed": {"index", "exit_code"}}. */
static void respond_probed(struct admin_conn *c, const struct sandbox *sb)
{
	struct buf b;
	struct json_writer w;

	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	admin_sandbox_json(&w, sb);
	if (json_writer_finish(&w) != 0 || b.len < 2) {
		admin_respond_error(c, 500, "internal", "the sandbox does not fit the response buffer");
		admin_flush(c);
		return;
	}
	b.len--; /* the object's '}' */
	buf_printf(&b, ",\"probes\":\"%s\"", c->probe_failed < 0 ? "passed" : "failed");
	if (c->probe_failed >= 0)
		buf_printf(&b, ",\"probe_failed\":{\"index\":%d,\"exit_code\":%d}", c->probe_failed,
			   c->probe_exit);
	if (buf_append(&b, "}", 1) != 0) {
		admin_respond_error(c, 500, "internal", "the sandbox does not fit the response buffer");
		admin_flush(c);
		return;
	}
	admin_respond(c, 201, &b);
	admin_flush(c);
}

/* Starts the next probe, or answers after the last. A probe that cannot start has failed. */
static void probes_next(struct admin_conn *c)
{
	struct sandbox *sb = sandbox_by_name(c->probe_sandbox);
	const struct exec_sink sink = { &probe_ops, c };

	for (; c->probe_next < c->req.nprobes; c->probe_next++) {
		const struct request_probe *rp = &c->req.probes[c->probe_next];
		struct exec_req er = { .argc = rp->argc, .timeout_seconds = rp->timeout_s };

		if (!sb || sb->state != SB_READY) {
			admin_respond_error(c, 409, "not_ready", "the sandbox stopped being ready while "
					    "its readiness probes ran");
			admin_flush(c);
			return;
		}
		memcpy(er.argv, rp->argv, sizeof(er.argv));
		if (exec_begin(sb, &er, &sink) >= 0)
			return; /* probe_done goes on */
		log_info("readiness probe", "name=%s probe=%u failed=1 error=%s",
			 log_q(c->probe_sandbox), c->probe_next, "not_started");
		if (c->probe_failed < 0) {
			c->probe_failed = (int32_t)c->probe_next;
			c->probe_exit = -1;
		}
	}
	if (!sb) {
		admin_respond_error(c, 409, "not_ready", "the sandbox is gone");
		admin_flush(c);
		return;
	}
	respond_probed(c, sb);
}

void admin_probes_start(struct admin_conn *c, const struct sandbox *sb)
{
	snprintf(c->probe_sandbox, sizeof(c->probe_sandbox), "%s", sb->name);
	c->probe_next = 0;
	c->probe_failed = -1;
	c->probe_exit = 0;
	probes_next(c);
}
