/* multipart.h: a streaming multipart/form-data parser (RFC 7578 over RFC 2046 5.1), for the
 * uploads of POST /files (e2b_files.c). Owns nothing but its struct; calls only base.
 *
 * BearSSL style, as the HTTP/1.1 parser: no I/O, no allocation. It is fed the body in pieces
 * of any size and says what it found: a part's headers (its form name and its filename, which
 * for E2B carries a whole path), the part's body bytes, the part's end, the message's end.
 * Body bytes are slices of the caller's input, or of the parser's own copy of the delimiter:
 * bytes that began like a delimiter at the end of one piece and turned out to be data in the
 * next are handed out from there, so nothing is ever buffered. Headers are kept in caller
 * storage of bounded size (only the Content-Disposition line stays; the others are dropped).
 * A message split at any byte boundary gives the same events and the same body bytes.
 *
 * Strict where it matters: CRLF line ends, a boundary of RFC 2046 characters (1..70), the
 * delimiter followed only by "--", transport padding or CRLF, at most MULTIPART_MAX_HEADERS
 * header lines a part, no obs-fold, no NUL; anything else is an error, and an error is final.
 * A preamble before the first delimiter and an epilogue after the last are ignored. */
#ifndef AGENTIC_E2B_MULTIPART_H
#define AGENTIC_E2B_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "http/http.h"

#define MULTIPART_BOUNDARY_MAX 70 /* RFC 2046 5.1.1 */
#define MULTIPART_MAX_HEADERS 16  /* header lines of one part */

enum multipart_event {
	MULTIPART_EV_NEED_MORE = 0, /* all input consumed; nothing to report */
	MULTIPART_EV_PART,          /* a part's headers are complete: multipart_name/_filename */
	MULTIPART_EV_BODY,          /* *slice holds the part's next body bytes */
	MULTIPART_EV_PART_END,      /* the part's body is complete */
	MULTIPART_EV_DONE,          /* the closing delimiter: the message is complete */
};

struct multipart {
	char delim[4 + MULTIPART_BOUNDARY_MAX]; /* "\r\n--" boundary */
	uint8_t dlen;
	uint8_t state;
	uint8_t k;          /* delimiter bytes matched so far (held back, not yet body) */
	uint8_t nlines;     /* header lines of the current part */
	bool in_part;       /* between a PART and its PART_END */
	bool disposed;      /* the part's Content-Disposition was seen */
	char *hdr;          /* caller storage for the part's headers */
	uint32_t hdr_cap;
	uint32_t hlen;      /* bytes of hdr in use */
	uint32_t line;      /* where the current header line begins in hdr */
	int32_t name;       /* offsets in hdr of the NUL-terminated values, -1: absent */
	int32_t filename;
};

/* Reads the boundary from a Content-Type value (multipart/form-data, any case; the boundary
 * parameter quoted or not, among any others) and prepares p with hdr_cap bytes of header
 * storage (at least 64). 0, or ERR_PARSE: not multipart/form-data, no boundary, a boundary
 * that is empty, longer than 70, ends in a space or holds a character RFC 2046 refuses. */
int multipart_init(struct multipart *p, const char *content_type, char *hdr, uint32_t hdr_cap);

/* Consumes bytes of in[0..len) and returns the first event found (MULTIPART_EV_NEED_MORE once
 * all are consumed), with *consumed the bytes taken; call again with the rest. A BODY slice
 * is valid until the next call. After DONE, further bytes (an epilogue) are consumed and
 * ignored. Errors, final (later calls return ERR_STATE): ERR_PARSE (malformed), ERR_LIMIT (a
 * header line over the storage, more than MULTIPART_MAX_HEADERS lines). */
int multipart_feed(struct multipart *p, const uint8_t *in, size_t len, size_t *consumed,
		   struct http_slice *slice);

/* The body ended: MULTIPART_EV_DONE when the closing delimiter was seen, else ERR_PARSE. */
int multipart_finish(const struct multipart *p);

/* From PART until the next part's headers begin: the part's form name and filename (the
 * Content-Disposition parameters, unquoted; name only when the disposition is form-data), or
 * NULL when absent. */
const char *multipart_name(const struct multipart *p);
const char *multipart_filename(const struct multipart *p);

#endif
