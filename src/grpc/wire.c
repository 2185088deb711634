/* wire.c: gRPC's small wire formats: status names, grpc-timeout, percent-encoded messages,
 * base64 metadata, and length-prefixed message reassembly. */
#include <string.h>

#include "base/be.h"
#include "grpc.h"

static const char *const status_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
};

const char *grpc_status_name(int status)
{
	if (status < 0 || (size_t)status >= ARRAY_LEN(status_names))
		return "UNKNOWN_STATUS";
	return status_names[status];
}

int grpc_timeout_parse(const char *s, size_t len, int64_t *ms)
{
	int64_t v = 0, per;

	/* TimeoutValue is at most 8 digits (gRPC over HTTP/2, "Requests") */
	if (len < 2 || len > 9)
		return ERR_PARSE;
	for (size_t i = 0; i + 1 < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return ERR_PARSE;
		v = v * 10 + (s[i] - '0');
	}
	switch (s[len - 1]) {
	case 'H':
		*ms = v * 3600000;
		return 0;
	case 'M':
		*ms = v * 60000;
		return 0;
	case 'S':
		*ms = v * 1000;
		return 0;
	case 'm':
		*ms = v;
		return 0;
	case 'u':
		per = 1000;
		break;
	case 'n':
		per = 1000000;
		break;
	default:
		return ERR_PARSE;
	}
	*ms = (v + per - 1) / per;
	return 0;
}

int grpc_percent_encode(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0, n = strlen(s);

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		/* a space at either end too: RFC 9113 §8.2.1 forbids it in a field value */
		int edge = ch == ' ' && (i == 0 || i + 1 == n);

		if (ch >= 0x20 && ch <= 0x7e && ch != '%' && !edge) {
			if (o + 1 >= cap)
				return ERR_LIMIT;
			out[o++] = (char)ch;
		} else {
			if (o + 3 >= cap)
				return ERR_LIMIT;
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	if (o >= cap)
		return ERR_LIMIT;
	out[o] = '\0';
	return 0;
}

void grpc_percent_decode(char *s)
{
	char *o = s;

	for (; *s; s++) {
		int hi, lo;

		if (*s == '%' && (hi = hex_value((unsigned char)s[1])) >= 0 && (lo = hex_value((unsigned char)s[2])) >= 0) {
			*o++ = (char)(hi << 4 | lo);
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

long grpc_base64_encode(const void *in, size_t len, char *out, size_t cap)
{
	const uint8_t *p = in;
	size_t o = 0, need = len / 3 * 4 + (len % 3 ? len % 3 + 1 : 0);

	if (need >= cap)
		return ERR_LIMIT;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < len)
			v |= p[i + 2];
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		if (i + 1 < len)
			out[o++] = b64[v >> 6 & 63];
		if (i + 2 < len)
			out[o++] = b64[v & 63];
	}
	out[o] = '\0';
	return (long)o;
}

static int b64val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

long grpc_base64_decode(const char *in, size_t len, void *out, size_t cap)
{
	uint8_t *o = out;
	size_t n = 0;
	uint32_t acc = 0;
	int bits = 0;

	while (len && in[len - 1] == '=')
		len--;
	if (len % 4 == 1)
		return ERR_PARSE;
	for (size_t i = 0; i < len; i++) {
		int v = b64val(in[i]);

		if (v < 0)
			return ERR_PARSE;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == cap)
				return ERR_LIMIT;
			o[n++] = (uint8_t)(acc >> bits);
		}
	}
	return (long)n;
}

enum grpc_rx_event grpc_rx_feed(struct grpc_rx *rx, const uint8_t **p, size_t *n,
				uint32_t max, const uint8_t **msg, uint32_t *len)
{
	while (*n) {
		size_t take;

		if (rx->hdr_len < 5) {
			take = 5 - rx->hdr_len;
			if (take > *n)
				take = *n;
			memcpy(rx->hdr + rx->hdr_len, *p, take);
			rx->hdr_len = (uint8_t)(rx->hdr_len + take);
			*p += take;
			*n -= take;
			if (rx->hdr_len < 5)
				return GRPC_RX_MORE;
			rx->len = be32_get(rx->hdr + 1);
			*len = rx->len;
			if (rx->hdr[0] & 1)
				return GRPC_RX_COMPRESSED;
			if (rx->len > max)
				return GRPC_RX_TOO_BIG;
			rx->need = rx->len;
			rx->have = 0;
			if (rx->len == 0) {
				rx->hdr_len = 0;
				*msg = *p;
				return GRPC_RX_MESSAGE;
			}
			continue;
		}
		if (rx->have == 0 && *n >= rx->need) {
			/* whole in this chunk: handed over where it lies, no copy */
			*msg = *p;
			*len = rx->len;
			*p += rx->need;
			*n -= rx->need;
			rx->hdr_len = 0;
			return GRPC_RX_MESSAGE;
		}
		if (!rx->buf) {
			*len = rx->len;
			return GRPC_RX_NEED_BUF;
		}
		take = rx->need < *n ? rx->need : *n;
		memcpy(rx->buf + rx->have, *p, take);
		rx->have += (uint32_t)take;
		rx->need -= (uint32_t)take;
		*p += take;
		*n -= take;
		if (rx->need == 0) {
			*msg = rx->buf;
			*len = rx->len;
			rx->hdr_len = 0;
			return GRPC_RX_MESSAGE;
		}
	}
	return GRPC_RX_MORE;
}
