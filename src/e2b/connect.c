/* connect.c: Connect envelopes and the proto3-JSON messages of envd's process.Process
 * (connect.h). Pure: no I/O, no state; uses base, json and grpc's base64. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/be.h"
#include "e2b/connect.h"
#include "grpc/grpc.h"
#include "json/json.h"

#define NTOK (4 * (CONNECT_MAX_ARGS + 2 * CONNECT_MAX_ENVS) + 64)

/* one parse at a time: the loop has no threads */
static struct json_token tok[NTOK];

int connect_envelope_decode(const uint8_t *body, size_t len, size_t max, const uint8_t **msg,
			    size_t *msg_len)
{
	uint32_t n;

	if (len < CONNECT_HDR || (body[0] & ~(CONNECT_COMPRESSED | CONNECT_END)))
		return ERR_PARSE;
	if (body[0] & CONNECT_COMPRESSED)
		return -ENOTSUP;
	if (body[0] != 0)
		return ERR_PARSE;
	n = be32_get(body + 1);
	if (n > max)
		return ERR_LIMIT;
	if ((size_t)n != len - CONNECT_HDR)
		return ERR_PARSE;
	*msg = body + CONNECT_HDR;
	*msg_len = n;
	return 0;
}

/* ---- reading ---- */

struct rd {
	struct json_doc d;
	char *text;
	size_t used, cap;
	const char **why;
	int err;
};

static int fail(struct rd *r, int err, const char *why)
{
	if (!r->err) {
		r->err = err;
		*r->why = why;
	}
	return -1;
}

/* The value of key in object obj, or -1 when absent or null. */
static int member(const struct rd *r, int obj, const char *key)
{
	int v = obj >= 0 && r->d.tok[obj].type == JSON_OBJECT ? json_obj_get(&r->d, obj, key) : -1;

	return v >= 0 && r->d.tok[v].type == JSON_NULL ? -1 : v;
}

static int object(struct rd *r, int obj, const char *key, const char *why)
{
	int v = member(r, obj, key);

	if (v >= 0 && r->d.tok[v].type != JSON_OBJECT)
		return fail(r, ERR_PARSE, why);
	return v;
}

/* A string token copied into the text storage; NULL (and r->err) when it does not fit. */
static const char *take(struct rd *r, int v, const char *why)
{
	int n;

	if (r->d.tok[v].type != JSON_STRING) {
		fail(r, ERR_PARSE, why);
		return NULL;
	}
	n = json_str(&r->d, v, r->text + r->used, r->cap - r->used);
	if (n < 0) {
		fail(r, n == ERR_LIMIT ? ERR_LIMIT : ERR_PARSE, why);
		return NULL;
	}
	r->used += (size_t)n + 1;
	return r->text + r->used - (size_t)n - 1;
}

/* A uint32 given as a number or a decimal string (proto3 JSON). */
static int number(struct rd *r, int v, uint32_t max, uint32_t *out, const char *why)
{
	char s[24];
	uint64_t u;
	int64_t i;

	if (r->d.tok[v].type == JSON_NUMBER && json_int(&r->d, v, &i) == 0 && i >= 0 &&
	    (uint64_t)i <= max) {
		*out = (uint32_t)i;
		return 0;
	}
	if (r->d.tok[v].type == JSON_STRING && json_str(&r->d, v, s, sizeof(s)) > 0 &&
	    parse_u64(s, max, &u) == 0) {
		*out = (uint32_t)u;
		return 0;
	}
	return fail(r, ERR_PARSE, why);
}

static void tag_of(struct rd *r, int obj, char *tag)
{
	int v = member(r, obj, "tag");

	tag[0] = '\0';
	if (v < 0)
		return;
	if (r->d.tok[v].type != JSON_STRING)
		fail(r, ERR_PARSE, "tag is a string");
	else if (json_str(&r->d, v, tag, CONNECT_TAG_BYTES) < 0)
		fail(r, ERR_LIMIT, "tag is too long");
}

static int doc_open(struct rd *r, const char *json, size_t len)
{
	r->err = 0;
	if (json_parse(&r->d, json, len, tok, NTOK) != 0 || tok[0].type != JSON_OBJECT)
		return fail(r, ERR_PARSE, "the message is not a JSON object");
	return 0;
}

static void start_args(struct rd *r, int a, struct connect_start *s)
{
	if (a < 0)
		return;
	if (r->d.tok[a].type != JSON_ARRAY) {
		fail(r, ERR_PARSE, "process.args is an array of strings");
		return;
	}
	if (r->d.tok[a].children > CONNECT_MAX_ARGS) {
		fail(r, ERR_LIMIT, "process.args has too many strings");
		return;
	}
	for (int i = json_first(&r->d, a); i >= 0 && !r->err; i = json_next(&r->d, a, i))
		s->args[s->nargs++] = take(r, i, "process.args is an array of strings");
}

static void start_envs(struct rd *r, int e, struct connect_start *s)
{
	if (e < 0)
		return;
	if (r->d.tok[e].type != JSON_OBJECT) {
		fail(r, ERR_PARSE, "process.envs is an object of strings");
		return;
	}
	if (r->d.tok[e].children > CONNECT_MAX_ENVS) {
		fail(r, ERR_LIMIT, "process.envs has too many variables");
		return;
	}
	for (int k = json_first(&r->d, e); k >= 0 && !r->err; k = json_next(&r->d, e, k + 1)) {
		s->env_key[s->nenv] = take(r, k, "process.envs is an object of strings");
		if (!r->err)
			s->env_val[s->nenv++] = take(r, k + 1, "process.envs is an object of strings");
	}
}

/* pty{size{cols,rows}}: the terminal's size (0: not given) */
static void pty_size(struct rd *r, int pty, uint16_t *rows, uint16_t *cols)
{
	int size = object(r, pty, "size", "pty.size is an object");
	int c = member(r, size, "cols"), w = member(r, size, "rows");
	uint32_t v;

	if (c >= 0 && number(r, c, UINT16_MAX, &v, "pty.size.cols is a number") == 0)
		*cols = (uint16_t)v;
	if (w >= 0 && number(r, w, UINT16_MAX, &v, "pty.size.rows is a number") == 0)
		*rows = (uint16_t)v;
}

int connect_start_parse(const char *json, size_t len, struct connect_start *s, char *text,
			size_t cap, const char **why)
{
	struct rd r = { .text = text, .cap = cap, .why = why };
	int p, v, pty;

	memset(s, 0, sizeof(*s));
	s->with_stdin = true;
	*why = NULL;
	if (doc_open(&r, json, len) != 0)
		return r.err;
	p = object(&r, 0, "process", "process is an object");
	if ((v = member(&r, p, "cmd")) < 0)
		fail(&r, ERR_PARSE, "process.cmd is missing");
	else
		s->cmd = take(&r, v, "process.cmd is a string");
	start_args(&r, member(&r, p, "args"), s);
	start_envs(&r, member(&r, p, "envs"), s);
	if (!r.err && (v = member(&r, p, "cwd")) >= 0)
		s->cwd = take(&r, v, "process.cwd is a string");
	if ((v = member(&r, 0, "stdin")) >= 0 && json_bool(&r.d, v, &s->with_stdin) != 0)
		fail(&r, ERR_PARSE, "stdin is a boolean");
	if ((pty = object(&r, 0, "pty", "pty is an object")) >= 0) {
		s->pty = true;
		pty_size(&r, pty, &s->rows, &s->cols);
	}
	tag_of(&r, 0, s->tag);
	if (!r.err && (!s->cmd || !s->cmd[0]))
		fail(&r, ERR_PARSE, "process.cmd is empty");
	return r.err;
}

static int signal_of(struct rd *r, int v)
{
	static const struct { const char *name; int sig; } names[] = {
		{ "SIGNAL_SIGKILL", CONNECT_SIG_KILL }, { "SIGNAL_SIGTERM", CONNECT_SIG_TERM },
		{ "SIGNAL_UNSPECIFIED", CONNECT_SIG_NONE },
	};
	uint32_t n;

	for (size_t i = 0; i < ARRAY_LEN(names); i++)
		if (json_str_eq(&r->d, v, names[i].name))
			return names[i].sig;
	if (number(r, v, 64, &n, "signal is SIGNAL_SIGKILL or SIGNAL_SIGTERM") != 0)
		return CONNECT_SIG_NONE;
	return (int)n;
}

/* input{stdin|pty}: base64 bytes into data */
static void input_of(struct rd *r, int in, struct connect_proc *p, uint8_t *data, size_t cap)
{
	int v = member(r, in, "stdin");
	long n;

	if (v < 0 && (v = member(r, in, "pty")) >= 0)
		p->input_pty = true;
	p->has_input = true;
	if (v < 0)
		return;
	if (r->d.tok[v].type != JSON_STRING) {
		fail(r, ERR_PARSE, "input is base64 bytes");
		return;
	}
	n = grpc_base64_decode(r->d.src + r->d.tok[v].start, r->d.tok[v].end - r->d.tok[v].start,
			       data, cap);
	if (n < 0)
		fail(r, n == ERR_LIMIT ? ERR_LIMIT : ERR_PARSE,
		     n == ERR_LIMIT ? "input is too large" : "input is not base64");
	else
		p->input_len = (size_t)n;
}

int connect_proc_parse(const char *json, size_t len, struct connect_proc *p, uint8_t *data,
		       size_t cap, const char **why)
{
	struct rd r = { .why = why };
	int sel, v, in, pty;

	memset(p, 0, sizeof(*p));
	*why = NULL;
	if (doc_open(&r, json, len) != 0)
		return r.err;
	sel = object(&r, 0, "process", "process is an object");
	if ((v = member(&r, sel, "pid")) >= 0 &&
	    number(&r, v, UINT32_MAX, &p->pid, "process.pid is a number") == 0)
		p->has_pid = true;
	tag_of(&r, sel, p->tag);
	if (!r.err && !p->has_pid && !p->tag[0])
		fail(&r, ERR_PARSE, "process names no pid or tag");
	if ((v = member(&r, 0, "signal")) >= 0)
		p->signal = signal_of(&r, v);
	if ((in = object(&r, 0, "input", "input is an object")) >= 0)
		input_of(&r, in, p, data, cap);
	if ((pty = object(&r, 0, "pty", "pty is an object")) >= 0) {
		p->has_size = true;
		pty_size(&r, pty, &p->rows, &p->cols);
	}
	return r.err;
}

/* ---- writing ---- */

/* The envelope started at mark (its header reserved) closed: its length filled in. */
static int envelope_close(struct buf *out, size_t mark, uint8_t flags, int err)
{
	if (err) {
		out->len = mark;
		return ERR_LIMIT;
	}
	out->data[mark] = flags;
	be32_put(out->data + mark + 1, (uint32_t)(out->len - mark - CONNECT_HDR));
	return 0;
}

static int envelope_literal(struct buf *out, uint8_t flags, const char *json)
{
	size_t mark = out->len;
	int err = buf_append(out, "\0\0\0\0", CONNECT_HDR);

	if (!err)
		err = buf_append(out, json, strlen(json));
	return envelope_close(out, mark, flags, err);
}

int connect_event_start(struct buf *out, uint32_t pid)
{
	char json[64];

	snprintf(json, sizeof(json), "{\"event\":{\"start\":{\"pid\":%u}}}", (unsigned)pid);
	return envelope_literal(out, 0, json);
}

int connect_event_keepalive(struct buf *out)
{
	return envelope_literal(out, 0, "{\"event\":{\"keepalive\":{}}}");
}

size_t connect_data_bytes(size_t len)
{
	return CONNECT_HDR + sizeof("{\"event\":{\"data\":{\"stdout\":\"\"}}}") +
	       connect_b64_len(len);
}

int connect_event_data(struct buf *out, enum connect_out which, const void *data, size_t len)
{
	static const char *const names[] = { "stdout", "stderr", "pty" };
	size_t mark = out->len;
	long n;
	int err;

	if (out->cap - out->len < connect_data_bytes(len))
		return ERR_LIMIT;
	memset(out->data + mark, 0, CONNECT_HDR);
	out->len += CONNECT_HDR;
	err = buf_printf(out, "{\"event\":{\"data\":{\"%s\":\"", names[which]);
	n = err ? -1 : grpc_base64_encode(data, len, (char *)out->data + out->len,
					   out->cap - out->len);
	if (n < 0)
		return envelope_close(out, mark, 0, ERR_LIMIT);
	out->len += (size_t)n;
	while (!err && n++ % 4)
		err = buf_append(out, "=", 1);
	if (!err)
		err = buf_append(out, "\"}}}", 4);
	return envelope_close(out, mark, 0, err);
}

int connect_event_end(struct buf *out, const struct connect_end_event *e)
{
	size_t mark = out->len;
	struct json_writer w;
	int err = buf_append(out, "\0\0\0\0", CONNECT_HDR);

	if (err)
		return ERR_LIMIT;
	json_writer_init(&w, out);
	json_obj_begin(&w);
	json_key(&w, "event");
	json_obj_begin(&w);
	json_key(&w, "end");
	json_obj_begin(&w);
	if (e->exit_code) {
		json_key(&w, "exitCode");
		json_int_write(&w, e->exit_code);
	}
	json_key(&w, "exited");
	json_bool_write(&w, e->exited);
	json_key(&w, "status");
	json_str_write(&w, e->status ? e->status : "");
	if (e->error) {
		json_key(&w, "error");
		json_str_write(&w, e->error);
	}
	json_obj_end(&w);
	json_obj_end(&w);
	json_obj_end(&w);
	return envelope_close(out, mark, 0, json_writer_finish(&w));
}

int connect_end_stream(struct buf *out, const char *code, const char *message)
{
	size_t mark = out->len;
	struct json_writer w;

	if (!code)
		return envelope_literal(out, CONNECT_END, "{}");
	if (buf_append(out, "\0\0\0\0", CONNECT_HDR) != 0)
		return ERR_LIMIT;
	json_writer_init(&w, out);
	json_error_write(&w, code, message);
	return envelope_close(out, mark, CONNECT_END, json_writer_finish(&w));
}

/* The longest prefix of s, at most max bytes, that ends on a UTF-8 character boundary. */
static size_t utf8_cut(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n <= max)
		return n;
	while (max && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

/* The config, with its envs or not, and each of args and cwd cut to at most cut bytes. */
static int config_form(struct buf *out, const struct connect_start *s, bool envs, size_t cut)
{
	struct json_writer w;

	json_writer_init(&w, out);
	json_obj_begin(&w);
	json_key(&w, "cmd");
	json_str_write(&w, s->cmd);
	json_key(&w, "args");
	json_arr_begin(&w);
	for (uint32_t i = 0; i < s->nargs; i++)
		json_strn_write(&w, s->args[i], utf8_cut(s->args[i], cut));
	json_arr_end(&w);
	json_key(&w, "envs");
	json_obj_begin(&w);
	for (uint32_t i = 0; envs && i < s->nenv; i++) {
		json_key(&w, s->env_key[i]);
		json_str_write(&w, s->env_val[i]);
	}
	json_obj_end(&w);
	if (s->cwd) {
		json_key(&w, "cwd");
		json_strn_write(&w, s->cwd, utf8_cut(s->cwd, cut));
	}
	json_obj_end(&w);
	return json_writer_finish(&w);
}

int connect_config_encode(struct buf *out, size_t cap, const struct connect_start *s)
{
	size_t room = cap < out->cap - out->len ? cap : out->cap - out->len;
	struct buf b;
	size_t cut = SIZE_MAX;
	bool envs = true;

	for (;;) {
		/* a window of room bytes over out's free space */
		buf_init(&b, out->data + out->len, room);
		if (config_form(&b, s, envs, cut) == 0) {
			out->len += b.len;
			return 0;
		}
		if (cut == 0)
			return ERR_LIMIT;
		cut = envs ? room : cut / 2;
		envs = false;
	}
}

int connect_list_encode(struct buf *out, const struct connect_info *items, uint32_t n)
{
	size_t mark = out->len;
	struct json_writer w;
	int err = buf_append(out, "{\"processes\":[", 14);

	for (uint32_t i = 0; i < n && !err; i++) {
		err = buf_printf(out, "%s{\"pid\":%u,\"config\":", i ? "," : "",
				 (unsigned)items[i].pid);
		err = err ? err : buf_append(out, items[i].config, items[i].config_len);
		if (!err && items[i].tag && items[i].tag[0]) {
			err = buf_append(out, ",\"tag\":", 7);
			json_writer_init(&w, out);
			json_str_write(&w, items[i].tag);
			err = err ? err : json_writer_finish(&w);
		}
		err = err ? err : buf_append(out, "}", 1);
	}
	err = err ? err : buf_append(out, "]}", 2);
	if (err)
		out->len = mark;
	return err ? ERR_LIMIT : 0;
}
