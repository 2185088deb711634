/* e2b_net.c: E2B's create-time network options onto the operator's e2b_egress_policy (e2b_net.h;
 * docs/E2B.md "Network options"). The request is read whole and checked first (a wrong type,
 * an unknown field of network, too many entries: refused, nothing made), then the operator's
 * policy is narrowed: allowOut keeps what it names of the policy, denyOut removes what it
 * covers, a header transform must land on a credential route the policy declares. Owns only
 * its static storage; calls base, json, egress's policy reader and writer. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "e2b/e2b_net.h"
#include "json/json.h"
#include "profile/credscan.h"

/* An allowOut or denyOut entry: a name ("*.x": suffix) or an address range. */
struct dest {
	bool cidr, suffix;
	int family;                 /* cidr: AF_INET (IPv4 carried in IPv6 included) or AF_INET6 */
	uint8_t addr[16], bits;
	char name[EGRESS_HOST_BYTES];
};

struct net_req {
	bool internet;              /* allow_internet_access (default true) */
	bool allow_given;           /* network.allowOut is there */
	struct dest allow[E2B_NET_LIST_MAX], deny[E2B_NET_LIST_MAX];
	bool used[E2B_NET_LIST_MAX]; /* allowOut[i] kept something */
	uint32_t nallow, ndeny;
	char hosts[E2B_NET_HOSTS_MAX][EGRESS_HOST_BYTES]; /* rules' hosts */
	uint32_t nhosts;
	bool asked;                 /* the body says anything of the network */
};

struct net {
	const struct json_doc *doc;
	char *why;
	size_t why_cap, why_len;
};

static struct json_token tok[E2B_NET_TOKENS];
static struct net_req rq;
static struct egress_policy op, out;

size_t e2b_net_table_bytes(void)
{
	return sizeof(tok) + sizeof(rq) + sizeof(op) + sizeof(out);
}

static int refuse(struct net *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct net *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int refuse(struct net *n, const char *fmt, ...)
{
	va_list ap;

	if (n->why_cap) {
		va_start(ap, fmt);
		vsnprintf(n->why, n->why_cap, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* One more note after the others ("; " between), cut where why ends. */
static void note(struct net *n, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (n->why_len + 3 >= n->why_cap)
		return;
	if (n->why_len) {
		memcpy(n->why + n->why_len, "; ", 3);
		n->why_len += 2;
	}
	va_start(ap, fmt);
	r = vsnprintf(n->why + n->why_len, n->why_cap - n->why_len, fmt, ap);
	va_end(ap);
	if (r > 0)
		n->why_len += (size_t)r;
	if (n->why_len >= n->why_cap)
		n->why_len = n->why_cap - 1;
}

/* ---- names and addresses ---- */

/* h is a name below s: it ends in "." s, with a label before. */
static bool under(const char *h, const char *s)
{
	size_t hl = strlen(h), sl = strlen(s);

	return hl > sl + 1 && h[hl - sl - 1] == '.' && strcmp(h + hl - sl, s) == 0;
}

static bool prefix_has(const uint8_t *a, const uint8_t *net, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;

	if (memcmp(a, net, full) != 0)
		return false;
	return rest == 0 || ((a[full] ^ net[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

/* d's address with the bits past its prefix cleared, and IPv4 carried in IPv6 (mapped,
 * NAT64's 64:ff9b::/96, 6to4's 2002::/16) as IPv4, as the egress worker judges addresses. */
static void dest_norm(struct dest *d)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
	unsigned len;

	if (d->family == AF_INET6 && d->bits >= 96 &&
	    (memcmp(d->addr, mapped, 12) == 0 || memcmp(d->addr, nat64, 12) == 0)) {
		memmove(d->addr, d->addr + 12, 4);
		d->family = AF_INET;
		d->bits = (uint8_t)(d->bits - 96);
	} else if (d->family == AF_INET6 && d->bits >= 16 && d->addr[0] == 0x20 &&
		   d->addr[1] == 0x02) {
		memmove(d->addr, d->addr + 2, 4);
		d->family = AF_INET;
		d->bits = (uint8_t)(d->bits - 16);
	}
	len = d->family == AF_INET ? 4 : 16;
	for (unsigned i = 0; i < 16; i++) {
		unsigned keep = i >= len ? 0 : d->bits >= (i + 1) * 8 ? 8 :
				d->bits > i * 8 ? d->bits - i * 8 : 0;

		d->addr[i] &= (uint8_t)(keep ? 0xff << (8 - keep) : 0);
	}
}

/* s, an IP address literal, as a range of one address. */
static bool ip_dest(const char *s, struct dest *d)
{
	memset(d, 0, sizeof(*d));
	d->cidr = true;
	if (inet_pton(AF_INET, s, d->addr) == 1) {
		d->family = AF_INET;
		d->bits = 32;
	} else if (inet_pton(AF_INET6, s, d->addr) == 1) {
		d->family = AF_INET6;
		d->bits = 128;
	} else {
		return false;
	}
	dest_norm(d);
	return true;
}

static bool cidr_dest(const char *s, struct dest *d)
{
	struct egress_range g;

	if (!egress_cidr_parse(s, &g))
		return false;
	memset(d, 0, sizeof(*d));
	d->cidr = true;
	d->family = g.family;
	d->bits = g.bits;
	memcpy(d->addr, g.addr, sizeof(d->addr));
	dest_norm(d);
	return true;
}

/* d is an IPv6 range holding IPv4 in IPv6 (mapped, NAT64, 6to4) without lying inside one of
 * those prefixes (dest_norm made such a range IPv4): all of IPv4, and more, in IPv6's form. */
static bool carries_v4(const struct dest *d)
{
	static const uint8_t mapped[16] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t nat64[16] = { 0x00, 0x64, 0xff, 0x9b };
	static const uint8_t six2four[16] = { 0x20, 0x02 };

	return d->family == AF_INET6 && d->bits > 0 &&
	       (prefix_has(mapped, d->addr, d->bits) || prefix_has(nat64, d->addr, d->bits) ||
		prefix_has(six2four, d->addr, d->bits));
}

/* An entry (s, lowercased in place) into d: NULL, or what is wrong with it. */
static const char *dest_parse(char *s, struct dest *d, bool names)
{
	if (strchr(s, '/') && !cidr_dest(s, d))
		return "a CIDR is ADDRESS/BITS (\"10.0.0.0/8\")";
	if (strchr(s, '/') || ip_dest(s, d))
		return names || !carries_v4(d) ? NULL : "an IPv6 range that holds IPv4 in IPv6 "
			"(::ffff:0:0/96, 64:ff9b::/96, 2002::/16) must lie inside that prefix";
	if (!names)
		return "must be a CIDR or an IP address (E2B's denyOut takes no domain names)";
	egress_lower(s);
	memset(d, 0, sizeof(*d));
	d->suffix = s[0] == '*' && s[1] == '.';
	if (!egress_dns_name_ok(s + (d->suffix ? 2 : 0)))
		return "must be a CIDR, an IP address or a domain name (\"example.com\", "
		       "\"*.example.com\")";
	memcpy(d->name, s + (d->suffix ? 2 : 0), strlen(s + (d->suffix ? 2 : 0)) + 1);
	return NULL;
}

static const char *dest_text(const struct dest *d, char *buf, size_t cap)
{
	char a[INET6_ADDRSTRLEN];

	if (!d->cidr)
		snprintf(buf, cap, "%s%s", d->suffix ? "*." : "", d->name);
	else if (inet_ntop(d->family, d->addr, a, sizeof(a)))
		snprintf(buf, cap, "%s/%u", a, (unsigned)d->bits);
	else
		snprintf(buf, cap, "?");
	return buf;
}

/* Range d holds address range x (its every address). */
static bool cidr_has(const struct dest *d, const struct dest *x)
{
	return d->family == x->family && d->bits <= x->bits && prefix_has(x->addr, d->addr, d->bits);
}

/* A name from the request as a message may echo it: never one shaped like a credential. */
static const char *shown(const char *s)
{
	return credscan_value(s) ? "(a name shaped like a credential)" : s;
}

/* ---- reading the request ---- */

/* A field name from the body as a message may show it: a short word, else NULL. */
static const char *key_shown(const struct net *n, int k, char *buf, size_t cap)
{
	int len = json_str(n->doc, k, buf, cap);

	if (len <= 0 || len > 32 ||
	    strspn(buf, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
	    (size_t)len)
		return NULL;
	return buf;
}

/* obj's member key: its value, -1 when absent or null, -2 (refused) when given twice. */
static int member(struct net *n, int obj, const char *path, const char *key)
{
	int v = -1;

	for (int k = json_first(n->doc, obj); k >= 0;
	     k = json_next(n->doc, obj, json_next(n->doc, obj, k))) {
		if (!json_str_eq(n->doc, k, key))
			continue;
		if (v >= 0)
			return refuse(n, "%s%s: given twice", path, key) - 1;
		v = k + 1;
	}
	if (v >= 0 && n->doc->tok[v].type == JSON_NULL)
		return -1;
	return v;
}

static int read_list(struct net *n, int v, const char *path, struct dest *list, uint32_t *count,
		     bool names)
{
	char s[EGRESS_HOST_BYTES + 8];
	const char *bad;

	if (n->doc->tok[v].type != JSON_ARRAY)
		return refuse(n, "%s: must be an array of strings", path);
	if (n->doc->tok[v].children > E2B_NET_LIST_MAX)
		return refuse(n, "%s: at most %d entries", path, E2B_NET_LIST_MAX);
	for (int i = json_first(n->doc, v); i >= 0; i = json_next(n->doc, v, i)) {
		int len = n->doc->tok[i].type == JSON_STRING ? json_str(n->doc, i, s, sizeof(s)) :
			  -EINVAL;

		if (len == ERR_LIMIT)
			return refuse(n, "%s[%u]: at most %zu bytes", path, *count, sizeof(s) - 1);
		if (len <= 0)
			return refuse(n, "%s[%u]: must be a non-empty string", path, *count);
		if ((bad = dest_parse(s, &list[*count], names)) != NULL)
			return refuse(n, "%s[%u]: %s", path, *count, bad);
		(*count)++;
	}
	return 0;
}

/* RFC 9110 tchar */
static bool token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      strchr("!#$%&'*+-.^_`|~", *s)))
			return false;
	return true;
}

/* One header name of a transform for host: only a credential route of the operator's policy
 * for host with that header takes it (its secret; the value sent is never used). */
static int read_header(struct net *n, int k, int v, const char *host)
{
	char h[EGRESS_HEADER_BYTES];
	bool routed = false;

	if (json_str(n->doc, k, h, sizeof(h)) <= 0 || !token(h))
		return refuse(n, "network.rules[\"%s\"]: a header name must be an HTTP token of at "
			      "most %d bytes", shown(host), EGRESS_HEADER_BYTES - 1);
	if (n->doc->tok[v].type != JSON_STRING)
		return refuse(n, "network.rules[\"%s\"]: a header value must be a string", shown(host));
	egress_lower(h);
	for (uint32_t i = 0; i < op.nroutes; i++) {
		if (strcmp(op.routes[i].host, host) != 0)
			continue;
		routed = true;
		if (strcmp(op.routes[i].header, h) == 0)
			return 0;
	}
	if (!routed)
		return refuse(n, "network.rules[\"%s\"]: the operator's e2b_egress_policy has no "
			      "credential route for this host: agentic injects only credentials the "
			      "operator declared, never a value from the request (docs/E2B.md "
			      "\"Network options\")", shown(host));
	return refuse(n, "network.rules[\"%s\"]: header %s is not the one the operator's "
		      "credential route for this host injects", shown(host), shown(h));
}

/* {"transform": {"headers": {name: value}}}: nothing else (a transform agentic would not
 * apply is refused, never dropped). */
static int read_rule(struct net *n, int r, const char *host)
{
	static const char *const what = "must be {\"transform\": {\"headers\": {...}}}";
	const struct json_doc *d = n->doc;
	int t, h;

	if (d->tok[r].type != JSON_OBJECT || (d->tok[r].children > 0 &&
	    (d->tok[r].children != 1 || !json_str_eq(d, r + 1, "transform"))))
		return refuse(n, "network.rules[\"%s\"]: a rule %s", shown(host), what);
	if ((t = member(n, r, "network.rules.", "transform")) < -1)
		return -1;
	if (t < 0)
		return 0;
	if (d->tok[t].type != JSON_OBJECT || (d->tok[t].children > 0 &&
	    (d->tok[t].children != 1 || !json_str_eq(d, t + 1, "headers"))))
		return refuse(n, "network.rules[\"%s\"]: a rule %s (agentic applies no other "
			      "transform)", shown(host), what);
	if ((h = member(n, t, "network.rules.transform.", "headers")) < -1)
		return -1;
	if (h < 0)
		return 0;
	if (d->tok[h].type != JSON_OBJECT)
		return refuse(n, "network.rules[\"%s\"]: headers must be an object", shown(host));
	if (d->tok[h].children > E2B_NET_HEADERS_MAX)
		return refuse(n, "network.rules[\"%s\"]: at most %d headers", shown(host),
			      E2B_NET_HEADERS_MAX);
	for (int k = json_first(d, h); k >= 0; k = json_next(d, h, json_next(d, h, k)))
		if (read_header(n, k, k + 1, host) != 0)
			return -1;
	return 0;
}

/* rules: {host: [rule, ...]}, each host a name or an address the policy's routes may name. */
static int read_rules(struct net *n, int v)
{
	const struct json_doc *d = n->doc;
	char *host;

	if (d->tok[v].type != JSON_OBJECT)
		return refuse(n, "network.rules: must be an object of host: [rules]");
	if (d->tok[v].children > E2B_NET_HOSTS_MAX)
		return refuse(n, "network.rules: at most %d hosts", E2B_NET_HOSTS_MAX);
	for (int k = json_first(d, v); k >= 0; k = json_next(d, v, json_next(d, v, k))) {
		int r = k + 1;
		struct dest ip;

		host = rq.hosts[rq.nhosts];
		if (json_str(d, k, host, EGRESS_HOST_BYTES) <= 0)
			host[0] = '\0';
		egress_lower(host);
		if (!egress_dns_name_ok(host) && !ip_dest(host, &ip))
			return refuse(n, "network.rules: a key is not a host name or an IP address");
		for (uint32_t i = 0; i < rq.nhosts; i++)
			if (strcmp(rq.hosts[i], host) == 0)
				return refuse(n, "network.rules[\"%s\"]: given twice", shown(host));
		if (d->tok[r].type == JSON_NULL)
			continue;
		if (d->tok[r].type != JSON_ARRAY || d->tok[r].children > E2B_NET_RULES_MAX)
			return refuse(n, "network.rules[\"%s\"]: must be an array of at most %d rules",
				      host, E2B_NET_RULES_MAX);
		for (int i = json_first(d, r); i >= 0; i = json_next(d, r, i))
			if (read_rule(n, i, host) != 0)
				return -1;
		rq.nhosts++;
	}
	return 0;
}

/* The fields of network other than the lists and rules: refused, or ignored with a note. */
static int read_others(struct net *n, int v)
{
	static const char *const known[] = { "allowOut", "denyOut", "rules", "egressProxy",
					     "allowPublicTraffic", "maskRequestHost" };
	const struct json_doc *d = n->doc;
	char key[40];
	int x;

	for (int k = json_first(d, v); k >= 0; k = json_next(d, v, json_next(d, v, k))) {
		size_t i;

		for (i = 0; i < ARRAY_LEN(known) && !json_str_eq(d, k, known[i]); i++)
			;
		if (i == ARRAY_LEN(known) && key_shown(n, k, key, sizeof(key)))
			return refuse(n, "network.%s: not supported by agentic (docs/E2B.md \"Network "
				      "options\")", key);
		if (i == ARRAY_LEN(known))
			return refuse(n, "network: a field agentic does not support (docs/E2B.md "
				      "\"Network options\")");
	}
	if ((x = member(n, v, "network.", "egressProxy")) < -1)
		return -1;
	if (x >= 0)
		return refuse(n, "network.egressProxy: agentic does not tunnel a sandbox's egress "
			      "through a proxy of the client's: it leaves only through agenticd's "
			      "audited egress broker");
	if ((x = member(n, v, "network.", "allowPublicTraffic")) < -1)
		return -1;
	if (x >= 0 && d->tok[x].type != JSON_TRUE && d->tok[x].type != JSON_FALSE)
		return refuse(n, "network.allowPublicTraffic: must be a boolean");
	if (x >= 0)
		note(n, "network.allowPublicTraffic: ignored (an agentic sandbox takes no inbound "
		     "traffic)");
	if ((x = member(n, v, "network.", "maskRequestHost")) < -1)
		return -1;
	if (x >= 0 && d->tok[x].type != JSON_STRING)
		return refuse(n, "network.maskRequestHost: must be a string");
	if (x >= 0)
		note(n, "network.maskRequestHost: ignored (an agentic sandbox takes no inbound "
		     "traffic)");
	return 0;
}

static int read_network(struct net *n, int v)
{
	int x;

	if (n->doc->tok[v].type != JSON_OBJECT)
		return refuse(n, "network: must be an object");
	if (read_others(n, v) != 0)
		return -1;
	if ((x = member(n, v, "network.", "allowOut")) < -1 ||
	    (x >= 0 && read_list(n, x, "network.allowOut", rq.allow, &rq.nallow, true) != 0))
		return -1;
	rq.allow_given = x >= 0;
	if ((x = member(n, v, "network.", "denyOut")) < -1 ||
	    (x >= 0 && read_list(n, x, "network.denyOut", rq.deny, &rq.ndeny, false) != 0))
		return -1;
	if ((x = member(n, v, "network.", "rules")) < -1 || (x >= 0 && read_rules(n, x) != 0))
		return -1;
	rq.asked = rq.asked || rq.allow_given || rq.ndeny || rq.nhosts;
	return 0;
}

static int read_request(struct net *n)
{
	int v;

	memset(&rq, 0, sizeof(rq));
	rq.internet = true;
	if ((v = member(n, 0, "", "allow_internet_access")) < -1)
		return -1;
	if (v >= 0 && json_bool(n->doc, v, &rq.internet) != 0)
		return refuse(n, "allow_internet_access: must be a boolean");
	rq.asked = !rq.internet;
	if ((v = member(n, 0, "", "network")) < -1)
		return -1;
	return v >= 0 ? read_network(n, v) : 0;
}

/* ---- narrowing the operator's policy ---- */

/* What both operator entry a and allowOut entry d allow, into x (a's port). */
static bool meet(const struct egress_allow *a, const struct dest *d, struct egress_allow *x)
{
	struct dest ip;

	*x = *a;
	if (d->cidr && d->bits == 0)
		return true; /* all traffic */
	if (!a->suffix && ip_dest(a->host, &ip))
		return d->cidr && cidr_has(d, &ip);
	if (d->cidr)
		return false;
	if (!a->suffix && !d->suffix)
		return strcmp(a->host, d->name) == 0;
	if (!a->suffix)
		return under(a->host, d->name);
	if (strcmp(a->host, d->name) == 0 || under(a->host, d->name))
		return d->suffix;
	if (!under(d->name, a->host))
		return false;
	memcpy(x->host, d->name, sizeof(x->host));
	x->suffix = d->suffix;
	return true;
}

/* allowOut entry d names host h (a route's: a name or an address). */
static bool names_host(const struct dest *d, const char *h)
{
	struct dest ip;

	if (d->cidr && d->bits == 0)
		return true;
	if (ip_dest(h, &ip))
		return d->cidr && cidr_has(d, &ip);
	if (d->cidr)
		return false;
	return d->suffix ? under(h, d->name) : strcmp(h, d->name) == 0;
}

static int add_allow(struct net *n, const struct egress_allow *x)
{
	for (uint32_t i = 0; i < out.nallow; i++)
		if (out.allow[i].port == x->port && out.allow[i].suffix == x->suffix &&
		    strcmp(out.allow[i].host, x->host) == 0)
			return 0;
	if (out.nallow == EGRESS_ALLOW_MAX)
		return refuse(n, "network.allowOut: the sandbox would get more than %d destinations "
			      "(an egress policy's most): name fewer, or a \"*.\" pattern",
			      EGRESS_ALLOW_MAX);
	out.allow[out.nallow++] = *x;
	return 0;
}

/* allowOut: the operator's destinations and routes it names, nothing else. */
static int narrow_allow(struct net *n)
{
	struct egress_allow x;
	uint32_t kept = 0;
	char t[EGRESS_HOST_BYTES + 8];

	out.nallow = 0;
	for (uint32_t i = 0; i < op.nallow; i++)
		for (uint32_t j = 0; j < rq.nallow; j++)
			if (meet(&op.allow[i], &rq.allow[j], &x)) {
				if (add_allow(n, &x) != 0)
					return -1;
				rq.used[j] = true;
			}
	for (uint32_t i = 0; i < op.nroutes; i++) {
		bool named = false;

		for (uint32_t j = 0; j < rq.nallow; j++)
			if (names_host(&rq.allow[j], op.routes[i].host))
				named = rq.used[j] = true;
		if (named)
			out.routes[kept++] = op.routes[i];
	}
	out.nroutes = kept;
	for (uint32_t j = 0; j < rq.nallow; j++)
		if (!rq.used[j])
			note(n, "network.allowOut[%u] %s: the operator's policy allows nothing of it "
			     "(dropped)", j, shown(dest_text(&rq.allow[j], t, sizeof(t))));
	return 0;
}

/* The address ranges no name reaches without a policy's allow_ranges: the egress worker's
 * classes other than public (egress/match.c), by the range kind that admits each (CIDR:
 * none but a CIDR). */
static const struct { enum egress_range_kind kind; int family; uint8_t net[16]; uint8_t bits; }
	nonpublic[] = {
	{ ERANGE_CIDR, AF_INET, { 0 }, 8 },
	{ ERANGE_CIDR, AF_INET, { 224 }, 4 },
	{ ERANGE_CIDR, AF_INET, { 240 }, 4 },
	{ ERANGE_LOOPBACK, AF_INET, { 127 }, 8 },
	{ ERANGE_PRIVATE, AF_INET, { 10 }, 8 },
	{ ERANGE_PRIVATE, AF_INET, { 172, 16 }, 12 },
	{ ERANGE_PRIVATE, AF_INET, { 192, 168 }, 16 },
	{ ERANGE_PRIVATE, AF_INET, { 100, 64 }, 10 },
	{ ERANGE_LINK_LOCAL, AF_INET, { 169, 254 }, 16 },
	{ ERANGE_CIDR, AF_INET, { 192, 0, 0 }, 24 },
	{ ERANGE_CIDR, AF_INET, { 192, 0, 2 }, 24 },
	{ ERANGE_CIDR, AF_INET, { 198, 51, 100 }, 24 },
	{ ERANGE_CIDR, AF_INET, { 203, 0, 113 }, 24 },
	{ ERANGE_CIDR, AF_INET, { 198, 18 }, 15 },
	{ ERANGE_LOOPBACK, AF_INET6, { [15] = 1 }, 128 },
	{ ERANGE_CIDR, AF_INET6, { 0 }, 96 },
	{ ERANGE_CIDR, AF_INET6, { 0xff }, 8 },
	{ ERANGE_PRIVATE, AF_INET6, { 0xfc }, 7 },
	{ ERANGE_LINK_LOCAL, AF_INET6, { 0xfe, 0x80 }, 10 },
	{ ERANGE_CIDR, AF_INET6, { 0xfe, 0xc0 }, 10 },
	{ ERANGE_CIDR, AF_INET6, { 0x20, 0x01, 0x0d, 0xb8 }, 32 },
	{ ERANGE_CIDR, AF_INET6, { 0x20, 0x01 }, 32 },
	{ ERANGE_CIDR, AF_INET6, { 0x01 }, 64 },
};

/* d holds an address the egress worker would take as public. */
static bool has_public(const struct dest *d)
{
	for (size_t i = 0; i < ARRAY_LEN(nonpublic); i++)
		if (nonpublic[i].family == d->family && nonpublic[i].bits <= d->bits &&
		    prefix_has(d->addr, nonpublic[i].net, nonpublic[i].bits))
			return false;
	return true;
}

static bool overlap(int fam, const uint8_t *a, unsigned abits, const struct dest *d)
{
	return fam == d->family && prefix_has(a, d->addr, abits < d->bits ? abits : d->bits);
}

/* Range g may admit an address of d ("host": this host's own, which may be anywhere). */
static bool range_meets(const struct egress_range *g, const struct dest *d)
{
	if (g->kind == ERANGE_HOST)
		return true;
	if (g->kind == ERANGE_CIDR) {
		struct dest r = { .cidr = true, .family = g->family, .bits = g->bits };

		memcpy(r.addr, g->addr, sizeof(r.addr));
		dest_norm(&r);
		return overlap(r.family, r.addr, r.bits, d);
	}
	for (size_t i = 0; i < ARRAY_LEN(nonpublic); i++)
		if (nonpublic[i].kind == g->kind &&
		    overlap(nonpublic[i].family, nonpublic[i].net, nonpublic[i].bits, d))
			return true;
	return false;
}

static bool policy_names(const struct egress_policy *p)
{
	struct dest ip;

	for (uint32_t i = 0; i < p->nallow; i++)
		if (p->allow[i].suffix || !ip_dest(p->allow[i].host, &ip))
			return true;
	for (uint32_t i = 0; i < p->nroutes; i++)
		if (!ip_dest(p->routes[i].host, &ip))
			return true;
	return false;
}

/* An address entry of the policy (allow's or a route's host) inside one of denyOut's. */
static bool denied(const char *host, bool suffix)
{
	struct dest ip;

	if (suffix || !ip_dest(host, &ip))
		return false;
	for (uint32_t j = 0; j < rq.ndeny; j++)
		if (cidr_has(&rq.deny[j], &ip))
			return true;
	return false;
}

/* denyOut without allowOut: what it covers leaves the policy. A public range cannot be kept
 * from a name (resolved at each connection): refused when the policy names any. */
static int apply_deny(struct net *n)
{
	uint32_t k = 0, before = out.nallow + out.nroutes + out.nranges;

	for (uint32_t j = 0; j < rq.ndeny; j++)
		if (has_public(&rq.deny[j]) && policy_names(&out))
			return refuse(n, "network.denyOut[%u]: agentic allows destinations by name and "
				      "cannot keep a name from resolving into a public address range: "
				      "deny all traffic (\"0.0.0.0/0\") and list what may be reached in "
				      "allowOut", j);
	for (uint32_t i = 0; i < out.nallow; i++)
		if (!denied(out.allow[i].host, out.allow[i].suffix))
			out.allow[k++] = out.allow[i];
	out.nallow = k;
	k = 0;
	for (uint32_t i = 0; i < out.nroutes; i++)
		if (!denied(out.routes[i].host, false))
			out.routes[k++] = out.routes[i];
	out.nroutes = k;
	k = 0;
	for (uint32_t i = 0; i < out.nranges; i++) {
		bool meets = false;

		for (uint32_t j = 0; j < rq.ndeny && !meets; j++)
			meets = range_meets(&out.ranges[i], &rq.deny[j]);
		if (!meets)
			out.ranges[k++] = out.ranges[i];
	}
	out.nranges = k;
	if (out.nallow + out.nroutes + out.nranges < before)
		note(n, "network.denyOut: %u of the operator's destinations, routes and address "
		     "ranges removed (a range is removed whole where it meets one)",
		     before - (out.nallow + out.nroutes + out.nranges));
	return 0;
}

static bool deny_all(void)
{
	for (uint32_t j = 0; j < rq.ndeny; j++)
		if (rq.deny[j].bits == 0)
			return true;
	return !rq.internet;
}

static int narrow(struct net *n, bool operator_set)
{
	out = op;
	if (!operator_set) {
		if (rq.asked)
			note(n, "no egress: the operator set no e2b_egress_policy");
		return 0;
	}
	if (rq.allow_given) {
		if (narrow_allow(n) != 0)
			return -1;
	} else if (deny_all()) {
		out.nallow = out.nroutes = 0;
	} else if (rq.ndeny && apply_deny(n) != 0) {
		return -1;
	}
	for (uint32_t h = 0; h < rq.nhosts; h++) {
		bool kept = false;

		for (uint32_t i = 0; i < out.nroutes; i++)
			kept = kept || strcmp(out.routes[i].host, rq.hosts[h]) == 0;
		note(n, kept ? "network.rules[\"%s\"]: the operator's credential route for it "
		     "injects its own secret (the values sent are not used)" :
		     "network.rules[\"%s\"]: not applied (no route to it is left)",
		     shown(rq.hosts[h]));
	}
	if (op.mode == EGRESS_REPORT && (out.nallow || out.nroutes) &&
	    (rq.allow_given || rq.ndeny))
		note(n, "the operator's policy is in report mode: what it would deny is let through "
		     "and audited");
	return 0;
}

int e2b_net_policy(const struct config *cfg, const char *body, size_t len, char *egress_json,
		   size_t cap, char *why, size_t why_cap)
{
	static char text[EGRESS_POLICY_BYTES];
	struct json_doc doc;
	struct net n = { &doc, why, why_cap, 0 };
	bool operator_set = cfg->e2b_egress_json[0] != '\0';
	char err[256];
	int r;

	if (why_cap)
		why[0] = '\0';
	r = json_parse(&doc, body, len, tok, E2B_NET_TOKENS);
	if (r == ERR_LIMIT)
		return refuse(&n, "the body is too large (at most %d JSON values, nesting %d deep)",
			      E2B_NET_TOKENS, JSON_MAX_DEPTH);
	if (r != 0)
		return refuse(&n, "the body is not valid JSON (byte %zu: %s)", doc.err_offset,
			      doc.err_what ? doc.err_what : "malformed");
	if (doc.tok[0].type != JSON_OBJECT)
		return refuse(&n, "the body is a JSON object");
	memset(&op, 0, sizeof(op));
	if (operator_set &&
	    egress_policy_parse(cfg->e2b_egress_json, strlen(cfg->e2b_egress_json), &op, err,
				sizeof(err)) != 0)
		return refuse(&n, "the operator's e2b_egress_policy does not read: %s", err);
	if (read_request(&n) != 0 || narrow(&n, operator_set) != 0)
		return -1;
	text[0] = '\0';
	if ((out.nallow || out.nroutes) && egress_policy_write(&out, text, sizeof(text)) < 0)
		return refuse(&n, "network.allowOut: the sandbox's policy would exceed %u bytes: name "
			      "fewer destinations", EGRESS_POLICY_BYTES);
	if (strlen(text) >= cap)
		return refuse(&n, "the sandbox's policy does not fit %zu bytes", cap);
	if (!text[0] && (op.nallow || op.nroutes) && !deny_all())
		note(&n, "no destination is left: the sandbox has no egress");
	memcpy(egress_json, text, strlen(text) + 1);
	return 0;
}

static void info_host(struct json_writer *w, const char *host, uint16_t port, bool suffix,
		      uint16_t def)
{
	char s[EGRESS_HOST_BYTES + 16];

	if (port == def)
		snprintf(s, sizeof(s), "%s%s", suffix ? "*." : "", host);
	else
		snprintf(s, sizeof(s), strchr(host, ':') ? "%s[%s]:%u" : "%s%s:%u",
			 suffix ? "*." : "", host, (unsigned)port);
	json_str_write(w, s);
}

void e2b_net_info(const char *egress_json, struct json_writer *w)
{
	char err[8];

	if (!egress_json[0] ||
	    egress_policy_parse(egress_json, strlen(egress_json), &out, err, sizeof(err)) != 0)
		memset(&out, 0, sizeof(out));
	json_key(w, "allowOut");
	json_arr_begin(w);
	for (uint32_t i = 0; i < out.nallow; i++)
		info_host(w, out.allow[i].host, out.allow[i].port, out.allow[i].suffix, 443);
	for (uint32_t i = 0; i < out.nroutes; i++)
		info_host(w, out.routes[i].host, out.routes[i].port, false, 80);
	json_arr_end(w);
	json_key(w, "denyOut");
	json_arr_begin(w);
	json_str_write(w, "0.0.0.0/0");
	json_str_write(w, "::/0");
	json_arr_end(w);
}
