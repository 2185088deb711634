/* e2b_files.c: the envd plane's plain-HTTP file routes: GET /files (a download, served on
 * e2b_fs.c's table) and POST /files (uploads: multipart/form-data, or application/octet-stream
 * with ?path=), and the end of both when a sandbox goes. Owns the upload table
 * (LIMIT_E2B_UPLOADS slots, static, in the memory budget like exec's). Calls base, the
 * connection layer (e2b_conn.h: C2), multipart.c, e2b_fs.c (e2b_fop.h) and the fileop client
 * (agent/fileop.h: C3), whose WRITE runs inside the sandbox as uid 10001.
 *
 * An upload never holds a whole body: the connection's bytes are parsed as they come and each
 * part's body goes to its file's fileop_write; while a write is busy (or a file is being
 * closed) the body is paused, and the few bytes already read wait in the slot. Files are
 * written one after the other, in the body's order; the answer (§6.3: a JSON array of
 * {name, path, type}) goes out when the last one is closed. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "agent/fileop.h"
#include "base/base.h"
#include "e2b/e2b_conn.h"
#include "e2b/e2b_fop.h"
#include "e2b/multipart.h"
#include "json/json.h"
#include "sandbox/sandbox.h"

struct upload {
	bool used;
	bool multipart;      /* else application/octet-stream to one path */
	bool writing;        /* a file's fileop runs (x >= 0) */
	bool closing;        /* its end was sent: its done is awaited */
	bool skipping;       /* the current part is not a "file" part: its body is dropped */
	bool body_end;       /* the request body is all in */
	bool paused;
	uint16_t gen;
	int32_t x;
	uint32_t npaths;
	struct e2b_ref conn;
	struct sandbox *sb;
	/* body bytes parsed but not yet taken by the write: in[hold_off..+hold_len) or, when they
	 * came from the parser's delimiter copy, dhold; unparsed bytes: in[raw_off..raw_end) */
	uint32_t hold_off, hold_len, dhold_len, raw_off, raw_end;
	struct buf paths;    /* the paths written, NUL-separated, in order */
	struct multipart mp;
	char qpath[LIMIT_PATH_BYTES]; /* ?path= resolved; "" when absent */
	uint8_t dhold[4 + MULTIPART_BOUNDARY_MAX];
	uint8_t in[LIMIT_E2B_UPLOAD_IN_BYTES];
	uint8_t paths_data[LIMIT_E2B_UPLOAD_PATHS_BYTES];
	char hdr[LIMIT_E2B_PART_HEAD_BYTES];
};

static struct upload ups[LIMIT_E2B_UPLOADS];

size_t e2b_files_table_bytes(void)
{
	return sizeof(ups);
}

/* The answer: each file's name and path (at most the paths' bytes each) and ~40 bytes of
 * JSON around them, in the connection's one whole answer. */
#define ANSWER_BYTES (2 * LIMIT_E2B_UPLOAD_PATHS_BYTES + 48 * LIMIT_E2B_UPLOAD_FILES)
_Static_assert(ANSWER_BYTES + 1024 <= LIMIT_E2B_OUT_BYTES, "the answer fits one whole reply");
static uint16_t up_gen;

_Static_assert(LIMIT_E2B_UPLOADS <= 256, "a slot index fits the ctx's low byte");

static void *up_ctx(const struct upload *up)
{
	return (void *)(uintptr_t)(((uintptr_t)up->gen << 8 | (uintptr_t)(up - ups)) + 1);
}

static struct upload *up_of(void *ctx)
{
	uintptr_t v = (uintptr_t)ctx - 1;
	struct upload *up = &ups[(v & 0xff) % LIMIT_E2B_UPLOADS];

	return up->used && up->gen == (uint16_t)(v >> 8) ? up : NULL;
}

/* ---- the query: application/x-www-form-urlencoded, as Go's url.Query reads it ---- */

static int hex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The first value of `key` in the query, decoded: 0, -ENOENT (absent), -EINVAL (a bad %
 * escape, a NUL, longer than cap - 1). */
static int query_get(const char *q, const char *key, char *out, size_t cap)
{
	size_t klen = strlen(key);

	for (const char *p = q; *p; p += strcspn(p, "&"), p += *p == '&') {
		size_t n = 0;

		if (strncmp(p, key, klen) != 0 || p[klen] != '=')
			continue;
		for (p += klen + 1; *p && *p != '&'; p++) {
			int c = *p == '+' ? ' ' : *p;
			if (*p == '%') {
				if (hex(p[1]) < 0 || hex(p[2]) < 0)
					return -EINVAL;
				c = hex(p[1]) << 4 | hex(p[2]);
				p += 2;
			}
			if (c == 0 || n + 1 >= cap)
				return -EINVAL;
			out[n++] = (char)c;
		}
		out[n] = '\0';
		return 0;
	}
	return -ENOENT;
}

/* ?path=, resolved against /home/user: 0 (out "" when absent and !required), or -1
 * answered (400). */
static int query_path(struct e2b_conn *c, bool required, char *out, size_t cap)
{
	char raw[LIMIT_PATH_BYTES];
	int r = query_get(e2b_query(c), "path", raw, sizeof(raw));

	out[0] = '\0';
	if (r == -ENOENT && !required)
		return 0;
	if (r == 0 && e2b_path_resolve(raw, out, cap) == 0)
		return 0;
	e2b_reply_error(c, 400, r == -ENOENT ? "the path query parameter is required"
				: "the path query parameter is not a valid path");
	return -1;
}

void e2b_files_get(struct e2b_conn *c)
{
	char path[LIMIT_PATH_BYTES];

	if (e2b_user_check(c) != 0 || query_path(c, true, path, sizeof(path)) != 0)
		return;
	e2b_fop_read(c, path);
}

/* ---- uploads: their end ---- */

static void up_put(struct upload *up)
{
	ASSERT(up->used);
	if (up->x >= 0)
		fileop_cancel(up->x);
	up->x = -1;
	up->used = false;
}

static void up_fail(struct upload *up, int status, const char *message)
{
	struct e2b_conn *c = e2b_conn_get(up->conn);

	if (c && up->paused)
		e2b_body_resume(c);
	if (c)
		e2b_reply_error(c, status, message);
	up_put(up);
}

/* [{"name","path","type":"file"}...] for the paths written. */
static void up_answer(struct upload *up, struct e2b_conn *c)
{
	static uint8_t out[ANSWER_BYTES];
	struct buf b;
	struct json_writer w;
	const char *p = (const char *)up->paths.data;

	buf_init(&b, out, sizeof(out));
	json_writer_init(&w, &b);
	json_arr_begin(&w);
	for (uint32_t i = 0; i < up->npaths; i++, p += strlen(p) + 1) {
		const char *slash = strrchr(p, '/');
		json_obj_begin(&w);
		json_key(&w, "name");
		json_str_write(&w, slash ? slash + 1 : p);
		json_key(&w, "path");
		json_str_write(&w, p);
		json_key(&w, "type");
		json_str_write(&w, "file");
		json_obj_end(&w);
	}
	json_arr_end(&w);
	if (json_writer_finish(&w) != 0) {
		up_fail(up, 500, "the answer could not be written");
		return;
	}
	if (up->paused)
		e2b_body_resume(c);
	e2b_reply(c, 200, "application/json", b.data, b.len);
	up_put(up);
}

/* The body is all in, every byte handed on and no file open: the answer, or why not. */
static void up_complete(struct upload *up)
{
	struct e2b_conn *c = e2b_conn_get(up->conn);

	if (!c) {
		up_put(up);
		return;
	}
	if (up->multipart && multipart_finish(&up->mp) != MULTIPART_EV_DONE)
		up_fail(up, 400, "the multipart body ended before its closing boundary");
	else if (up->npaths == 0)
		up_fail(up, 400, "the upload has no part named \"file\"");
	else
		up_answer(up, c);
}

/* ---- uploads: one file ---- */

static bool path_written(const struct upload *up, const char *path)
{
	const char *p = (const char *)up->paths.data;

	for (uint32_t i = 0; i < up->npaths; i++, p += strlen(p) + 1)
		if (strcmp(p, path) == 0)
			return true;
	return false;
}

static void up_sink_taken(void *ctx);
static void up_sink_done(void *ctx, int err, const char *message);

static const struct fileop_sink_ops up_sink_ops = {
	.stdin_taken = up_sink_taken,
	.done = up_sink_done,
};

/* Opens the file at path (resolved) for writing: 0, or -1 answered. */
static int up_open(struct upload *up, const char *path)
{
	struct fileop_req req = { .op = FILEOP_WRITE, .path = path, .parents = true };
	struct fileop_sink sink = { &up_sink_ops, up_ctx(up) };
	const char *message;
	int r;

	if (path_written(up, path)) {
		up_fail(up, 400, "two parts of the upload name the same path");
		return -1;
	}
	if (up->npaths == LIMIT_E2B_UPLOAD_FILES ||
	    buf_append(&up->paths, path, strlen(path) + 1) != 0) {
		up_fail(up, 400, "too many files in one upload");
		return -1;
	}
	up->npaths++;
	r = fileop_begin(up->sb, &req, &sink);
	if (r < 0) {
		int status = e2b_fop_begin_status(r, &message);
		up_fail(up, status, message);
		return -1;
	}
	up->x = r;
	up->writing = true;
	return 0;
}

/* A part's headers: where its body goes. 0, or -1 answered. */
static int up_part(struct upload *up)
{
	const char *name = multipart_name(&up->mp), *fn = multipart_filename(&up->mp);
	char path[LIMIT_PATH_BYTES];

	up->skipping = !name || strcmp(name, "file") != 0;
	if (up->skipping)
		return 0;
	if (up->qpath[0])
		return up_open(up, up->qpath);
	if (!fn || !fn[0] || e2b_path_resolve(fn, path, sizeof(path)) != 0) {
		up_fail(up, 400, "a file part needs a filename (its path) or the path query "
			"parameter");
		return -1;
	}
	return up_open(up, path);
}

/* The current file's bytes are all handed on: its end, then its done. */
static void up_close(struct upload *up)
{
	if (!up->writing)
		return;
	fileop_write(up->x, NULL, 0, true);
	up->closing = true;
}

/* ---- uploads: the pump ---- */

/* Body bytes to the file: what the write does not take now is held. */
static void up_write(struct upload *up, const uint8_t *d, size_t len)
{
	size_t n = up->writing ? fileop_write(up->x, d, len, false) : len;

	if (n >= len)
		return;
	if (d >= up->in && d < up->in + sizeof(up->in)) {
		up->hold_off = (uint32_t)(d - up->in + n);
		up->hold_len = (uint32_t)(len - n);
	} else {
		ASSERT(len - n <= sizeof(up->dhold));
		memcpy(up->dhold, d + n, len - n);
		up->dhold_len = (uint32_t)(len - n);
	}
}

/* Held bytes to the file: true when none is left. */
static bool up_drain(struct upload *up)
{
	uint8_t *d = up->dhold_len ? up->dhold : up->in + up->hold_off;
	uint32_t *len = up->dhold_len ? &up->dhold_len : &up->hold_len;
	size_t n;

	if (*len == 0)
		return true;
	n = fileop_write(up->x, d, *len, false);
	ASSERT(n <= *len);
	if (d == up->dhold)
		memmove(up->dhold, up->dhold + n, *len - n);
	else
		up->hold_off += (uint32_t)n;
	*len -= (uint32_t)n;
	return *len == 0;
}

/* One multipart event from the unparsed bytes: 0, or -1 answered. */
static int up_event(struct upload *up)
{
	struct http_slice s;
	size_t used;
	int ev = multipart_feed(&up->mp, up->in + up->raw_off, up->raw_end - up->raw_off, &used,
				&s);

	up->raw_off += (uint32_t)used;
	switch (ev) {
	case MULTIPART_EV_PART:
		return up_part(up);
	case MULTIPART_EV_BODY:
		if (!up->skipping)
			up_write(up, s.data, s.len);
		return 0;
	case MULTIPART_EV_PART_END:
		up_close(up);
		return 0;
	case MULTIPART_EV_NEED_MORE:
	case MULTIPART_EV_DONE:
		return 0;
	default:
		up_fail(up, 400, ev == ERR_LIMIT ? "a part's headers are too long"
				 : "the multipart body is malformed");
		return -1;
	}
}

/* Makes what progress it can, pauses or resumes the body, answers when all is done. */
static void up_progress(struct upload *up)
{
	struct e2b_conn *c;

	while (!up->closing && up_drain(up) && up->raw_off < up->raw_end) {
		if (!up->multipart) {
			up_write(up, up->in + up->raw_off, up->raw_end - up->raw_off);
			up->raw_off = up->raw_end;
		} else if (up_event(up) != 0) {
			return;
		}
	}
	if (!up->closing && !up->hold_len && !up->dhold_len && up->raw_off == up->raw_end) {
		up->raw_off = up->raw_end = 0;
		if (up->body_end && !up->multipart && up->writing) {
			up_close(up);
		} else if (up->body_end) {
			up_complete(up);
			return;
		}
	}
	c = e2b_conn_get(up->conn);
	if (!c)
		return;
	if (up->closing || up->hold_len || up->dhold_len || up->raw_off < up->raw_end) {
		if (!up->paused)
			e2b_body_pause(c);
		up->paused = true;
	} else if (up->paused) {
		e2b_body_resume(c);
		up->paused = false;
	}
}

/* ---- uploads: the fileop's and the connection's callbacks ---- */

static void up_sink_taken(void *ctx)
{
	struct upload *up = up_of(ctx);

	if (up)
		up_progress(up);
}

static void up_sink_done(void *ctx, int err, const char *message)
{
	struct upload *up = up_of(ctx);

	if (!up)
		return;
	up->x = -1;
	up->writing = up->closing = false;
	if (err) {
		up_fail(up, e2b_fop_http_status(err), err == ENOSPC || err == EDQUOT
			? "not enough disk space in the sandbox"
			: message && message[0] ? message : "the file could not be written");
		return;
	}
	up_progress(up);
}

/* Keeps the connection's bytes (compacting the slot first when needed), then goes on. */
static void up_on_body(struct e2b_conn *c, void *ctx, const uint8_t *data, size_t len, bool end)
{
	struct upload *up = up_of(ctx);
	uint32_t lo;

	if (!up)
		return;
	lo = up->hold_len ? up->hold_off : up->raw_off;
	if (len > sizeof(up->in) - up->raw_end && lo > 0) {
		memmove(up->in, up->in + lo, up->raw_end - lo);
		up->hold_off -= up->hold_len ? lo : 0;
		up->raw_off -= lo;
		up->raw_end -= lo;
	}
	if (len > sizeof(up->in) - up->raw_end) {
		log_error("e2b upload refused", "reason=%s bytes=%zu", "body_over_slot", len);
		up_fail(up, 500, "agenticd could not hold the upload's body");
		return;
	}
	if (len)
		memcpy(up->in + up->raw_end, data, len);
	up->raw_end += (uint32_t)len;
	up->body_end = end;
	(void)c;
	up_progress(up);
}

static void up_on_close(struct e2b_conn *c, void *ctx)
{
	struct upload *up = up_of(ctx);

	(void)c;
	if (up)
		up_put(up); /* a file being written stops where it is, as envd's would */
}

static const struct e2b_service_ops up_service = {
	.on_body = up_on_body,
	.on_close = up_on_close,
};

/* ---- uploads: the start ---- */

static struct upload *up_get(struct e2b_conn *c)
{
	for (size_t i = 0; i < ARRAY_LEN(ups); i++) {
		struct upload *up = &ups[i];
		if (up->used)
			continue;
		memset(up, 0, offsetof(struct upload, qpath));
		up->used = true;
		up->gen = ++up_gen;
		up->x = -1;
		up->conn = e2b_ref_of(c);
		up->sb = e2b_sandbox(c);
		buf_init(&up->paths, up->paths_data, sizeof(up->paths_data));
		return up;
	}
	return NULL;
}

/* The body's encoding: 0 (multipart or octet-stream), or -1 answered. */
static int up_encoding(struct e2b_conn *c, struct upload *up)
{
	const char *ce = e2b_header(c, "Content-Encoding");
	const char *ct = e2b_header(c, "Content-Type");

	if (ce && strcasecmp(ce, "identity") != 0) {
		up_fail(up, 400, strcasecmp(ce, "gzip") == 0
			? "gzip uploads are not supported by agentic: send the body uncompressed"
			: "this Content-Encoding is not supported: send the body uncompressed");
		return -1;
	}
	if (ct && strncasecmp(ct, "application/octet-stream", 24) == 0 &&
	    (ct[24] == '\0' || ct[24] == ';' || ct[24] == ' ')) {
		if (!up->qpath[0]) {
			up_fail(up, 400, "an application/octet-stream upload needs the path query "
				"parameter");
			return -1;
		}
		return up_open(up, up->qpath);
	}
	if (multipart_init(&up->mp, ct, up->hdr, sizeof(up->hdr)) != 0) {
		up_fail(up, 400, "the upload must be multipart/form-data with a valid boundary, "
			"or application/octet-stream");
		return -1;
	}
	up->multipart = true;
	return 0;
}

void e2b_files_post(struct e2b_conn *c)
{
	struct upload *up;

	if (e2b_user_check(c) != 0)
		return;
	if (!(up = up_get(c))) {
		e2b_reply_error(c, 503, "too many uploads at once in agenticd; try again");
		return;
	}
	if (query_path(c, false, up->qpath, sizeof(up->qpath)) != 0) {
		up_put(up);
		return;
	}
	if (up_encoding(c, up) != 0)
		return;
	e2b_conn_attach(c, &up_service, up_ctx(up));
}

void e2b_fs_sandbox_gone(struct sandbox *sb)
{
	for (size_t i = 0; i < ARRAY_LEN(ups); i++)
		if (ups[i].used && ups[i].sb == sb)
			up_fail(&ups[i], 502, "The sandbox was not found");
	e2b_fop_sandbox_gone(sb);
}
