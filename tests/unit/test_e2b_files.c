/* test_e2b_files.c: the filesystem.Filesystem service (src/e2b/e2b_fs.c) and GET/POST /files
 * (src/e2b/e2b_files.c) against stand-ins of the connection layer (contract C2) and the
 * fileop client (contract C3), wrapped with the linker's --wrap (Makefile:
 * UNIT_WRAP_test_e2b_files): the exact answers the SDK depends on (EntryInfo JSON, Connect
 * error codes, §6.3's integer-coded JSON, the upload's array), answers too long for a slot
 * streamed as the client takes them, uploads streamed to the file at the write's pace with
 * the body paused meanwhile (never held whole), files written in order, and a sandbox's end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fileop.h"
#include "e2b/e2b_conn.h"
#include "sandbox/sandbox.h"

/* ---- the connection (C2) ---- */

struct e2b_conn {
	const char *query, *ctype, *cenc, *auth;
	const char *body;
	size_t body_len;
	int status;            /* of a whole answer or the stream's head; 0: none yet */
	char rtype[64];
	char *out;             /* the answer's body: whole, or the chunks */
	size_t out_len, out_cap;
	char code[32];         /* a Connect error's code */
	bool streaming, ended, paused, gone;
	size_t room;           /* e2b_stream_room */
	int pauses, resumes;
	const struct e2b_service_ops *ops;
	void *ctx;
	uint32_t gen;
};

static struct e2b_conn conn;
static struct sandbox sb;

static void out_add(const void *d, size_t n)
{
	if (conn.out_len + n + 1 > conn.out_cap) {
		conn.out_cap = (conn.out_len + n + 1) * 2;
		conn.out = realloc(conn.out, conn.out_cap);
		assert_non_null(conn.out);
	}
	memcpy(conn.out + conn.out_len, d, n);
	conn.out_len += n;
	conn.out[conn.out_len] = '\0';
}

static void conn_reset(void)
{
	free(conn.out);
	memset(&conn, 0, sizeof(conn));
	conn.query = "";
	conn.body = "";
	conn.room = SIZE_MAX;
	conn.gen++;
}

const char *__wrap_e2b_query(const struct e2b_conn *c) { return c->query; }
struct sandbox *__wrap_e2b_sandbox(const struct e2b_conn *c) { (void)c; return &sb; }

const char *__wrap_e2b_header(const struct e2b_conn *c, const char *name)
{
	return strcasecmp(name, "content-type") == 0 ? c->ctype
	       : strcasecmp(name, "content-encoding") == 0 ? c->cenc : NULL;
}

const uint8_t *__wrap_e2b_body(const struct e2b_conn *c, size_t *len)
{
	*len = c->body_len ? c->body_len : strlen(c->body);
	return (const uint8_t *)c->body;
}

void __wrap_e2b_reply(struct e2b_conn *c, int status, const char *type, const void *b, size_t n)
{
	assert_int_equal(c->status, 0);
	c->status = status;
	snprintf(c->rtype, sizeof(c->rtype), "%s", type);
	out_add(b, n);
	c->ended = true;
}

void __wrap_e2b_reply_error(struct e2b_conn *c, int status, const char *message)
{
	char json[512];

	snprintf(json, sizeof(json), "{\"code\":%d,\"message\":\"%s\"}", status, message);
	__wrap_e2b_reply(c, status, "application/json", json, strlen(json));
}

void __wrap_e2b_connect_error(struct e2b_conn *c, const char *code, const char *message)
{
	snprintf(c->code, sizeof(c->code), "%s", code);
	__wrap_e2b_reply(c, 999, "application/json", message, strlen(message));
}

int __wrap_e2b_stream_begin(struct e2b_conn *c, int status, const char *type)
{
	assert_int_equal(c->status, 0);
	c->status = status;
	snprintf(c->rtype, sizeof(c->rtype), "%s", type);
	c->streaming = true;
	return 0;
}

size_t __wrap_e2b_stream_room(const struct e2b_conn *c) { return c->room; }

int __wrap_e2b_stream_write(struct e2b_conn *c, const void *d, size_t n)
{
	assert_true(c->streaming && !c->ended);
	if (n > c->room)
		return -EAGAIN;
	out_add(d, n);
	c->room -= n;
	return 0;
}

void __wrap_e2b_stream_end(struct e2b_conn *c)
{
	assert_true(c->streaming && !c->ended);
	c->ended = true;
}

void __wrap_e2b_conn_attach(struct e2b_conn *c, const struct e2b_service_ops *ops, void *ctx)
{
	c->ops = ops;
	c->ctx = ctx;
}

void __wrap_e2b_body_pause(struct e2b_conn *c) { assert_false(c->paused); c->paused = true; c->pauses++; }
void __wrap_e2b_body_resume(struct e2b_conn *c) { assert_true(c->paused); c->paused = false; c->resumes++; }
struct e2b_ref __wrap_e2b_ref_of(const struct e2b_conn *c) { return (struct e2b_ref){ 0, c->gen }; }

struct e2b_conn *__wrap_e2b_conn_get(struct e2b_ref r)
{
	return r.gen == conn.gen && !conn.gone ? &conn : NULL;
}

/* H1's: refuses root as C2 says; "nobody" is unknown */
int __wrap_e2b_user_check(struct e2b_conn *c)
{
	if (c->auth && strcmp(c->auth, "root") == 0) {
		__wrap_e2b_reply_error(c, 403, "agentic runs no command as root in a sandbox");
		return -1;
	}
	return 0;
}

int __wrap_e2b_path_resolve(const char *in, char *out, size_t cap)
{
	int n;

	if (!in[0])
		return -EINVAL;
	if (in[0] == '~')
		n = snprintf(out, cap, "/home/user%s", in + 1);
	else
		n = snprintf(out, cap, "%s%s", in[0] == '/' ? "" : "/home/user/", in);
	return n > 0 && (size_t)n < cap ? 0 : -EINVAL;
}

/* ---- the fileop client (C3) ---- */

struct session {
	struct fileop_req req;
	char path[256], path2[256];
	struct fileop_sink sink;
	char *written;
	size_t wlen;
	bool eof, ended, cancelled, want_taken;
};

static struct session sess[64];
static int nsess;
static int begin_error;       /* fileop_begin fails with it once when set */
static size_t take_most = SIZE_MAX; /* fileop_write takes at most this much a call */
static unsigned write_calls;

int __wrap_fileop_begin(struct sandbox *s, const struct fileop_req *r, const struct fileop_sink *k)
{
	struct session *x;

	assert_ptr_equal(s, &sb);
	if (begin_error) {
		int e = begin_error;
		begin_error = 0;
		return e;
	}
	assert_true(nsess < (int)ARRAY_LEN(sess));
	x = &sess[nsess];
	memset(x, 0, sizeof(*x));
	x->req = *r;
	snprintf(x->path, sizeof(x->path), "%s", r->path);
	snprintf(x->path2, sizeof(x->path2), "%s", r->path2 ? r->path2 : "");
	x->sink = *k;
	return nsess++;
}

size_t __wrap_fileop_write(int32_t xi, const void *d, size_t len, bool eof)
{
	struct session *x = &sess[xi];
	size_t n = len < take_most ? len : take_most;

	assert_true(xi >= 0 && xi < nsess);
	assert_false(x->eof || x->cancelled);
	if (len == 0) {
		x->eof = eof;
		return 0;
	}
	if (++write_calls % 3 == 0)
		n = 0; /* a chunk in flight: nothing taken now */
	x->written = realloc(x->written, x->wlen + n + 1);
	memcpy(x->written + x->wlen, d, n);
	x->wlen += n;
	x->want_taken |= n < len;
	return n;
}

void __wrap_fileop_cancel(int32_t xi)
{
	assert_true(xi >= 0 && xi < nsess);
	sess[xi].cancelled = true;
}

static void sessions_reset(void)
{
	for (int i = 0; i < nsess; i++)
		free(sess[i].written);
	nsess = 0;
	take_most = SIZE_MAX;
	write_calls = 0;
}

static void done(int xi, int err, const char *message)
{
	assert_false(sess[xi].ended);
	sess[xi].ended = true;
	sess[xi].sink.ops->done(sess[xi].sink.ctx, err, message);
}

static void entry(int xi, const char *name, int type, uint32_t mode, const char *target)
{
	char path[256];
	struct file_entry e = {
		.name = name, .path = path, .symlink_target = target, .owner = "user",
		.group = "user", .type = type, .size = 2, .mode = mode,
		.mtime_s = 1796493600, .mtime_ns = 5,
	};

	snprintf(path, sizeof(path), "/home/user/%s", name);
	sess[xi].sink.ops->entry(sess[xi].sink.ctx, &e);
}

static int setup(void **state)
{
	(void)state;
	conn_reset();
	sessions_reset();
	return 0;
}

/* ---- filesystem.Filesystem ---- */

#define A_TXT "{\"name\":\"a.txt\",\"type\":\"FILE_TYPE_FILE\",\"path\":\"/home/user/a.txt\"," \
	      "\"size\":\"2\",\"mode\":420,\"permissions\":\"-rw-r--r--\",\"owner\":\"user\"," \
	      "\"group\":\"user\",\"modifiedTime\":\"2026-12-05T18:00:00.000000005Z\"}"

static void test_fs_stat_answers_entry_info_json(void **state)
{
	(void)state;
	conn.body = "{\"path\":\"a.txt\"}";
	e2b_fs_call(&conn, "Stat");
	assert_int_equal(nsess, 1);
	assert_int_equal(sess[0].req.op, FILEOP_STAT);
	assert_string_equal(sess[0].path, "/home/user/a.txt");
	assert_int_equal(conn.status, 0);
	entry(0, "a.txt", 1, 0100644, NULL);
	done(0, 0, NULL);
	assert_int_equal(conn.status, 200);
	assert_string_equal(conn.rtype, "application/json");
	assert_string_equal(conn.out, "{\"entry\":" A_TXT "}");
}

static void expect_code(const char *method, const char *body, int err, const char *code)
{
	conn_reset();
	sessions_reset();
	conn.body = body;
	e2b_fs_call(&conn, method);
	if (nsess == 1)
		done(0, err, NULL);
	if (strcmp(conn.code, code) != 0)
		fail_msg("%s %s errno %d: code [%s], want [%s]", method, body, err, conn.code, code);
}

static void test_fs_errors_are_connect_codes_the_sdk_maps(void **state)
{
	(void)state;
	expect_code("Stat", "{\"path\":\"/nope\"}", ENOENT, "not_found");
	expect_code("ListDir", "{\"path\":\"/nope\",\"depth\":1}", ENOENT, "not_found");
	expect_code("ListDir", "{\"path\":\"/etc/passwd\"}", ENOTDIR, "invalid_argument");
	expect_code("MakeDir", "{\"path\":\"/home/user/d\"}", EEXIST, "already_exists");
	expect_code("MakeDir", "{\"path\":\"/home/user/a.txt\"}", ENOTDIR, "invalid_argument");
	expect_code("MakeDir", "{\"path\":\"/etc/x\"}", EACCES, "permission_denied");
	expect_code("Move", "{\"source\":\"/nope\",\"destination\":\"b\"}", ENOENT, "not_found");
	expect_code("MakeDir", "{\"path\":\"/etc/x\"}", EROFS, "permission_denied");
	expect_code("Move", "{\"source\":\"/sbin/agentic-init\",\"destination\":\"b\"}", EXDEV,
		    "invalid_argument");
	expect_code("Stat", "{\"path\":\"/x\"}", EIO, "internal");
	expect_code("WatchDir", "{\"path\":\"/x\"}", 0, "unimplemented");
	expect_code("CreateWatcher", "{\"path\":\"/x\"}", 0, "unimplemented");
	expect_code("Stat", "{\"path\":\"\"}", 0, "invalid_argument");
	expect_code("Stat", "{\"path\":7}", 0, "invalid_argument");
	expect_code("Stat", "[1]", 0, "invalid_argument");
	expect_code("Stat", "not json", 0, "invalid_argument");
	expect_code("ListDir", "{\"path\":\"/\",\"depth\":-1}", 0, "invalid_argument");
	expect_code("ListDir", "{\"path\":\"/\",\"depth\":\"x\"}", 0, "invalid_argument");
	assert_int_equal(nsess, 0);
	/* agenticd's own limits: unavailable, which the SDK retries as a timeout */
	conn_reset();
	begin_error = ERR_LIMIT;
	conn.body = "{\"path\":\"/x\"}";
	e2b_fs_call(&conn, "Stat");
	assert_string_equal(conn.code, "unavailable");
}

static void test_fs_remove_missing_is_no_error_and_move_passes_both_paths(void **state)
{
	(void)state;
	conn.body = "{\"path\":\"gone\"}";
	e2b_fs_call(&conn, "Remove");
	assert_int_equal(sess[0].req.op, FILEOP_REMOVE);
	done(0, ENOENT, NULL);
	assert_int_equal(conn.status, 200);
	assert_string_equal(conn.out, "{}");
	conn_reset();
	conn.body = "{\"source\":\"~/a.txt\",\"destination\":\"/tmp/b\"}";
	e2b_fs_call(&conn, "Move");
	assert_int_equal(sess[1].req.op, FILEOP_MOVE);
	assert_string_equal(sess[1].path, "/home/user/a.txt");
	assert_string_equal(sess[1].path2, "/tmp/b");
	entry(1, "a.txt", 1, 0644, NULL);
	done(1, 0, NULL);
	assert_string_equal(conn.out, "{\"entry\":" A_TXT "}");
	conn_reset();
	conn.body = "{\"path\":\"/home/user/d/e\"}";
	e2b_fs_call(&conn, "MakeDir");
	assert_int_equal(sess[2].req.op, FILEOP_MKDIR);
	assert_true(sess[2].req.parents);
	entry(2, "e", 2, 040755, NULL);
	done(2, 0, NULL);
	assert_int_equal(conn.status, 200);
}

static void test_fs_listdir_depth_and_entry_types(void **state)
{
	(void)state;
	conn.body = "{\"path\":\"/home/user\",\"depth\":\"2\"}";
	e2b_fs_call(&conn, "ListDir");
	assert_int_equal(sess[0].req.op, FILEOP_LIST);
	assert_int_equal(sess[0].req.depth, 2);
	entry(0, "d", 2, 040755, NULL);
	entry(0, "l", 3, 0120777, "/proc/1/mem");
	entry(0, "bad\xff", 1, 0644, NULL); /* no UTF-8: left out */
	entry(0, "s", 1, 0104755, NULL);
	done(0, 0, NULL);
	assert_int_equal(conn.status, 200);
	assert_non_null(strstr(conn.out, "\"name\":\"d\",\"type\":\"FILE_TYPE_DIRECTORY\""));
	assert_non_null(strstr(conn.out, "\"mode\":493,\"permissions\":\"drwxr-xr-x\""));
	assert_non_null(strstr(conn.out, "\"type\":\"FILE_TYPE_SYMLINK\""));
	assert_non_null(strstr(conn.out, "\"permissions\":\"Lrwxrwxrwx\""));
	assert_non_null(strstr(conn.out, "\"symlinkTarget\":\"/proc/1/mem\"}"));
	assert_non_null(strstr(conn.out, "\"permissions\":\"urwxr-xr-x\""));
	assert_null(strstr(conn.out, "bad"));
	assert_memory_equal(conn.out, "{\"entries\":[{", 13);
	assert_string_equal(conn.out + conn.out_len - 3, "}]}");
	/* no depth: 1 */
	conn_reset();
	conn.body = "{\"path\":\"/home/user\"}";
	e2b_fs_call(&conn, "ListDir");
	assert_int_equal(sess[1].req.depth, 1);
	done(1, 0, NULL);
	assert_string_equal(conn.out, "{\"entries\":[]}");
}

/* A listing longer than the slot: 200 streamed, as the client takes it. */
static void test_fs_long_listing_streams_at_the_clients_pace(void **state)
{
	char name[32];
	int n = 0;

	(void)state;
	conn.body = "{\"path\":\"/\",\"depth\":3}";
	conn.room = 4000;
	e2b_fs_call(&conn, "ListDir");
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "f%04d", i);
		entry(0, name, 1, 0644, NULL);
		if (i % 10 == 0 && conn.streaming) {
			conn.room = 4000; /* the client read some */
			conn.ops->on_writable(&conn, conn.ctx);
		}
	}
	done(0, 0, NULL);
	assert_true(conn.streaming);
	while (!conn.ended) {
		conn.room = 3000;
		conn.ops->on_writable(&conn, conn.ctx);
	}
	assert_int_equal(conn.status, 200);
	for (const char *p = conn.out; (p = strstr(p, "\"name\":\"f")); p++)
		n++;
	assert_int_equal(n, 2000);
	assert_string_equal(conn.out + conn.out_len - 2, "]}");
}

static void test_fs_root_is_refused_before_anything_runs(void **state)
{
	(void)state;
	conn.auth = "root";
	conn.body = "{\"path\":\"/root\"}";
	e2b_fs_call(&conn, "Stat");
	assert_int_equal(conn.status, 403);
	assert_int_equal(nsess, 0);
}

/* ---- GET /files ---- */

static void test_files_get_whole_empty_missing_directory(void **state)
{
	(void)state;
	conn.query = "path=a.txt&username=user";
	e2b_files_get(&conn);
	assert_int_equal(sess[0].req.op, FILEOP_READ);
	assert_string_equal(sess[0].path, "/home/user/a.txt");
	sess[0].sink.ops->data(sess[0].sink.ctx, "hi", 2);
	done(0, 0, NULL);
	assert_int_equal(conn.status, 200);
	assert_false(conn.streaming); /* a whole answer: Content-Length */
	assert_string_equal(conn.rtype, "application/octet-stream");
	assert_string_equal(conn.out, "hi");

	conn_reset();
	conn.query = "path=%2Fhome%2Fuser%2Fempty+file";
	e2b_files_get(&conn);
	assert_string_equal(sess[1].path, "/home/user/empty file");
	done(1, 0, NULL);
	assert_int_equal(conn.status, 200);
	assert_int_equal(conn.out_len, 0);

	conn_reset();
	conn.query = "path=/nope";
	e2b_files_get(&conn);
	done(2, ENOENT, NULL);
	assert_string_equal(conn.out, "{\"code\":404,\"message\":\"no such file or directory\"}");

	conn_reset();
	conn.query = "path=/home/user";
	e2b_files_get(&conn);
	done(3, EISDIR, NULL);
	assert_int_equal(conn.status, 400);
	assert_string_equal(conn.rtype, "application/json");

	conn_reset();
	conn.query = "username=user";
	e2b_files_get(&conn);
	assert_int_equal(conn.status, 400);
	conn_reset();
	conn.query = "path=%zz";
	e2b_files_get(&conn);
	assert_int_equal(conn.status, 400);
	conn_reset();
	conn.query = "path=a%00b";
	e2b_files_get(&conn);
	assert_int_equal(conn.status, 400);
	assert_int_equal(nsess, 4);
}

static void test_files_get_large_binary_streams_exactly(void **state)
{
	static uint8_t file[1 << 20];
	size_t off = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(file); i++)
		file[i] = (uint8_t)(i * 2654435761u >> 13);
	memset(file + 1000, 0, 5000);
	conn.query = "path=/home/user/big";
	conn.room = 0;
	e2b_files_get(&conn);
	while (off < sizeof(file)) {
		size_t n = sizeof(file) - off < 7000 ? sizeof(file) - off : 7000;
		assert_int_equal(sess[0].sink.ops->data(sess[0].sink.ctx, file + off, n), 0);
		off += n;
		conn.room = 9000;
		if (conn.streaming)
			conn.ops->on_writable(&conn, conn.ctx);
	}
	done(0, 0, NULL);
	while (!conn.ended) {
		conn.room = 5000;
		conn.ops->on_writable(&conn, conn.ctx);
	}
	assert_int_equal(conn.status, 200);
	assert_int_equal(conn.out_len, sizeof(file));
	assert_memory_equal(conn.out, file, sizeof(file));
}

/* A client that reads nothing while the file keeps coming: the read is stopped, not held. */
static void test_files_get_stalled_client_stops_the_read(void **state)
{
	static uint8_t chunk[4096];
	int r = 0;

	(void)state;
	conn.query = "path=/dev/zero";
	conn.room = 0;
	e2b_files_get(&conn);
	for (int i = 0; i < 100 && r == 0; i++)
		r = sess[0].sink.ops->data(sess[0].sink.ctx, chunk, sizeof(chunk));
	assert_int_equal(r, -ENOBUFS);
	assert_true(conn.streaming);
	done(0, EPIPE, NULL);
	assert_true(conn.ended);
	assert_true(conn.out_len < 64 * 1024);
}

/* ---- POST /files ---- */

#define CT "multipart/form-data; boundary=----formdata-undici-0123"
#define B "------formdata-undici-0123"
#define PART(fn) B "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" fn "\"\r\n" \
		 "Content-Type: application/octet-stream\r\n\r\n"

/* Delivers the body in pieces of `piece` bytes, as the connection would: never while the
 * upload has it paused; meanwhile the fileop takes what it was offered and ends the files
 * whose end it was sent. */
static void deliver(const void *body, size_t len, size_t piece)
{
	size_t off = 0;
	int idle = 0;

	e2b_files_post(&conn);
	while (!conn.ended && idle < 4) {
		bool moved = false;
		if (!conn.paused && off < len) {
			size_t n = len - off < piece ? len - off : piece;
			conn.ops->on_body(&conn, conn.ctx, (const uint8_t *)body + off, n,
					  off + n == len);
			off += n;
			moved = true;
		} else if (!conn.paused && len == 0 && off == 0 && conn.ops) {
			conn.ops->on_body(&conn, conn.ctx, NULL, 0, true);
			off = 1;
			moved = true;
		}
		for (int i = 0; i < nsess && !conn.ended; i++) {
			struct session *x = &sess[i];
			if (x->want_taken) {
				x->want_taken = false;
				x->sink.ops->stdin_taken(x->sink.ctx);
				moved = true;
			} else if (x->eof && !x->ended) {
				done(i, 0, NULL);
				moved = true;
			}
		}
		idle = moved ? 0 : idle + 1;
	}
	assert_true(conn.ended);
	assert_false(conn.paused);
}

static void test_files_post_sdk_single_write(void **state)
{
	static const char body[] = PART("/home/user/a.txt") "hi\r\n" B "--\r\n";

	(void)state;
	conn.ctype = CT;
	conn.query = "path=%2Fhome%2Fuser%2Fa.txt";
	deliver(body, sizeof(body) - 1, 13);
	assert_int_equal(conn.status, 200);
	assert_string_equal(conn.out, "[{\"name\":\"a.txt\",\"path\":\"/home/user/a.txt\","
				      "\"type\":\"file\"}]");
	assert_int_equal(nsess, 1);
	assert_int_equal(sess[0].req.op, FILEOP_WRITE);
	assert_true(sess[0].req.parents);
	assert_int_equal(sess[0].wlen, 2);
	assert_memory_equal(sess[0].written, "hi", 2);
}

static void test_files_post_several_parts_in_order_at_every_piece_size(void **state)
{
	static const char body[] = "preamble\r\n" PART("b.txt") "B\r\n--" B "x\r\n"
		PART("/home/user/c.txt") "\r\n" B "\r\nContent-Disposition: form-data; "
		"name=\"other\"\r\n\r\nignored\r\n" PART("~/d") "\r\n" B "--";

	(void)state;
	for (size_t piece = 1; piece < sizeof(body); piece += piece < 20 ? 1 : 37) {
		conn_reset();
		sessions_reset();
		take_most = piece % 5 + 1;
		conn.ctype = CT;
		deliver(body, sizeof(body) - 1, piece);
		assert_int_equal(conn.status, 200);
		assert_string_equal(conn.out,
			"[{\"name\":\"b.txt\",\"path\":\"/home/user/b.txt\",\"type\":\"file\"},"
			"{\"name\":\"c.txt\",\"path\":\"/home/user/c.txt\",\"type\":\"file\"},"
			"{\"name\":\"d\",\"path\":\"/home/user/d\",\"type\":\"file\"}]");
		assert_int_equal(nsess, 3);
		assert_int_equal(sess[0].wlen, 6 + strlen(B));
		assert_memory_equal(sess[0].written, "B\r\n--" B "x", sess[0].wlen);
		assert_int_equal(sess[1].wlen, 0);
		assert_int_equal(sess[2].wlen, 0);
		for (int i = 0; i < 3; i++)
			assert_true(sess[i].eof && sess[i].ended);
	}
}

static void test_files_post_large_binary_never_held_whole(void **state)
{
	static char body[(1 << 20) + 512];
	size_t n = 0, head;

	(void)state;
	n += (size_t)snprintf(body, sizeof(body), PART("big.bin"));
	head = n;
	for (size_t i = 0; i < (1 << 20); i++)
		body[n++] = (char)(i * 2654435761u >> 11);
	memset(body + head + 4096, 0, 4096);
	memcpy(body + head + 9000, "\r\n" B, sizeof(B) + 1); /* less its last byte... */
	body[head + 9000 + sizeof(B) - 1] = 'X';             /* ...then a different one */
	n += (size_t)snprintf(body + n, sizeof(body) - n, "\r\n" B "--\r\n");
	conn.ctype = CT;
	take_most = 8192;
	deliver(body, n, LIMIT_E2B_READ_BYTES); /* what one read of the connection brings */
	assert_int_equal(conn.status, 200);
	assert_int_equal(sess[0].wlen, 1 << 20);
	assert_memory_equal(sess[0].written, body + head, 1 << 20);
	assert_true(conn.pauses > 0 && conn.pauses == conn.resumes);
}

static void test_files_post_octet_stream_and_its_refusals(void **state)
{
	static const char data[] = "raw\0bytes";

	(void)state;
	conn.ctype = "application/octet-stream";
	conn.query = "path=raw.bin";
	take_most = 3;
	deliver(data, sizeof(data), 4);
	assert_string_equal(conn.out, "[{\"name\":\"raw.bin\",\"path\":\"/home/user/raw.bin\","
				      "\"type\":\"file\"}]");
	assert_int_equal(sess[0].wlen, sizeof(data));
	assert_memory_equal(sess[0].written, data, sizeof(data));
	/* an empty body is an empty file */
	conn_reset();
	conn.ctype = "application/octet-stream";
	conn.query = "path=empty";
	deliver("", 0, 1);
	assert_int_equal(conn.status, 200);
	assert_int_equal(sess[1].wlen, 0);
	assert_true(sess[1].eof);
	/* no path */
	conn_reset();
	conn.ctype = "application/octet-stream";
	e2b_files_post(&conn);
	assert_int_equal(conn.status, 400);
	/* gzip */
	conn_reset();
	conn.ctype = "application/octet-stream";
	conn.cenc = "gzip";
	conn.query = "path=x";
	e2b_files_post(&conn);
	assert_int_equal(conn.status, 400);
	assert_non_null(strstr(conn.out, "gzip uploads are not supported"));
	/* neither multipart nor octet-stream */
	conn_reset();
	conn.ctype = "text/plain";
	conn.query = "path=x";
	e2b_files_post(&conn);
	assert_int_equal(conn.status, 400);
	assert_int_equal(nsess, 2);
}

static void test_files_post_refusals_and_a_full_disk(void **state)
{
	static const char twice[] = PART("a") "1\r\n" PART("/home/user/a") "2\r\n" B "--";
	static const char noname[] = B "\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n"
		"x\r\n" B "--";
	static const char unclosed[] = PART("a") "1\r\n";
	static const char bad[] = PART("a") "1\r\n" B "junk";

	(void)state;
	conn.ctype = CT;
	deliver(twice, sizeof(twice) - 1, 5);
	assert_int_equal(conn.status, 400);
	assert_non_null(strstr(conn.out, "same path"));
	conn_reset();
	conn.ctype = CT;
	deliver(noname, sizeof(noname) - 1, 64);
	assert_int_equal(conn.status, 400);
	conn_reset();
	conn.ctype = CT;
	deliver(unclosed, sizeof(unclosed) - 1, 64);
	assert_int_equal(conn.status, 400);
	conn_reset();
	conn.ctype = CT;
	deliver(bad, sizeof(bad) - 1, 64);
	assert_int_equal(conn.status, 400);
	/* ENOSPC from the write: 507, the SDK's NotEnoughSpaceError */
	conn_reset();
	sessions_reset();
	conn.ctype = CT;
	e2b_files_post(&conn);
	conn.ops->on_body(&conn, conn.ctx, (const uint8_t *)PART("f") "data", strlen(PART("f")) + 4,
			  false);
	done(0, ENOSPC, NULL);
	assert_int_equal(conn.status, 507);
	assert_string_equal(conn.rtype, "application/json");
	assert_false(conn.paused);
	conn.ops->on_body(&conn, conn.ctx, (const uint8_t *)"late", 4, true); /* ignored */
}

static void test_files_sandbox_gone_ends_uploads_and_calls(void **state)
{
	(void)state;
	conn.ctype = CT;
	e2b_files_post(&conn);
	conn.ops->on_body(&conn, conn.ctx, (const uint8_t *)PART("f") "da",
			  strlen(PART("f")) + 2, false);
	e2b_fs_sandbox_gone(&sb);
	assert_int_equal(conn.status, 502);
	assert_true(sess[0].cancelled);
	/* a late done of the cancelled write finds nothing */
	done(0, 0, NULL);
	conn_reset();
	conn.body = "{\"path\":\"/\"}";
	e2b_fs_call(&conn, "ListDir");
	e2b_fs_sandbox_gone(&sb);
	assert_string_equal(conn.code, "unavailable");
	assert_true(sess[1].cancelled);
}

/* The client leaves: the fileop is cancelled and no callback reaches the freed slot. */
static void test_files_client_gone_cancels(void **state)
{
	(void)state;
	conn.query = "path=/home/user/a";
	e2b_files_get(&conn);
	conn.ops->on_close(&conn, conn.ctx);
	assert_true(sess[0].cancelled);
	conn.gone = true;
	assert_int_equal(sess[0].sink.ops->data(sess[0].sink.ctx, "x", 1), -EPIPE);
	done(0, 0, NULL);
	assert_int_equal(conn.status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_fs_stat_answers_entry_info_json, setup),
		cmocka_unit_test_setup(test_fs_errors_are_connect_codes_the_sdk_maps, setup),
		cmocka_unit_test_setup(test_fs_remove_missing_is_no_error_and_move_passes_both_paths,
				       setup),
		cmocka_unit_test_setup(test_fs_listdir_depth_and_entry_types, setup),
		cmocka_unit_test_setup(test_fs_long_listing_streams_at_the_clients_pace, setup),
		cmocka_unit_test_setup(test_fs_root_is_refused_before_anything_runs, setup),
		cmocka_unit_test_setup(test_files_get_whole_empty_missing_directory, setup),
		cmocka_unit_test_setup(test_files_get_large_binary_streams_exactly, setup),
		cmocka_unit_test_setup(test_files_get_stalled_client_stops_the_read, setup),
		cmocka_unit_test_setup(test_files_post_sdk_single_write, setup),
		cmocka_unit_test_setup(test_files_post_several_parts_in_order_at_every_piece_size,
				       setup),
		cmocka_unit_test_setup(test_files_post_large_binary_never_held_whole, setup),
		cmocka_unit_test_setup(test_files_post_octet_stream_and_its_refusals, setup),
		cmocka_unit_test_setup(test_files_post_refusals_and_a_full_disk, setup),
		cmocka_unit_test_setup(test_files_sandbox_gone_ends_uploads_and_calls, setup),
		cmocka_unit_test_setup(test_files_client_gone_cancels, setup),
	};
	int r = cmocka_run_group_tests(tests, NULL, NULL);

	conn_reset();
	sessions_reset();
	return r;
}
