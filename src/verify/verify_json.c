/* verify_json.c: a verification's result object (docs/VERIFY.md): the target, the summary,
 * the checks that did not run and every check's verdict. */
#include "base/base.h"
#include "sandbox/posture.h"
#include "sandbox/sandbox.h"
#include "verify/verify.h"
#include "version.h"

void verify_result_json(struct json_writer *w, const struct verify_result *r,
			const struct verify_meta *m)
{
	json_obj_begin(w);
	json_key(w, "agentic_version");
	json_str_write(w, AGENTIC_VERSION);
	json_key(w, "target");
	json_str_write(w, m->is_sandbox ? "sandbox" : "container");
	json_key(w, "container_id");
	json_str_write(w, m->container_id ? m->container_id : "");
	json_key(w, "sandbox");
	if (m->sb) {
		json_obj_begin(w);
		json_key(w, "name");
		json_str_write(w, m->sb->name);
		json_key(w, "instance_id");
		json_str_write(w, m->sb->instance_id);
		json_key(w, "run");
		if (m->run)
			json_str_write(w, m->run);
		else
			json_null_write(w);
		json_key(w, "posture");
		posture_json(w, &m->sb->posture);
		json_obj_end(w);
	} else {
		json_null_write(w);
	}
	sandbox_time_write(w, "started_at", m->started_ms);
	json_key(w, "duration_ms");
	json_int_write(w, m->duration_ms);
	json_key(w, "result");
	json_str_write(w, verify_result_word(r));
	json_key(w, "summary");
	json_obj_begin(w);
	json_key(w, "passed");
	json_int_write(w, r->passed);
	json_key(w, "failed");
	json_int_write(w, r->failed);
	json_key(w, "info");
	json_int_write(w, r->info);
	json_key(w, "skipped");
	json_int_write(w, r->skipped);
	json_key(w, "not_run");
	json_int_write(w, r->not_run);
	json_obj_end(w);
	json_key(w, "not_run");
	json_arr_begin(w);
	for (unsigned i = 0; i < VERIFY_CHECKS; i++)
		if (verify_check_not_run(r, i))
			json_str_write(w, verify_check_id(i));
	json_arr_end(w);
	json_key(w, "checks");
	json_arr_begin(w);
	for (unsigned i = 0; i < VERIFY_CHECKS; i++) {
		json_obj_begin(w);
		json_key(w, "id");
		json_str_write(w, verify_check_id(i));
		json_key(w, "status");
		json_str_write(w, verify_status_name(r->check[i].status));
		json_key(w, "title");
		json_str_write(w, verify_check_title(i));
		json_key(w, "reason");
		json_str_write(w, r->check[i].reason);
		json_obj_end(w);
	}
	json_arr_end(w);
	json_obj_end(w);
}
