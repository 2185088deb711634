/* results.c: reads the typed results of finished calls out of their JSON answers. Fields we
 * do not use are ignored; strings are copied into the result's own text storage. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "docker/docker_internal.h"

static int parse(struct docker_call *c, struct json_doc *doc, enum json_type root)
{
	int r;

	if (!c->slot)
		return ERR_STATE;
	r = json_parse(doc, (const char *)c->slot->body, c->body_len, c->dc->tok, c->dc->tok_cap);
	if (r == ERR_LIMIT)
		return DOCKER_ERR_TOO_BIG;
	if (r != 0 || doc->tok[0].type != root)
		return DOCKER_ERR_REPLY;
	return 0;
}

int docker_result_body(const struct docker_call *c, const char **body, size_t *len)
{
	if (!c->slot)
		return ERR_STATE;
	*body = (const char *)c->slot->body;
	*len = c->body_len;
	return 0;
}

/* Strings of one result, kept in its text storage; the first failure sticks. */
struct store {
	char *text;
	uint32_t *len;
	uint32_t cap;
	int err;
};

/* A string member, or "" when absent or null. */
static const char *keep(struct store *s, const struct json_doc *d, int idx)
{
	char *out = s->text + *s->len;
	int r;

	if (idx < 0 || d->tok[idx].type == JSON_NULL)
		return "";
	r = json_str(d, idx, out, s->cap - *s->len);
	if (r < 0) {
		if (!s->err)
			s->err = r == ERR_LIMIT ? DOCKER_ERR_TOO_BIG : DOCKER_ERR_REPLY;
		return "";
	}
	*s->len += (uint32_t)r + 1;
	return out;
}

static uint32_t keep_list(struct store *s, const struct json_doc *d, int arr, const char **v)
{
	uint32_t n = 0;

	if (arr < 0 || d->tok[arr].type != JSON_ARRAY)
		return 0;
	for (int i = json_first(d, arr); i >= 0; i = json_next(d, arr, i)) {
		if (n == DOCKER_LIST_MAX) {
			s->err = DOCKER_ERR_TOO_BIG;
			break;
		}
		v[n++] = keep(s, d, i);
	}
	return n;
}

static uint32_t keep_kvs(struct store *s, const struct json_doc *d, int obj, struct docker_kv *kv)
{
	uint32_t n = 0;

	if (obj < 0 || d->tok[obj].type != JSON_OBJECT)
		return 0;
	for (int k = json_first(d, obj); k >= 0; k = json_next(d, obj, k + 1)) {
		if (n == DOCKER_LIST_MAX) {
			s->err = DOCKER_ERR_TOO_BIG;
			break;
		}
		kv[n].key = keep(s, d, k);
		kv[n].value = keep(s, d, k + 1);
		n++;
	}
	return n;
}

static int64_t get_int(const struct json_doc *d, int obj, const char *key)
{
	int64_t v = 0;
	json_int(d, json_obj_get(d, obj, key), &v);
	return v;
}

static bool get_bool(const struct json_doc *d, int obj, const char *key)
{
	bool v = false;
	json_bool(d, json_obj_get(d, obj, key), &v);
	return v;
}

static int copy_id(const struct json_doc *d, int obj, const char *key, char id[DOCKER_ID_SIZE])
{
	int r = json_str(d, json_obj_get(d, obj, key), id, DOCKER_ID_SIZE);
	return r > 0 ? 0 : DOCKER_ERR_REPLY;
}

int docker_result_id(struct docker_call *c, char id[DOCKER_ID_SIZE])
{
	struct json_doc d;
	int r = parse(c, &d, JSON_OBJECT);

	return r ? r : copy_id(&d, 0, "Id", id);
}

int docker_result_version(struct docker_call *c, struct docker_version *out)
{
	struct json_doc d;
	int r = parse(c, &d, JSON_OBJECT);

	memset(out, 0, sizeof(*out));
	if (r)
		return r;
	json_str(&d, json_obj_get(&d, 0, "Version"), out->version, sizeof(out->version));
	json_str(&d, json_obj_get(&d, 0, "MinAPIVersion"), out->min_api_version,
		 sizeof(out->min_api_version));
	if (json_str(&d, json_obj_get(&d, 0, "ApiVersion"), out->api_version,
		     sizeof(out->api_version)) <= 0)
		return DOCKER_ERR_REPLY;
	return 0;
}

int docker_result_info(struct docker_call *c, struct docker_info *out)
{
	struct json_doc d;
	int r = parse(c, &d, JSON_OBJECT);
	int opts;

	memset(out, 0, sizeof(*out));
	if (r)
		return r;
	json_str(&d, json_obj_get(&d, 0, "Name"), out->name, sizeof(out->name));
	json_str(&d, json_obj_get(&d, 0, "ServerVersion"), out->server_version,
		 sizeof(out->server_version));
	json_str(&d, json_obj_get(&d, 0, "OperatingSystem"), out->operating_system,
		 sizeof(out->operating_system));
	json_str(&d, json_obj_get(&d, 0, "KernelVersion"), out->kernel_version,
		 sizeof(out->kernel_version));
	out->docker_desktop = strstr(out->operating_system, "Docker Desktop") != NULL;
	/* userns-remap shows up as "name=userns" among the security options */
	opts = json_obj_get(&d, 0, "SecurityOptions");
	for (int i = json_first(&d, opts); i >= 0; i = json_next(&d, opts, i)) {
		char opt[128];
		if (json_str(&d, i, opt, sizeof(opt)) > 0 &&
		    (strcmp(opt, "name=userns") == 0 || strncmp(opt, "name=userns,", 12) == 0))
			out->userns_remap = true;
	}
	return 0;
}

int docker_result_network(struct docker_call *c, struct docker_network *out)
{
	struct json_doc d;
	struct store s = { out->text, &out->text_len, sizeof(out->text), 0 };
	int r = parse(c, &d, JSON_OBJECT);
	int cfg;

	memset(out, 0, offsetof(struct docker_network, text));
	out->text_len = 0;
	if (r)
		return r;
	if ((r = copy_id(&d, 0, "Id", out->id)) != 0)
		return r;
	out->name = keep(&s, &d, json_obj_get(&d, 0, "Name"));
	out->driver = keep(&s, &d, json_obj_get(&d, 0, "Driver"));
	out->internal = get_bool(&d, 0, "Internal");
	cfg = json_obj_get(&d, json_obj_get(&d, 0, "IPAM"), "Config");
	out->subnet = keep(&s, &d, json_obj_get(&d, json_first(&d, cfg), "Subnet"));
	out->nlabels = keep_kvs(&s, &d, json_obj_get(&d, 0, "Labels"), out->labels);
	out->noptions = keep_kvs(&s, &d, json_obj_get(&d, 0, "Options"), out->options);
	return s.err;
}

int docker_result_container(struct docker_call *c, struct docker_container *out)
{
	struct json_doc d;
	struct store s = { out->text, &out->text_len, sizeof(out->text), 0 };
	int r = parse(c, &d, JSON_OBJECT);
	int cfg, st, hc, mounts, nets, execs;

	memset(out, 0, offsetof(struct docker_container, text));
	out->text_len = 0;
	if (r)
		return r;
	if ((r = copy_id(&d, 0, "Id", out->id)) != 0)
		return r;
	out->name = keep(&s, &d, json_obj_get(&d, 0, "Name"));
	if (out->name[0] == '/')
		out->name++;

	cfg = json_obj_get(&d, 0, "Config");
	out->image = keep(&s, &d, json_obj_get(&d, cfg, "Image"));
	out->user = keep(&s, &d, json_obj_get(&d, cfg, "User"));
	out->nentrypoint = keep_list(&s, &d, json_obj_get(&d, cfg, "Entrypoint"), out->entrypoint);
	out->ncmd = keep_list(&s, &d, json_obj_get(&d, cfg, "Cmd"), out->cmd);
	out->nenv = keep_list(&s, &d, json_obj_get(&d, cfg, "Env"), out->env);
	out->nlabels = keep_kvs(&s, &d, json_obj_get(&d, cfg, "Labels"), out->labels);

	st = json_obj_get(&d, 0, "State");
	out->status = keep(&s, &d, json_obj_get(&d, st, "Status"));
	out->running = get_bool(&d, st, "Running");
	out->pid = get_int(&d, st, "Pid");
	out->exit_code = get_int(&d, st, "ExitCode");

	hc = json_obj_get(&d, 0, "HostConfig");
	out->ncap_add = keep_list(&s, &d, json_obj_get(&d, hc, "CapAdd"), out->cap_add);
	out->ncap_drop = keep_list(&s, &d, json_obj_get(&d, hc, "CapDrop"), out->cap_drop);
	out->nsecurity_opt = keep_list(&s, &d, json_obj_get(&d, hc, "SecurityOpt"),
				       out->security_opt);
	out->ntmpfs = keep_kvs(&s, &d, json_obj_get(&d, hc, "Tmpfs"), out->tmpfs);
	out->nsysctls = keep_kvs(&s, &d, json_obj_get(&d, hc, "Sysctls"), out->sysctls);
	out->network_mode = keep(&s, &d, json_obj_get(&d, hc, "NetworkMode"));
	out->restart_policy = keep(&s, &d, json_obj_get(&d, json_obj_get(&d, hc, "RestartPolicy"),
						     "Name"));
	out->pids_limit = get_int(&d, hc, "PidsLimit");
	out->memory = get_int(&d, hc, "Memory");
	out->nano_cpus = get_int(&d, hc, "NanoCpus");
	out->readonly_rootfs = get_bool(&d, hc, "ReadonlyRootfs");
	out->init = get_bool(&d, hc, "Init");
	out->privileged = get_bool(&d, hc, "Privileged");

	nets = json_obj_get(&d, json_obj_get(&d, 0, "NetworkSettings"), "Networks");
	for (int k = nets >= 0 && d.tok[nets].type == JSON_OBJECT ? json_first(&d, nets) : -1;
	     k >= 0; k = json_next(&d, nets, k + 1)) {
		if (out->nnetworks == DOCKER_LIST_MAX) {
			s.err = DOCKER_ERR_TOO_BIG;
			break;
		}
		out->networks[out->nnetworks].key = keep(&s, &d, k);
		out->networks[out->nnetworks].value = keep(&s, &d, json_obj_get(&d, k + 1, "NetworkID"));
		out->nnetworks++;
	}

	execs = json_obj_get(&d, 0, "ExecIDs");
	for (int x = execs >= 0 && d.tok[execs].type == JSON_ARRAY ? json_first(&d, execs) : -1;
	     x >= 0; x = json_next(&d, execs, x))
		out->nexecs++;

	mounts = json_obj_get(&d, 0, "Mounts");
	for (int m = json_first(&d, mounts); m >= 0; m = json_next(&d, mounts, m)) {
		if (out->nmounts == DOCKER_LIST_MAX) {
			s.err = DOCKER_ERR_TOO_BIG;
			break;
		}
		struct docker_mount *o = &out->mounts[out->nmounts++];
		o->source = keep(&s, &d, json_obj_get(&d, m, "Source"));
		o->target = keep(&s, &d, json_obj_get(&d, m, "Destination"));
		o->read_only = !get_bool(&d, m, "RW");
	}
	return s.err;
}

int docker_result_wait(struct docker_call *c, int64_t *status_code)
{
	struct json_doc d;
	int r = parse(c, &d, JSON_OBJECT);

	if (r)
		return r;
	return json_int(&d, json_obj_get(&d, 0, "StatusCode"), status_code) == 0 ? 0
									       : DOCKER_ERR_REPLY;
}

int docker_result_each(struct docker_call *c, int (*fn)(void *ctx, const struct docker_summary *s),
		       void *ctx)
{
	struct json_doc d;
	int r = parse(c, &d, JSON_ARRAY);

	if (r)
		return r;
	for (int i = json_first(&d, 0); i >= 0; i = json_next(&d, 0, i)) {
		struct docker_summary s;
		int names;

		memset(&s, 0, sizeof(s));
		if (copy_id(&d, i, "Id", s.id) != 0)
			return DOCKER_ERR_REPLY;
		names = json_obj_get(&d, i, "Names");
		if (names >= 0) {
			json_str(&d, json_first(&d, names), s.name, sizeof(s.name));
			if (s.name[0] == '/')
				memmove(s.name, s.name + 1, strlen(s.name));
		} else {
			json_str(&d, json_obj_get(&d, i, "Name"), s.name, sizeof(s.name));
		}
		json_str(&d, json_obj_get(&d, i, "State"), s.state, sizeof(s.state));
		if ((r = fn(ctx, &s)) != 0)
			return r;
	}
	return 0;
}

int docker_result_each_subnet(struct docker_call *c, const char *label_key,
			      const char *label_value,
			      int (*fn)(void *ctx, const char *subnet, bool labelled), void *ctx)
{
	struct json_doc d;
	int r = parse(c, &d, JSON_ARRAY);

	if (r)
		return r;
	for (int i = json_first(&d, 0); i >= 0; i = json_next(&d, 0, i)) {
		int cfg = json_obj_get(&d, json_obj_get(&d, i, "IPAM"), "Config");
		int label = json_obj_get(&d, json_obj_get(&d, i, "Labels"), label_key);
		bool labelled = label >= 0 && json_str_eq(&d, label, label_value);

		if (cfg < 0 || d.tok[cfg].type != JSON_ARRAY)
			continue;
		for (int k = json_first(&d, cfg); k >= 0; k = json_next(&d, cfg, k)) {
			char subnet[64];

			if (json_str(&d, json_obj_get(&d, k, "Subnet"), subnet, sizeof(subnet)) < 0)
				continue;
			if ((r = fn(ctx, subnet, labelled)) != 0)
				return r;
		}
	}
	return 0;
}

int docker_result_each_tag(struct docker_call *c, int (*fn)(void *ctx, const char *tag),
			   void *ctx)
{
	struct json_doc d;
	int r = parse(c, &d, JSON_ARRAY);

	if (r)
		return r;
	for (int i = json_first(&d, 0); i >= 0; i = json_next(&d, 0, i)) {
		int tags = json_obj_get(&d, i, "RepoTags");

		if (tags < 0 || d.tok[tags].type != JSON_ARRAY)
			continue;
		for (int k = json_first(&d, tags); k >= 0; k = json_next(&d, tags, k)) {
			char tag[256];

			if (json_str(&d, k, tag, sizeof(tag)) <= 0)
				continue;
			if ((r = fn(ctx, tag)) != 0)
				return r;
		}
	}
	return 0;
}

const char *docker_kv_get(const struct docker_kv *kv, uint32_t n, const char *key)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	return NULL;
}
