/* sni.c: the ClientHello's server name (see sni.h). The handshake bytes are gathered from the
 * records first, so a hello split over records (as some clients send a large one) reads the
 * same as one in a single record; then every length field is checked against what holds it. */
#include <stdbool.h>
#include <string.h>

#include "egress/head.h"
#include "egress/sni.h"

struct rd {
	const uint8_t *p;
	size_t n;
};

static bool take(struct rd *r, size_t k, const uint8_t **out)
{
	if (r->n < k)
		return false;
	if (out)
		*out = r->p;
	r->p += k;
	r->n -= k;
	return true;
}

static bool u8(struct rd *r, size_t *v)
{
	const uint8_t *p;
	if (!take(r, 1, &p))
		return false;
	*v = p[0];
	return true;
}

static bool u16(struct rd *r, size_t *v)
{
	const uint8_t *p;
	if (!take(r, 2, &p))
		return false;
	*v = (size_t)p[0] << 8 | p[1];
	return true;
}

/* A sub-reader over the next k bytes of r. */
static bool sub(struct rd *r, size_t k, struct rd *s)
{
	const uint8_t *p;
	if (!take(r, k, &p))
		return false;
	s->p = p;
	s->n = k;
	return true;
}


/* server_name extension data: a list of (type, name); the first host_name (0) counts, and a
 * second host_name is refused (RFC 6066: at most one of each type). */
static int read_server_name(struct rd *ext, char *name)
{
	struct rd list;
	size_t ln;
	bool found = false;

	if (!u16(ext, &ln) || ln == 0 || !sub(ext, ln, &list) || ext->n != 0)
		return ERR_PARSE;
	while (list.n > 0) {
		size_t type, nn;
		const uint8_t *np;
		if (!u8(&list, &type) || !u16(&list, &nn) || !take(&list, nn, &np))
			return ERR_PARSE;
		if (type != 0)
			continue;
		if (found || egress_name_parse((const char *)np, nn, name) != 0)
			return ERR_PARSE;
		found = true;
	}
	return found ? EGRESS_SNI_FOUND : EGRESS_SNI_NONE;
}

static int read_hello(struct rd *r, char *name)
{
	size_t v, n, sn, cn, en;
	struct rd exts;
	bool seen_sni = false;
	int rc = EGRESS_SNI_NONE;

	if (!u16(r, &v) || (v >> 8) != 3 || !take(r, 32, NULL))
		return ERR_PARSE;
	if (!u8(r, &sn) || sn > 32 || !take(r, sn, NULL))
		return ERR_PARSE;
	if (!u16(r, &cn) || cn < 2 || cn % 2 != 0 || !take(r, cn, NULL))
		return ERR_PARSE;
	if (!u8(r, &n) || n < 1 || !take(r, n, NULL))
		return ERR_PARSE;
	if (r->n == 0)
		return EGRESS_SNI_NONE; /* no extensions at all */
	if (!u16(r, &en) || !sub(r, en, &exts) || r->n != 0)
		return ERR_PARSE;
	while (exts.n > 0) {
		size_t type, len;
		struct rd data;
		if (!u16(&exts, &type) || !u16(&exts, &len) || !sub(&exts, len, &data))
			return ERR_PARSE;
		if (type != 0)
			continue;
		if (seen_sni)
			return ERR_PARSE;
		seen_sni = true;
		rc = read_server_name(&data, name);
		if (rc < 0)
			return rc;
	}
	return rc;
}

int egress_sni_parse(const uint8_t *buf, size_t len, char name[EGRESS_HOST_BYTES])
{
	uint8_t hs[EGRESS_HELLO_MAX];
	size_t have = 0, need = 0, pos = 0;
	struct rd r;

	name[0] = '\0';
	/* Gather handshake bytes record by record until the message's length is known and met. */
	while (need == 0 || have < need) {
		size_t rlen;
		if (len - pos < 5)
			return len - pos > 0 && buf[pos] != 22 ? ERR_PARSE : EGRESS_SNI_MORE;
		if (buf[pos] != 22 || buf[pos + 1] != 3)
			return ERR_PARSE;
		rlen = (size_t)buf[pos + 3] << 8 | buf[pos + 4];
		if (rlen == 0 || rlen > 16384)
			return ERR_PARSE;
		if (len - pos - 5 < rlen)
			return EGRESS_SNI_MORE;
		if (have + rlen > sizeof(hs))
			return ERR_PARSE;
		memcpy(hs + have, buf + pos + 5, rlen);
		have += rlen;
		pos += 5 + rlen;
		if (need == 0 && have >= 4) {
			if (hs[0] != 1)
				return ERR_PARSE; /* the first handshake message is no ClientHello */
			need = 4 + ((size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3]);
			if (need > EGRESS_HELLO_MAX || need < 4 + 38)
				return ERR_PARSE;
		}
	}
	if (have != need)
		return ERR_PARSE; /* another message shares the hello's last record: not a client's */
	r.p = hs + 4;
	r.n = need - 4;
	return read_hello(&r, name);
}
