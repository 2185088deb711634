/* blocking.c: one-shot blocking forms of the calls (begin, run, read the result, end), and
 * version negotiation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker/docker_internal.h"

/* Ends the call, handing its error details to the caller when it failed. */
static int finish(struct docker_call *c, int r, struct docker_error *err)
{
	if (r != 0 && err) {
		*err = c->error;
		err->code = r;
	}
	docker_call_end(c);
	return r;
}

int docker_client_negotiate(struct docker_client *dc, struct docker_error *err)
{
	struct docker_call c;
	struct docker_version v;
	char api[sizeof(c.api_version)], why[sizeof(c.error.message)];
	int r;

	dc->version[0] = '\0';
	dc->minor = 0;
	r = docker_ping_begin(&c, dc);
	if (r == 0)
		r = docker_call_run(&c);
	memcpy(api, c.api_version, sizeof(api));
	if ((r = finish(&c, r, err)) != 0)
		return r;
	r = docker_version_begin(&c, dc);
	if (r == 0)
		r = docker_call_run(&c);
	if (r == 0)
		r = docker_result_version(&c, &v);
	if ((r = finish(&c, r, err)) != 0)
		return r;
	r = docker_version_pick(api, v.min_api_version, dc->version, sizeof(dc->version), why,
				sizeof(why));
	if (r != 0) {
		if (err) {
			memset(err, 0, sizeof(*err));
			err->code = r;
			err->op = DOCKER_OP_VERSION;
			snprintf(err->message, sizeof(err->message), "%s", why);
		}
		return r;
	}
	dc->minor = (int)strtol(dc->version + 2, NULL, 10);
	return 0;
}

int docker_info(struct docker_client *dc, struct docker_info *out, struct docker_error *err)
{
	struct docker_call c;
	int r = docker_info_begin(&c, dc);

	if (r == 0)
		r = docker_call_run(&c);
	if (r == 0)
		r = docker_result_info(&c, out);
	return finish(&c, r, err);
}

int docker_network_create(struct docker_client *dc, const struct docker_network_spec *spec,
			  char id[DOCKER_ID_SIZE], struct docker_error *err)
{
	struct docker_call c;
	int r = docker_network_create_begin(&c, dc, spec);

	if (r == 0)
		r = docker_call_run(&c);
	if (r == 0)
		r = docker_result_id(&c, id);
	return finish(&c, r, err);
}

int docker_network_inspect(struct docker_client *dc, const char *id, struct docker_network *out,
			   struct docker_error *err)
{
	struct docker_call c;
	int r = docker_network_inspect_begin(&c, dc, id);

	if (r == 0)
		r = docker_call_run(&c);
	if (r == 0)
		r = docker_result_network(&c, out);
	return finish(&c, r, err);
}

int docker_container_create(struct docker_client *dc, const struct docker_container_spec *spec,
			    char id[DOCKER_ID_SIZE], struct docker_error *err)
{
	struct docker_call c;
	int r = docker_container_create_begin(&c, dc, spec);

	if (r == 0)
		r = docker_call_run(&c);
	if (r == 0)
		r = docker_result_id(&c, id);
	return finish(&c, r, err);
}

int docker_container_inspect(struct docker_client *dc, const char *id,
			     struct docker_container *out, struct docker_error *err)
{
	struct docker_call c;
	int r = docker_container_inspect_begin(&c, dc, id);

	if (r == 0)
		r = docker_call_run(&c);
	if (r == 0)
		r = docker_result_container(&c, out);
	return finish(&c, r, err);
}

int docker_container_wait(struct docker_client *dc, const char *id, int64_t *status_code,
			  struct docker_error *err)
{
	struct docker_call c;
	int r = docker_container_wait_begin(&c, dc, id);

	if (r == 0)
		r = docker_call_run(&c);
	if (r == 0)
		r = docker_result_wait(&c, status_code);
	return finish(&c, r, err);
}

/* Calls whose answer carries nothing we read. */
static int run_plain(struct docker_call *c, int r, struct docker_error *err)
{
	if (r == 0)
		r = docker_call_run(c);
	return finish(c, r, err);
}

int docker_network_remove(struct docker_client *dc, const char *id, struct docker_error *err)
{
	struct docker_call c;
	return run_plain(&c, docker_network_remove_begin(&c, dc, id), err);
}

int docker_container_start(struct docker_client *dc, const char *id, struct docker_error *err)
{
	struct docker_call c;
	return run_plain(&c, docker_container_start_begin(&c, dc, id), err);
}

int docker_container_stop(struct docker_client *dc, const char *id, int timeout_s,
			  struct docker_error *err)
{
	struct docker_call c;
	return run_plain(&c, docker_container_stop_begin(&c, dc, id, timeout_s), err);
}

int docker_container_kill(struct docker_client *dc, const char *id, const char *signal,
			  struct docker_error *err)
{
	struct docker_call c;
	return run_plain(&c, docker_container_kill_begin(&c, dc, id, signal), err);
}

int docker_container_remove(struct docker_client *dc, const char *id, bool force,
			    struct docker_error *err)
{
	struct docker_call c;
	return run_plain(&c, docker_container_remove_begin(&c, dc, id, force), err);
}
