/* audit.c: the egress audit line's one writer (audit.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "egress/audit.h"
#include "json/json.h"

static void str(struct json_writer *w, const char *key, const char *v)
{
	json_key(w, key);
	json_str_write(w, v ? v : "");
}

static void num(struct json_writer *w, const char *key, int64_t v)
{
	json_key(w, key);
	json_int_write(w, v);
}

void egress_audit_ts(char *out, size_t cap)
{
	int64_t ms = clock_wall_ms();
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

int egress_audit_write(struct buf *b, const struct egress_audit *a)
{
	struct json_writer w;
	char ts[32];
	bool policy = a->kind && strcmp(a->kind, "policy") == 0;

	egress_audit_ts(ts, sizeof(ts));
	json_writer_init(&w, b);
	json_obj_begin(&w);
	str(&w, "ts", ts);
	str(&w, "sandbox", a->sandbox);
	str(&w, "instance", a->instance);
	num(&w, "conn", a->conn);
	str(&w, "kind", a->kind);
	if (policy) {
		str(&w, "decision", a->decision);
		str(&w, "reason", a->reason);
		str(&w, "mode", a->mode);
		num(&w, "allow", a->allow);
		num(&w, "routes", a->routes);
		num(&w, "status", a->status);
	} else {
		str(&w, "method", a->method);
		str(&w, "host", a->host);
		num(&w, "port", a->port);
		str(&w, "path", a->path);
		str(&w, "decision", a->decision);
		str(&w, "reason", a->reason);
		num(&w, "status", a->status);
		num(&w, "bytes_up", a->bytes_up);
		num(&w, "bytes_down", a->bytes_down);
		num(&w, "duration_ms", a->duration_ms);
		str(&w, "end", a->end);
		if (a->suppressed)
			num(&w, "suppressed", (int64_t)a->suppressed);
	}
	json_obj_end(&w);
	return json_writer_finish(&w) != 0 ? ERR_LIMIT : 0;
}
