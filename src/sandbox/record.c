/* record.c: a sandbox's record, instances/<id>/sandbox.json on the agentshare: written
 * atomically, read back at start, listed (sandbox.h). The instance directory and the
 * workspace beside the record are share.h's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json/json.h"
#include "sandbox/sandbox.h"
#include "workspace/host.h"

static void write_strrun(struct json_writer *w, const char *key, const char *run, uint32_t len)
{
	json_key(w, key);
	json_arr_begin(w);
	for (const char *p = NULL; (p = strrun_next(run, len, p));)
		json_str_write(w, p);
	json_arr_end(w);
}

/* What a restarted agenticd needs to take the sandbox back, as one JSON object. */
static void record_fields(struct json_writer *w, const struct sandbox *sb)
{
	json_obj_begin(w);
	json_key(w, "name");
	json_str_write(w, sb->name);
	json_key(w, "agent_id");
	json_str_write(w, sb->agent_id);
	json_key(w, "pool");
	json_bool_write(w, sb->pool);
	json_key(w, "claimed");
	json_bool_write(w, sb->claimed);
	/* a claim's env stays out of every agentshare file (its values may be credentials): a
	 * restarted agenticd knows it no more, and the init keeps what it was given */
	json_key(w, "instance_id");
	json_str_write(w, sb->instance_id);
	json_key(w, "state");
	json_str_write(w, sb->state == SB_READY ? "ready" : sb->state == SB_REMOVING ? "removing"
						 : "creating");
	json_key(w, "control_uid");
	json_int_write(w, sb->uid);
	json_key(w, "subnet");
	json_str_write(w, sb->subnet_text);
	json_key(w, "network");
	json_str_write(w, sb->network);
	json_key(w, "network_id");
	json_str_write(w, sb->network_id);
	json_key(w, "network_managed");
	json_bool_write(w, sb->net_managed);
	json_key(w, "container_id");
	json_str_write(w, sb->container_id);
	json_key(w, "image");
	json_str_write(w, sb->image);
	json_key(w, "created_ms");
	json_int_write(w, sb->created_ms);
	json_key(w, "ready_ms");
	json_int_write(w, sb->ready_ms);
	json_key(w, "expires_at");
	json_int_write(w, sb->expires_at);
	json_key(w, "keep_workspace");
	json_bool_write(w, sb->keep_workspace);
	json_key(w, "disk_bytes");
	json_int_write(w, (int64_t)sb->disk_bytes);
	json_key(w, "transcript_bytes");
	json_int_write(w, (int64_t)sb->transcript_bytes);
	json_key(w, "writable_root");
	json_bool_write(w, sb->writable_root);
	json_key(w, "runtime");
	json_str_write(w, sb->vm ? "vm" : "docker");
	write_strrun(w, "cmd", sb->cmd, sb->cmd_len);
	write_strrun(w, "labels", sb->labels, sb->labels_len);
	write_strrun(w, "mounts", sb->mounts, sb->mounts_len);
	json_key(w, "mount_ro");
	json_int_write(w, sb->mount_ro);
	json_key(w, "posture");
	posture_record_write(w, &sb->posture);
	/* the policy's normalised text ("" for none), so a restarted agenticd enforces it */
	json_key(w, "egress");
	json_str_write(w, sb->egress_json);
	/* the E2B API's fields (a token's hash, never the token) */
	if (sb->e2b_json[0]) {
		json_key(w, "e2b");
		json_str_write(w, sb->e2b_json);
	}
	json_obj_end(w);
}

/* dir/sandbox.json: temp + fsync + rename, then an fsync of dir: a reader (a restarted
 * agenticd) sees the old or the new record. Unsynced: no fsync (a host's crash may lose it). */
static int write_atomic(const char *dir, const struct buf *b, bool sync)
{
	char path[LIMIT_PATH_BYTES + 32], tmp[LIMIT_PATH_BYTES + 32];
	ssize_t n;
	int fd, r;

	snprintf(path, sizeof(path), "%s/sandbox.json", dir);
	snprintf(tmp, sizeof(tmp), "%s/.sandbox.json.tmp", dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	n = write(fd, b->data, b->len);
	r = n == (ssize_t)b->len ? 0 : n < 0 ? -errno : -EIO;
	if (r == 0 && sync && fsync(fd) != 0)
		r = -errno;
	close(fd);
	if (r == 0 && rename(tmp, path) != 0)
		r = -errno;
	if (r != 0) {
		unlink(tmp);
		return r;
	}
	if (sync && (fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	return 0;
}

static int record_write(const struct config *cfg, const struct sandbox *sb, bool sync)
{
	static char text[LIMIT_SANDBOX_CMD_BYTES + LIMIT_SANDBOX_LABEL_BYTES +
			 LIMIT_SANDBOX_MOUNT_BYTES + 8192 + 2 * EGRESS_POLICY_BYTES +
			 2 * LIMIT_E2B_RECORD_BYTES];
	char dir[LIMIT_PATH_BYTES];
	struct buf b;
	struct json_writer w;
	int r;

	if ((r = host_instance_dir(cfg, sb->instance_id, dir, sizeof(dir))) != 0)
		return r;
	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	record_fields(&w, sb);
	if ((r = json_writer_finish(&w)) != 0 || buf_append(&b, "\n", 1) != 0)
		return r ? r : ERR_LIMIT;
	return write_atomic(dir, &b, sync);
}

int sandbox_record_write(const struct config *cfg, const struct sandbox *sb)
{
	return record_write(cfg, sb, true);
}

int sandbox_record_write_unsynced(const struct config *cfg, const struct sandbox *sb)
{
	return record_write(cfg, sb, false);
}

int sandbox_record_sync(const struct config *cfg, const struct sandbox *sb)
{
	char dir[LIMIT_PATH_BYTES], path[LIMIT_PATH_BYTES + 32];
	int fd, r;

	if ((r = host_instance_dir(cfg, sb->instance_id, dir, sizeof(dir))) != 0)
		return r;
	snprintf(path, sizeof(path), "%s/sandbox.json", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -errno;
	r = fsync(fd) != 0 ? -errno : 0;
	close(fd);
	if (r == 0 && (fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		r = fsync(fd) != 0 ? -errno : 0;
		close(fd);
	}
	return r;
}

static int read_strrun(const struct json_doc *doc, int arr, char *run, uint32_t *len,
		       uint32_t cap, uint16_t *count)
{
	char s[CONFIG_STR_BYTES * 4];

	*len = 0;
	*count = 0;
	if (arr < 0)
		return 0;
	if (doc->tok[arr].type != JSON_ARRAY)
		return ERR_PARSE;
	for (int i = json_first(doc, arr); i >= 0; i = json_next(doc, arr, i)) {
		if (json_str(doc, i, s, sizeof(s)) < 0 || strrun_add(run, len, cap, s) != 0)
			return ERR_PARSE;
		(*count)++;
	}
	return 0;
}

/* Reads dir/sandbox.json and parses it into doc (its text and tokens are static here):
 * 0, -errno or ERR_PARSE. */
static int record_load(const char *dir, struct json_doc *doc)
{
	static char text[LIMIT_SANDBOX_CMD_BYTES * 2 + LIMIT_SANDBOX_LABEL_BYTES * 2 +
			 LIMIT_SANDBOX_MOUNT_BYTES * 2 + 16384 + 2 * EGRESS_POLICY_BYTES +
			 2 * LIMIT_E2B_RECORD_BYTES];
	static struct json_token tok[2048];
	char path[LIMIT_PATH_BYTES + 16];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/sandbox.json", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n <= 0 || (size_t)n == sizeof(text))
		return ERR_PARSE;
	if (json_parse(doc, text, (size_t)n, tok, ARRAY_LEN(tok)) != 0 ||
	    doc->tok[0].type != JSON_OBJECT)
		return ERR_PARSE;
	return 0;
}

/* The record's name, ids, state, uid, network and numbers: 0 or ERR_PARSE. */
static int read_fields(const struct json_doc *doc, struct sandbox *sb, char *state,
		       size_t state_size)
{
	int64_t v;
	bool bv;

	if (json_str(doc, json_obj_get(doc, 0, "name"), sb->name, sizeof(sb->name)) < 0 ||
	    json_str(doc, json_obj_get(doc, 0, "instance_id"), sb->instance_id,
		     sizeof(sb->instance_id)) < 0 ||
	    json_str(doc, json_obj_get(doc, 0, "state"), state, state_size) < 0 ||
	    json_int(doc, json_obj_get(doc, 0, "control_uid"), &v) != 0 || v < 0 ||
	    v > UINT32_MAX)
		return ERR_PARSE;
	sb->uid = (uint32_t)v;
	json_str(doc, json_obj_get(doc, 0, "subnet"), sb->subnet_text, sizeof(sb->subnet_text));
	json_str(doc, json_obj_get(doc, 0, "network"), sb->network, sizeof(sb->network));
	json_str(doc, json_obj_get(doc, 0, "network_id"), sb->network_id,
		 sizeof(sb->network_id));
	json_str(doc, json_obj_get(doc, 0, "container_id"), sb->container_id,
		 sizeof(sb->container_id));
	json_str(doc, json_obj_get(doc, 0, "image"), sb->image, sizeof(sb->image));
	if (json_bool(doc, json_obj_get(doc, 0, "network_managed"), &bv) == 0)
		sb->net_managed = bv;
	if (json_bool(doc, json_obj_get(doc, 0, "keep_workspace"), &bv) == 0)
		sb->keep_workspace = bv;
	if (json_bool(doc, json_obj_get(doc, 0, "writable_root"), &bv) == 0)
		sb->writable_root = bv;
	sb->vm = json_str_eq(doc, json_obj_get(doc, 0, "runtime"), "vm");
	if (json_int(doc, json_obj_get(doc, 0, "created_ms"), &v) == 0)
		sb->created_ms = v;
	if (json_int(doc, json_obj_get(doc, 0, "ready_ms"), &v) == 0)
		sb->ready_ms = v;
	if (json_int(doc, json_obj_get(doc, 0, "expires_at"), &v) == 0 && v > 0)
		sb->expires_at = v;
	if (json_int(doc, json_obj_get(doc, 0, "mount_ro"), &v) == 0)
		sb->mount_ro = (uint32_t)v;
	if (json_int(doc, json_obj_get(doc, 0, "disk_bytes"), &v) == 0 && v > 0)
		sb->disk_bytes = (uint64_t)v;
	if (json_int(doc, json_obj_get(doc, 0, "transcript_bytes"), &v) == 0 && v > 0)
		sb->transcript_bytes = (uint64_t)v;
	return 0;
}

/* What the request asked for (cmd, labels, mounts) and the warm pool's part: 0 or
 * ERR_PARSE. */
static int read_request(const struct json_doc *doc, struct sandbox *sb)
{
	uint16_t npairs;
	bool bv;

	if (read_strrun(doc, json_obj_get(doc, 0, "cmd"), sb->cmd, &sb->cmd_len,
			sizeof(sb->cmd), &sb->ncmd) != 0 ||
	    read_strrun(doc, json_obj_get(doc, 0, "labels"), sb->labels, &sb->labels_len,
			sizeof(sb->labels), &npairs) != 0 ||
	    read_strrun(doc, json_obj_get(doc, 0, "mounts"), sb->mounts, &sb->mounts_len,
			sizeof(sb->mounts), &sb->nmounts) != 0)
		return ERR_PARSE;
	sb->nlabels = npairs / 2;
	sb->nmounts /= 2;
	/* a record from before warm sandboxes: its container was made with its name */
	if (json_str(doc, json_obj_get(doc, 0, "agent_id"), sb->agent_id,
		     sizeof(sb->agent_id)) <= 0)
		snprintf(sb->agent_id, sizeof(sb->agent_id), "%s", sb->name);
	if (json_bool(doc, json_obj_get(doc, 0, "pool"), &bv) == 0)
		sb->pool = bv;
	if (json_bool(doc, json_obj_get(doc, 0, "claimed"), &bv) == 0)
		sb->claimed = bv;
	sb->claim_env_len = 0;
	sb->nclaim_env = 0;
	return 0;
}

/* Its posture and its egress policy: 0 or ERR_PARSE. */
static int read_policies(const struct json_doc *doc, struct sandbox *sb)
{
	static struct egress_policy pol;
	int pt;

	/* a record from before postures has none: T0 until the engine's view is read, and its
	 * request (env) is gone, so nothing is known of it at create */
	if ((pt = json_obj_get(doc, 0, "posture")) >= 0 &&
	    posture_record_read(doc, pt, &sb->posture) != 0)
		return ERR_PARSE;
	/* a record from before egress policies has none; one that no longer reads as a policy
	 * leaves the sandbox with none, egress closed: it is not opened on a guess */
	sb->egress_json[0] = '\0';
	if ((pt = json_obj_get(doc, 0, "egress")) >= 0 &&
	    (json_str(doc, pt, sb->egress_json, sizeof(sb->egress_json)) < 0 ||
	     (sb->egress_json[0] && egress_policy_parse(sb->egress_json, strlen(sb->egress_json),
							&pol, NULL, 0) != 0))) {
		sb->egress_json[0] = '\0';
		log_warn("sandbox.json egress policy unreadable; egress off", "name=%s",
			 log_q(sb->name));
	}
	if (json_str(doc, json_obj_get(doc, 0, "e2b"), sb->e2b_json, sizeof(sb->e2b_json)) < 0)
		sb->e2b_json[0] = '\0';
	return 0;
}

int sandbox_record_read(const struct config *cfg, const char *id, struct sandbox *sb,
			char *state, size_t state_size)
{
	char dir[LIMIT_PATH_BYTES];
	struct json_doc doc;
	int r;

	if ((r = host_instance_dir(cfg, id, dir, sizeof(dir))) != 0 ||
	    (r = record_load(dir, &doc)) != 0 ||
	    (r = read_fields(&doc, sb, state, state_size)) != 0 ||
	    (r = read_request(&doc, sb)) != 0)
		return r;
	return read_policies(&doc, sb);
}

int sandbox_record_each(const struct config *cfg, int (*fn)(void *ctx, const char *id),
			void *ctx)
{
	char dir[LIMIT_PATH_BYTES], rec[LIMIT_PATH_BYTES + 320];
	struct dirent *de;
	DIR *d;
	int r = 0;

	snprintf(dir, sizeof(dir), "%s/instances", cfg->agentshare_root);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (r == 0 && (de = readdir(d))) {
		struct stat st;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= SB_ID_BYTES)
			continue;
		snprintf(rec, sizeof(rec), "%s/%s/sandbox.json", dir, de->d_name);
		if (lstat(rec, &st) == 0 && S_ISREG(st.st_mode))
			r = fn(ctx, de->d_name);
	}
	closedir(d);
	return r;
}
