/* egress_audit_weak.c: the policy audit line (egress_view.h's egress_audit_policy) for a build
 * without the relay's (mgmt/egress.c, whose definition wins where both are linked). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mgmt/egress_view.h"
#include "mgmt/sandbox.h"

/* The policy line, as docs/EGRESS.md "Audit" has it. Weak, so the relay's definition
 * (mgmt/egress.c) replaces it wherever that is linked in. */
__attribute__((weak)) int egress_audit_policy(struct sandbox *sb, const char *source)
{
	static struct egress_policy pol;
	char line[1024], ts[40];
	struct json_writer w;
	struct buf b;
	int64_t ms = clock_wall_ms();
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	bool has = sb->egress_json[0] != '\0';
	int fd, r;

	if (has && egress_policy_parse(sb->egress_json, strlen(sb->egress_json), &pol, NULL, 0) != 0)
		has = false;
	gmtime_r(&t, &tm);
	snprintf(ts + strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm), 16, ".%03dZ",
		 (int)(ms % 1000));
	buf_init(&b, line, sizeof(line) - 1);
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "ts");
	json_str_write(&w, ts);
	json_key(&w, "sandbox");
	json_str_write(&w, sb->name);
	json_key(&w, "instance");
	json_str_write(&w, sb->instance_id);
	json_key(&w, "conn");
	json_int_write(&w, 0);
	json_key(&w, "kind");
	json_str_write(&w, "policy");
	json_key(&w, "decision");
	json_str_write(&w, "set");
	json_key(&w, "reason");
	json_str_write(&w, source);
	json_key(&w, "mode");
	json_str_write(&w, !has ? "off" : pol.mode == EGRESS_REPORT ? "report" : "enforce");
	json_key(&w, "allow");
	json_int_write(&w, has ? pol.nallow : 0);
	json_key(&w, "routes");
	json_int_write(&w, has ? pol.nroutes : 0);
	json_key(&w, "status");
	json_int_write(&w, 0);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0 || buf_append(&b, "\n", 1) != 0)
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
