/* policy.c: a sandbox's egress policy (policy.h): the strict reader, the normalised writer,
 * the matches and the address classes (docs/EGRESS.md "Policy"). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "egress/policy.h"
#include "json/json.h"

/* A policy's JSON values: 32 allow strings and 8 full routes are some 300; the rest is room
 * for a hostile document to be refused as too large rather than mis-read. */
#define POLICY_TOKENS 1024

static const char *const reason_words[ER_COUNT] = {
	[ER_ALLOWLISTED] = "allowlisted",
	[ER_ROUTE] = "route",
	[ER_HOST_NOT_ALLOWED] = "host_not_allowed",
	[ER_METHOD_NOT_ALLOWED] = "method_not_allowed",
	[ER_PATH_NOT_ALLOWED] = "path_not_allowed",
	[ER_SNI_MISMATCH] = "sni_mismatch",
	[ER_NO_SNI] = "no_sni",
	[ER_ADDRESS_NOT_ALLOWED] = "address_not_allowed",
	[ER_DNS_FAILED] = "dns_failed",
	[ER_CONNECT_FAILED] = "connect_failed",
	[ER_UPSTREAM_TLS_FAILED] = "upstream_tls_failed",
	[ER_RATE_LIMITED] = "rate_limited",
	[ER_BAD_REQUEST] = "bad_request",
	[ER_BUSY] = "busy",
	[ER_WORKER_FAILED] = "worker_failed",
	[ER_SECRET_UNAVAILABLE] = "secret_unavailable",
	[ER_REDIRECT_RETURNED] = "redirect_returned",
};

const char *egress_reason_word(enum egress_reason r)
{
	return (unsigned)r < ER_COUNT ? reason_words[r] : "unknown";
}

static const char *const range_words[] = {
	[ERANGE_LOOPBACK] = "loopback",
	[ERANGE_PRIVATE] = "private",
	[ERANGE_LINK_LOCAL] = "link-local",
	[ERANGE_HOST] = "host",
};

/* ---- reading ---- */

struct rd {
	const struct json_doc *doc;
	struct egress_policy *p;
	char *err;
	size_t errcap;
};

static int bad(struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(struct rd *r, const char *fmt, ...)
{
	va_list ap;

	if (r->errcap) {
		va_start(ap, fmt);
		vsnprintf(r->err, r->errcap, fmt, ap);
		va_end(ap);
	}
	return ERR_PARSE;
}

static enum json_type type_of(const struct rd *r, int idx)
{
	return r->doc->tok[idx].type;
}

/* A field name from the document, as an error may show it: a short word of a-z 0-9 _ -, else
 * a placeholder (a name is no value, but hostile bytes stay out of logs all the same). */
static const char *key_shown(struct rd *r, int k, char *out, size_t cap)
{
	int n = json_str(r->doc, k, out, cap);

	if (n <= 0 || n > 32 || strspn(out, "abcdefghijklmnopqrstuvwxyz0123456789_-") != (size_t)n)
		return "(a field name)";
	return out;
}

/* Only the named fields, each at most once. */
static int known_fields(struct rd *r, int obj, const char *path, const char *const *names,
			size_t nnames)
{
	char key[64];

	for (int k = json_first(r->doc, obj); k >= 0;
	     k = json_next(r->doc, obj, json_next(r->doc, obj, k))) {
		size_t i;

		for (i = 0; i < nnames && !json_str_eq(r->doc, k, names[i]); i++)
			;
		if (i == nnames)
			return bad(r, "%s.%s: unknown field", path, key_shown(r, k, key, sizeof(key)));
		for (int e = json_first(r->doc, obj); e != k;
		     e = json_next(r->doc, obj, json_next(r->doc, obj, e)))
			if (json_str_eq(r->doc, e, names[i]))
				return bad(r, "%s.%s: given twice", path, names[i]);
	}
	return 0;
}

/* A string value into out (cap bytes with the NUL); non-empty. */
static int take_str(struct rd *r, int idx, const char *path, char *out, size_t cap)
{
	int n;

	if (type_of(r, idx) != JSON_STRING)
		return bad(r, "%s: must be a string", path);
	n = json_str(r->doc, idx, out, cap);
	if (n == ERR_LIMIT)
		return bad(r, "%s: at most %zu bytes", path, cap - 1);
	if (n < 0)
		return bad(r, "%s: must not hold U+0000", path);
	if (n == 0)
		return bad(r, "%s: must not be empty", path);
	return 0;
}

void egress_lower(char *s)
{
	for (; *s; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s = (char)(*s + ('a' - 'A'));
}

bool egress_ip_literal(const char *s)
{
	uint8_t a[16];

	return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

/* A DNS name: letters, digits and '-' in labels of 1 to 63 bytes, none starting or ending
 * with '-', at most 253 bytes, the last label not all digits (that would be an address). */
bool egress_dns_name_ok(const char *s)
{
	size_t n = strlen(s), label = 0;
	bool digits = true;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i <= n; i++) {
		char c = s[i];

		if (c == '.' || c == '\0') {
			if (label == 0 || label > 63 || s[i - 1] == '-')
				return false;
			if (c == '\0')
				return !digits;
			label = 0;
			digits = true;
			continue;
		}
		if (c == '-' && label == 0)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-'))
			return false;
		digits = digits && c >= '0' && c <= '9';
		label++;
	}
	return false;
}

static bool port_parse(const char *s, uint16_t *port)
{
	unsigned long v = 0;

	if (!*s || strlen(s) > 5)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	if (v < 1 || v > 65535)
		return false;
	*port = (uint16_t)v;
	return true;
}

/* "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6 literal into host (lowercase) and
 * port (def when none is named). suffix: "*." may lead. 0, or a static phrase of what is
 * wrong. */
static const char *hostport_parse(const char *s, char *host, uint16_t *port, uint16_t def,
				  bool allow_suffix, bool *suffix)
{
	char tmp[EGRESS_HOST_BYTES + 16];
	const char *colon;
	size_t hl;

	*suffix = false;
	*port = def;
	if (strlen(s) >= sizeof(tmp))
		return "too long";
	if (s[0] == '*') {
		if (!allow_suffix)
			return "a wildcard is allowed in allow only";
		if (s[1] != '.')
			return "a wildcard must be a whole first label (\"*.example.com\")";
		*suffix = true;
		s += 2;
	}
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (*suffix || !close)
			return "a bracketed address must be an IPv6 literal";
		hl = (size_t)(close - s - 1);
		if (hl >= EGRESS_HOST_BYTES)
			return "too long";
		memcpy(tmp, s + 1, hl);
		tmp[hl] = '\0';
		if (inet_pton(AF_INET6, tmp, (uint8_t[16]){ 0 }) != 1)
			return "a bracketed address must be an IPv6 literal";
		if (close[1] == ':') {
			if (!port_parse(close + 2, port))
				return "the port must be 1 to 65535";
		} else if (close[1]) {
			return "must be host or host:port";
		}
		memcpy(host, tmp, hl + 1);
		egress_lower(host);
		return NULL;
	}
	colon = strchr(s, ':');
	if (colon && strchr(colon + 1, ':')) {
		/* two colons: a bare IPv6 literal, with no port */
		if (*suffix || inet_pton(AF_INET6, s, (uint8_t[16]){ 0 }) != 1)
			return "must be host or host:port (an IPv6 address in brackets)";
		if (strlen(s) >= EGRESS_HOST_BYTES)
			return "too long";
		memcpy(host, s, strlen(s) + 1);
		egress_lower(host);
		return NULL;
	}
	hl = colon ? (size_t)(colon - s) : strlen(s);
	if (hl == 0)
		return "the host must not be empty";
	if (hl >= EGRESS_HOST_BYTES)
		return "too long";
	memcpy(tmp, s, hl);
	tmp[hl] = '\0';
	if (colon && !port_parse(colon + 1, port))
		return "the port must be 1 to 65535";
	if (strchr(tmp, '*'))
		return "a wildcard must be a whole first label (\"*.example.com\")";
	if (*suffix ? !egress_dns_name_ok(tmp) : !(egress_dns_name_ok(tmp) || egress_ip_literal(tmp)))
		return *suffix ? "what follows \"*.\" must be a DNS name" :
			"the host must be a DNS name (labels of letters, digits and -) or an IP "
			"address";
	memcpy(host, tmp, hl + 1);
	egress_lower(host);
	return NULL;
}

static int read_mode(struct rd *r, int v)
{
	if (json_str_eq(r->doc, v, "enforce"))
		r->p->mode = EGRESS_ENFORCE;
	else if (json_str_eq(r->doc, v, "report"))
		r->p->mode = EGRESS_REPORT;
	else
		return bad(r, "egress.mode: must be \"enforce\" or \"report\"");
	return 0;
}

static int check_array(struct rd *r, int v, const char *path, uint32_t max, bool nonempty)
{
	if (type_of(r, v) != JSON_ARRAY)
		return bad(r, "%s: must be an array", path);
	if (r->doc->tok[v].children > max)
		return bad(r, "%s: at most %u entries", path, max);
	if (nonempty && r->doc->tok[v].children == 0)
		return bad(r, "%s: must hold at least one entry", path);
	return 0;
}

static int add_allow(struct rd *r, const char *s, const char *at)
{
	struct egress_allow *a = &r->p->allow[r->p->nallow];
	const char *why = hostport_parse(s, a->host, &a->port, 443, true, &a->suffix);

	if (why)
		return bad(r, "%s: %s", at, why);
	r->p->nallow++;
	return 0;
}

static int read_allow(struct rd *r, int v)
{
	char s[EGRESS_HOST_BYTES + 16], at[48];
	int rc;

	if ((rc = check_array(r, v, "egress.allow", EGRESS_ALLOW_MAX, false)) != 0)
		return rc;
	for (int i = json_first(r->doc, v); i >= 0; i = json_next(r->doc, v, i)) {
		snprintf(at, sizeof(at), "egress.allow[%u]", r->p->nallow);
		if ((rc = take_str(r, i, at, s, sizeof(s))) != 0 || (rc = add_allow(r, s, at)) != 0)
			return rc;
	}
	return 0;
}

/* RFC 9110 tchar */
static bool token_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      strchr("!#$%&'*+-.^_`|~", *s)))
			return false;
	return true;
}

static bool abs_path_ok(const char *s)
{
	if (s[0] != '/')
		return false;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return false;
	for (const char *c = s; (c = strstr(c, "/..")); c += 3)
		if (c[3] == '/' || c[3] == '\0')
			return false;
	return true;
}

static int read_upstream(struct rd *r, int v, struct egress_route *rt, const char *at)
{
	char s[EGRESS_HOST_BYTES + 32];
	const char *why;
	bool suffix;
	int rc;

	if ((rc = take_str(r, v, at, s, sizeof(s))) != 0)
		return rc;
	if (strncmp(s, "https://", 8) != 0 || strpbrk(s + 8, "/?#@") || !s[8])
		return bad(r, "%s: must be \"https://name\" or \"https://name:port\", nothing more", at);
	if ((why = hostport_parse(s + 8, rt->up_host, &rt->up_port, 443, false, &suffix)) != NULL)
		return bad(r, "%s: %s", at, why);
	return 0;
}

static int read_value(struct rd *r, int v, struct egress_route *rt, const char *at)
{
	const char *first;
	int rc;

	if ((rc = take_str(r, v, at, rt->value, sizeof(rt->value))) != 0)
		return rc;
	for (const char *c = rt->value; *c; c++)
		if (*c == '\r' || *c == '\n')
			return bad(r, "%s: must not hold CR or LF", at);
		else if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
			return bad(r, "%s: must not hold control characters", at);
	first = strstr(rt->value, "{secret}");
	if (!first || strstr(first + 1, "{secret}"))
		return bad(r, "%s: must hold \"{secret}\" exactly once", at);
	return 0;
}

/* Headers that frame or route the request: a credential may not replace them. */
static bool header_reserved(const char *h)
{
	static const char *const reserved[] = { "host", "content-length", "transfer-encoding",
						"connection", "upgrade", "te", "trailer",
						"keep-alive", "proxy-connection",
						"accept-encoding" };

	for (size_t i = 0; i < ARRAY_LEN(reserved); i++)
		if (strcmp(h, reserved[i]) == 0)
			return true;
	return false;
}

static int read_methods(struct rd *r, int v, struct egress_route *rt, const char *path)
{
	char at[80];
	int rc;

	if ((rc = check_array(r, v, path, EGRESS_METHODS_MAX, true)) != 0)
		return rc;
	rt->nmethods = 0;
	for (int i = json_first(r->doc, v); i >= 0; i = json_next(r->doc, v, i)) {
		char *m = rt->methods[rt->nmethods];

		snprintf(at, sizeof(at), "%s[%u]", path, rt->nmethods);
		if ((rc = take_str(r, i, at, m, EGRESS_METHOD_BYTES)) != 0)
			return rc;
		if (strspn(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != strlen(m))
			return bad(r, "%s: must be an uppercase method name (A-Z)", at);
		if (strcmp(m, "CONNECT") == 0)
			return bad(r, "%s: CONNECT is allow's, not a route's", at);
		rt->nmethods++;
	}
	return 0;
}

/* A path an upstream might read as another one (a dot segment, raw or percent-encoded, an
 * encoded slash or backslash) is judged by no prefix: "/v1/../admin" is not under "/v1/". A
 * segment's ";parameters" do not hide a dot segment: servlet containers read "/v1/..;/admin"
 * as "/admin". */
bool egress_path_plain(const char *path, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = path[i];

		if (c == '\\' || (unsigned char)c <= 0x20 || c == 0x7f)
			return false;
		if (c == '%' && i + 2 < n) {
			char hi = path[i + 1], lo = (char)(path[i + 2] | 0x20);

			if ((hi == '2' && (lo == 'e' || lo == 'f')) || (hi == '5' && lo == 'c'))
				return false;
		}
		if (c == '/') {
			size_t s = i + 1, e = s;

			while (e < n && path[e] != '/' && path[e] != ';')
				e++;
			if ((e - s == 1 && path[s] == '.') ||
			    (e - s == 2 && path[s] == '.' && path[s + 1] == '.'))
				return false;
		}
	}
	return true;
}

static int read_prefixes(struct rd *r, int v, struct egress_route *rt, const char *path)
{
	char at[80];
	int rc;

	if ((rc = check_array(r, v, path, EGRESS_PREFIXES_MAX, true)) != 0)
		return rc;
	rt->nprefixes = 0;
	for (int i = json_first(r->doc, v); i >= 0; i = json_next(r->doc, v, i)) {
		char *s = rt->prefixes[rt->nprefixes];

		snprintf(at, sizeof(at), "%s[%u]", path, rt->nprefixes);
		if ((rc = take_str(r, i, at, s, EGRESS_PREFIX_BYTES)) != 0)
			return rc;
		if (s[0] != '/')
			return bad(r, "%s: must start with \"/\"", at);
		for (const char *c = s; *c; c++)
			if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '?' || *c == '#')
				return bad(r, "%s: must not hold spaces, control characters, ? or #",
					   at);
		if (!egress_path_plain(s, strlen(s)))
			return bad(r, "%s: must not hold a dot segment, a backslash or an "
				   "encoded dot, slash or backslash", at);
		rt->nprefixes++;
	}
	return 0;
}

/* A route's credential: its header, the value that carries the secret, the secret's file. */
static int read_credential(struct rd *r, int o, struct egress_route *rt, const char *path)
{
	char at[64];
	int v, rc;

	snprintf(at, sizeof(at), "%s.header", path);
	if ((v = json_obj_get(r->doc, o, "header")) < 0)
		return bad(r, "%s: required", at);
	if ((rc = take_str(r, v, at, rt->header, sizeof(rt->header))) != 0)
		return rc;
	if (!token_ok(rt->header))
		return bad(r, "%s: must be a header name (an HTTP token)", at);
	egress_lower(rt->header);
	if (header_reserved(rt->header))
		return bad(r, "%s: a header that frames or routes the request cannot carry a "
			   "credential", at);

	snprintf(at, sizeof(at), "%s.value", path);
	if ((v = json_obj_get(r->doc, o, "value")) >= 0) {
		if ((rc = read_value(r, v, rt, at)) != 0)
			return rc;
	} else {
		memcpy(rt->value, "{secret}", sizeof("{secret}"));
	}

	snprintf(at, sizeof(at), "%s.secret_file", path);
	if ((v = json_obj_get(r->doc, o, "secret_file")) < 0)
		return bad(r, "%s: required", at);
	if ((rc = take_str(r, v, at, rt->secret_file, sizeof(rt->secret_file))) != 0)
		return rc;
	if (!abs_path_ok(rt->secret_file))
		return bad(r, "%s: must be an absolute path without \"..\" or control characters",
			   at);
	return 0;
}

static int read_route(struct rd *r, int o, uint32_t idx)
{
	static const char *const fields[] = { "host", "upstream", "header", "value",
					      "secret_file", "methods", "path_prefixes" };
	struct egress_route *rt = &r->p->routes[idx];
	char path[32], at[64], s[EGRESS_HOST_BYTES + 16];
	const char *why;
	bool suffix;
	int v, rc;

	memset(rt, 0, sizeof(*rt));
	snprintf(path, sizeof(path), "egress.routes[%u]", idx);
	if (type_of(r, o) != JSON_OBJECT)
		return bad(r, "%s: must be an object", path);
	if ((rc = known_fields(r, o, path, fields, ARRAY_LEN(fields))) != 0)
		return rc;

	snprintf(at, sizeof(at), "%s.host", path);
	if ((v = json_obj_get(r->doc, o, "host")) < 0)
		return bad(r, "%s: required", at);
	if ((rc = take_str(r, v, at, s, sizeof(s))) != 0)
		return rc;
	if ((why = hostport_parse(s, rt->host, &rt->port, 80, false, &suffix)) != NULL)
		return bad(r, "%s: %s", at, why);

	snprintf(at, sizeof(at), "%s.upstream", path);
	if ((v = json_obj_get(r->doc, o, "upstream")) >= 0) {
		if ((rc = read_upstream(r, v, rt, at)) != 0)
			return rc;
	} else {
		memcpy(rt->up_host, rt->host, sizeof(rt->up_host));
		rt->up_port = 443;
	}

	if ((rc = read_credential(r, o, rt, path)) != 0)
		return rc;

	snprintf(at, sizeof(at), "%s.methods", path);
	if ((v = json_obj_get(r->doc, o, "methods")) >= 0) {
		if ((rc = read_methods(r, v, rt, at)) != 0)
			return rc;
	} else {
		memcpy(rt->methods[0], "GET", 4);
		memcpy(rt->methods[1], "POST", 5);
		rt->nmethods = 2;
	}

	snprintf(at, sizeof(at), "%s.path_prefixes", path);
	if ((v = json_obj_get(r->doc, o, "path_prefixes")) >= 0) {
		if ((rc = read_prefixes(r, v, rt, at)) != 0)
			return rc;
	} else {
		memcpy(rt->prefixes[0], "/", 2);
		rt->nprefixes = 1;
	}
	r->p->nroutes = idx + 1;
	return 0;
}

static int read_routes(struct rd *r, int v)
{
	uint32_t n = 0;
	int rc;

	if ((rc = check_array(r, v, "egress.routes", EGRESS_ROUTES_MAX, false)) != 0)
		return rc;
	for (int i = json_first(r->doc, v); i >= 0; i = json_next(r->doc, v, i))
		if ((rc = read_route(r, i, n++)) != 0)
			return rc;
	return 0;
}

static int read_uint(struct rd *r, int v, const char *path, int64_t min, int64_t max,
		     int64_t *out)
{
	if (type_of(r, v) != JSON_NUMBER || json_int(r->doc, v, out) != 0 || *out < min ||
	    *out > max)
		return bad(r, "%s: must be a whole number from %lld to %lld", path, (long long)min,
			   (long long)max);
	return 0;
}

bool egress_cidr_parse(const char *s, struct egress_range *g)
{
	char a[64];
	const char *slash = strchr(s, '/');
	size_t al;
	unsigned long bits = 0;
	unsigned maxbits;

	if (!slash || (al = (size_t)(slash - s)) == 0 || al >= sizeof(a) || !slash[1] ||
	    strlen(slash + 1) > 3)
		return false;
	memcpy(a, s, al);
	a[al] = '\0';
	memset(g->addr, 0, sizeof(g->addr));
	if (inet_pton(AF_INET, a, g->addr) == 1) {
		g->family = AF_INET;
		maxbits = 32;
	} else if (inet_pton(AF_INET6, a, g->addr) == 1) {
		g->family = AF_INET6;
		maxbits = 128;
	} else {
		return false;
	}
	for (const char *c = slash + 1; *c; c++) {
		if (*c < '0' || *c > '9')
			return false;
		bits = bits * 10 + (unsigned long)(*c - '0');
	}
	if (bits > maxbits || (slash[1] == '0' && slash[2]))
		return false;
	g->kind = ERANGE_CIDR;
	g->bits = (uint8_t)bits;
	return true;
}

static bool cidr_host_bits_clear(const struct egress_range *g)
{
	unsigned len = g->family == AF_INET ? 4 : 16;

	for (unsigned i = 0; i < len; i++) {
		unsigned keep = g->bits >= (i + 1) * 8 ? 8 : g->bits > i * 8 ? g->bits - i * 8 : 0;
		uint8_t mask = (uint8_t)(keep ? 0xff << (8 - keep) : 0);

		if (g->addr[i] & (uint8_t)~mask)
			return false;
	}
	return true;
}

static int read_ranges(struct rd *r, int v)
{
	char s[64], at[48];
	int rc;

	if ((rc = check_array(r, v, "egress.allow_ranges", EGRESS_RANGES_MAX, false)) != 0)
		return rc;
	for (int i = json_first(r->doc, v); i >= 0; i = json_next(r->doc, v, i)) {
		struct egress_range *g = &r->p->ranges[r->p->nranges];
		size_t w;

		snprintf(at, sizeof(at), "egress.allow_ranges[%u]", r->p->nranges);
		if ((rc = take_str(r, i, at, s, sizeof(s))) != 0)
			return rc;
		memset(g, 0, sizeof(*g));
		for (w = 0; w < ARRAY_LEN(range_words) && strcmp(s, range_words[w]) != 0; w++)
			;
		if (w < ARRAY_LEN(range_words)) {
			g->kind = (enum egress_range_kind)w;
		} else if (!egress_cidr_parse(s, g)) {
			return bad(r, "%s: must be loopback, private, link-local, host or a CIDR "
				   "(\"10.1.0.0/16\")", at);
		} else if (!cidr_host_bits_clear(g)) {
			return bad(r, "%s: the address has bits set past the prefix length", at);
		}
		r->p->nranges++;
	}
	return 0;
}

/* The older form: [{"host": H, "port": P}, ...] is {"allow": ["H:P", ...]}, with the older
 * form's own words for a bad host. */
#define LIST_HOST_RULE "must be a DNS name (labels of letters, digits and -) or an IP address"

static int read_list_form(struct rd *r)
{
	static const char *const fields[] = { "host", "port" };
	char host[EGRESS_HOST_BYTES + 8], s[EGRESS_HOST_BYTES + 16], path[32], at[48];
	uint32_t n = 0;
	int rc;

	if ((rc = check_array(r, 0, "egress", EGRESS_ALLOW_MAX, false)) != 0)
		return rc;
	for (int e = json_first(r->doc, 0); e >= 0; e = json_next(r->doc, 0, e), n++) {
		int h, pt;
		int64_t port;

		snprintf(path, sizeof(path), "egress[%u]", n);
		if (type_of(r, e) != JSON_OBJECT)
			return bad(r, "%s: must be an object {\"host\", \"port\"}", path);
		if ((rc = known_fields(r, e, path, fields, ARRAY_LEN(fields))) != 0)
			return rc;
		snprintf(at, sizeof(at), "%s.host", path);
		if ((h = json_obj_get(r->doc, e, "host")) < 0)
			return bad(r, "%s: required", at);
		if (type_of(r, h) != JSON_STRING)
			return bad(r, "%s: must be a string", at);
		if (json_str(r->doc, h, host, sizeof(host)) <= 0 ||
		    (strpbrk(host, ":[]*") && inet_pton(AF_INET6, host, (uint8_t[16]){ 0 }) != 1))
			return bad(r, "%s: " LIST_HOST_RULE, at);
		snprintf(at, sizeof(at), "%s.port", path);
		if ((pt = json_obj_get(r->doc, e, "port")) < 0)
			return bad(r, "%s: required", at);
		if ((rc = read_uint(r, pt, at, 1, 65535, &port)) != 0)
			return rc;
		snprintf(s, sizeof(s), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host,
			 (unsigned)port);
		snprintf(at, sizeof(at), "%s.host", path);
		if (add_allow(r, s, at) != 0)
			return bad(r, "%s: " LIST_HOST_RULE, at);
	}
	return 0;
}

static int read_object(struct rd *r)
{
	static const char *const fields[] = { "mode", "allow", "routes", "rate_per_minute",
					      "max_bytes_per_connection", "allow_ranges" };
	int64_t n;
	int v, rc;

	if ((rc = known_fields(r, 0, "egress", fields, ARRAY_LEN(fields))) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "mode")) >= 0 && (rc = read_mode(r, v)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "allow")) >= 0 && (rc = read_allow(r, v)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "routes")) >= 0 && (rc = read_routes(r, v)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "rate_per_minute")) >= 0) {
		if ((rc = read_uint(r, v, "egress.rate_per_minute", 1, 1000000, &n)) != 0)
			return rc;
		r->p->rate_per_minute = (uint32_t)n;
	}
	if ((v = json_obj_get(r->doc, 0, "max_bytes_per_connection")) >= 0) {
		if ((rc = read_uint(r, v, "egress.max_bytes_per_connection", 1, 1ll << 50, &n)) != 0)
			return rc;
		r->p->max_bytes = (uint64_t)n;
	}
	if ((v = json_obj_get(r->doc, 0, "allow_ranges")) >= 0 && (rc = read_ranges(r, v)) != 0)
		return rc;
	return 0;
}

int egress_policy_parse(const char *json, size_t len, struct egress_policy *out, char *err,
			size_t errcap)
{
	struct json_token tok[POLICY_TOKENS];
	char norm[EGRESS_POLICY_BYTES];
	struct json_doc doc;
	struct rd r = { &doc, out, err, errcap };
	int rc;

	if (errcap)
		err[0] = '\0';
	memset(out, 0, sizeof(*out));
	out->mode = EGRESS_ENFORCE;
	out->rate_per_minute = EGRESS_RATE_DEFAULT;
	out->max_bytes = EGRESS_MAX_BYTES_DEFAULT;
	if (len > EGRESS_POLICY_BYTES)
		return bad(&r, "egress: larger than %u bytes", EGRESS_POLICY_BYTES);
	rc = json_parse(&doc, json, len, tok, POLICY_TOKENS);
	if (rc == ERR_LIMIT)
		rc = bad(&r, "egress: too large (at most %d JSON values, nesting %d deep)",
			 POLICY_TOKENS, JSON_MAX_DEPTH);
	else if (rc != 0)
		rc = bad(&r, "egress: not JSON: %s at byte %zu",
			 doc.err_what ? doc.err_what : "malformed", doc.err_offset);
	else if (tok[0].type == JSON_ARRAY)
		rc = read_list_form(&r);
	else if (tok[0].type == JSON_OBJECT)
		rc = read_object(&r);
	else
		rc = bad(&r, "egress: must be an object (or the older list of {\"host\", \"port\"})");
	/* what is accepted can be written back, and held by whoever keeps the normalised text */
	if (rc == 0 && egress_policy_write(out, norm, sizeof(norm)) < 0)
		rc = bad(&r, "egress: the normalised policy would exceed %u bytes",
			 EGRESS_POLICY_BYTES);
	if (rc != 0) {
		memset(out, 0, sizeof(*out));
		out->rate_per_minute = EGRESS_RATE_DEFAULT;
		out->max_bytes = EGRESS_MAX_BYTES_DEFAULT;
	}
	return rc;
}

/* ---- writing ---- */

static void hostport_write(struct json_writer *w, const char *prefix, const char *host,
			   uint16_t port, bool suffix)
{
	char s[EGRESS_HOST_BYTES + 24];

	snprintf(s, sizeof(s), strchr(host, ':') ? "%s%s[%s]:%u" : "%s%s%s:%u", prefix,
		 suffix ? "*." : "", host, (unsigned)port);
	json_str_write(w, s);
}

static void range_write(struct json_writer *w, const struct egress_range *g)
{
	char a[INET6_ADDRSTRLEN], s[INET6_ADDRSTRLEN + 8];

	if (g->kind != ERANGE_CIDR) {
		json_str_write(w, (unsigned)g->kind < ARRAY_LEN(range_words) ?
			       range_words[g->kind] : "loopback");
		return;
	}
	if (!inet_ntop(g->family == AF_INET ? AF_INET : AF_INET6, g->addr, a, sizeof(a)))
		a[0] = '\0';
	snprintf(s, sizeof(s), "%s/%u", a, (unsigned)g->bits);
	json_str_write(w, s);
}

long egress_policy_write(const struct egress_policy *p, char *out, size_t cap)
{
	struct json_writer w;
	struct buf b;

	if (cap < 2)
		return ERR_LIMIT;
	buf_init(&b, out, cap - 1);
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "mode");
	json_str_write(&w, p->mode == EGRESS_REPORT ? "report" : "enforce");
	json_key(&w, "allow");
	json_arr_begin(&w);
	for (uint32_t i = 0; i < p->nallow && i < EGRESS_ALLOW_MAX; i++)
		hostport_write(&w, "", p->allow[i].host, p->allow[i].port, p->allow[i].suffix);
	json_arr_end(&w);
	json_key(&w, "routes");
	json_arr_begin(&w);
	for (uint32_t i = 0; i < p->nroutes && i < EGRESS_ROUTES_MAX; i++) {
		const struct egress_route *rt = &p->routes[i];

		json_obj_begin(&w);
		json_key(&w, "host");
		hostport_write(&w, "", rt->host, rt->port, false);
		json_key(&w, "upstream");
		hostport_write(&w, "https://", rt->up_host, rt->up_port, false);
		json_key(&w, "header");
		json_str_write(&w, rt->header);
		json_key(&w, "value");
		json_str_write(&w, rt->value);
		json_key(&w, "secret_file");
		json_str_write(&w, rt->secret_file);
		json_key(&w, "methods");
		json_arr_begin(&w);
		for (uint32_t m = 0; m < rt->nmethods && m < EGRESS_METHODS_MAX; m++)
			json_str_write(&w, rt->methods[m]);
		json_arr_end(&w);
		json_key(&w, "path_prefixes");
		json_arr_begin(&w);
		for (uint32_t m = 0; m < rt->nprefixes && m < EGRESS_PREFIXES_MAX; m++)
			json_str_write(&w, rt->prefixes[m]);
		json_arr_end(&w);
		json_obj_end(&w);
	}
	json_arr_end(&w);
	json_key(&w, "rate_per_minute");
	json_int_write(&w, p->rate_per_minute);
	json_key(&w, "max_bytes_per_connection");
	json_int_write(&w, (int64_t)p->max_bytes);
	json_key(&w, "allow_ranges");
	json_arr_begin(&w);
	for (uint32_t i = 0; i < p->nranges && i < EGRESS_RANGES_MAX; i++)
		range_write(&w, &p->ranges[i]);
	json_arr_end(&w);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0)
		return ERR_LIMIT;
	out[b.len] = '\0';
	return (long)b.len;
}
