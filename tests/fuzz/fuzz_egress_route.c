/* fuzz_egress_route.c: the credential route's pure pieces on arbitrary bytes (src/egress/
 * route.c, body.c). Input: byte 0 picks a feed size, byte 1 a secret length, then the secret,
 * then a request as a workload sends it (head, body, whatever follows).
 * - egress_route_rewrite_framed: a head it accepts comes out as one well-formed head (CRLF
 *   lines only, one empty line at its end, the injected header once, no dropped header, the
 *   request line and Host ours);
 * - egress_body_take: the bytes taken and the end found are the same whatever the pieces;
 * - the mask: the same whatever the pieces, the length kept, equal to a naive reference, and
 *   (for a secret without '*') no occurrence left. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "egress/body.h"
#include "egress/route.h"

#define IN_MAX 8192u

static char out[IN_MAX + 2 * EGRESS_SECRET_BYTES + 1024];
static char raw[IN_MAX + 1];

static bool line_named(const char *line, size_t len, const char *name)
{
	size_t n = strlen(name);

	return len > n && line[n] == ':' && strncasecmp(line, name, n) == 0;
}

static void check_head(const char *h, size_t n, const uint8_t *sec, size_t slen)
{
	static const char *const dropped[] = { "authorization", "proxy-authorization", "cookie",
					       "proxy-connection", "keep-alive", "te", "upgrade" };
	size_t injected = 0, hosts = 0, closes = 0;
	const char *p = h, *end = h + n;

	if (n < 4 || memcmp(end - 4, "\r\n\r\n", 4) != 0 ||
	    strncmp(h, "POST /p?q HTTP/1.1\r\nHost: up.example\r\n", 38) != 0)
		abort();
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t len;

		if (!eol || eol == p || eol[-1] != '\r')
			abort();
		len = (size_t)(eol - 1 - p);
		if (memchr(p, '\r', len))
			abort(); /* a bare CR inside a line */
		if (len == 0 && eol + 1 != end)
			abort(); /* an empty line before the end: a second head */
		for (size_t i = 0; i < ARRAY_LEN(dropped); i++)
			if (line_named(p, len, dropped[i]))
				abort();
		if (line_named(p, len, "x-api-key")) {
			if (len != 11 + slen || memcmp(p + 11, sec, slen) != 0)
				abort();
			injected++;
		}
		hosts += line_named(p, len, "host");
		closes += line_named(p, len, "connection");
		p = eol + 1;
	}
	if (injected != 1 || hosts != 1 || closes != 1)
		abort();
}

static long take_pieces(struct egress_body b, const uint8_t *in, size_t n, size_t piece,
			bool *done)
{
	size_t taken = 0;

	for (size_t at = 0; at < n && !b.done; at += piece) {
		size_t len = at + piece < n ? piece : n - at;
		long t = egress_body_take(&b, in + at, len);

		if (t < 0)
			return t;
		if ((size_t)t > len || ((size_t)t < len && !b.done))
			abort();
		taken += (size_t)t;
		if ((size_t)t < len)
			break;
	}
	*done = b.done;
	return (long)taken;
}

static struct egress_mask mask;
static uint8_t m1[IN_MAX + EGRESS_SECRET_BYTES], m2[IN_MAX + EGRESS_SECRET_BYTES];
static uint8_t ref[IN_MAX];

static size_t mask_pieces(const uint8_t *sec, size_t slen, const uint8_t *in, size_t n,
			  size_t piece, uint8_t *res)
{
	size_t o = 0;

	egress_mask_init(&mask, sec, slen);
	for (size_t at = 0; at < n; at += piece) {
		size_t len = at + piece < n ? piece : n - at;

		o += egress_mask_feed(&mask, in + at, len, res + o);
		if (slen && mask.nheld >= slen)
			abort();
	}
	return o + egress_mask_flush(&mask, res + o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct egress_route rt0 = {
		.host = "api.example", .port = 80, .up_host = "up.example", .up_port = 443,
		.header = "x-api-key", .value = "{secret}",
	};
	struct egress_head h = { .method = "POST", .host = "api.example", .port = 80,
				 .path = "/p?q" };
	struct egress_body b;
	const uint8_t *sec, *req, *hend;
	size_t piece, slen, rlen;
	long n;

	if (size < 2 || size > IN_MAX)
		return 0;
	piece = 1 + data[0] % 64;
	slen = data[1] % 32;
	if (slen > size - 2)
		slen = size - 2;
	sec = data + 2;
	req = sec + slen;
	rlen = size - 2 - slen;

	/* The mask, on the whole input after the secret. */
	{
		size_t a = mask_pieces(sec, slen, req, rlen, rlen ? rlen : 1, m1);
		size_t c = mask_pieces(sec, slen, req, rlen, piece, m2);
		size_t o = 0;

		if (a != rlen || c != rlen || memcmp(m1, m2, rlen) != 0)
			abort();
		for (size_t i = 0; i < rlen;) {
			if (slen && i + slen <= rlen && memcmp(req + i, sec, slen) == 0) {
				memset(ref + o, '*', slen);
				o += slen;
				i += slen;
			} else {
				ref[o++] = req[i++];
			}
		}
		if (memcmp(ref, m1, rlen) != 0)
			abort();
		if (slen && !memchr(sec, '*', slen))
			for (size_t i = 0; i + slen <= rlen; i++)
				if (memcmp(m1 + i, sec, slen) == 0)
					abort();
	}

	/* The rewrite and the body's end. */
	memcpy(raw, req, rlen);
	raw[rlen] = 0;
	hend = NULL;
	for (size_t i = 0; i + 4 <= rlen; i++)
		if (memcmp(req + i, "\r\n\r\n", 4) == 0) {
			hend = req + i + 4;
			break;
		}
	if (!hend)
		return 0;
	h.raw = raw;
	h.raw_len = (size_t)(hend - req);
	n = egress_route_rewrite_framed(&h, &rt0, sec, slen, out, sizeof(out), &b);
	if (n >= 0) {
		size_t blen = rlen - h.raw_len;
		bool d1, d2;
		long t1 = take_pieces(b, hend, blen, blen ? blen : 1, &d1);
		long t2 = take_pieces(b, hend, blen, piece, &d2);

		check_head(out, (size_t)n, sec, slen);
		if (t1 != t2 || (t1 >= 0 && d1 != d2))
			abort();
		if (b.kind == EB_NONE && t1 != 0)
			abort();
		if (b.kind == EB_LENGTH && t1 >= 0 && (uint64_t)t1 != (b.left < blen ? b.left : blen))
			abort();
	} else if (n != ERR_PARSE && n != ERR_LIMIT) {
		abort();
	}
	return 0;
}
