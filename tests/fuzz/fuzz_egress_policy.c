/* fuzz_egress_policy.c: any bytes as an egress policy: the reader never crashes, a refusal is
 * one NUL-terminated "egress...: ..." line, and what it accepts holds the rules (counts within
 * bounds, ports 1 to 65535, lowercase hosts, one "{secret}" and no CR/LF in a value, absolute
 * secret files, ranges of a known kind) and writes back to a text that reads back to the same
 * policy. Every match and the address check run on what was read. */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/policy.h"

static void no_upper(const char *s)
{
	for (; *s; s++)
		if (*s >= 'A' && *s <= 'Z')
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct egress_policy p, q;
	static char out[EGRESS_POLICY_BYTES], again[EGRESS_POLICY_BYTES];
	char err[256];
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };
	uint32_t idx;
	long n;

	memset(err, 'x', sizeof(err));
	if (egress_policy_parse((const char *)data, size, &p, err, sizeof(err)) != 0) {
		if (!memchr(err, '\0', sizeof(err)) || strncmp(err, "egress", 6) != 0 ||
		    !strstr(err, ": "))
			abort();
		return 0;
	}
	if (p.nallow > EGRESS_ALLOW_MAX || p.nroutes > EGRESS_ROUTES_MAX ||
	    p.nranges > EGRESS_RANGES_MAX || p.rate_per_minute < 1 || p.rate_per_minute > 1000000 ||
	    p.max_bytes < 1 || p.max_bytes > (1ull << 50) || p.mode > EGRESS_REPORT)
		abort();
	for (uint32_t i = 0; i < p.nallow; i++) {
		if (p.allow[i].port == 0 || !p.allow[i].host[0])
			abort();
		no_upper(p.allow[i].host);
		if (egress_match_connect(&p, p.allow[i].host, p.allow[i].port) != ER_ALLOWLISTED &&
		    !p.allow[i].suffix)
			abort();
	}
	for (uint32_t i = 0; i < p.nroutes; i++) {
		const struct egress_route *rt = &p.routes[i];
		const char *s = strstr(rt->value, "{secret}");

		if (rt->port == 0 || rt->up_port == 0 || !s || strstr(s + 1, "{secret}") ||
		    strpbrk(rt->value, "\r\n") || rt->secret_file[0] != '/' ||
		    rt->nmethods < 1 || rt->nmethods > EGRESS_METHODS_MAX || rt->nprefixes < 1 ||
		    rt->nprefixes > EGRESS_PREFIXES_MAX)
			abort();
		no_upper(rt->host);
		no_upper(rt->up_host);
		no_upper(rt->header);
		for (uint32_t m = 0; m < rt->nprefixes; m++)
			if (rt->prefixes[m][0] != '/')
				abort();
		if (egress_match_route(&p, rt->host, rt->port, rt->methods[0], rt->prefixes[0],
				       &idx) != ER_ROUTE || idx > i)
			abort();
	}
	for (uint32_t i = 0; i < p.nranges; i++)
		if (p.ranges[i].kind > ERANGE_CIDR ||
		    (p.ranges[i].kind == ERANGE_CIDR && p.ranges[i].bits >
		     (p.ranges[i].family == AF_INET ? 32 : 128)))
			abort();
	n = egress_policy_write(&p, out, sizeof(out));
	if (n < 0 || (size_t)n != strlen(out))
		abort();
	if (egress_policy_parse(out, (size_t)n, &q, err, sizeof(err)) != 0 ||
	    memcmp(&p, &q, sizeof(p)) != 0 || egress_policy_write(&q, again, sizeof(again)) != n ||
	    memcmp(out, again, (size_t)n) != 0)
		abort();
	if (size >= 16) {
		memcpy(&a6.sin6_addr, data, 16);
		egress_addr_allowed(&p, (const struct sockaddr *)&a6, NULL);
	}
	return 0;
}
