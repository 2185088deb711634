/* admin_sbjson.c: a sandbox as the admin API shows it (inspect, list, the v2 views): its
 * record with its agent's state and its transcript's (agent/, transcript/). */
#include <stdio.h>
#include <string.h>

#include "json/json.h"
#include "admin/admin.h"
#include "agent/agent.h"
#include "sandbox/sandbox.h"
#include "transcript/runlog.h"
#include "workspace/host.h"

static const char *agent_state(const struct sandbox *sb)
{
	if (!agent_of(sb)->call)
		return "disconnected";
	if (!agent_of(sb)->authed)
		return "authenticating";
	if (agent_of(sb)->ready)
		return "ready";
	return agent_of(sb)->registered ? "registered" : "connected";
}

/* What the create's request asked for: cmd, labels, the posture, mounts. */
static void request_json(struct json_writer *w, const struct sandbox *sb)
{
	const char *p, *q;
	uint32_t i = 0;

	json_key(w, "cmd");
	json_arr_begin(w);
	for (p = NULL; (p = strrun_next(sb->cmd, sb->cmd_len, p));)
		json_str_write(w, p);
	json_arr_end(w);
	json_key(w, "labels");
	json_obj_begin(w);
	for (p = NULL; (p = strrun_next(sb->labels, sb->labels_len, p)) &&
	     (q = strrun_next(sb->labels, sb->labels_len, p)); p = q) {
		json_key(w, p);
		json_str_write(w, q);
	}
	json_obj_end(w);
	json_key(w, "posture");
	posture_json(w, &sb->posture);
	json_key(w, "mounts");
	json_arr_begin(w);
	for (p = NULL; (p = strrun_next(sb->mounts, sb->mounts_len, p)) &&
	     (q = strrun_next(sb->mounts, sb->mounts_len, p)); p = q, i++) {
		json_obj_begin(w);
		json_key(w, "source");
		json_str_write(w, p);
		json_key(w, "target");
		json_str_write(w, q);
		json_key(w, "read_only");
		json_bool_write(w, (sb->mount_ro >> i) & 1);
		json_obj_end(w);
	}
	json_arr_end(w);
}

void admin_sandbox_json(struct json_writer *w, const struct sandbox *sb)
{
	const struct config *cfg = sandbox_config();
	const struct transcript_sb *t = transcript_of(sb);
	const struct run *run = &t->run;
	char path[LIMIT_PATH_BYTES];

	json_obj_begin(w);
	json_key(w, "name");
	json_str_write(w, sb->name);
	json_key(w, "instance_id");
	json_str_write(w, sb->instance_id);
	json_key(w, "state");
	json_str_write(w, sandbox_state_name(sb));
	json_key(w, "container_id");
	json_str_write(w, sb->container_id);
	json_key(w, "container_status");
	json_str_write(w, !sb->ct_exists ? "absent" : sb->running ? "running" : "stopped");
	json_key(w, "runtime");
	json_str_write(w, sb->vm ? "vm" : "docker");
	json_key(w, "image");
	json_str_write(w, sb->image);
	json_key(w, "control_uid");
	json_int_write(w, sb->uid);
	json_key(w, "workload_uid");
	json_int_write(w, cfg->workload_uid);
	json_key(w, "network");
	json_str_write(w, sb->network);
	json_key(w, "network_managed");
	json_bool_write(w, sb->net_managed);
	json_key(w, "subnet");
	if (sb->subnet_text[0])
		json_str_write(w, sb->subnet_text);
	else
		json_null_write(w);
	json_key(w, "agent");
	json_str_write(w, agent_state(sb));
	sandbox_time_write(w, "agent_seen_at", agent_of(sb)->seen_ms);
	sandbox_time_write(w, "created_at", sb->created_ms);
	sandbox_time_write(w, "ready_at", sb->ready_ms);
	if (sb->expires_at)
		sandbox_time_write(w, "expires_at", sb->expires_at);
	/* the run's transcript, and why it is not being written (a full disk): its output waits */
	json_key(w, "run");
	if (run->open)
		json_str_write(w, run->name);
	else
		json_null_write(w);
	json_key(w, "transcript_error");
	if (run->error)
		json_str_write(w, strerror(-run->error));
	else
		json_null_write(w);
	json_key(w, "workspace");
	if (host_instance_dir(cfg, sb->instance_id, path, sizeof(path)) == 0 &&
	    strlen(path) + 11 < sizeof(path)) {
		strcat(path, "/workspace");
		json_str_write(w, path);
	} else {
		json_null_write(w);
	}
	json_key(w, "disk_bytes");
	json_int_write(w, (int64_t)sb->disk_bytes);
	json_key(w, "transcript_bytes");
	json_int_write(w, (int64_t)sandbox_transcript_budget(sb));
	json_key(w, "transcript_used_bytes");
	json_int_write(w, (int64_t)t->used);
	json_key(w, "writable_root");
	json_bool_write(w, sb->writable_root);
	request_json(w, sb);
	json_obj_end(w);
}
