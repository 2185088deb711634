/* worker.c: `agentic egress-worker`, one process per proxied connection at a time
 * (docs/EGRESS.md "agenticd ↔ worker", "What a worker does" and "Reuse"). agenticd starts it
 * unprivileged with fd 3 the workload's raw bytes and fd 4 a SEQPACKET control socket carrying
 * JSON packets, before it knows the sandbox (agenticd keeps workers started ahead). It reads
 * the request head, judges it against the sandbox's policy, connects upstream, relays, then
 * sends its audit record to agenticd, which writes the run's egress.jsonl line (the worker
 * holds no file: one a workload took over could not truncate, forge or fill the audit), and
 * exits, or, a direct connection's, waits
 * for agenticd to arm it again on the same sandbox's listener. Blocking code with poll(): the
 * process holds one connection and nothing else.
 *
 * Decisions this file takes where the design leaves room:
 * - Report mode turns policy refusals (host, method, path, SNI) into would_deny and goes on.
 *   The address check is not a policy refusal: a name resolving to loopback, a private or
 *   link-local range or this host's own address without allow_ranges is refused in report
 *   mode too, as 0.0.0.0/8 and multicast always are, so report mode never opens the host.
 * - An absolute-form request that matches no route (or breaks a route's methods or path
 *   prefixes) is forwarded in report mode without a credential: plain HTTP to the host and
 *   port it named, the request line in origin form, the proxy's own headers dropped and
 *   `Connection: close`, then relayed raw. In enforce mode it is 403.
 * - An operational failure after a would_deny (DNS, connect) is audited as that failure with
 *   decision deny: the connection did not go through. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "egress/audit.h"
#include "egress/confine.h"
#include "egress/worker.h"
#include "egress/head.h"
#include "egress/policy.h"
#include "egress/route.h"
#include "egress/sni.h"
#include "json/json.h"

const char egress_worker_help[] =
	"usage: agentic egress-worker\n"
	"\n"
	"One proxied connection of a sandbox's egress at a time (docs/EGRESS.md), started by\n"
	"agenticd as an unprivileged user with fd 3 the workload's bytes and fd 4 agenticd's\n"
	"control socket; its audit record goes to agenticd, which writes the line. A direct\n"
	"connection's worker is armed again by agenticd for its sandbox's next connection. It\n"
	"takes no argument and is never an applet link.\n";


static const char *const decision_words[] = { "allow", "deny", "would_deny" };

void worker_own_recv(struct worker *w);

static int str_field(const struct json_doc *d, const char *key, char *out, size_t cap,
		     bool required)
{
	int i = json_obj_get(d, 0, key);

	if (i < 0)
		return required ? ERR_PARSE : 0;
	return json_str(d, i, out, cap) < 0 ? ERR_PARSE : 0;
}

/* The first packet: {"sandbox", "instance", "conn", "rate_limited", "policy", "ca_file",
 * "io_timeout_ms", "own"}; "own": true says agenticd answers {"own": true} with this host's
 * addresses (ask_own). Errors name the field only. */
static int read_start(struct worker *w, const char **what)
{
	static char pkt[CTL_MAX + 1];
	static struct json_token tok[CTL_TOKENS];
	struct json_doc d;
	char perr[256];
	bool sent = false;
	int64_t v;
	long n;
	int i;

	*what = "packet";
	n = worker_ctl_recv_start(w, pkt, sizeof(pkt));
	if (n < 0 || json_parse(&d, pkt, (size_t)n, tok, CTL_TOKENS) != 0 ||
	    tok[0].type != JSON_OBJECT)
		return ERR_PARSE;
	*what = "sandbox";
	if (str_field(&d, "sandbox", w->sandbox, sizeof(w->sandbox), true) != 0)
		return ERR_PARSE;
	*what = "instance";
	if (str_field(&d, "instance", w->instance, sizeof(w->instance), true) != 0)
		return ERR_PARSE;
	*what = "conn";
	if ((i = json_obj_get(&d, 0, "conn")) < 0 || json_int(&d, i, &w->conn) != 0 || w->conn < 0)
		return ERR_PARSE;
	*what = "rate_limited";
	if ((i = json_obj_get(&d, 0, "rate_limited")) < 0 || json_bool(&d, i, &w->rate_limited) != 0)
		return ERR_PARSE;
	*what = "ca_file";
	memcpy(w->ca_file, CA_FILE_DEFAULT, sizeof(CA_FILE_DEFAULT));
	if (str_field(&d, "ca_file", w->ca_file, sizeof(w->ca_file), false) != 0 ||
	    w->ca_file[0] != '/')
		return ERR_PARSE;
	*what = "io_timeout_ms";
	w->io_timeout_ms = IO_TIMEOUT_DEFAULT_MS;
	if ((i = json_obj_get(&d, 0, "io_timeout_ms")) >= 0) {
		if (json_int(&d, i, &v) != 0 || v < 1 || v > 86400000)
			return ERR_PARSE;
		w->io_timeout_ms = (int)v;
	}
	*what = "listen";
	if ((i = json_obj_get(&d, 0, "listen")) >= 0 && json_bool(&d, i, &w->listen) != 0)
		return ERR_PARSE;
	*what = "reuse";
	if ((i = json_obj_get(&d, 0, "reuse")) >= 0 && json_bool(&d, i, &w->reuse) != 0)
		return ERR_PARSE;
	*what = "policy";
	if ((i = json_obj_get(&d, 0, "policy")) < 0 ||
	    (tok[i].type != JSON_OBJECT && tok[i].type != JSON_ARRAY) ||
	    egress_policy_parse(pkt + tok[i].start, tok[i].end - tok[i].start, &w->policy, perr,
				sizeof(perr)) != 0)
		return ERR_PARSE;
	*what = "own";
	w->own = -1;
	if ((i = json_obj_get(&d, 0, "own")) >= 0 && json_bool(&d, i, &w->own_ask) != 0)
		return ERR_PARSE;
	/* agenticd sent this host's addresses right behind: read now, so that none waits in
	 * front of a later answer; used at dial when still fresh (OWN_FRESH_MS) */
	if ((i = json_obj_get(&d, 0, "own_sent")) >= 0 &&
	    (json_bool(&d, i, &sent) != 0 || (sent && (worker_own_recv(w), w->ctl_lost))))
		return ERR_PARSE;
	return 0;
}

/* ---- the audit ---- */

/* The longest line: the request line is printable ASCII, so a string field's JSON is at most
 * twice its bytes (a '"' or '\\' escaped); 1 KiB more for the keys, numbers, ts and words. A
 * request head's path of 2047 '"' once made a line longer than the 4 KiB buffer there was: no
 * line, no record, and a reused worker waited for a word that came for no record. The record
 * goes to agenticd in one control packet: it must fit one. */
#define AUDIT_LINE_MAX                                                                        \
	(2 * (sizeof(((struct egress_head *)0)->path) + EGRESS_HOST_BYTES + EGRESS_METHOD_BYTES + \
	      SB_NAME_BYTES + sizeof(((struct worker *)0)->instance)) + 1024)
_Static_assert(AUDIT_LINE_MAX < CTL_MAX, "an audit record fits one control packet");

/* Sends the record (agenticd writes the line): true when agenticd got it (a reused worker
 * waits for agenticd's word only then). A connection cut by agenticd's end has no line. */
static bool audit(struct worker *w)
{
	static char line[AUDIT_LINE_MAX + 1];
	char path[sizeof(w->head.path)];
	struct egress_audit a = {
		.sandbox = w->sandbox, .instance = w->instance, .conn = w->conn, .kind = w->kind,
		.method = w->have_head ? w->head.method : "", .host = w->have_head ? w->head.host : "",
		.port = w->have_head ? w->head.port : 0, .path = path,
		.decision = decision_words[w->decision], .reason = egress_reason_word(w->reason),
		.status = w->status, .bytes_up = (int64_t)w->bytes_up,
		.bytes_down = (int64_t)w->bytes_down, .duration_ms = clock_mono_ms() - w->start_ms,
		.end = egress_end_word(w->end),
	};
	struct buf b;

	path[0] = '\0';
	if (w->have_head) {
		size_t pn = strcspn(w->head.path, "?"); /* never the query */
		memcpy(path, w->head.path, pn);
		path[pn] = '\0';
	}
	buf_init(&b, line, sizeof(line) - 1);
	if (egress_audit_write(&b, &a) != 0) {
		log_error("egress audit line not written", "sandbox=%s conn=%lld",
			  log_q(w->sandbox), (long long)w->conn);
		return false;
	}
	return !w->ctl_lost && send(FD_CTL, line, b.len, MSG_NOSIGNAL) == (ssize_t)b.len;
}

/* ---- the request head ---- */

/* Reads until the head is whole (true) or it cannot be (false, the audit fields set). */
static bool read_head(struct worker *w)
{
	int64_t deadline = clock_mono_ms() + HEAD_TIMEOUT_MS;

	for (;;) {
		int rc = egress_head_parse(w->headbuf, w->headlen, &w->head);
		int64_t left = deadline - clock_mono_ms();
		ssize_t n;
		if (rc == EGRESS_HEAD_DONE) {
			w->have_head = true;
			return true;
		}
		if (rc != EGRESS_HEAD_MORE) {
			worker_refuse(w, 400, ER_BAD_REQUEST);
			return false;
		}
		rc = left > 0 ? worker_wait_fd(w, FD_DATA, POLLIN, (int)left) : 0;
		if (rc <= 0) {
			if (w->ctl_lost) {
				w->decision = D_DENY;
				w->reason = ER_BAD_REQUEST;
				w->end = EE_CONTROL_LOST;
				return false;
			}
			worker_refuse(w, 400, ER_BAD_REQUEST);
			w->end = EE_TIMEOUT;
			return false;
		}
		n = recv(FD_DATA, w->headbuf + w->headlen, sizeof(w->headbuf) - w->headlen,
			 MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			w->decision = D_DENY;
			w->reason = ER_BAD_REQUEST;
			w->end = EE_CLIENT_GONE;
			return false;
		}
		w->headlen += (size_t)n;
	}
}


/* ---- the two kinds ---- */

/* CONNECT: 200, the ClientHello's SNI against the CONNECT host, then the relay. Not a byte
 * goes upstream before the SNI is judged. */
static void tunnel(struct worker *w, int up)
{
	static uint8_t hello[EGRESS_HELLO_BUF];
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	char sni[EGRESS_HOST_BYTES];
	size_t n = w->head.rest_len < sizeof(hello) ? w->head.rest_len : sizeof(hello);
	int64_t deadline = clock_mono_ms() + HELLO_TIMEOUT_MS;
	int rc;

	if (!worker_send_all(FD_DATA, ok, sizeof(ok) - 1)) {
		w->end = EE_CLIENT_GONE;
		return;
	}
	w->status = 200;
	memcpy(hello, w->head.rest, n);
	for (;;) {
		int64_t left = deadline - clock_mono_ms();
		ssize_t r;
		rc = egress_sni_parse(hello, n, sni);
		if (rc != EGRESS_SNI_MORE)
			break;
		if (n == sizeof(hello)) {
			rc = ERR_PARSE;
			break;
		}
		if (left <= 0 || worker_wait_fd(w, FD_DATA, POLLIN, (int)left) != 1) {
			w->end = w->ctl_lost ? EE_CONTROL_LOST : EE_TIMEOUT;
			rc = EGRESS_SNI_NONE;
			goto judged;
		}
		r = recv(FD_DATA, hello + n, sizeof(hello) - n, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0) {
			w->end = EE_CLIENT_GONE;
			rc = EGRESS_SNI_NONE;
			goto judged;
		}
		n += (size_t)r;
	}
judged:
	if (rc != EGRESS_SNI_FOUND || strcasecmp(sni, w->head.host) != 0) {
		enum egress_reason why = rc == EGRESS_SNI_FOUND ? ER_SNI_MISMATCH : ER_NO_SNI;
		/* Report mode goes on with a hello it has read; without one there is nothing to
		 * forward, and the connection is audited as refused. */
		if (w->policy.mode != EGRESS_REPORT || w->end != EE_CLOSED) {
			w->decision = D_DENY;
			w->reason = why;
			shutdown(FD_DATA, SHUT_RDWR);
			return;
		}
		if (w->decision != D_WOULD_DENY) /* a host refusal stays the reason */
			w->reason = why;
		w->decision = D_WOULD_DENY;
	}
	if (n > w->policy.max_bytes)
		n = (size_t)w->policy.max_bytes;
	if (!worker_send_all(up, hello, n)) {
		w->end = EE_UPSTREAM_ERROR;
		return;
	}
	w->bytes_up += n;
	if (w->bytes_up >= w->policy.max_bytes) {
		w->end = EE_BYTE_CAP;
		return;
	}
	worker_relay(w, up, false);
}

/* A plain request forwarded without a credential (report mode, no route): the request line
 * in origin form, the head's other lines but the proxy's own and the connection's, then
 * Connection: close and whatever body bytes came with the head. */
static void forward_plain(struct worker *w, int up)
{
	static char out[EGRESS_HEAD_MAX + 2200];
	const char *p = memchr(w->head.raw, '\n', w->head.raw_len);
	const char *end = w->head.raw + w->head.raw_len;
	const char *ver = p - 8 - (p[-1] == '\r');
	size_t n;

	n = (size_t)snprintf(out, sizeof(out), "%s %s %.8s\r\n", w->head.method, w->head.path, ver);
	for (p = p + 1; p < end;) {
		const char *lf = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)(lf - p);
		static const char *const dropped[] = { "proxy-authorization:", "proxy-connection:",
						       "connection:", "keep-alive:" };
		bool drop = len == 0 || (len == 1 && p[0] == '\r');
		for (size_t i = 0; i < ARRAY_LEN(dropped) && !drop; i++)
			drop = strncasecmp(p, dropped[i], strlen(dropped[i])) == 0;
		if (!drop && n + len + 1 < sizeof(out)) {
			memcpy(out + n, p, len + 1);
			n += len + 1;
		}
		p = lf + 1;
	}
	n += (size_t)snprintf(out + n, sizeof(out) - n, "Connection: close\r\n\r\n");
	if (!worker_send_all(up, out, n) ||
	    (w->head.rest_len && !worker_send_all(up, w->head.rest, w->head.rest_len))) {
		w->end = EE_UPSTREAM_ERROR;
		return;
	}
	w->bytes_up += w->head.raw_len + w->head.rest_len; /* as the workload sent them */
	worker_relay(w, up, true);
}

static void route(struct worker *w, uint32_t ri, int up)
{
	static uint8_t secret[EGRESS_SECRET_BYTES];
	const struct egress_route *rt = &w->policy.routes[ri];
	struct egress_route_result res = { 0 };
	struct egress_route_call c = {
		.client_fd = FD_DATA, .upstream_fd = up, .route = rt, .head = &w->head,
		.secret = secret, .ca_file = w->ca_file, .max_bytes = w->policy.max_bytes,
		.io_timeout_ms = w->io_timeout_ms,
	};
	long n = worker_ask_secret(w, ri, secret, sizeof(secret));

	if (n < 0) {
		if (w->ctl_lost) {
			w->decision = D_DENY;
			w->reason = ER_SECRET_UNAVAILABLE;
			w->end = EE_CONTROL_LOST;
			return;
		}
		worker_refuse(w, 502, ER_SECRET_UNAVAILABLE);
		return;
	}
	c.secret_len = (size_t)n;
	egress_route_run(&c, &res);
	explicit_bzero(secret, sizeof(secret));
	w->status = res.status;
	w->bytes_up = res.bytes_up;
	w->bytes_down = res.bytes_down;
	w->end = res.end;
	w->reason = res.reason;
	if (res.reason == ER_UPSTREAM_TLS_FAILED || res.reason == ER_BAD_REQUEST)
		w->decision = D_DENY;
	/* the route answered these itself, before any response came from upstream */
	if (res.reason == ER_UPSTREAM_TLS_FAILED && !w->status)
		w->status = 502;
}

/* ---- the process ---- */

/* fds 0-2 open (on /dev/null when agenticd gave none), so no socket of ours can become
 * stderr and receive a log line. */
static bool std_fds(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0) {
			int n = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (n != fd) {
				if (n >= 0)
					close(n);
				return false;
			}
		}
	return true;
}

/* An armed worker (docs/EGRESS.md "Direct connections"): waits on the sandbox's listener at
 * FD_DATA until a connection comes, or agenticd ends it (its control socket readable or
 * gone: nothing may come there before the connection). The accepted socket takes FD_DATA's
 * place, which closes the listener before a byte of the workload's is read, and agenticd is
 * told. false: no connection, no audit line (agenticd's, if any). */
static bool accept_one(struct worker *w)
{
	struct pollfd p[2] = { { .fd = FD_DATA, .events = POLLIN },
			       { .fd = FD_CTL, .events = POLLIN } };
	int one = 1;

	for (;;) {
		int fd, n = poll(p, 2, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || p[1].revents)
			return false;
		if (p[0].revents & (POLLERR | POLLNVAL))
			return false;
		fd = accept4(FD_DATA, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				continue;
			return false;
		}
		if (dup2(fd, FD_DATA) != FD_DATA) {
			close(fd);
			return false;
		}
		close(fd);
		setsockopt(FD_DATA, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (send(FD_CTL, "{\"accepted\":true}", 17, MSG_NOSIGNAL) != 17) {
			w->ctl_lost = true;
			return false;
		}
		w->start_ms = clock_mono_ms();
		if (w->own >= 0)
			w->own_ms = w->start_ms;
		return true;
	}
}

/* One connection, from its request head to its audit line: true when agenticd got the
 * record. */
static bool serve(struct worker *w)
{
	uint32_t ri = 0;
	int up = -1;
	bool sent;

	if (!read_head(w))
		goto done;
	w->kind = egress_head_is_connect(&w->head) ? "tunnel" : "route";
	if (w->rate_limited) {
		worker_refuse(w, 429, ER_RATE_LIMITED);
		goto done;
	}
	if (egress_head_is_connect(&w->head))
		w->reason = egress_match_connect(&w->policy, w->head.host, w->head.port);
	else
		w->reason = egress_match_route(&w->policy, w->head.host, w->head.port, w->head.method,
					       w->head.path, &ri);
	if (w->reason == ER_ALLOWLISTED || w->reason == ER_ROUTE) {
		w->decision = D_ALLOW;
	} else if (w->policy.mode == EGRESS_REPORT) {
		w->decision = D_WOULD_DENY;
	} else {
		worker_refuse(w, 403, w->reason);
		goto done;
	}
	if (w->reason == ER_ROUTE) {
		if (ri >= w->policy.nroutes) {
			worker_refuse(w, 502, ER_WORKER_FAILED);
			goto done;
		}
		up = worker_dial(w, w->policy.routes[ri].up_host, w->policy.routes[ri].up_port);
		if (up >= 0)
			route(w, ri, up);
	} else {
		up = worker_dial(w, w->head.host, w->head.port);
		if (up >= 0 && egress_head_is_connect(&w->head))
			tunnel(w, up);
		else if (up >= 0)
			forward_plain(w, up);
	}
	worker_settle_end(w);
done:
	sent = audit(w);
	if (up >= 0)
		close(up);
	return sent;
}

/* Between two connections of a reused worker (docs/EGRESS.md "Reuse"): the last one's socket
 * closed (/dev/null holds FD_DATA's place, so that the next start packet's descriptors do not
 * land on it), everything of it forgotten, the address families probed again at the next
 * arming. The audit descriptor stays until the next packet's replaces it. */
static bool forget(struct worker *w)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (null < 0 || dup2(null, FD_DATA) != FD_DATA) {
		if (null >= 0)
			close(null);
		return false;
	}
	close(null);
	explicit_bzero(w, sizeof(*w));
	worker_families_reset();
	w->start_ms = clock_mono_ms();
	w->kind = "unknown";
	w->end = EE_CLOSED;
	return true;
}

int egress_worker_main(int argc, char **argv)
{
	static struct worker w;
	const char *what = "";
	int rc;

	if (argc > 1) {
		fprintf(stderr, "agentic-egress-worker: unknown argument '%s' (see --help)\n",
			argv[1]);
		return 2;
	}
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || !std_fds() ||
	    fcntl(FD_DATA, F_GETFD) < 0 || fcntl(FD_CTL, F_GETFD) < 0) {
		log_error("egress worker without its descriptors", "want=%s", "3,4");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	w.start_ms = clock_mono_ms();
	w.kind = "unknown";
	w.end = EE_CLOSED;
	if (read_start(&w, &what) != 0) {
		/* No audit line: without the packet there is no sandbox to name; agenticd audits
		 * the worker's failure (worker_failed). */
		log_error("egress worker start packet refused", "field=%s", log_q(what));
		return 1;
	}
	/* its policy known, before a byte of the workload's: for the rest of its life (agenticd
	 * arms it again only for the same policy) */
	if ((rc = egress_confine(&w.policy, w.ca_file)) < 0) {
		log_error("egress worker cannot confine itself", "error=%s", log_q(strerror(-rc)));
		return 1;
	}
	for (;;) {
		if (w.listen) {
			worker_families_probe();
			if (!accept_one(&w))
				return 0;
		}
		/* reused: armed again on the same sandbox's listener by agenticd's next packet,
		 * or its eof (agenticd has no use for this worker now); agenticd answers a
		 * record, so without one there is nothing to wait for */
		if (!serve(&w) || !w.reuse || w.ctl_lost || !forget(&w))
			return 0;
		if (read_start(&w, &what) != 0) {
			if (w.ctl_lost)
				return 0;
			log_error("egress worker start packet refused", "field=%s", log_q(what));
			return 1;
		}
		if (!w.listen) {
			log_error("egress worker start packet refused", "field=%s", log_q("listen"));
			return 1;
		}
	}
}

