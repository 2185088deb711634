/* requests.c: builds each Engine API request (target, query, JSON body) and starts its call. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "docker/docker_internal.h"


/* The path, prefixed with the negotiated version. */
static int target_begin(struct buf *t, char *storage, struct docker_client *dc, const char *path)
{
	buf_init(t, storage, LIMIT_DOCKER_TARGET_BYTES);
	if (dc->version[0] && buf_printf(t, "/v%s", dc->version) != 0)
		return ERR_LIMIT;
	return buf_printf(t, "%s", path);
}

/* Percent-encodes everything but RFC 3986 unreserved bytes: safe in a path segment and in a
 * query value alike. */
static int append_escaped(struct buf *t, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	int r = 0;

	for (; *s && r == 0; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			r = buf_append(t, s, 1);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			r = buf_append(t, e, 3);
		}
	}
	if (r == 0 && t->len < t->cap)
		t->data[t->len] = '\0';
	else
		r = ERR_LIMIT;
	return r;
}

/* Fails the call when the client has not negotiated a version (paths would be unversioned)
 * or the object id is empty. */
static int check(struct docker_call *c, const char *id)
{
	if (!c->dc->version[0])
		return call_fail_begin(c, ERR_STATE, "API version not negotiated yet");
	if (id && !id[0])
		return call_fail_begin(c, -EINVAL, "empty id");
	return 0;
}

/* "/PREFIX" + escaped id + suffix, then the call starts. */
static int start_on(struct docker_call *c, const char *method, const char *prefix, const char *id,
		    const char *suffix, bool stream, int timeout)
{
	char storage[LIMIT_DOCKER_TARGET_BYTES];
	struct buf t;
	int r = check(c, id);

	if (r != 0)
		return r;
	r = target_begin(&t, storage, c->dc, prefix);
	if (r == 0 && id)
		r = append_escaped(&t, id);
	if (r == 0 && suffix)
		r = buf_printf(&t, "%s", suffix);
	if (r != 0)
		return call_fail_begin(c, ERR_LIMIT, "request target too long");
	return call_start(c, method, (const char *)t.data, NULL, 0, stream, timeout);
}

int docker_ping_begin(struct docker_call *c, struct docker_client *dc)
{
	call_prepare(c, dc, DOCKER_OP_PING, "");
	/* unversioned: it is how the version is learned */
	return call_start(c, "GET", "/_ping", NULL, 0, false, dc->read_timeout_ms);
}

int docker_version_begin(struct docker_call *c, struct docker_client *dc)
{
	call_prepare(c, dc, DOCKER_OP_VERSION, "");
	return call_start(c, "GET", "/version", NULL, 0, false, dc->read_timeout_ms);
}

int docker_info_begin(struct docker_call *c, struct docker_client *dc)
{
	call_prepare(c, dc, DOCKER_OP_INFO, "");
	return start_on(c, "GET", "/info", NULL, NULL, false, dc->read_timeout_ms);
}

/* ---- JSON bodies ---- */
static void write_strs(struct json_writer *w, const char *key, const char *const *list)
{
	if (!list)
		return;
	json_key(w, key);
	json_arr_begin(w);
	for (; *list; list++)
		json_str_write(w, *list);
	json_arr_end(w);
}

static void write_kvs(struct json_writer *w, const char *key, const struct docker_kv *kv)
{
	if (!kv)
		return;
	json_key(w, key);
	json_obj_begin(w);
	for (; kv->key; kv++) {
		json_key(w, kv->key);
		json_str_write(w, kv->value);
	}
	json_obj_end(w);
}

/* Writes the body into the slot's response buffer (free until the answer comes) and starts. */
static int start_json(struct docker_call *c, const char *method, const char *target,
		      void (*write)(struct json_writer *w, const void *spec, int minor),
		      const void *spec)
{
	struct buf body;
	struct json_writer w;
	int r = call_acquire(c);

	if (r != 0)
		return r;
	buf_init(&body, c->slot->body, LIMIT_DOCKER_REQUEST_BYTES - LIMIT_HTTP_HEAD_BYTES);
	json_writer_init(&w, &body);
	write(&w, spec, c->dc->minor);
	r = json_writer_finish(&w);
	if (r == ERR_LIMIT)
		return call_fail_begin(c, r, "request body over its size limit");
	if (r != 0)
		return call_fail_begin(c, r, "request holds a string that is not UTF-8");
	return call_start(c, method, target, (const char *)body.data, body.len, false,
			  c->dc->read_timeout_ms);
}

static void write_network(struct json_writer *w, const void *spec, int minor)
{
	const struct docker_network_spec *s = spec;

	json_obj_begin(w);
	json_key(w, "Name");
	json_str_write(w, s->name);
	/* Engines before 1.44 create a second network of the same name unless asked not to. */
	if (minor < 44) {
		json_key(w, "CheckDuplicate");
		json_bool_write(w, true);
	}
	json_key(w, "Driver");
	json_str_write(w, s->driver ? s->driver : "bridge");
	json_key(w, "Internal");
	json_bool_write(w, s->internal);
	if (s->subnet) {
		json_key(w, "IPAM");
		json_obj_begin(w);
		json_key(w, "Driver");
		json_str_write(w, "default");
		json_key(w, "Config");
		json_arr_begin(w);
		json_obj_begin(w);
		json_key(w, "Subnet");
		json_str_write(w, s->subnet);
		json_obj_end(w);
		json_arr_end(w);
		json_obj_end(w);
	}
	write_kvs(w, "Options", s->options);
	write_kvs(w, "Labels", s->labels);
	json_obj_end(w);
}

int docker_network_create_begin(struct docker_call *c, struct docker_client *dc,
				const struct docker_network_spec *spec)
{
	char storage[LIMIT_DOCKER_TARGET_BYTES];
	struct buf t;
	int r;

	call_prepare(c, dc, DOCKER_OP_NETWORK_CREATE, spec->name);
	if ((r = check(c, spec->name)) != 0)
		return r;
	target_begin(&t, storage, dc, "/networks/create");
	return start_json(c, "POST", (const char *)t.data, write_network, spec);
}

static void write_container(struct json_writer *w, const void *spec, int minor)
{
	const struct docker_container_spec *s = spec;

	json_obj_begin(w);
	json_key(w, "Image");
	json_str_write(w, s->image);
	if (s->user) {
		json_key(w, "User");
		json_str_write(w, s->user);
	}
	if (s->working_dir) {
		json_key(w, "WorkingDir");
		json_str_write(w, s->working_dir);
	}
	write_strs(w, "Entrypoint", s->entrypoint);
	write_strs(w, "Cmd", s->cmd);
	write_strs(w, "Env", s->env);
	write_kvs(w, "Labels", s->labels);

	json_key(w, "HostConfig");
	json_obj_begin(w);
	write_strs(w, "CapDrop", s->cap_drop);
	write_strs(w, "CapAdd", s->cap_add);
	write_strs(w, "SecurityOpt", s->security_opt);
	write_kvs(w, "Tmpfs", s->tmpfs);
	write_kvs(w, "Sysctls", s->sysctls);
	write_kvs(w, "StorageOpt", s->storage_opt);
	/* Mounts, not Binds: a missing Binds source is silently created as an empty root-owned
	 * directory, a missing Mounts source is an error. */
	if (s->mounts) {
		json_key(w, "Mounts");
		json_arr_begin(w);
		for (const struct docker_mount *m = s->mounts; m->source; m++) {
			json_obj_begin(w);
			json_key(w, "Type");
			json_str_write(w, "bind");
			json_key(w, "Source");
			json_str_write(w, m->source);
			json_key(w, "Target");
			json_str_write(w, m->target);
			json_key(w, "ReadOnly");
			json_bool_write(w, m->read_only);
			json_obj_end(w);
		}
		json_arr_end(w);
	}
	write_strs(w, "Dns", s->dns);
	write_strs(w, "DnsSearch", s->dns_search);
	if (s->network_mode) {
		json_key(w, "NetworkMode");
		json_str_write(w, s->network_mode);
	}
	if (s->pids_limit) {
		json_key(w, "PidsLimit");
		json_int_write(w, s->pids_limit);
	}
	if (s->memory) {
		json_key(w, "Memory");
		json_int_write(w, s->memory);
	}
	if (s->nano_cpus) {
		json_key(w, "NanoCpus");
		json_int_write(w, s->nano_cpus);
	}
	json_key(w, "RestartPolicy");
	json_obj_begin(w);
	json_key(w, "Name");
	json_str_write(w, s->restart_policy ? s->restart_policy : "no");
	json_obj_end(w);
	json_key(w, "ReadonlyRootfs");
	json_bool_write(w, s->readonly_rootfs);
	json_key(w, "Init");
	json_bool_write(w, s->init);
	json_key(w, "Privileged");
	json_bool_write(w, false);
	json_obj_end(w);
	json_obj_end(w);
}

int docker_container_create_begin(struct docker_call *c, struct docker_client *dc,
				  const struct docker_container_spec *spec)
{
	char storage[LIMIT_DOCKER_TARGET_BYTES];
	struct buf t;
	int r;

	call_prepare(c, dc, DOCKER_OP_CONTAINER_CREATE, spec->name ? spec->name : "");
	snprintf(c->error.image, sizeof(c->error.image), "%s", spec->image ? spec->image : "");
	if ((r = check(c, spec->image)) != 0)
		return r;
	if (spec->name && !spec->name[0])
		return call_fail_begin(c, -EINVAL, "empty container name");
	target_begin(&t, storage, dc, "/containers/create");
	if (spec->name && (buf_printf(&t, "?name=") != 0 || append_escaped(&t, spec->name) != 0))
		return call_fail_begin(c, ERR_LIMIT, "request target too long");
	return start_json(c, "POST", (const char *)t.data, write_container, spec);
}

int docker_network_inspect_begin(struct docker_call *c, struct docker_client *dc, const char *id)
{
	call_prepare(c, dc, DOCKER_OP_NETWORK_INSPECT, id);
	return start_on(c, "GET", "/networks/", id, NULL, false, dc->read_timeout_ms);
}

int docker_network_remove_begin(struct docker_call *c, struct docker_client *dc, const char *id)
{
	call_prepare(c, dc, DOCKER_OP_NETWORK_REMOVE, id);
	return start_on(c, "DELETE", "/networks/", id, NULL, false, dc->read_timeout_ms);
}

int docker_container_start_begin(struct docker_call *c, struct docker_client *dc, const char *id)
{
	call_prepare(c, dc, DOCKER_OP_CONTAINER_START, id);
	return start_on(c, "POST", "/containers/", id, "/start", false, dc->read_timeout_ms);
}

int docker_container_rename_begin(struct docker_call *c, struct docker_client *dc, const char *id,
				  const char *name)
{
	char storage[LIMIT_DOCKER_TARGET_BYTES];
	struct buf t;
	int r;

	call_prepare(c, dc, DOCKER_OP_CONTAINER_RENAME, id);
	if ((r = check(c, id)) != 0)
		return r;
	r = target_begin(&t, storage, dc, "/containers/");
	if (r == 0)
		r = append_escaped(&t, id);
	if (r == 0)
		r = buf_printf(&t, "/rename?name=");
	if (r == 0)
		r = append_escaped(&t, name);
	if (r != 0)
		return call_fail_begin(c, ERR_LIMIT, "request target too long");
	return call_start(c, "POST", (const char *)t.data, NULL, 0, false, dc->read_timeout_ms);
}

int docker_container_inspect_begin(struct docker_call *c, struct docker_client *dc,
				   const char *id)
{
	call_prepare(c, dc, DOCKER_OP_CONTAINER_INSPECT, id);
	return start_on(c, "GET", "/containers/", id, "/json", false, dc->read_timeout_ms);
}

int docker_container_stop_begin(struct docker_call *c, struct docker_client *dc, const char *id,
				int timeout_s)
{
	char suffix[48];
	int timeout = dc->read_timeout_ms;

	call_prepare(c, dc, DOCKER_OP_CONTAINER_STOP, id);
	snprintf(suffix, sizeof(suffix), "/stop?t=%d", timeout_s);
	/* the engine answers only after the grace period */
	if (timeout >= 0 && timeout_s > 0)
		timeout += timeout_s * 1000;
	return start_on(c, "POST", "/containers/", id, suffix, false, timeout);
}

int docker_container_kill_begin(struct docker_call *c, struct docker_client *dc, const char *id,
				const char *signal)
{
	char suffix[80];

	call_prepare(c, dc, DOCKER_OP_CONTAINER_KILL, id);
	for (const char *p = signal; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) ||
		    p - signal > 16)
			return call_fail_begin(c, -EINVAL, "signal must be a name or number");
	snprintf(suffix, sizeof(suffix), "/kill?signal=%s", signal);
	return start_on(c, "POST", "/containers/", id, suffix, false, dc->read_timeout_ms);
}

int docker_container_wait_begin(struct docker_call *c, struct docker_client *dc, const char *id)
{
	call_prepare(c, dc, DOCKER_OP_CONTAINER_WAIT, id);
	/* headers come at once, the body at exit: no read timeout */
	return start_on(c, "POST", "/containers/", id, "/wait?condition=not-running", false, -1);
}

int docker_container_logs_begin(struct docker_call *c, struct docker_client *dc, const char *id,
				bool follow, int tail, bool tty, docker_log_fn fn, void *ctx)
{
	char suffix[96];

	call_prepare(c, dc, DOCKER_OP_CONTAINER_LOGS, id);
	c->tty = tty;
	c->on_log = fn;
	c->ctx = ctx;
	if (tail < 0)
		snprintf(suffix, sizeof(suffix), "/logs?stdout=1&stderr=1&follow=%d&tail=all", follow);
	else
		snprintf(suffix, sizeof(suffix), "/logs?stdout=1&stderr=1&follow=%d&tail=%d", follow,
			 tail);
	return start_on(c, "GET", "/containers/", id, suffix, true,
			follow ? -1 : dc->read_timeout_ms);
}

int docker_container_remove_begin(struct docker_call *c, struct docker_client *dc,
				  const char *id, bool force)
{
	call_prepare(c, dc, DOCKER_OP_CONTAINER_REMOVE, id);
	return start_on(c, "DELETE", "/containers/", id, force ? "?force=1&v=1" : "?v=1", false,
			dc->read_timeout_ms);
}

/* path + "filters=" + the escaped {"label":[label]} */
static int start_list(struct docker_call *c, const char *path, const char *label)
{
	char storage[LIMIT_DOCKER_TARGET_BYTES], fstore[1024];
	struct buf t, f;
	struct json_writer w;
	int r;

	if ((r = check(c, NULL)) != 0)
		return r;
	target_begin(&t, storage, c->dc, path);
	if (label) {
		buf_init(&f, fstore, sizeof(fstore) - 1);
		json_writer_init(&w, &f);
		json_obj_begin(&w);
		json_key(&w, "label");
		json_arr_begin(&w);
		json_str_write(&w, label);
		json_arr_end(&w);
		json_obj_end(&w);
		if ((r = json_writer_finish(&w)) != 0)
			return call_fail_begin(c, r, "label filter not valid");
		f.data[f.len] = '\0';
		r = buf_printf(&t, "%sfilters=", strchr(path, '?') ? "&" : "?");
		if (r == 0)
			r = append_escaped(&t, (const char *)f.data);
		if (r != 0)
			return call_fail_begin(c, ERR_LIMIT, "request target too long");
	}
	return call_start(c, "GET", (const char *)t.data, NULL, 0, false, c->dc->read_timeout_ms);
}

int docker_network_list_begin(struct docker_call *c, struct docker_client *dc, const char *label)
{
	call_prepare(c, dc, DOCKER_OP_NETWORK_LIST, label ? label : "");
	return start_list(c, "/networks", label);
}

int docker_container_list_begin(struct docker_call *c, struct docker_client *dc,
				const char *label)
{
	call_prepare(c, dc, DOCKER_OP_CONTAINER_LIST, label ? label : "");
	return start_list(c, "/containers/json?all=1", label);
}

int docker_image_list_begin(struct docker_call *c, struct docker_client *dc)
{
	char storage[LIMIT_DOCKER_TARGET_BYTES];
	struct buf t;
	int r;

	call_prepare(c, dc, DOCKER_OP_IMAGE_LIST, "");
	if ((r = check(c, NULL)) != 0)
		return r;
	target_begin(&t, storage, dc, "/images/json?filters=");
	if (append_escaped(&t, "{\"dangling\":[\"false\"]}") != 0)
		return call_fail_begin(c, ERR_LIMIT, "request target too long");
	return call_start(c, "GET", (const char *)t.data, NULL, 0, false, dc->read_timeout_ms);
}

int docker_events_begin(struct docker_call *c, struct docker_client *dc, const char *filters,
			int64_t since, docker_event_fn fn, void *ctx)
{
	char storage[LIMIT_DOCKER_TARGET_BYTES];
	struct buf t;
	int r;

	call_prepare(c, dc, DOCKER_OP_EVENTS, "");
	c->on_event = fn;
	c->ctx = ctx;
	if ((r = check(c, NULL)) != 0)
		return r;
	if ((r = call_acquire(c)) != 0)
		return r;
	/* the event being assembled lives in the slot's response buffer */
	c->split.buf = (char *)c->slot->body;
	c->split.cap = LIMIT_DOCKER_EVENT_BYTES;
	target_begin(&t, storage, dc, "/events?");
	r = 0;
	if (since > 0)
		r = buf_printf(&t, "since=%" PRId64 "&", since);
	if (r == 0 && filters)
		r = buf_printf(&t, "filters=");
	if (r == 0 && filters)
		r = append_escaped(&t, filters);
	if (r != 0)
		return call_fail_begin(c, ERR_LIMIT, "request target too long");
	return call_start(c, "GET", (const char *)t.data, NULL, 0, true, -1);
}
