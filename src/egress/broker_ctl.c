/* broker_ctl.c: the worker's control packets: its requests (a secret, this host's addresses),
 * its accept, its record (the audit line agenticd writes for it), and its end. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/audit.h"
#include "egress/broker_slot.h"
#include "egress/policy.h"
#include "egress/route.h"

#define RECORD_EXIT_MS 1000            /* for a direct worker not armed again after its record */

/* The answer to {"own": true}: {"own": K} (-1: none known, the worker reads them itself),
 * then, when K > 0, the K records as a packet of their own. */
static void ctl_own(struct eslot *s)
{
	if (broker_own_send(s) != 0)
		log_warn("egress addresses answer not sent", "name=%s conn=%llu", log_q(s->name),
			 (unsigned long long)s->conn);
}

/* word if it is one of words[0..n), else "unknown": a record's words are the worker's, and
 * one a workload took over may say anything; the line says only what a worker can say. */
static const char *word_of(const char *word, const char *(*name)(int), int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(word, name(i)) == 0)
			return name(i);
	return "unknown";
}

static const char *kind_name(int i)
{
	static const char *const kinds[] = { "tunnel", "route", "unknown" };

	return kinds[i];
}

static const char *decision_name(int i)
{
	static const char *const decisions[] = { "allow", "deny", "would_deny" };

	return decisions[i];
}

static const char *reason_name(int i)
{
	return egress_reason_word((enum egress_reason)i);
}

static const char *end_name(int i)
{
	return egress_end_word((enum egress_end)i);
}

/* The worker's record: the audit line agenticd writes for it (docs/EGRESS.md "Audit"). ts,
 * sandbox, instance and conn are the slot's and duration_ms agenticd's own (from the
 * connection's claim, or an armed worker's accept); the rest is what the worker says, in the
 * words it can say. */
static void ctl_record(struct eslot *s, const struct json_doc *d)
{
	static char host[EGRESS_HOST_BYTES], path[CTL_BYTES];
	char kind[16] = "", method[32] = "", decision[16] = "", reason[32] = "", end[32] = "";
	struct egress_audit f = { 0 };
	int dec = 1;

	host[0] = path[0] = '\0';
	json_str(d, json_obj_get(d, 0, "kind"), kind, sizeof(kind));
	json_str(d, json_obj_get(d, 0, "method"), method, sizeof(method));
	json_str(d, json_obj_get(d, 0, "host"), host, sizeof(host));
	json_str(d, json_obj_get(d, 0, "path"), path, sizeof(path));
	json_str(d, json_obj_get(d, 0, "decision"), decision, sizeof(decision));
	json_str(d, json_obj_get(d, 0, "reason"), reason, sizeof(reason));
	json_str(d, json_obj_get(d, 0, "end"), end, sizeof(end));
	json_int(d, json_obj_get(d, 0, "port"), &f.port);
	json_int(d, json_obj_get(d, 0, "status"), &f.status);
	json_int(d, json_obj_get(d, 0, "bytes_up"), &f.bytes_up);
	json_int(d, json_obj_get(d, 0, "bytes_down"), &f.bytes_down);
	path[strcspn(path, "?")] = '\0'; /* never the query */
	for (int i = 0; i < 3; i++)
		if (strcmp(decision, decision_name(i)) == 0)
			dec = i;
	f.kind = word_of(kind, kind_name, 3);
	f.method = method;
	f.host = host;
	f.path = path;
	f.decision = decision_name(dec);
	f.reason = word_of(reason, reason_name, ER_COUNT);
	f.end = word_of(end, end_name, EE_TIMEOUT + 1);
	f.port = f.port < 0 || f.port > 65535 ? 0 : f.port;
	f.bytes_up = f.bytes_up < 0 ? 0 : f.bytes_up;
	f.bytes_down = f.bytes_down < 0 ? 0 : f.bytes_down;
	f.duration_ms = clock_mono_ms() - s->started_ms;
	s->record_seen = true;
	metrics_egress(dec, (uint64_t)f.bytes_up, (uint64_t)f.bytes_down);
	if (s->sb && s->sb->gen == s->sb_gen && s->sb->state != SB_FREE &&
	    broker_audit_line(s->sb, s->name, s->instance, s->conn, &f) != 0)
		log_warn("egress audit line not written", "name=%s conn=%llu", log_q(s->name),
			 (unsigned long long)s->conn);
	log_info("egress", "sandbox=%s conn=%llu kind=%s host=%s port=%lld decision=%s reason=%s "
		 "status=%lld", log_q(s->name), (unsigned long long)s->conn, log_q(f.kind),
		 log_q(host), (long long)f.port, log_q(f.decision), log_q(f.reason),
		 (long long)f.status);
}

/* The control socket is done with: read to its end, or closed on a worker that broke the
 * protocol. */
static void ctl_over(struct eslot *s)
{
	s->ctl_eof = true;
	broker_close_ctl(s);
	if (s->spare) {
		/* a spare that ended or broke the protocol: no connection to audit, and no longer
		 * one to take (the slot waits for the reaper); the next waits a second, so that a
		 * worker that cannot start is not started as fast as it dies */
		s->spare = false;
		bst.spare_backoff_until = clock_mono_ms() + 1000;
		broker_close_data(s);
		broker_slot_maybe_free(s);
		return;
	}
	if (s->armed) {
		/* it died waiting (or broke the protocol): no connection was its; agenticd accepts
		 * again, and, as for a spare that ended, the next is armed a second later at the
		 * earliest, so that a worker that cannot wait is not armed as fast as it dies */
		s->armed = false;
		s->quiet = true;
		/* not for one armed again after a connection (served): that one started, and
		 * the workload's bytes it read may have made it break the protocol, which must not
		 * hold back every sandbox's spares and arming */
		if (!s->served)
			bst.spare_backoff_until = clock_mono_ms() + 1000;
		if (s->sb->gen == s->sb_gen && broker_sb(s->sb)->lfd >= 0 && broker_sb(s->sb)->lfd_ok)
			broker_listen_watch(s->sb, true);
	}
	if (!s->record_seen)
		broker_worker_failed_line(s);
	if (s->call)
		broker_step(s);
	broker_slot_maybe_free(s);
}

/* Whether a packet waits on s's control socket (its eof is left to the read that finds it). */
static bool ctl_queued(const struct eslot *s)
{
	char c;

	return recv(s->ctl, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* A worker sends at most three packets: one request for this host's addresses, one secret
 * request, then its record. Anything else (a
 * second secret, a packet after the record, one that is no JSON object) is a worker that a
 * workload took over: it would read every route's secret of its policy, or keep agenticd's
 * loop reading secret files and writing log lines as fast as it sends. It is killed and its
 * control socket closed. */
void broker_ctl_readable(struct eslot *s)
{
	static char pkt[CTL_BYTES + 1];
	static struct json_token ptok[256];

	for (;;) {
		struct json_doc d;
		ssize_t n = recv(s->ctl, pkt, CTL_BYTES, MSG_DONTWAIT);
		const char *bad = NULL;
		int64_t route;
		int i;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			ctl_over(s);
			return;
		}
		if (s->spare)
			bad = "packet_before_start";
		else if (s->record_seen)
			bad = "packet_after_record";
		else if (json_parse(&d, pkt, (size_t)n, ptok, ARRAY_LEN(ptok)) != 0 ||
			 ptok[0].type != JSON_OBJECT)
			bad = "not_an_object";
		else if (s->armed && json_obj_get(&d, 0, "accepted") < 0)
			bad = "packet_before_accept"; /* it has no connection yet: nothing to ask */
		else if ((i = json_obj_get(&d, 0, "secret")) >= 0) {
			if (s->secret_asked || json_int(&d, i, &route) != 0)
				bad = "second_secret";
			else {
				s->secret_asked = true;
				broker_secret_answer(s, route);
			}
		} else if (json_obj_get(&d, 0, "own") >= 0) {
			if (s->own_asked)
				bad = "second_own";
			else {
				s->own_asked = true;
				ctl_own(s);
			}
		} else if (json_obj_get(&d, 0, "accepted") >= 0) {
			if (!s->armed)
				bad = "accepted_unarmed";
			else
				broker_armed_accepted(s);
		} else if (json_obj_get(&d, 0, "decision") >= 0) {
			ctl_record(s, &d);
			/* a direct connection's worker waits: armed again, or this eof ends it. It
			 * sends nothing before its next start packet: a packet already queued
			 * behind the record would be read as the next connection's, so a worker
			 * could play a connection after another without any, each a token, an
			 * audit file and a start packet of agenticd's (REUSE_MAX in one turn) */
			if (s->direct && !s->call && ctl_queued(s))
				bad = "packet_after_record";
			else if (s->direct && !s->call && !broker_rearm(s)) {
				/* its connection is over: one that does not end at the eof (one a
				 * crafted request took over) is killed, not left holding its slot */
				s->linger_until = clock_mono_ms() + RECORD_EXIT_MS;
				ctl_over(s);
				return;
			}
		} else
			bad = "unknown_packet";
		if (bad) {
			log_warn("egress worker broke the control protocol, killed",
				 "name=%s conn=%llu what=%s", log_q(s->name),
				 (unsigned long long)s->conn, log_q(bad));
			broker_worker_kill(s);
			ctl_over(s);
			return;
		}
	}
}
