/* view.c: a sandbox's egress as the admin API shows it (view.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress/audit.h"
#include "egress/view.h"
#include "workspace/host.h"
#include "transcript/runlog.h"
#include "sandbox/sandbox.h"

/* what a view reads at once: a policy, or one audit line */
#define VIEW_TOKENS 1024
static struct json_token tokens[VIEW_TOKENS];

static void copy_value(struct json_writer *w, const struct json_doc *d, int idx)
{
	static char s[EGRESS_POLICY_BYTES];
	const struct json_token *t = &d->tok[idx];
	int64_t n;

	switch (t->type) {
	case JSON_OBJECT:
		json_obj_begin(w);
		for (int k = json_first(d, idx); k >= 0; k = json_next(d, idx, json_next(d, idx, k))) {
			if (json_str(d, k, s, sizeof(s)) < 0)
				continue;
			json_key(w, s);
			copy_value(w, d, k + 1);
		}
		json_obj_end(w);
		break;
	case JSON_ARRAY:
		json_arr_begin(w);
		for (int i = json_first(d, idx); i >= 0; i = json_next(d, idx, i))
			copy_value(w, d, i);
		json_arr_end(w);
		break;
	case JSON_STRING:
		if (json_str(d, idx, s, sizeof(s)) < 0)
			s[0] = '\0';
		json_str_write(w, s);
		break;
	case JSON_NUMBER:
		if (json_int(d, idx, &n) == 0)
			json_int_write(w, n);
		else
			json_null_write(w);
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		json_bool_write(w, t->type == JSON_TRUE);
		break;
	default:
		json_null_write(w);
	}
}

int egress_view_copy(struct json_writer *w, const char *json, size_t len)
{
	struct json_doc d;

	if (json_parse(&d, json, len, tokens, VIEW_TOKENS) != 0)
		return ERR_PARSE;
	copy_value(w, &d, 0);
	return 0;
}

void egress_view_policy(struct json_writer *w, const char *egress_json)
{
	if (!egress_json[0] || egress_view_copy(w, egress_json, strlen(egress_json)) != 0)
		json_null_write(w);
}

int egress_view_audit_open(const struct sandbox *sb, int flags)
{
	char dir[LIMIT_PATH_BYTES], path[LIMIT_PATH_BYTES + 32];
	int r;

	if (transcript_of(sb)->run.open && transcript_of(sb)->run.dirfd >= 0) {
		r = openat(transcript_of(sb)->run.dirfd, "egress.jsonl", flags | O_CLOEXEC | O_NOFOLLOW, 0600);
		return r < 0 ? -errno : r;
	}
	if ((r = host_instance_dir(sandbox_config(), sb->instance_id, dir, sizeof(dir))) != 0)
		return r;
	/* current -> runs/<run>: the link is agenticd's own; the file itself is not followed */
	snprintf(path, sizeof(path), "%s/current/egress.jsonl", dir);
	r = open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
	return r < 0 ? -errno : r;
}

void egress_view_audit(struct json_writer *w, const struct sandbox *sb, uint32_t max)
{
	/* the tail read: 100 lines of some 300 bytes, with room */
	static char tail[64 * 1024];
	const char *line[EGRESS_VIEW_AUDIT_MAX];
	size_t len[EGRESS_VIEW_AUDIT_MAX];
	uint32_t n = 0;
	struct stat st;
	ssize_t got = 0;
	off_t from;
	int fd = egress_view_audit_open(sb, O_RDONLY);

	json_arr_begin(w);
	if (max > EGRESS_VIEW_AUDIT_MAX)
		max = EGRESS_VIEW_AUDIT_MAX;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		from = st.st_size > (off_t)sizeof(tail) ? st.st_size - (off_t)sizeof(tail) : 0;
		got = pread(fd, tail, sizeof(tail), from);
		if (got < 0)
			got = 0;
		/* the newest lines first, back from the end; a line cut at the tail's start is
		 * dropped */
		ssize_t end = got;  /* one past the line being found */

		if (end > 0 && tail[end - 1] == '\n')
			end--;
		while (end > 0 && n < max) {
			ssize_t s = end;

			while (s > 0 && tail[s - 1] != '\n')
				s--;
			if (s == 0 && from > 0)
				break;
			if (end > s) {
				line[n] = tail + s;
				len[n++] = (size_t)(end - s);
			}
			end = s - 1; /* before the newline that ends the line before */
		}
	}
	if (fd >= 0)
		close(fd);
	for (uint32_t i = n; i-- > 0;) {
		struct json_doc d;

		if (json_parse(&d, line[i], len[i], tokens, VIEW_TOKENS) == 0 &&
		    d.tok[0].type == JSON_OBJECT)
			copy_value(w, &d, 0);
	}
	json_arr_end(w);
}

/* The policy line, as docs/EGRESS.md "Audit" has it: the one writer of it, for the create and
 * the API alike. */
int egress_audit_policy(struct sandbox *sb, const char *source)
{
	static struct egress_policy pol;
	char line[1024];
	struct buf b;
	bool has = sb->egress_json[0] != '\0';
	int fd, r;

	if (has && egress_policy_parse(sb->egress_json, strlen(sb->egress_json), &pol, NULL, 0) != 0)
		has = false;
	buf_init(&b, line, sizeof(line) - 1);
	if (egress_audit_write(&b, &(const struct egress_audit){
		    .sandbox = sb->name, .instance = sb->instance_id, .kind = "policy",
		    .decision = "set", .reason = source,
		    .mode = !has ? "off" : pol.mode == EGRESS_REPORT ? "report" : "enforce",
		    .allow = has ? pol.nallow : 0, .routes = has ? pol.nroutes : 0 }) != 0 ||
	    buf_append(&b, "\n", 1) != 0)
		return ERR_LIMIT;
	fd = egress_view_audit_open(sb, O_WRONLY | O_APPEND | O_CREAT);
	if (fd < 0) {
		log_warn("egress audit not written", "name=%s error=%s", log_q(sb->name),
			 log_q(err_str(fd)));
		return fd;
	}
	/* one write: a line whole or not at all, beside the workers' own */
	r = write(fd, b.data, b.len) == (ssize_t)b.len ? 0 : -EIO;
	if (r != 0)
		log_warn("egress audit not written", "name=%s error=%s", log_q(sb->name),
			 log_q(strerror(errno)));
	close(fd);
	log_info("egress policy set", "name=%s source=%s mode=%s", log_q(sb->name), log_q(source),
		 !has ? "off" : pol.mode == EGRESS_REPORT ? "report" : "enforce");
	return r;
}
