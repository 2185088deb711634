/* e2b_state.c: E2B's own fields of a sandbox (template, metadata, the access token's hash, the
 * E2B start), one per slot, written only here and read through e2b_of; kept in the sandbox's
 * record (sandbox_e2b_json_set: never a label or env, nothing the workload can read) and read
 * back at start. The access token is HMAC-SHA256(state_dir/e2b-secret, "<id>:<started_ms>"):
 * the same after a restart, stored nowhere in clear. The bottom of e2b/: it calls the sandbox
 * table and BearSSL, no other file of the module. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bearssl.h>

#include "config/config.h"
#include "e2b/e2b_state.h"
#include "json/json.h"
#include "sandbox/sandbox.h"

#define SECRET_BYTES 32

static struct {
	struct e2b_sb *tab;
	uint32_t nsb;
	uint8_t secret[SECRET_BYTES];
	bool have_secret;
} S;

const struct e2b_sb *e2b_of(const struct sandbox *sb)
{
	uint32_t i = sandbox_index(sb);

	if (i >= S.nsb || !S.tab[i].used || S.tab[i].gen != sb->gen)
		return NULL;
	return &S.tab[i];
}

/* state_dir/e2b-secret: root's, 0600, SECRET_BYTES; made when absent. */
static int secret_open(const struct config *cfg, char *err, size_t err_size)
{
	char path[LIMIT_PATH_BYTES + 16];
	struct stat st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/e2b-secret", cfg->state_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT) {
		if (random_bytes(S.secret, SECRET_BYTES) != 0)
			goto fail;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 || write(fd, S.secret, SECRET_BYTES) != SECRET_BYTES || fsync(fd) != 0)
			goto fail;
		close(fd);
		log_info("e2b secret made", "path=%s", log_q(path));
		S.have_secret = true;
		return 0;
	}
	if (fd < 0 || fstat(fd, &st) != 0)
		goto fail;
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077)) {
		close(fd);
		snprintf(err, err_size, "%s must be a regular file of root's with mode 0600", path);
		return -1;
	}
	n = read(fd, S.secret, SECRET_BYTES);
	close(fd);
	if (n != SECRET_BYTES) {
		snprintf(err, err_size, "%s is shorter than %d bytes", path, SECRET_BYTES);
		return -1;
	}
	S.have_secret = true;
	return 0;
fail:
	snprintf(err, err_size, "cannot make or read %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

void e2b_state_init(struct e2b_sb *tab, uint32_t nsb)
{
	S.tab = tab;
	S.nsb = nsb;
	S.have_secret = false;
}

int e2b_state_secret(const struct config *cfg, char *err, size_t err_size)
{
	return secret_open(cfg, err, err_size);
}

static void hex(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static void token_of(const char *name, int64_t started_ms, char *out)
{
	br_hmac_key_context kc;
	br_hmac_context hc;
	uint8_t mac[br_sha256_SIZE];
	char msg[SB_NAME_BYTES + 32];
	int n = snprintf(msg, sizeof(msg), "%s:%lld", name, (long long)started_ms);

	ASSERT(S.have_secret);
	br_hmac_key_init(&kc, &br_sha256_vtable, S.secret, SECRET_BYTES);
	br_hmac_init(&hc, &kc, 0);
	br_hmac_update(&hc, msg, (size_t)n);
	br_hmac_out(&hc, mac);
	hex(mac, E2B_TOKEN_CHARS / 2, out);
}

void e2b_sha256(const void *data, size_t len, uint8_t *out)
{
	br_sha256_context h;

	br_sha256_init(&h);
	br_sha256_update(&h, data, len);
	br_sha256_out(&h, out);
}

void e2b_token(const struct sandbox *sb, char *out)
{
	const struct e2b_sb *e = e2b_of(sb);

	out[0] = '\0';
	if (e)
		token_of(sb->name, e->started_ms, out);
}

bool e2b_token_ok(const struct sandbox *sb, const char *token)
{
	const struct e2b_sb *e = e2b_of(sb);
	uint8_t h[32], diff = 0;

	if (!e || !token)
		return false;
	e2b_sha256(token, strlen(token), h);
	for (size_t i = 0; i < sizeof(h); i++)
		diff |= (uint8_t)(h[i] ^ e->token_hash[i]);
	return diff == 0;
}

/* The blob: {"template":..,"started_ms":..,"token_sha256":..,"metadata":{..}}. */
static int blob_write(const struct e2b_sb *e, char *out, size_t cap)
{
	char h[2 * br_sha256_SIZE + 1];
	struct buf b;
	struct json_writer w;

	hex(e->token_hash, sizeof(e->token_hash), h);
	buf_init(&b, out, cap - 1);
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "template");
	json_str_write(&w, e->template_id);
	json_key(&w, "started_ms");
	json_int_write(&w, e->started_ms);
	json_key(&w, "token_sha256");
	json_str_write(&w, h);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0 || b.len < 1)
		return -E2BIG;
	/* the metadata's own text (already a JSON object) before the closing brace */
	b.len--;
	if (buf_printf(&b, ",\"metadata\":%s}", e->metadata) != 0)
		return -E2BIG;
	out[b.len] = '\0';
	return 0;
}

int e2b_state_set(struct sandbox *sb, const char *template_id, const char *metadata,
		  int64_t started_ms)
{
	static char blob[LIMIT_E2B_RECORD_BYTES];
	uint32_t i = sandbox_index(sb);
	struct e2b_sb *e;
	char token[E2B_TOKEN_CHARS + 1];

	ASSERT(i < S.nsb);
	e = &S.tab[i];
	memset(e, 0, sizeof(*e));
	snprintf(e->template_id, sizeof(e->template_id), "%s", template_id);
	if ((size_t)snprintf(e->metadata, sizeof(e->metadata), "%s", metadata) >= sizeof(e->metadata))
		return -E2BIG;
	e->started_ms = started_ms;
	token_of(sb->name, started_ms, token);
	e2b_sha256(token, strlen(token), e->token_hash);
	memset(token, 0, sizeof(token));
	if (blob_write(e, blob, sizeof(blob)) != 0 || !sandbox_e2b_json_set(sb, blob))
		return -E2BIG;
	e->gen = sb->gen;
	e->used = true;
	return 0;
}

static int unhex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		out[i] = (uint8_t)v;
	}
	return strlen(s) == 2 * n ? 0 : -EINVAL;
}

void e2b_state_load(struct sandbox *sb)
{
	static struct json_token tok[512];
	uint32_t i = sandbox_index(sb);
	struct json_doc doc;
	struct e2b_sb *e;
	char h[2 * br_sha256_SIZE + 1];
	int m;

	if (i >= S.nsb || !sb->e2b_json[0])
		return;
	e = &S.tab[i];
	memset(e, 0, sizeof(*e));
	if (json_parse(&doc, sb->e2b_json, strlen(sb->e2b_json), tok, ARRAY_LEN(tok)) != 0 ||
	    json_str(&doc, json_obj_get(&doc, 0, "template"), e->template_id,
		     sizeof(e->template_id)) < 0 ||
	    json_int(&doc, json_obj_get(&doc, 0, "started_ms"), &e->started_ms) != 0 ||
	    json_str(&doc, json_obj_get(&doc, 0, "token_sha256"), h, sizeof(h)) < 0 ||
	    unhex(h, e->token_hash, sizeof(e->token_hash)) != 0 ||
	    (m = json_obj_get(&doc, 0, "metadata")) < 0 || doc.tok[m].type != JSON_OBJECT ||
	    doc.tok[m].end - doc.tok[m].start >= sizeof(e->metadata)) {
		log_warn("sandbox.json e2b fields unreadable; not an E2B sandbox", "name=%s",
			 log_q(sb->name));
		memset(e, 0, sizeof(*e));
		return;
	}
	memcpy(e->metadata, doc.src + doc.tok[m].start, doc.tok[m].end - doc.tok[m].start);
	e->gen = sb->gen;
	e->used = true;
}
