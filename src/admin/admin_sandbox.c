/* admin_sandbox.c: the admin API's sandbox routes: list, a create's start (admitted by the
 * lifecycle: lifecycle_admit), inspect, remove, and a run's transcript (logs). Above
 * admin_http.c; admin_create.c's creates and admin_v2.c's removes end here. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "admin/admin_conn.h"
#include "lifecycle/lifecycle.h"
#include "transcript/runlog.h"
#include "config/profiles.h"

void admin_containers_list(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static const char head[] = "{\"containers\":[";

	admin_list_start(c, head, sizeof(head) - 1, admin_sandbox_item, sandbox_slots());
}

/* ---- create ---- */

/* The lifecycle admits it (lifecycle_admit); a refusal is answered here. The connection
 * waits before the create begins: its answer may come at once, through the hooks. */
void admin_create_start(struct admin_conn *c)
{
	struct request_error e = { 0 };
	enum admin_phase was = c->phase;

	c->phase = AC_WAIT;
	if (lifecycle_admit(&c->req, admin_state.ac.vm, SB_WAITER_ADMIN,
			    (int32_t)admin_conn_index(c), c->gen, &e))
		return;
	c->phase = was;
	admin_respond_error(c, e.status, e.code, e.message);
}

/* ---- inspect and remove ---- */

void admin_container_inspect(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	admin_respond_sandbox(c, 200, sb);
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
	sandbox_waiter_set(sb, SB_WAITER_ADMIN, (int32_t)admin_conn_index(c), c->gen);
	c->phase = AC_WAIT;
	lifecycle_remove(sb, admin_query_flag(query, "force"), admin_query_flag(query, "keep_workspace"));
}

/* ---- logs: a run's stdout.log or stderr.log, as it is now, or followed (?follow=1: the
 * current run's, as it grows, until the sandbox is removed) ---- */

void admin_container_logs(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	static const struct http_field fields[] = {
		{ "Content-Type", "application/octet-stream" },
		{ NULL, NULL },
	};
	char run[64], stream[16];
	bool follow = admin_query_flag(query, "follow");
	int fd, r, s;

	admin_query_value(query, "run", run, sizeof(run));
	admin_query_value(query, "stream", stream, sizeof(stream));
	if (stream[0] && strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0) {
		admin_respond_error(c, 400, "bad_request", "stream is stdout or stderr");
		return;
	}
	if (follow && run[0]) {
		admin_respond_error(c, 400, "bad_request", "follow is for the current run: no run");
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
	if (follow)
		admin_respond_follow(c, fd, sb, fields);
	else
		admin_respond_file(c, fd, fields);
}
