/* match.c: what a policy allows (policy.h): a CONNECT's host and port, a request's route by
 * its host, port, method and path, and an address by its class (loopback, private,
 * link-local, this host's own) and the policy's ranges. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "egress/policy.h"

/* ---- matching ---- */

/* The name as the request gave it, lowercase, brackets of an IPv6 literal dropped: false
 * when it cannot be a name of the policy. */
static bool name_norm(const char *in, char *out)
{
	size_t n = in ? strlen(in) : 0;

	if (n >= 2 && in[0] == '[' && in[n - 1] == ']') {
		in++;
		n -= 2;
	}
	if (n == 0 || n >= EGRESS_HOST_BYTES)
		return false;
	memcpy(out, in, n);
	out[n] = '\0';
	egress_lower(out);
	return true;
}

enum egress_reason egress_match_connect(const struct egress_policy *p, const char *host,
					uint16_t port)
{
	char h[EGRESS_HOST_BYTES];
	size_t hl;

	if (!name_norm(host, h))
		return ER_HOST_NOT_ALLOWED;
	hl = strlen(h);
	for (uint32_t i = 0; i < p->nallow && i < EGRESS_ALLOW_MAX; i++) {
		const struct egress_allow *a = &p->allow[i];
		size_t sl = strlen(a->host);

		if (a->port != port)
			continue;
		if (!a->suffix && strcmp(h, a->host) == 0)
			return ER_ALLOWLISTED;
		/* "*.example.com": a name ending in ".example.com", with a label before it */
		if (a->suffix && hl > sl + 1 && h[hl - sl - 1] == '.' &&
		    strcmp(h + hl - sl, a->host) == 0 && !egress_ip_literal(h))
			return ER_ALLOWLISTED;
	}
	return ER_HOST_NOT_ALLOWED;
}

enum egress_reason egress_match_route(const struct egress_policy *p, const char *host,
				      uint16_t port, const char *method, const char *path,
				      uint32_t *route)
{
	char h[EGRESS_HOST_BYTES];
	bool host_seen = false, method_seen = false;
	size_t plen;

	if (!name_norm(host, h) || !method || !path)
		return ER_HOST_NOT_ALLOWED;
	plen = strcspn(path, "?#");
	for (uint32_t i = 0; i < p->nroutes && i < EGRESS_ROUTES_MAX; i++) {
		const struct egress_route *rt = &p->routes[i];
		bool m_ok = false;

		if (rt->port != port || strcmp(rt->host, h) != 0)
			continue;
		host_seen = true;
		for (uint32_t m = 0; m < rt->nmethods && !m_ok; m++)
			m_ok = strcmp(rt->methods[m], method) == 0;
		if (!m_ok)
			continue;
		method_seen = true;
		if (path[0] != '/' || !egress_path_plain(path, plen))
			continue;
		for (uint32_t x = 0; x < rt->nprefixes; x++) {
			size_t xl = strlen(rt->prefixes[x]);

			if (xl <= plen && memcmp(path, rt->prefixes[x], xl) == 0) {
				if (route)
					*route = i;
				return ER_ROUTE;
			}
		}
	}
	if (!host_seen)
		return ER_HOST_NOT_ALLOWED;
	return method_seen ? ER_PATH_NOT_ALLOWED : ER_METHOD_NOT_ALLOWED;
}

/* ---- address classes ---- */

enum addr_class { AC_PUBLIC, AC_NEVER, AC_LOOPBACK, AC_PRIVATE, AC_LINK_LOCAL, AC_SPECIAL };

/* a of family fam (AF_INET: 4 bytes, AF_INET6: 16) inside net/bits? */
static bool prefix_has(const uint8_t *a, const uint8_t *net, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;

	if (memcmp(a, net, full) != 0)
		return false;
	return rest == 0 || ((a[full] ^ net[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

static enum addr_class class4(const uint8_t *a)
{
	struct { uint8_t net[4]; unsigned bits; enum addr_class c; } const t[] = {
		{ { 0, 0, 0, 0 }, 8, AC_NEVER },          /* "this network" */
		{ { 224, 0, 0, 0 }, 4, AC_NEVER },        /* multicast */
		{ { 240, 0, 0, 0 }, 4, AC_NEVER },        /* reserved, and the broadcast */
		{ { 127, 0, 0, 0 }, 8, AC_LOOPBACK },
		{ { 10, 0, 0, 0 }, 8, AC_PRIVATE },
		{ { 172, 16, 0, 0 }, 12, AC_PRIVATE },
		{ { 192, 168, 0, 0 }, 16, AC_PRIVATE },
		{ { 100, 64, 0, 0 }, 10, AC_PRIVATE },    /* CGNAT */
		{ { 169, 254, 0, 0 }, 16, AC_LINK_LOCAL },
		{ { 192, 0, 0, 0 }, 24, AC_SPECIAL },     /* IETF protocol assignments */
		{ { 192, 0, 2, 0 }, 24, AC_SPECIAL },     /* documentation */
		{ { 198, 51, 100, 0 }, 24, AC_SPECIAL },
		{ { 203, 0, 113, 0 }, 24, AC_SPECIAL },
		{ { 198, 18, 0, 0 }, 15, AC_SPECIAL },    /* benchmarking */
	};

	for (size_t i = 0; i < ARRAY_LEN(t); i++)
		if (prefix_has(a, t[i].net, t[i].bits))
			return t[i].c;
	return AC_PUBLIC;
}

static enum addr_class class6(const uint8_t *a)
{
	static const uint8_t zero[16], one[16] = { [15] = 1 };
	struct { uint8_t net[16]; unsigned bits; enum addr_class c; } const t[] = {
		{ { 0xff }, 8, AC_NEVER },                  /* multicast */
		{ { 0xfc }, 7, AC_PRIVATE },                /* ULA */
		{ { 0xfe, 0x80 }, 10, AC_LINK_LOCAL },
		{ { 0xfe, 0xc0 }, 10, AC_SPECIAL },         /* site-local, deprecated */
		{ { 0x20, 0x01, 0x0d, 0xb8 }, 32, AC_SPECIAL }, /* documentation */
		{ { 0x20, 0x01, 0x00, 0x00 }, 32, AC_SPECIAL }, /* Teredo */
		{ { 0x01, 0x00 }, 64, AC_SPECIAL },         /* discard */
		{ { 0 }, 96, AC_SPECIAL },                  /* IPv4-compatible, deprecated */
	};

	if (memcmp(a, zero, 16) == 0)
		return AC_NEVER;
	if (memcmp(a, one, 16) == 0)
		return AC_LOOPBACK;
	for (size_t i = 0; i < ARRAY_LEN(t); i++)
		if (prefix_has(a, t[i].net, t[i].bits))
			return t[i].c;
	return AC_PUBLIC;
}

/* sa as 4 bytes (IPv4, and IPv6 that carries one: mapped, NAT64's 64:ff9b::/96, 6to4's
 * 2002::/16) or 16: the family, or 0 when it is no address. */
static int addr_of(const struct sockaddr *sa, uint8_t out[16])
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };

	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		return AF_INET;
	}
	if (sa->sa_family != AF_INET6)
		return 0;
	memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
	if (memcmp(out, mapped, 12) == 0 || memcmp(out, nat64, 12) == 0) {
		memmove(out, out + 12, 4);
		return AF_INET;
	}
	if (out[0] == 0x20 && out[1] == 0x02) {
		memmove(out, out + 2, 4);
		return AF_INET;
	}
	return AF_INET6;
}

static bool is_own(const uint8_t *a, int fam, const struct egress_own_addrs *own)
{
	for (uint32_t i = 0; own && i < own->n && i < ARRAY_LEN(own->addr); i++) {
		uint8_t b[16];

		if (addr_of((const struct sockaddr *)&own->addr[i], b) == fam &&
		    memcmp(a, b, fam == AF_INET ? 4 : 16) == 0)
			return true;
	}
	return false;
}

bool egress_addr_allowed(const struct egress_policy *p, const struct sockaddr *sa,
			 const struct egress_own_addrs *own)
{
	uint8_t a[16];
	int fam = addr_of(sa, a);
	enum addr_class c;
	bool mine;

	if (!fam)
		return false;
	c = fam == AF_INET ? class4(a) : class6(a);
	if (c == AC_NEVER)
		return false;
	/* the loopback is judged as loopback even though the host holds it */
	mine = c != AC_LOOPBACK && is_own(a, fam, own);
	if (c == AC_PUBLIC && !mine)
		return true;
	for (uint32_t i = 0; i < p->nranges && i < EGRESS_RANGES_MAX; i++) {
		const struct egress_range *g = &p->ranges[i];

		switch (g->kind) {
		case ERANGE_LOOPBACK:
			if (c == AC_LOOPBACK)
				return true;
			break;
		case ERANGE_PRIVATE:
			if (c == AC_PRIVATE && !mine)
				return true;
			break;
		case ERANGE_LINK_LOCAL:
			if (c == AC_LINK_LOCAL && !mine)
				return true;
			break;
		case ERANGE_HOST:
			if (mine)
				return true;
			break;
		case ERANGE_CIDR:
			if (g->family == fam && g->bits <= (fam == AF_INET ? 32 : 128) &&
			    prefix_has(a, g->addr, g->bits))
				return true;
			break;
		}
	}
	return false;
}
