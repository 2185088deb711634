/* e2b_fs.c: E2B's filesystem.Filesystem service (unary Connect-JSON: Stat, ListDir, MakeDir,
 * Remove, Move; the watcher family answers unimplemented) and GET /files' download, both on
 * one table of file operations. Owns that table (LIMIT_E2B_FILE_OPS slots, static, in the
 * memory budget like exec's). Calls base, json, the connection layer (e2b_conn.h: C2) and the
 * fileop client (agent/fileop.h: C3), which runs every operation inside the sandbox as uid
 * 10001, so the kernel and the container decide what a path reaches: nothing here walks a
 * path on the host.
 *
 * An operation's answer is gathered in its slot. When the fileop ends and the whole answer
 * is there, it goes out at once with its exact status (errors are Connect JSON with a string
 * code, or §6.3's JSON with an integer code for downloads). An answer that outgrows the slot
 * is committed as 200 and streamed (chunked) as the client takes it. */
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agent/fileop.h"
#include "base/base.h"
#include "e2b/e2b_conn.h"
#include "e2b/e2b_fop.h"
#include "json/json.h"
#include "sandbox/sandbox.h"

enum fop_kind { FOP_STAT, FOP_LIST, FOP_MKDIR, FOP_REMOVE, FOP_MOVE, FOP_READ };

struct fop {
	bool used;
	bool streaming;      /* the 200 head went out: the rest is chunks */
	bool done;           /* the fileop ended well: drain, then end the stream */
	uint8_t kind;        /* enum fop_kind */
	uint16_t gen;
	int32_t x;           /* the fileop session, -1: none */
	uint32_t nentries;
	struct e2b_ref conn;
	struct sandbox *sb;
	struct buf out;
	uint8_t data[LIMIT_E2B_FILE_OUT_BYTES];
};

static struct fop fops[LIMIT_E2B_FILE_OPS];

size_t e2b_fs_table_bytes(void)
{
	return sizeof(fops);
}

static uint16_t fop_gen;

static const struct method {
	const char *name;
	uint8_t kind;
	enum fileop_kind op;
	const char *head, *tail; /* the answer's JSON around its entries */
} methods[] = {
	{ "Stat", FOP_STAT, FILEOP_STAT, "{", "}" },
	{ "ListDir", FOP_LIST, FILEOP_LIST, "{\"entries\":[", "]}" },
	{ "MakeDir", FOP_MKDIR, FILEOP_MKDIR, "{", "}" },
	{ "Remove", FOP_REMOVE, FILEOP_REMOVE, "{", "}" },
	{ "Move", FOP_MOVE, FILEOP_MOVE, "{", "}" },
};

/* ---- the slots; a callback's ctx is its slot and generation, so a late one finds nothing ---- */

static void *ctx_of(const struct fop *op)
{
	return (void *)(uintptr_t)(((uintptr_t)op->gen << 8 | (uintptr_t)(op - fops)) + 1);
}

static struct fop *fop_of(void *ctx)
{
	uintptr_t v = (uintptr_t)ctx - 1;
	struct fop *op = &fops[(v & 0xff) % LIMIT_E2B_FILE_OPS];

	return op->used && op->gen == (uint16_t)(v >> 8) ? op : NULL;
}

_Static_assert(LIMIT_E2B_FILE_OPS <= 256, "a slot index fits the ctx's low byte");

static struct fop *fop_get(struct e2b_conn *c, uint8_t kind)
{
	struct sandbox *sb = e2b_sandbox(c);

	ASSERT(sb);
	for (size_t i = 0; i < ARRAY_LEN(fops); i++) {
		struct fop *op = &fops[i];
		if (op->used)
			continue;
		memset(op, 0, offsetof(struct fop, data));
		op->used = true;
		op->gen = ++fop_gen;
		op->kind = kind;
		op->x = -1;
		op->conn = e2b_ref_of(c);
		op->sb = sb;
		buf_init(&op->out, op->data, sizeof(op->data));
		return op;
	}
	return NULL;
}

static void fop_put(struct fop *op)
{
	ASSERT(op->used);
	op->used = false;
}

/* ---- answers ---- */

static const char *connect_code(int err)
{
	switch (err) {
	case ENOENT:
		return "not_found";
	case EEXIST:
		return "already_exists";
	case ENOTDIR: case EISDIR: case EINVAL: case ELOOP: case ENAMETOOLONG: case EXDEV:
		return "invalid_argument";
	case EACCES: case EPERM: case EROFS: case ETXTBSY:
		return "permission_denied";
	case ENOSPC: case EDQUOT:
		return "resource_exhausted";
	default:
		return "internal";
	}
}

int e2b_fop_http_status(int err)
{
	switch (err) {
	case ENOENT:
		return 404;
	case EACCES: case EPERM: case EROFS: case ETXTBSY:
		return 403;
	case ENOSPC: case EDQUOT:
		return 507;
	case ENOTDIR: case EISDIR: case EINVAL: case ELOOP: case ENAMETOOLONG: case EEXIST:
	case EXDEV:
		return 400;
	default:
		return 500;
	}
}

int e2b_fop_begin_status(int r, const char **message)
{
	if (r == ERR_LIMIT) {
		*message = "too many file operations at once in agenticd; try again";
		return 503;
	}
	if (r == ERR_STATE || r == -EAGAIN) {
		*message = "the sandbox's agent is not reachable now; try again";
		return 503;
	}
	if (r == -EINVAL) {
		*message = "the file operation was refused: a path must be UTF-8 and a depth "
			   "within the limit";
		return 400;
	}
	*message = "the file operation could not start";
	return 500;
}

static const char *err_message(int err, const char *message)
{
	if (message && message[0])
		return message;
	return err == ENOENT ? "no such file or directory"
	       : err == EEXIST ? "the path already exists"
	       : err == ENOTDIR ? "a path component is not a directory"
	       : err == EISDIR ? "the path is a directory"
	       : err == EACCES || err == EPERM ? "permission denied"
	       : err == ENOSPC || err == EDQUOT ? "not enough space in the sandbox"
	       : "the file operation failed";
}

/* An error before any byte of the answer went out. */
static void answer_error(struct fop *op, struct e2b_conn *c, int err, const char *message)
{
	message = err_message(err, message);
	if (op->kind == FOP_READ)
		e2b_reply_error(c, e2b_fop_http_status(err), message);
	else if (op->kind == FOP_LIST && err == ENOTDIR)
		e2b_connect_error(c, "invalid_argument", "the path is not a directory");
	else
		e2b_connect_error(c, connect_code(err), message);
}

static void answer_begin_error(struct fop *op, struct e2b_conn *c, int r)
{
	const char *message;
	int status = e2b_fop_begin_status(r, &message);

	if (op->kind == FOP_READ)
		e2b_reply_error(c, status, message);
	else
		e2b_connect_error(c, status == 503 ? "unavailable" : status == 400
				  ? "invalid_argument" : "internal", message);
}

static const char *content_type(const struct fop *op)
{
	return op->kind == FOP_READ ? "application/octet-stream" : "application/json";
}

/* What the slot holds, to the client as it takes it: 0 (all out), -EAGAIN (on_writable
 * comes), -EPIPE (the client is gone). The 200 head goes out first when it has not. */
static int fop_flush(struct fop *op, struct e2b_conn *c)
{
	if (!op->streaming) {
		if (e2b_stream_begin(c, 200, content_type(op)) != 0)
			return -EPIPE;
		op->streaming = true;
	}
	while (op->out.len) {
		size_t n = e2b_stream_room(c);
		int r;

		n = n < op->out.len ? n : op->out.len;
		if (n == 0)
			return -EAGAIN;
		r = e2b_stream_write(c, op->out.data, n);
		if (r == -EAGAIN)
			return -EAGAIN;
		if (r != 0)
			return -EPIPE;
		buf_consume(&op->out, n);
	}
	return 0;
}

/* Makes room in the slot by streaming what it holds (committing to 200): 0, or -EPIPE (the
 * client is gone). Whether room came is for the caller to see. */
static int fop_push(struct fop *op)
{
	struct e2b_conn *c = e2b_conn_get(op->conn);

	if (!c || fop_flush(op, c) == -EPIPE)
		return -EPIPE;
	return 0;
}

/* The fileop ended well and the tail is in the slot: one whole answer, or the stream's end. */
static void fop_finish(struct fop *op, struct e2b_conn *c)
{
	int r;

	if (!op->streaming) {
		e2b_reply(c, 200, content_type(op), op->out.data, op->out.len);
		fop_put(op);
		return;
	}
	op->done = true;
	r = fop_flush(op, c);
	if (r == -EAGAIN)
		return;
	if (r == 0)
		e2b_stream_end(c);
	fop_put(op);
}

/* The answer cannot be completed (the client takes a long answer too slowly): the fileop
 * stops, and the client gets an error, or a stream that ends short (its JSON or its file
 * incomplete, which it reports). */
static void fop_abort(struct fop *op, const char *why)
{
	struct e2b_conn *c = e2b_conn_get(op->conn);

	log_warn("e2b file answer cut", "reason=%s", log_q(why));
	if (op->x >= 0)
		fileop_cancel(op->x);
	op->x = -1;
	if (c && !op->streaming)
		answer_error(op, c, EIO, "the answer could not be completed");
	else if (c)
		e2b_stream_end(c);
	fop_put(op);
}

/* ---- the connection's side ---- */

static void fop_on_writable(struct e2b_conn *c, void *ctx)
{
	struct fop *op = fop_of(ctx);

	if (!op)
		return;
	if (op->done) {
		fop_finish(op, c);
		return;
	}
	if (op->streaming && fop_flush(op, c) == -EPIPE) {
		if (op->x >= 0)
			fileop_cancel(op->x);
		fop_put(op);
	}
}

static void fop_on_close(struct e2b_conn *c, void *ctx)
{
	struct fop *op = fop_of(ctx);

	(void)c;
	if (!op)
		return;
	if (op->x >= 0)
		fileop_cancel(op->x);
	fop_put(op);
}

static const struct e2b_service_ops fop_service = {
	.on_writable = fop_on_writable,
	.on_close = fop_on_close,
};

/* ---- the fileop's side ---- */

static const char *type_name(int type)
{
	return type == FILE_TYPE_FILE ? "FILE_TYPE_FILE" : type == FILE_TYPE_DIR ? "FILE_TYPE_DIRECTORY"
	       : type == FILE_TYPE_SYMLINK ? "FILE_TYPE_SYMLINK" : "FILE_TYPE_UNSPECIFIED";
}

/* As Go's os.FileMode.String(), which envd sends: type and special letters, then rwx. */
static const char *perm_string(const struct file_entry *e, char *s)
{
	uint32_t m = e->mode, t = m & S_IFMT;
	char *p = s;

	if (t == 0)
		t = e->type == FILE_TYPE_DIR ? S_IFDIR : e->type == FILE_TYPE_SYMLINK ? S_IFLNK : S_IFREG;
	if (t == S_IFDIR)
		*p++ = 'd';
	if (t == S_IFLNK)
		*p++ = 'L';
	if (t == S_IFBLK || t == S_IFCHR)
		*p++ = 'D';
	if (t == S_IFIFO)
		*p++ = 'p';
	if (t == S_IFSOCK)
		*p++ = 'S';
	if (m & S_ISUID)
		*p++ = 'u';
	if (m & S_ISGID)
		*p++ = 'g';
	if (t == S_IFCHR)
		*p++ = 'c';
	if (m & S_ISVTX)
		*p++ = 't';
	if (p == s)
		*p++ = '-';
	for (int i = 0; i < 9; i++)
		*p++ = m & (0400u >> i) ? "rwxrwxrwx"[i] : '-';
	*p = '\0';
	return s;
}

static const char *rfc3339(int64_t sec, int32_t nsec, char *out, size_t cap)
{
	time_t t = (time_t)sec;
	struct tm tm;
	size_t n;

	if (!gmtime_r(&t, &tm) || !(n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm)))
		return "1970-01-01T00:00:00Z";
	if (nsec > 0 && nsec < 1000000000)
		snprintf(out + n, cap - n, ".%09" PRId32 "Z", nsec);
	else
		snprintf(out + n, cap - n, "Z");
	return out;
}

/* EntryInfo as proto3 JSON (§6.2): int64 size as a string, enum names, RFC 3339 time. */
static void entry_json(struct json_writer *w, const struct file_entry *e)
{
	char num[24], perms[24], when[48];

	snprintf(num, sizeof(num), "%" PRIu64, e->size);
	json_obj_begin(w);
	json_key(w, "name");
	json_str_write(w, e->name ? e->name : "");
	json_key(w, "type");
	json_str_write(w, type_name(e->type));
	json_key(w, "path");
	json_str_write(w, e->path ? e->path : "");
	json_key(w, "size");
	json_str_write(w, num);
	json_key(w, "mode");
	json_int_write(w, e->mode & 0777);
	json_key(w, "permissions");
	json_str_write(w, perm_string(e, perms));
	if (e->owner) {
		json_key(w, "owner");
		json_str_write(w, e->owner);
	}
	if (e->group) {
		json_key(w, "group");
		json_str_write(w, e->group);
	}
	json_key(w, "modifiedTime");
	json_str_write(w, rfc3339(e->mtime_s, e->mtime_ns, when, sizeof(when)));
	if (e->symlink_target) {
		json_key(w, "symlinkTarget");
		json_str_write(w, e->symlink_target);
	}
	json_obj_end(w);
}

/* One entry into the answer: ListDir's are comma-separated, the others take the first. An
 * entry whose name is not UTF-8 (JSON cannot carry it) is left out. */
static int fop_entry_add(struct fop *op, const struct file_entry *e)
{
	struct json_writer w;
	size_t mark = op->out.len;
	int r;

	if (op->kind != FOP_LIST && op->nentries > 0)
		return 0;
	if (op->kind == FOP_LIST && op->nentries > 0)
		r = buf_append(&op->out, ",", 1);
	else
		r = op->kind == FOP_LIST ? 0 : buf_append(&op->out, "\"entry\":", 8);
	json_writer_init(&w, &op->out);
	if (r == 0) {
		entry_json(&w, e);
		r = json_writer_finish(&w);
	}
	if (r != 0)
		op->out.len = mark;
	if (r == 0)
		op->nentries++;
	return r == -EINVAL ? 0 : r;
}

static void fop_sink_entry(void *ctx, const struct file_entry *e)
{
	struct fop *op = fop_of(ctx);

	if (!op || op->kind == FOP_READ || op->kind == FOP_REMOVE)
		return;
	if (fop_entry_add(op, e) == ERR_LIMIT && (fop_push(op) != 0 || fop_entry_add(op, e) != 0))
		fop_abort(op, "client too slow");
}

static int fop_sink_data(void *ctx, const void *d, size_t len)
{
	struct fop *op = fop_of(ctx);
	const uint8_t *p = d;

	if (!op || op->kind != FOP_READ)
		return -EPIPE;
	while (len) {
		size_t n = op->out.cap - op->out.len;
		int r;

		if (n == 0 && (r = fop_push(op)) != 0)
			return r;
		n = op->out.cap - op->out.len;
		if (n == 0)
			return -ENOBUFS; /* the fileop stops, and its done ends the answer */
		n = n < len ? n : len;
		buf_append(&op->out, p, n);
		p += n;
		len -= n;
	}
	return 0;
}

static void fop_sink_done(void *ctx, int err, const char *message)
{
	struct fop *op = fop_of(ctx);
	const struct method *m;
	struct e2b_conn *c;

	if (!op)
		return;
	op->x = -1;
	if (!(c = e2b_conn_get(op->conn))) {
		fop_put(op);
		return;
	}
	if (op->kind == FOP_REMOVE && err == ENOENT)
		err = 0; /* rm -rf: what is not there is removed */
	if (err && !op->streaming) {
		answer_error(op, c, err, message);
		fop_put(op);
		return;
	}
	if (err) {
		/* bytes went out already: the answer ends short, the client sees a broken one */
		fop_abort(op, "fileop failed");
		return;
	}
	m = op->kind == FOP_READ ? NULL : &methods[op->kind];
	if (m && buf_append(&op->out, m->tail, strlen(m->tail)) != 0 &&
	    (fop_push(op) != 0 || buf_append(&op->out, m->tail, strlen(m->tail)) != 0)) {
		fop_abort(op, "client too slow");
		return;
	}
	fop_finish(op, c);
}

static const struct fileop_sink_ops fop_sink_ops = {
	.entry = fop_sink_entry,
	.data = fop_sink_data,
	.done = fop_sink_done,
};

/* ---- starting one ---- */

static void fop_start(struct fop *op, struct e2b_conn *c, const struct fileop_req *req)
{
	struct fileop_sink sink = { &fop_sink_ops, ctx_of(op) };
	int r;

	if (op->kind != FOP_READ) {
		const char *head = methods[op->kind].head;
		buf_append(&op->out, head, strlen(head));
	}
	e2b_conn_attach(c, &fop_service, ctx_of(op));
	r = fileop_begin(op->sb, req, &sink);
	if (r < 0) {
		answer_begin_error(op, c, r);
		fop_put(op);
		return;
	}
	op->x = r;
}

void e2b_fop_read(struct e2b_conn *c, const char *path)
{
	struct fileop_req req = { .op = FILEOP_READ, .path = path };
	struct fop *op = fop_get(c, FOP_READ);

	if (!op) {
		e2b_reply_error(c, 503, "too many file operations at once in agenticd; try again");
		return;
	}
	fop_start(op, c, &req);
}

void e2b_fop_sandbox_gone(struct sandbox *sb)
{
	for (size_t i = 0; i < ARRAY_LEN(fops); i++) {
		struct fop *op = &fops[i];
		struct e2b_conn *c;

		if (!op->used || op->sb != sb)
			continue;
		if (op->x >= 0)
			fileop_cancel(op->x);
		op->x = -1;
		c = e2b_conn_get(op->conn);
		if (c && !op->streaming && op->kind == FOP_READ)
			e2b_reply_error(c, 502, "The sandbox was not found");
		else if (c && !op->streaming)
			e2b_connect_error(c, "unavailable", "the sandbox was removed");
		else if (c)
			e2b_stream_end(c);
		fop_put(op);
	}
}

/* ---- filesystem.Filesystem ---- */

/* A path member of the request, resolved against /home/user: 0, or -1 answered. */
static int request_path(struct e2b_conn *c, const struct json_doc *doc, const char *key,
			char *out, size_t cap)
{
	char raw[LIMIT_PATH_BYTES];
	int v = json_obj_get(doc, 0, key);

	if (v < 0 || json_str(doc, v, raw, sizeof(raw)) < 0 ||
	    e2b_path_resolve(raw, out, cap) != 0) {
		e2b_connect_error(c, "invalid_argument", "the request needs a path (a string of "
				  "at most 4095 bytes, not empty)");
		return -1;
	}
	return 0;
}

/* ListDir's depth: a number or a decimal string (proto3 JSON); absent or 0 means 1. */
static int request_depth(const struct json_doc *doc, uint32_t *depth)
{
	int v = json_obj_get(doc, 0, "depth");
	int64_t d = 0;
	char s[12];
	uint64_t u;

	if (v >= 0 && doc->tok[v].type == JSON_STRING) {
		if (json_str(doc, v, s, sizeof(s)) < 0 || parse_u64(s, UINT32_MAX, &u) != 0)
			return -EINVAL;
		d = (int64_t)u;
	} else if (v >= 0 && (json_int(doc, v, &d) != 0 || d < 0 || d > UINT32_MAX)) {
		return -EINVAL;
	}
	*depth = d ? (uint32_t)d : 1;
	return 0;
}

static const struct method *method_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_LEN(methods); i++)
		if (strcmp(methods[i].name, name) == 0)
			return &methods[i];
	return NULL;
}

/* The request's JSON into doc, and its paths resolved: 0, or -1 answered. */
static int fs_request(struct e2b_conn *c, const struct method *m, struct json_doc *doc,
		      struct json_token *tok, uint32_t ntok, struct fileop_req *req,
		      char *p1, char *p2)
{
	size_t len;
	const uint8_t *body = e2b_body(c, &len);

	if (json_parse(doc, (const char *)body, len, tok, ntok) != 0 ||
	    tok[0].type != JSON_OBJECT) {
		e2b_connect_error(c, "invalid_argument", "the request body is not a JSON object");
		return -1;
	}
	req->op = m->op;
	req->parents = m->op == FILEOP_MKDIR;
	req->path = p1;
	if (m->op == FILEOP_MOVE) {
		req->path2 = p2;
		if (request_path(c, doc, "source", p1, LIMIT_PATH_BYTES) != 0 ||
		    request_path(c, doc, "destination", p2, LIMIT_PATH_BYTES) != 0)
			return -1;
		return 0;
	}
	if (request_path(c, doc, "path", p1, LIMIT_PATH_BYTES) != 0)
		return -1;
	if (m->op == FILEOP_LIST && request_depth(doc, &req->depth) != 0) {
		e2b_connect_error(c, "invalid_argument", "depth must be a number from 1");
		return -1;
	}
	return 0;
}

void e2b_fs_call(struct e2b_conn *c, const char *method)
{
	static char p1[LIMIT_PATH_BYTES], p2[LIMIT_PATH_BYTES];
	struct json_token tok[32];
	struct json_doc doc;
	struct fileop_req req = { 0 };
	const struct method *m = method_find(method);
	struct fop *op;

	if (!m) {
		e2b_connect_error(c, "unimplemented", "agentic serves Stat, ListDir, MakeDir, "
				  "Remove and Move of filesystem.Filesystem; watching is not "
				  "implemented");
		return;
	}
	if (e2b_user_check(c) != 0 || fs_request(c, m, &doc, tok, ARRAY_LEN(tok), &req, p1, p2))
		return;
	if (!(op = fop_get(c, m->kind))) {
		e2b_connect_error(c, "unavailable", "too many file operations at once in "
				  "agenticd; try again");
		return;
	}
	fop_start(op, c, &req);
}
