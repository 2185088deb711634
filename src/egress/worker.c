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

#define FD_DATA 3
#define FD_CTL 4
#define CTL_MAX 16384u                 /* a control packet, either way */
#define CTL_TOKENS 4096u
#define HEAD_TIMEOUT_MS 10000
#define HELLO_TIMEOUT_MS 10000
#define CONNECT_TIMEOUT_MS 10000
#define CTL_TIMEOUT_MS 10000          /* the start packet, a secret's answer */
#define OWN_FRESH_MS 50                /* this host's addresses sent with the start, used at
					* dial up to this old; older, asked again */
#define IO_TIMEOUT_DEFAULT_MS 300000
#define RELAY_BUF (256u * 1024u)
#define CA_FILE_DEFAULT "/etc/ssl/certs/ca-certificates.crt"
#define OWN_RECORD 17u                 /* an own address from agenticd: family (4|6), 16 bytes */
#define OWN_MAX (CTL_MAX / OWN_RECORD)

enum decision { D_ALLOW, D_DENY, D_WOULD_DENY };
static const char *const decision_words[] = { "allow", "deny", "would_deny" };

struct worker {
	/* from agenticd's first packet */
	char sandbox[SB_NAME_BYTES];
	char instance[128];
	int64_t conn;
	bool rate_limited;
	struct egress_policy policy;
	char ca_file[LIMIT_PATH_BYTES];
	int io_timeout_ms;
	/* the audit record */
	const char *kind;
	struct egress_head head;
	bool have_head;
	enum decision decision;
	enum egress_reason reason;
	int status;
	uint64_t bytes_up, bytes_down;
	enum egress_end end;
	int64_t start_ms;
	bool ctl_lost;
	bool listen;                  /* FD_DATA is the sandbox's listener: accept one first */
	bool reuse;                   /* after the record, agenticd's next start packet or eof */
	bool own_ask;                 /* agenticd answers {"own": true} with this host's addresses */
	/* this host's addresses as agenticd sent them at dial time (own >= 0; 0: none), or -1:
	 * getifaddrs here; one byte more than the records, for ctl_recv's terminator */
	long own;
	int64_t own_ms;               /* when own came (monotonic) */
	uint8_t own_rec[OWN_MAX * OWN_RECORD + 1];
	/* the request head as received, and what followed it */
	char headbuf[EGRESS_HEAD_MAX];
	size_t headlen;
};

/* ---- small I/O helpers ---- */

/* Waits for ev on fd for at most ms, watching the control socket: agenticd gone (hangup) sets
 * w->ctl_lost. 1 when fd is ready, 0 on timeout, -1 when control is lost or poll failed. */
static int wait_fd(struct worker *w, int fd, short ev, int ms)
{
	int64_t deadline = ms < 0 ? INT64_MAX : clock_mono_ms() + ms;

	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = ev }, { .fd = FD_CTL, .events = 0 } };
		int64_t left = ms < 0 ? -1 : deadline - clock_mono_ms();
		int n;
		if (ms >= 0 && left < 0)
			left = 0;
		n = poll(p, 2, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)) {
			w->ctl_lost = true;
			return -1;
		}
		if (p[0].revents)
			return 1;
		if (n == 0 || left == 0)
			return 0;
	}
}

static bool send_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static const char *status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 429: return "Too Many Requests";
	default: return "Bad Gateway";
	}
}

/* Our own refusal: the status, Connection: close and the reason word as the body (never the
 * policy), then end of our side. */
static void refuse(struct worker *w, int status, enum egress_reason reason)
{
	char resp[256];
	const char *word = egress_reason_word(reason);
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: text/plain\r\n"
			 "Content-Length: %zu\r\n\r\n%s\n",
			 status, status_text(status), strlen(word) + 1, word);

	w->decision = D_DENY;
	w->reason = reason;
	if (n > 0 && (size_t)n < sizeof(resp) && send_all(FD_DATA, resp, (size_t)n))
		w->status = status;
	shutdown(FD_DATA, SHUT_WR);
}

/* ---- the control channel ---- */

/* Receives one packet (at most CTL_MAX bytes; a longer one is an error) within ms. */
static long ctl_recv(struct worker *w, char *buf, size_t cap, int ms)
{
	ssize_t n;

	if (wait_fd(w, FD_CTL, POLLIN, ms) != 1)
		return -1;
	do
		n = recv(FD_CTL, buf, cap, MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		w->ctl_lost = true;
	if (n <= 0 || (size_t)n >= cap)
		return -1;
	buf[n] = '\0';
	return (long)n;
}

/* The start packet: waited for without a timeout (agenticd starts workers ahead, and closes
 * the socket when it has no use for one), with, for a direct connection, the workload's own
 * socket or the sandbox's listener as its one descriptor, which replaces the data socket at
 * FD_DATA. More than one descriptor: refused. */
static long ctl_recv_start(struct worker *w, char *buf, size_t cap)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(2 * sizeof(int))];
	} cm;
	struct iovec iov = { buf, cap - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	struct cmsghdr *c;
	int data = -1, nfd = 0;
	struct stat st;
	ssize_t n;

	if (wait_fd(w, FD_CTL, POLLIN, -1) != 1)
		return -1;
	do
		n = recvmsg(FD_CTL, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	/* every descriptor that came is counted, and closed unless it is one expected (room is
	 * made for one more than may come, so a third is seen, not cut) */
	for (c = CMSG_FIRSTHDR(&mh); n >= 0 && c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0; CMSG_LEN((k + 1) * sizeof(int)) <= c->cmsg_len; k++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
			if (nfd == 0)
				data = got;
			else
				close(got);
			nfd++;
		}
	}
	if (n <= 0 || nfd > 1 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (data >= 0 && (fstat(data, &st) != 0 || !S_ISSOCK(st.st_mode) ||
			   dup2(data, FD_DATA) != FD_DATA))) {
		if (data >= 0 && data != FD_DATA)
			close(data);
		if (n == 0)
			w->ctl_lost = true;
		return -1;
	}
	if (data >= 0 && data != FD_DATA)
		close(data);
	buf[n] = '\0';
	return (long)n;
}

static void own_recv(struct worker *w);

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
	n = ctl_recv_start(w, pkt, sizeof(pkt));
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
	    (json_bool(&d, i, &sent) != 0 || (sent && (own_recv(w), w->ctl_lost))))
		return ERR_PARSE;
	return 0;
}

/* This host's addresses, asked of agenticd when they are needed (at dial, so no older than
 * agenticd's view then): {"own": K} and, when K > 0, a packet of K records (OWN_RECORD bytes:
 * 4 or 6, then the address in 16 bytes). Sets w->own, or leaves it -1 (getifaddrs then). */
static void own_recv(struct worker *w)
{
	static char pkt[CTL_MAX + 1];
	struct json_token tok[8];
	struct json_doc d;
	int64_t v;
	long n;
	int i;

	w->own = -1;
	n = ctl_recv(w, pkt, sizeof(pkt), CTL_TIMEOUT_MS);
	if (n <= 0 || json_parse(&d, pkt, (size_t)n, tok, 8) != 0 || tok[0].type != JSON_OBJECT ||
	    (i = json_obj_get(&d, 0, "own")) < 0 || json_int(&d, i, &v) != 0 || v < 0 ||
	    v > (int64_t)OWN_MAX)
		return;
	/* none: no packet (SEQPACKET's empty packet reads as the end) */
	n = v ? ctl_recv(w, (char *)w->own_rec, sizeof(w->own_rec), CTL_TIMEOUT_MS) : 0;
	if (n != (long)(v * OWN_RECORD))
		return;
	for (long k = 0; k < v; k++)
		if (w->own_rec[k * OWN_RECORD] != 4 && w->own_rec[k * OWN_RECORD] != 6)
			return;
	w->own = (long)v;
	w->own_ms = clock_mono_ms();
}

static void ask_own(struct worker *w)
{
	w->own = -1;
	if (send(FD_CTL, "{\"own\":true}", 12, MSG_NOSIGNAL) != 12) {
		w->ctl_lost = true;
		return;
	}
	own_recv(w);
}

static int b64_value(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Standard base64 with padding: the decoded length, or -1. */
static long b64_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
	size_t o = 0;

	if (len % 4 != 0)
		return -1;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		int pad = 0;
		for (int k = 0; k < 4; k++) {
			if (in[i + k] == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
			} else if (pad || (v[k] = b64_value((unsigned char)in[i + k])) < 0) {
				return -1;
			}
		}
		uint32_t t = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
			     (uint32_t)v[3];
		if (o + 3 - (size_t)pad > cap)
			return -1;
		out[o++] = (uint8_t)(t >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(t >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)t;
	}
	return (long)o;
}

/* Asks agenticd for route i's secret: its length in secret, or -1 (agenticd answered an
 * error, or is gone). Every buffer that held the secret is wiped before returning. */
static long ask_secret(struct worker *w, uint32_t i, uint8_t *secret, size_t cap)
{
	static char pkt[CTL_MAX + 1];
	static char b64[CTL_MAX];
	struct json_token tok[8];
	struct json_doc d;
	char req[64];
	long n, out = -1;
	int k, m;

	m = snprintf(req, sizeof(req), "{\"secret\":%u}", i);
	if (send(FD_CTL, req, (size_t)m, MSG_NOSIGNAL) != m) {
		w->ctl_lost = true;
		return -1;
	}
	n = ctl_recv(w, pkt, sizeof(pkt), CTL_TIMEOUT_MS);
	if (n > 0 && json_parse(&d, pkt, (size_t)n, tok, 8) == 0 && tok[0].type == JSON_OBJECT &&
	    (k = json_obj_get(&d, 0, "secret_b64")) >= 0 &&
	    (m = json_str(&d, k, b64, sizeof(b64))) > 0)
		out = b64_decode(b64, (size_t)m, secret, cap);
	explicit_bzero(pkt, sizeof(pkt));
	explicit_bzero(b64, sizeof(b64));
	if (out <= 0) {
		explicit_bzero(secret, cap);
		return -1;
	}
	return out;
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
			refuse(w, 400, ER_BAD_REQUEST);
			return false;
		}
		rc = left > 0 ? wait_fd(w, FD_DATA, POLLIN, (int)left) : 0;
		if (rc <= 0) {
			if (w->ctl_lost) {
				w->decision = D_DENY;
				w->reason = ER_BAD_REQUEST;
				w->end = EE_CONTROL_LOST;
				return false;
			}
			refuse(w, 400, ER_BAD_REQUEST);
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

/* ---- resolving and connecting ---- */

/* May the connection go to sa, this host's own addresses considered (ERANGE_HOST, and an own
 * address is never "public" or "private")? egress_own_addrs holds 32; a host running many
 * sandboxes has more (a bridge and a link-local address per network). Being own matters
 * only when sa is one of them, so the list is offered in slices of 32: a slice that holds sa
 * is the one whose verdict differs from the verdict with none, and it is the answer. */
static bool addr_allowed(const struct egress_policy *p, const struct sockaddr *sa,
			 const struct ifaddrs *ifa)
{
	static const struct egress_own_addrs none;
	static struct egress_own_addrs slice;
	bool base = egress_addr_allowed(p, sa, &none);
	const struct ifaddrs *e = ifa;

	while (e) {
		slice.n = 0;
		for (; e && slice.n < ARRAY_LEN(slice.addr); e = e->ifa_next) {
			int fam = e->ifa_addr ? e->ifa_addr->sa_family : AF_UNSPEC;
			if (fam != AF_INET && fam != AF_INET6)
				continue;
			memset(&slice.addr[slice.n], 0, sizeof(slice.addr[0]));
			memcpy(&slice.addr[slice.n++], e->ifa_addr, fam == AF_INET ?
			       sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
		}
		if (slice.n > 0 && egress_addr_allowed(p, sa, &slice) != base)
			return !base;
	}
	return base;
}

/* addr_allowed, with this host's addresses as agenticd sent them (the same slices). */
static bool addr_allowed_rec(const struct egress_policy *p, const struct sockaddr *sa,
			     const uint8_t *rec, long n)
{
	static const struct egress_own_addrs none;
	static struct egress_own_addrs slice;
	bool base = egress_addr_allowed(p, sa, &none);
	long k = 0;

	while (k < n) {
		slice.n = 0;
		for (; k < n && slice.n < ARRAY_LEN(slice.addr); k++) {
			const uint8_t *r = rec + k * OWN_RECORD;
			struct sockaddr_storage *ss = &slice.addr[slice.n++];

			memset(ss, 0, sizeof(*ss));
			if (r[0] == 4) {
				struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
				a4->sin_family = AF_INET;
				memcpy(&a4->sin_addr, r + 1, 4);
			} else {
				struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
				a6->sin6_family = AF_INET6;
				memcpy(&a6->sin6_addr, r + 1, 16);
			}
		}
		if (egress_addr_allowed(p, sa, &slice) != base)
			return !base;
	}
	return base;
}

static int connect_one(const struct addrinfo *a)
{
	int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct pollfd p;
	int err = 0, n;
	socklen_t el = sizeof(err);

	if (fd < 0)
		return -1;
	/* a relay forwards what it has at once (see the init's listener) */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	p.fd = fd;
	p.events = POLLOUT;
	do
		n = poll(&p, 1, CONNECT_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	if (n != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
		close(fd);
		return -1;
	}
	/* blocking again: the route's TLS loop expects it; the relay uses MSG_DONTWAIT */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* Which address families this host can use, as AI_ADDRCONFIG asks it (musl: a UDP socket
 * of the family connected to its loopback), probed once: an armed worker does it before its
 * connection comes, so the four system calls a family are off the connection's path. */
static int families = -1; /* bit 0: IPv4, bit 1: IPv6 */

static bool family_usable(int family)
{
	const struct sockaddr_in lo4 = { .sin_family = AF_INET, .sin_port = htons(65535),
					 .sin_addr = { .s_addr = htonl(INADDR_LOOPBACK) } };
	const struct sockaddr_in6 lo6 = { .sin6_family = AF_INET6, .sin6_port = htons(65535),
					  .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	bool ok;

	if (fd < 0)
		return false;
	ok = family == AF_INET ? connect(fd, (const struct sockaddr *)&lo4, sizeof(lo4)) == 0
			       : connect(fd, (const struct sockaddr *)&lo6, sizeof(lo6)) == 0;
	close(fd);
	return ok;
}

static void families_probe(void)
{
	if (families < 0)
		families = (family_usable(AF_INET) ? 1 : 0) | (family_usable(AF_INET6) ? 2 : 0);
}

/* Resolves host, checks every address against the policy, connects to the first that
 * answers. The connected fd, or -1 with the refusal answered. */
static int dial(struct worker *w, const char *host, uint16_t port)
{
	struct ifaddrs *ifa;
	bool allowed = true;
	/* AI_ADDRCONFIG's effect without its cost: musl would probe the families on every call
	 * and then ask for the usable one only (a resolver that fails AAAA fails the lookup);
	 * families_probe did the probing */
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL, *a;
	char ports[8];
	int fd = -1;

	families_probe();
	hints.ai_family = families == 1 ? AF_INET : families == 2 ? AF_INET6 : AF_UNSPEC;
	snprintf(ports, sizeof(ports), "%u", port);
	if (families == 0 || getaddrinfo(host, ports, &hints, &res) != 0 || !res) {
		refuse(w, 502, ER_DNS_FAILED);
		return -1;
	}
	/* what came with the start is taken while fresh: a slow resolution asks again. An armed
	 * worker's came long before its connection, but agenticd ends an armed worker whenever
	 * this host's addresses change, so its list is as fresh as agenticd's; the age counts
	 * from its accept. */
	if (w->own_ask && (w->own < 0 || clock_mono_ms() - w->own_ms > OWN_FRESH_MS))
		ask_own(w);
	if (w->own >= 0) {
		for (a = res; a && allowed; a = a->ai_next)
			allowed = addr_allowed_rec(&w->policy, a->ai_addr, w->own_rec, w->own);
	} else if (getifaddrs(&ifa) != 0) {
		/* without them an own address would pass for a public one: refuse */
		log_warn("egress host addresses unknown", "sandbox=%s conn=%lld err=%s",
			 log_q(w->sandbox), (long long)w->conn, log_q(strerror(errno)));
		freeaddrinfo(res);
		refuse(w, 403, ER_ADDRESS_NOT_ALLOWED);
		return -1;
	} else {
		for (a = res; a && allowed; a = a->ai_next)
			allowed = addr_allowed(&w->policy, a->ai_addr, ifa);
		freeifaddrs(ifa);
	}
	if (!allowed) {
		freeaddrinfo(res);
		refuse(w, 403, ER_ADDRESS_NOT_ALLOWED);
		return -1;
	}
	for (a = res; a && fd < 0; a = a->ai_next)
		fd = connect_one(a);
	freeaddrinfo(res);
	if (fd < 0)
		refuse(w, 502, ER_CONNECT_FAILED);
	return fd;
}

/* ---- the relay ---- */

struct pipe_buf {
	uint8_t b[RELAY_BUF];
	size_t off, len;
	bool eof;      /* the source has ended */
	bool shut;     /* and the sink's write side is shut */
};

/* Moves bytes both ways until both have ended, the byte cap, an error, io_timeout_ms without
 * a byte, or agenticd's hangup. status_sniff: read the upstream's status line into w->status
 * (a forwarded plain request). */
static void relay(struct worker *w, int up, bool status_sniff)
{
	static struct pipe_buf a2u, u2a;
	char sniff[16];
	size_t nsniff = 0;
	uint64_t cap = w->policy.max_bytes;
	int64_t last = clock_mono_ms();

	/* a side that reported a hangup while nothing was wanted of it: polled again only once
	 * something is (else poll would report the hangup at once, forever: a busy loop) */
	bool hung[2] = { false, false };

	/* the state only: clearing the buffers too would touch their 512 KiB, a page fault a
	 * page in a worker just started, on the handshake's path */
	a2u.off = a2u.len = u2a.off = u2a.len = 0;
	a2u.eof = a2u.shut = u2a.eof = u2a.shut = false;
	for (;;) {
		uint64_t used = w->bytes_up + w->bytes_down;
		bool capped = used >= cap;
		struct pollfd p[3] = {
			{ .fd = FD_DATA, .events = 0 },
			{ .fd = up, .events = 0 },
			{ .fd = FD_CTL, .events = 0 },
		};
		int n, left;

		if (a2u.eof && a2u.len == 0 && !a2u.shut) {
			shutdown(up, SHUT_WR);
			a2u.shut = true;
		}
		if (u2a.eof && u2a.len == 0 && !u2a.shut) {
			shutdown(FD_DATA, SHUT_WR);
			u2a.shut = true;
		}
		if (a2u.shut && u2a.shut) {
			w->end = EE_CLOSED;
			return;
		}
		if (capped && a2u.len == 0 && u2a.len == 0) {
			w->end = EE_BYTE_CAP;
			return;
		}
		if (!capped && !a2u.eof && a2u.len == 0)
			p[0].events |= POLLIN;
		if (u2a.len > 0)
			p[0].events |= POLLOUT;
		if (!capped && !u2a.eof && u2a.len == 0)
			p[1].events |= POLLIN;
		if (a2u.len > 0)
			p[1].events |= POLLOUT;
		for (int i = 0; i < 2; i++)
			if (hung[i] && !p[i].events)
				p[i].fd = -1;
		left = (int)(last + w->io_timeout_ms - clock_mono_ms());
		if (left <= 0) {
			w->end = EE_TIMEOUT;
			return;
		}
		n = poll(p, 3, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			w->end = EE_UPSTREAM_ERROR;
			return;
		}
		if (p[2].revents & (POLLHUP | POLLERR | POLLNVAL)) {
			w->ctl_lost = true;
			w->end = EE_CONTROL_LOST;
			return;
		}
		if (n == 0)
			continue;
		/* A side that hung up where nothing more is read from it would wake poll forever:
		 * the workload gone entirely while the upstream still talks, an upstream reset or
		 * closed both ways. */
		if ((p[0].revents & (POLLHUP | POLLERR)) && a2u.eof && !u2a.shut) {
			w->end = EE_CLIENT_GONE;
			return;
		}
		if ((p[1].revents & POLLERR) && u2a.eof) {
			w->end = EE_UPSTREAM_ERROR;
			return;
		}
		if ((p[1].revents & POLLHUP) && u2a.eof && u2a.len == 0) {
			w->end = EE_CLOSED;
			return;
		}
		for (int i = 0; i < 2; i++)
			if (!p[i].events && (p[i].revents & (POLLHUP | POLLERR)))
				hung[i] = true;
		/* workload -> upstream (read only when asked for: a hangup is reported anyway,
		 * and a2u may still hold bytes) */
		if ((p[0].events & POLLIN) && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			size_t want = RELAY_BUF;
			ssize_t r;
			if (want > cap - used)
				want = (size_t)(cap - used);
			r = recv(FD_DATA, a2u.b, want, MSG_DONTWAIT);
			if (r > 0) {
				a2u.off = 0;
				a2u.len = (size_t)r;
				w->bytes_up += (uint64_t)r;
				last = clock_mono_ms();
			} else if (r == 0) {
				a2u.eof = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				w->end = EE_CLIENT_GONE;
				return;
			}
		}
		/* written at once, without waiting for poll's word that it may be: a relay's
		 * round trip is what a workload's TLS handshake is made of */
		if (a2u.len > 0) {
			ssize_t s = send(up, a2u.b + a2u.off, a2u.len, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (s > 0) {
				a2u.off += (size_t)s;
				a2u.len -= (size_t)s;
				last = clock_mono_ms();
			} else if (s < 0 && errno != EAGAIN && errno != EINTR) {
				w->end = EE_UPSTREAM_ERROR;
				return;
			}
		}
		/* upstream -> workload */
		if ((p[1].events & POLLIN) && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			size_t want = RELAY_BUF;
			ssize_t r;
			used = w->bytes_up + w->bytes_down;
			if (want > cap - used)
				want = (size_t)(cap - used);
			r = want ? recv(up, u2a.b, want, MSG_DONTWAIT) : -1;
			if (r > 0) {
				u2a.off = 0;
				u2a.len = (size_t)r;
				w->bytes_down += (uint64_t)r;
				last = clock_mono_ms();
				if (status_sniff && nsniff < sizeof(sniff)) {
					size_t k = sizeof(sniff) - nsniff < (size_t)r ?
						   sizeof(sniff) - nsniff : (size_t)r;
					memcpy(sniff + nsniff, u2a.b, k);
					nsniff += k;
					if (nsniff >= 12 && memcmp(sniff, "HTTP/1.", 7) == 0 &&
					    sniff[8] == ' ' && isdigit((unsigned char)sniff[9]) &&
					    isdigit((unsigned char)sniff[10]) &&
					    isdigit((unsigned char)sniff[11])) {
						int st = atoi((char[4]){ sniff[9], sniff[10], sniff[11], 0 });
						if (st >= 100 && st <= 999)
							w->status = st;
					}
				}
			} else if (r == 0) {
				u2a.eof = true;
			} else if (want && errno != EAGAIN && errno != EINTR) {
				w->end = EE_UPSTREAM_ERROR;
				return;
			}
		}
		if (u2a.len > 0) {
			ssize_t s = send(FD_DATA, u2a.b + u2a.off, u2a.len,
					 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (s > 0) {
				u2a.off += (size_t)s;
				u2a.len -= (size_t)s;
				last = clock_mono_ms();
			} else if (s < 0 && errno != EAGAIN && errno != EINTR) {
				w->end = EE_CLIENT_GONE;
				return;
			}
		}
	}
}

/* fd 3 failed: the workload's side, unless agenticd (which carries it) has gone. A process
 * that dies has its descriptors closed one after the other, so fd 3 may hang up a moment
 * before the control socket does: give that a moment. */
static void settle_end(struct worker *w)
{
	struct pollfd p = { .fd = FD_CTL, .events = 0 };
	int wait = w->end == EE_CLIENT_GONE ? 200 : 0;

	if (w->ctl_lost || (poll(&p, 1, wait) == 1 && (p.revents & (POLLHUP | POLLERR)))) {
		w->ctl_lost = true;
		if (w->end == EE_CLIENT_GONE || w->end == EE_CLOSED)
			w->end = EE_CONTROL_LOST;
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

	if (!send_all(FD_DATA, ok, sizeof(ok) - 1)) {
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
		if (left <= 0 || wait_fd(w, FD_DATA, POLLIN, (int)left) != 1) {
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
	if (!send_all(up, hello, n)) {
		w->end = EE_UPSTREAM_ERROR;
		return;
	}
	w->bytes_up += n;
	if (w->bytes_up >= w->policy.max_bytes) {
		w->end = EE_BYTE_CAP;
		return;
	}
	relay(w, up, false);
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
	if (!send_all(up, out, n) ||
	    (w->head.rest_len && !send_all(up, w->head.rest, w->head.rest_len))) {
		w->end = EE_UPSTREAM_ERROR;
		return;
	}
	w->bytes_up += w->head.raw_len + w->head.rest_len; /* as the workload sent them */
	relay(w, up, true);
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
	long n = ask_secret(w, ri, secret, sizeof(secret));

	if (n < 0) {
		if (w->ctl_lost) {
			w->decision = D_DENY;
			w->reason = ER_SECRET_UNAVAILABLE;
			w->end = EE_CONTROL_LOST;
			return;
		}
		refuse(w, 502, ER_SECRET_UNAVAILABLE);
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
		refuse(w, 429, ER_RATE_LIMITED);
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
		refuse(w, 403, w->reason);
		goto done;
	}
	if (w->reason == ER_ROUTE) {
		if (ri >= w->policy.nroutes) {
			refuse(w, 502, ER_WORKER_FAILED);
			goto done;
		}
		up = dial(w, w->policy.routes[ri].up_host, w->policy.routes[ri].up_port);
		if (up >= 0)
			route(w, ri, up);
	} else {
		up = dial(w, w->head.host, w->head.port);
		if (up >= 0 && egress_head_is_connect(&w->head))
			tunnel(w, up);
		else if (up >= 0)
			forward_plain(w, up);
	}
	settle_end(w);
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
	families = -1;
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
			families_probe();
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
