/* fileop.c: file operations in a sandbox (fileop.h) on top of the exec engine: the file
 * applet runs as an exec session marked quiet (its bytes stay out of the transcript; the
 * start line and the result are in it) with this file's sink, and its answer is parsed here.
 * The sandbox is hostile: a line is bounded (LIMIT_FILEOP_LINE_BYTES), a malformed one ends
 * the operation with EIO, no size it states is trusted for memory, and only exit codes
 * 1..125 are taken as the applet's errno. May call base and exec (agent/exec.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/exec.h"
#include "agent/fileop.h"
#include "sandbox/sandbox.h"

struct fileop {
	bool used;
	uint32_t gen;              /* the handle is gen * LIMIT_FILEOPS + slot: a stale one
				    * (its operation over, the slot reused) matches nothing */
	bool stopped;              /* done was called early (a bad line, data refused) */
	int32_t exec;
	uint32_t entries;          /* lines taken: one for STAT, MKDIR, MOVE, WRITE */
	enum fileop_kind op;
	struct fileop_sink sink;
	uint32_t line_len, msg_len;
	char msg[LIMIT_FILEOP_MESSAGE_BYTES];
	char line[LIMIT_FILEOP_LINE_BYTES + 1];
};

static struct fileop fops[LIMIT_FILEOPS];
static uint32_t fop_gen;

static const char *const op_words[] = {
	[FILEOP_STAT] = "stat", [FILEOP_LIST] = "list", [FILEOP_MKDIR] = "mkdir",
	[FILEOP_MOVE] = "move", [FILEOP_REMOVE] = "remove", [FILEOP_READ] = "read",
	[FILEOP_WRITE] = "write",
};

size_t fileop_table_bytes(void)
{
	return sizeof(fops);
}

/* ---- the answer line: {"path":S,"type":S,"size":N,...,"target":S} ---- */

struct lex {
	char *p, *end;
};

/* A string at l->p, unescaped in place (the output never passes the input); NULL when
 * malformed. Escapes: the applet's (\" \\ \u00XX, XX 01..ff as that byte) and JSON's short
 * ones; raw bytes below 0x20 are refused, bytes from 0x80 kept as they are. */
static char *lex_str(struct lex *l)
{
	static const char shorts[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
	char *start, *o;

	if (l->p >= l->end || *l->p != '"')
		return NULL;
	start = o = ++l->p;
	while (l->p < l->end && *l->p != '"') {
		unsigned char c = (unsigned char)*l->p++;
		const char *s;
		int hi, lo;

		if (c < 0x20)
			return NULL;
		if (c != '\\') {
			*o++ = (char)c;
			continue;
		}
		if (l->p >= l->end)
			return NULL;
		c = (unsigned char)*l->p++;
		if (c == 'u') {
			if (l->end - l->p < 4 || l->p[0] != '0' || l->p[1] != '0' ||
			    (hi = hex_value(l->p[2])) < 0 || (lo = hex_value(l->p[3])) < 0 ||
			    (hi | lo) == 0)
				return NULL;
			*o++ = (char)(hi << 4 | lo);
			l->p += 4;
			continue;
		}
		for (s = shorts; *s && *s != (char)c; s += 2)
			;
		if (!*s)
			return NULL;
		*o++ = s[1];
	}
	if (l->p >= l->end)
		return NULL;
	l->p++;
	*o = '\0';
	return start;
}

/* A decimal integer (a '-' only where neg is allowed) within 63 bits; -EINVAL otherwise. */
static int lex_num(struct lex *l, bool neg, int64_t *out)
{
	bool minus = neg && l->p < l->end && *l->p == '-';
	uint64_t v = 0;
	char *s;

	l->p += minus;
	for (s = l->p; l->p < l->end && *l->p >= '0' && *l->p <= '9'; l->p++) {
		if (v > (UINT64_C(1) << 62) / 5)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*l->p - '0');
	}
	if (l->p == s || l->p - s > 19 || v > INT64_MAX)
		return -EINVAL;
	*out = minus ? -(int64_t)v : (int64_t)v;
	return 0;
}

static const char *owner_name(int64_t id, char *buf)
{
	if (id == 0)
		return "root";
	if (id == 10001)
		return "user";
	snprintf(buf, 12, "%u", (unsigned)id); /* ids are checked to fit 32 bits */
	return buf;
}

static int type_of(const char *w)
{
	return !strcmp(w, "file") ? FILE_TYPE_FILE : !strcmp(w, "dir") ? FILE_TYPE_DIR
	     : !strcmp(w, "symlink") ? FILE_TYPE_SYMLINK : FILE_TYPE_OTHER;
}

/* One member's value into e (ids: uid, gid). -EINVAL for a bad or out-of-range value. */
static int member(struct lex *l, const char *key, struct file_entry *e, int64_t ids[2])
{
	static const char *const nums[] = { "size", "mode", "uid", "gid", "mtime", "mtime_ns" };
	int64_t v;
	char *s;

	if (!strcmp(key, "path") || !strcmp(key, "type") || !strcmp(key, "target")) {
		if (!(s = lex_str(l)))
			return -EINVAL;
		if (key[0] == 'p')
			e->path = s;
		else if (key[1] == 'y')
			e->type = type_of(s);
		else
			e->symlink_target = s;
		return 0;
	}
	for (size_t i = 0; i < ARRAY_LEN(nums); i++) {
		if (strcmp(key, nums[i]) != 0)
			continue;
		if (lex_num(l, i == 4, &v) != 0)
			return -EINVAL;
		if ((i == 1 && v > 07777) || ((i == 2 || i == 3) && v > UINT32_MAX) ||
		    (i == 5 && v > 999999999))
			return -EINVAL;
		if (i == 0)
			e->size = (uint64_t)v;
		else if (i == 1)
			e->mode = (uint32_t)v;
		else if (i <= 3)
			ids[i - 2] = v;
		else if (i == 4)
			e->mtime_s = v;
		else
			e->mtime_ns = (int32_t)v;
		return 0;
	}
	return -EINVAL;
}

int fileop_line_parse(char *line, size_t len, struct file_entry *e, char *idbuf)
{
	struct lex l = { line, line + len };
	int64_t ids[2] = { -1, -1 };
	const char *slash;

	memset(e, 0, sizeof(*e));
	if (memchr(line, '\0', len) || l.p >= l.end || *l.p++ != '{')
		return -EINVAL;
	for (;;) {
		char *key = lex_str(&l);

		if (!key || l.p >= l.end || *l.p++ != ':' || member(&l, key, e, ids) != 0 ||
		    l.p >= l.end)
			return -EINVAL;
		if (*l.p == '}')
			break;
		if (*l.p++ != ',')
			return -EINVAL;
	}
	if (++l.p != l.end || !e->path || !e->path[0] || ids[0] < 0 || ids[1] < 0 ||
	    (e->symlink_target && e->type != FILE_TYPE_SYMLINK))
		return -EINVAL;
	slash = strrchr(e->path, '/');
	e->name = slash && slash[1] ? slash + 1 : e->path;
	e->owner = owner_name(ids[0], idbuf);
	e->group = owner_name(ids[1], idbuf + 12);
	return 0;
}

/* ---- the exec sink ---- */

static void release(struct fileop *f)
{
	f->used = false;
}

/* The operation ends early (done now): the session is detached and runs on, unheard. */
static void stop(struct fileop *f, int err, const char *message)
{
	f->stopped = true;
	f->sink.ops->done(f->sink.ctx, err, message);
}

/* The lines in data: each parsed and handed on. 0, or -EIO once one is malformed. */
static int take_lines(struct fileop *f, const char *data, size_t len)
{
	char ids[24];
	struct file_entry e;

	while (len) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;

		if (f->line_len + n > LIMIT_FILEOP_LINE_BYTES)
			return -EIO;
		memcpy(f->line + f->line_len, data, n);
		f->line_len += (uint32_t)n;
		data += n;
		len -= n;
		if (!nl)
			break;
		data++;
		len--;
		if ((f->op != FILEOP_LIST && f->entries) ||
		    fileop_line_parse(f->line, f->line_len, &e, ids) != 0)
			return -EIO;
		f->entries++;
		f->line_len = 0;
		if (f->sink.ops->entry)
			f->sink.ops->entry(f->sink.ctx, &e);
	}
	return 0;
}

static int fop_output(void *ctx, int stream, const void *data, size_t len)
{
	struct fileop *f = ctx;
	int r;

	if (stream == 1) {
		size_t take = sizeof(f->msg) - 1 - f->msg_len;

		take = len < take ? len : take;
		memcpy(f->msg + f->msg_len, data, take);
		f->msg_len += (uint32_t)take;
		return 0;
	}
	if (f->op == FILEOP_READ) {
		r = f->sink.ops->data(f->sink.ctx, data, len);
		if (r != 0)
			stop(f, -r > 0 && -r < 4096 ? -r : EIO, "the client stopped taking the data");
	} else if ((r = take_lines(f, data, len)) != 0) {
		stop(f, EIO, "the sandbox's file applet gave a malformed answer");
	}
	if (f->stopped)
		release(f);
	return r;
}

/* The applet's stderr line as a message: "agentic-file: OP: " cut, printable ASCII only. */
static const char *message_of(struct fileop *f, const char *fallback)
{
	char *m = f->msg, *colon;

	f->msg[f->msg_len] = '\0';
	if (!strncmp(m, "agentic-file: ", 14) && (colon = strstr(m + 14, ": ")) != NULL)
		m = colon + 2;
	for (char *p = m; *p; p++)
		if (*p == '\n')
			*p = '\0';
		else if (*p < 0x20 || *p > 0x7e)
			*p = '?';
	return *m ? m : fallback;
}

static void fop_done(void *ctx, int32_t exit_code, int64_t duration_ms, const char *error,
		     const char *transcript_error)
{
	static char msg[LIMIT_FILEOP_MESSAGE_BYTES];
	struct fileop *f = ctx;
	struct fileop_sink s = f->sink;
	int err = 0;

	(void)duration_ms;
	(void)transcript_error;
	if (exit_code == 0 && (f->line_len || (!f->entries && f->op != FILEOP_LIST &&
						f->op != FILEOP_REMOVE && f->op != FILEOP_READ))) {
		err = EIO;
		snprintf(msg, sizeof(msg), "the sandbox's file applet gave a malformed answer");
	} else if (exit_code > 0 && exit_code <= 125) {
		err = exit_code;
		snprintf(msg, sizeof(msg), "%s", message_of(f, strerror(err)));
	} else if (exit_code != 0) {
		err = EIO;
		snprintf(msg, sizeof(msg), "the file operation did not finish%s%s",
			 error && *error ? ": " : "", error && *error ? error : "");
		for (char *p = msg; *p; p++)
			if (*p < 0x20 || *p > 0x7e)
				*p = '?';
	}
	release(f);
	s.ops->done(s.ctx, err, err ? msg : NULL);
}

static void fop_stdin_taken(void *ctx)
{
	struct fileop *f = ctx;

	if (f->sink.ops->stdin_taken)
		f->sink.ops->stdin_taken(f->sink.ctx);
}

static const struct exec_sink_ops fop_ops = {
	.client = "fileop",
	.output = fop_output,
	.done = fop_done,
	.stdin_taken = NULL,
};

static const struct exec_sink_ops fop_write_ops = {
	.client = "fileop",
	.output = fop_output,
	.done = fop_done,
	.stdin_taken = fop_stdin_taken,
};

/* ---- begin, write, cancel ---- */

/* 1..LIMIT_PATH_BYTES-1 bytes of UTF-8 (the transcript's start line is JSON). */
static bool path_ok(const char *p)
{
	size_t n = p ? strlen(p) : 0;

	if (n == 0 || n >= LIMIT_PATH_BYTES)
		return false;
	for (const unsigned char *s = (const unsigned char *)p; *s; ) {
		int k = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 && *s >= 0xc2 ? 1
		      : (*s & 0xf0) == 0xe0 ? 2 : (*s & 0xf8) == 0xf0 && *s <= 0xf4 ? 3 : -1;

		if (k < 0)
			return false;
		for (s++; k > 0; k--, s++)
			if ((*s & 0xc0) != 0x80)
				return false;
	}
	return true;
}

/* The applet's argv into req: its program, "file", the op, its arguments. */
static int build_argv(const struct sandbox *sb, const struct fileop_req *r, struct exec_req *req,
		      char *depth)
{
	uint32_t n = 0;

	if (!path_ok(r->path) || (r->op == FILEOP_MOVE && !path_ok(r->path2)) ||
	    (r->op == FILEOP_LIST && (r->depth == 0 || r->depth > LIMIT_FILEOP_DEPTH)) ||
	    (unsigned)r->op >= ARRAY_LEN(op_words))
		return -EINVAL;
	req->argv[n++] = sb->vm ? "/init" : "/sbin/agentic-init";
	req->argv[n++] = "file";
	req->argv[n++] = op_words[r->op];
	if (r->parents && (r->op == FILEOP_MKDIR || r->op == FILEOP_WRITE))
		req->argv[n++] = "-p";
	req->argv[n++] = r->path;
	if (r->op == FILEOP_MOVE)
		req->argv[n++] = r->path2;
	if (r->op == FILEOP_LIST) {
		snprintf(depth, 12, "%u", (unsigned)r->depth);
		req->argv[n++] = depth;
	}
	req->argc = n;
	return 0;
}

int fileop_begin(struct sandbox *sb, const struct fileop_req *r, const struct fileop_sink *s)
{
	struct exec_req req = { 0 };
	struct exec_sink es;
	struct fileop *f = NULL;
	char depth[12];
	int x;

	if (!s || !s->ops || !s->ops->done || build_argv(sb, r, &req, depth) != 0 ||
	    (r->op == FILEOP_READ && !s->ops->data))
		return -EINVAL;
	for (uint32_t i = 0; i < LIMIT_FILEOPS && !f; i++)
		if (!fops[i].used)
			f = &fops[i];
	if (!f)
		return ERR_LIMIT;
	req.quiet = true;
	req.timeout_seconds = r->op == FILEOP_READ || r->op == FILEOP_WRITE
			    ? LIMIT_FILEOP_TRANSFER_S : LIMIT_FILEOP_META_S;
	memset(f, 0, offsetof(struct fileop, msg));
	f->gen = ++fop_gen % (INT32_MAX / LIMIT_FILEOPS);
	f->op = r->op;
	f->sink = *s;
	es = (struct exec_sink){ r->op == FILEOP_WRITE ? &fop_write_ops : &fop_ops, f };
	x = exec_begin(sb, &req, &es);
	if (x < 0)
		return x;
	f->used = true;
	f->exec = x;
	return (int)(f->gen * LIMIT_FILEOPS + (uint32_t)(f - fops));
}

/* The running operation a handle names, or NULL (over: its done came, or it was cancelled). */
static struct fileop *by_handle(int32_t x)
{
	struct fileop *f;

	ASSERT(x >= 0);
	f = &fops[(uint32_t)x % LIMIT_FILEOPS];
	return f->used && f->gen == (uint32_t)x / LIMIT_FILEOPS ? f : NULL;
}

size_t fileop_write(int32_t x, const void *data, size_t len, bool eof)
{
	struct fileop *f = by_handle(x);

	if (!f || f->op != FILEOP_WRITE)
		return len;
	return exec_stdin(f->exec, data, len, eof);
}

void fileop_cancel(int32_t x)
{
	struct fileop *f = by_handle(x);

	if (!f)
		return;
	exec_signal(f->exec, SIGKILL); /* a read of a huge file, a write half done: stop it */
	exec_detach(f->exec);
	release(f);
}
