/* fuzz_e2b_net.c: any bytes as an E2B create body's network options (src/e2b/e2b_net.c),
 * against one of three operator policies (the first byte picks: none, names with a route and
 * ranges, addresses only in report mode): it never crashes; a refusal says why and leaves the
 * result untouched; what it accepts is "" or a normalised policy never wider than the
 * operator's (each allow entry within the operator's, each route and range one of the
 * operator's, the same mode, rate and byte cap), and its notes end inside their buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/e2b_net.h"

static const char *const ops[] = {
	NULL,
	"{\"allow\":[\"pypi.org\",\"*.githubusercontent.com\",\"api.x.com:8443\",\"1.2.3.4\","
	"\"[fd00::1]:22\"],\"routes\":[{\"host\":\"api.anthropic.com\",\"header\":\"x-api-key\","
	"\"secret_file\":\"/etc/agentic/secrets/a\"},{\"host\":\"10.0.0.7\",\"header\":"
	"\"authorization\",\"value\":\"Bearer {secret}\",\"secret_file\":\"/s/b\"}],"
	"\"allow_ranges\":[\"private\",\"loopback\",\"host\",\"10.1.0.0/16\",\"fd00::/8\"]}",
	"{\"mode\":\"report\",\"allow\":[\"1.2.3.4\",\"8.8.8.8:53\",\"[2001:db8::1]:443\"],"
	"\"rate_per_minute\":7,\"allow_ranges\":[\"link-local\",\"192.168.0.0/16\"]}",
};

static bool under(const char *h, const char *s)
{
	size_t hl = strlen(h), sl = strlen(s);

	return hl > sl + 1 && h[hl - sl - 1] == '.' && strcmp(h + hl - sl, s) == 0;
}

static void never_wider(const struct egress_policy *o, const struct egress_policy *r)
{
	if (r->mode != o->mode || r->rate_per_minute != o->rate_per_minute ||
	    r->max_bytes != o->max_bytes || (!r->nallow && !r->nroutes))
		abort();
	for (uint32_t i = 0; i < r->nallow; i++) {
		const struct egress_allow *x = &r->allow[i];
		bool in = !x->suffix && egress_match_connect(o, x->host, x->port) == ER_ALLOWLISTED;

		for (uint32_t j = 0; j < o->nallow && !in && x->suffix; j++)
			in = o->allow[j].suffix && o->allow[j].port == x->port &&
			     (!strcmp(o->allow[j].host, x->host) || under(x->host, o->allow[j].host));
		if (!in)
			abort();
	}
	for (uint32_t i = 0; i < r->nroutes; i++) {
		bool in = false;

		for (uint32_t j = 0; j < o->nroutes && !in; j++)
			in = memcmp(&r->routes[i], &o->routes[j], sizeof(r->routes[i])) == 0;
		if (!in)
			abort();
	}
	for (uint32_t i = 0; i < r->nranges; i++) {
		bool in = false;

		for (uint32_t j = 0; j < o->nranges && !in; j++)
			in = memcmp(&r->ranges[i], &o->ranges[j], sizeof(r->ranges[i])) == 0;
		if (!in)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config cfg;
	static struct egress_policy o, r;
	static char out[EGRESS_POLICY_BYTES];
	char why[512], err[256];
	const char *op;

	if (size < 1)
		return 0;
	op = ops[data[0] % 3];
	memset(&o, 0, sizeof(o));
	cfg.e2b_egress_json[0] = '\0';
	if (op && (egress_policy_parse(op, strlen(op), &o, err, sizeof(err)) != 0 ||
		   egress_policy_write(&o, cfg.e2b_egress_json, sizeof(cfg.e2b_egress_json)) < 0))
		abort();
	memset(out, 'x', sizeof(out));
	memset(why, 'y', sizeof(why));
	if (e2b_net_policy(&cfg, (const char *)data + 1, size - 1, out, sizeof(out), why,
			   sizeof(why)) != 0) {
		if (!memchr(why, '\0', sizeof(why)) || !why[0])
			abort();
		for (size_t i = 0; i < sizeof(out); i++)
			if (out[i] != 'x')
				abort();
		return 0;
	}
	if (!memchr(why, '\0', sizeof(why)) || !memchr(out, '\0', sizeof(out)))
		abort();
	if (!out[0])
		return 0;
	if (!op || egress_policy_parse(out, strlen(out), &r, err, sizeof(err)) != 0)
		abort();
	never_wider(&o, &r);
	return 0;
}
