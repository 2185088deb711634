/* stream.c: resumable decoders for Docker's streams: multiplexed logs and the event stream. */
#include <string.h>

#include "base/be.h"
#include "base/limits.h"
#include "docker.h"

int docker_demux_feed(struct docker_demux *d, const uint8_t *in, size_t len, docker_log_fn fn,
		      void *ctx)
{
	while (len) {
		if (d->remaining == 0) {
			size_t n = sizeof(d->hdr) - d->have;
			if (n > len)
				n = len;
			memcpy(d->hdr + d->have, in, n);
			d->have += (uint8_t)n;
			in += n;
			len -= n;
			if (d->have < sizeof(d->hdr))
				return 0;
			d->have = 0;
			/* stdin (0) appears only on attached TTY-less streams; anything above 2
			 * means we are not reading a multiplexed stream at all */
			if (d->hdr[0] > 2 || d->hdr[1] || d->hdr[2] || d->hdr[3])
				return ERR_PARSE;
			d->stream = d->hdr[0];
			d->remaining = be32_get(d->hdr + 4);
			continue;
		}
		size_t n = len < d->remaining ? len : d->remaining;
		int r = fn(ctx, d->stream, in, n);
		d->remaining -= (uint32_t)n;
		in += n;
		len -= n;
		if (r != 0)
			return r;
	}
	return 0;
}

/* One byte of the object, unless it is over cap (then none more of it). */
static void keep(struct docker_splitter *s, uint8_t c)
{
	if (s->len == s->cap && !s->skipping) {
		s->skipping = true;
		s->len = 0;
	}
	if (!s->skipping)
		s->buf[s->len++] = (char)c;
}

int docker_splitter_feed(struct docker_splitter *s, const uint8_t *in, size_t len,
			 int (*fn)(void *ctx, const char *obj, size_t len), void *ctx)
{
	for (size_t i = 0; i < len; i++) {
		uint8_t c = in[i];

		if (s->depth == 0) {
			if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
				continue;
			if (c != '{')
				return ERR_PARSE;
		}
		if (s->in_string) {
			bool closes = !s->escape && !s->hex_left && c == '"';

			/* a long top-level string ("Action": an exec's command line) is cut
			 * where nothing is split, its closing quote kept */
			if (!s->cutting && s->depth == 1 && s->str_len >= LIMIT_DOCKER_EVENT_STRING_BYTES &&
			    !s->escape && !s->hex_left && (c & 0xc0) != 0x80)
				s->cutting = true;
			if (!s->cutting || closes)
				keep(s, c);
			s->str_len++;
			if (s->hex_left) {
				s->hex_left--;
			} else if (s->escape) {
				s->escape = false;
				s->hex_left = c == 'u' ? 4 : 0;
			} else if (c == '\\') {
				s->escape = true;
			} else if (c == '"') {
				s->in_string = false;
				s->cutting = false;
			}
			continue;
		}
		keep(s, c);
		if (c == '"') {
			s->in_string = true;
			s->str_len = 0;
		} else if (c == '{' || c == '[') {
			s->depth++;
		} else if (c == '}' || c == ']') {
			/* a stray closer at depth 0 cannot happen (objects start with '{'); one
			 * that unbalances the object is left for json_parse to refuse */
			if (--s->depth == 0) {
				uint32_t n = s->len;
				bool skipped = s->skipping;
				s->len = 0;
				s->skipping = false;
				int r = skipped ? fn(ctx, NULL, 0) : fn(ctx, s->buf, n);
				if (r != 0)
					return r;
			}
		}
	}
	return 0;
}
