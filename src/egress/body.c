/* body.c: following a request body to its end (body.h). A chunked body is checked as strictly
 * as it is counted: a size line of hex digits (an extension after ';' allowed), CRLF after
 * every line and every chunk's data, trailers as lines; anything else is ERR_PARSE, so a byte
 * that another parser could read as the start of a second request never goes upstream. */
#include "egress/body.h"

#include "base/base.h"

enum {
	C_SIZE,         /* hex digits of a chunk's size */
	C_EXT,          /* after ';', up to CR */
	C_SIZE_LF,      /* the size line's LF */
	C_DATA,         /* the chunk's bytes */
	C_DATA_CR,
	C_DATA_LF,
	C_TRAILER_START, /* a trailer line or the final CRLF */
	C_TRAILER,
	C_TRAILER_LF,
	C_END_LF,
};

/* A chunk size has at most 15 hex digits: below 2^60, far past any byte cap, never overflows. */
#define SIZE_DIGITS_MAX 15u

/* A byte that may stand in an extension or a trailer line: visible, space, tab, or not ASCII. */
static bool line_byte(uint8_t c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* One byte of a chunk's size line (C_SIZE, C_EXT, C_SIZE_LF): 0, or ERR_PARSE. */
static int size_byte(struct egress_body *b, uint8_t c)
{
	switch (b->state) {
	case C_SIZE:
		if (hex_value(c) >= 0) {
			if (++b->digits > SIZE_DIGITS_MAX)
				return ERR_PARSE;
			b->left = b->left * 16 + (uint64_t)hex_value(c);
		} else if (b->digits > 0 && c == ';') {
			b->state = C_EXT;
		} else if (b->digits > 0 && c == '\r') {
			b->state = C_SIZE_LF;
		} else {
			return ERR_PARSE;
		}
		return 0;
	case C_EXT:
		if (c == '\r')
			b->state = C_SIZE_LF;
		else if (!line_byte(c))
			return ERR_PARSE;
		return 0;
	default: /* C_SIZE_LF */
		if (c != '\n')
			return ERR_PARSE;
		b->state = b->left == 0 ? C_TRAILER_START : C_DATA;
		return 0;
	}
}

/* One byte after a chunk's data, of a trailer line or of the end: 0, ERR_PARSE, or
 * ERR_STATE (no state of the machine). */
static int frame_byte(struct egress_body *b, uint8_t c)
{
	switch (b->state) {
	case C_DATA_CR:
		if (c != '\r')
			return ERR_PARSE;
		b->state = C_DATA_LF;
		return 0;
	case C_DATA_LF:
		if (c != '\n')
			return ERR_PARSE;
		b->state = C_SIZE;
		b->digits = 0;
		b->left = 0;
		return 0;
	case C_TRAILER_START:
		if (c == '\r')
			b->state = C_END_LF;
		else if (line_byte(c) && c != ' ' && c != '\t')
			b->state = C_TRAILER;
		else
			return ERR_PARSE;
		return 0;
	case C_TRAILER:
		if (c == '\r')
			b->state = C_TRAILER_LF;
		else if (!line_byte(c))
			return ERR_PARSE;
		return 0;
	case C_TRAILER_LF:
		if (c != '\n')
			return ERR_PARSE;
		b->state = C_TRAILER_START;
		return 0;
	case C_END_LF:
		if (c != '\n')
			return ERR_PARSE;
		b->done = true;
		return 0;
	default:
		return ERR_STATE;
	}
}

static long chunked_take(struct egress_body *b, const uint8_t *in, size_t n)
{
	size_t i = 0;

	while (i < n && !b->done) {
		int r;

		if (b->state == C_DATA) {
			size_t take = n - i;

			if ((uint64_t)take > b->left)
				take = (size_t)b->left;
			b->left -= take;
			i += take;
			if (b->left == 0)
				b->state = C_DATA_CR;
			continue;
		}
		r = b->state == C_SIZE || b->state == C_EXT || b->state == C_SIZE_LF ?
			    size_byte(b, in[i]) : frame_byte(b, in[i]);
		if (r < 0)
			return r;
		i++;
	}
	return (long)i;
}

long egress_body_take(struct egress_body *b, const uint8_t *in, size_t n)
{
	size_t take;

	if (b->done)
		return 0;
	switch (b->kind) {
	case EB_NONE:
		b->done = true;
		return 0;
	case EB_LENGTH:
		take = (uint64_t)n > b->left ? (size_t)b->left : n;
		b->left -= take;
		if (b->left == 0)
			b->done = true;
		return (long)take;
	case EB_CHUNKED:
		return chunked_take(b, in, n);
	}
	return ERR_STATE;
}
