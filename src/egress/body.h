/* body.h: where a request's body ends (docs/EGRESS.md step 5: "the body as framed, anything
 * after the request's end is not forwarded"), for the credential route. The head's headers say
 * how it is framed (egress_route_rewrite_framed finds them); egress_body_take then follows the
 * bytes as they arrive, a Content-Length counted down or a chunked body's sizes tracked to
 * its last chunk and trailers. Chunked bytes are forwarded as they came. */
#ifndef AGENTIC_EGRESS_BODY_H
#define AGENTIC_EGRESS_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct egress_head;
struct egress_route;

enum egress_body_kind { EB_NONE, EB_LENGTH, EB_CHUNKED };

struct egress_body {
	enum egress_body_kind kind;
	uint64_t left;          /* EB_LENGTH: bytes to come; EB_CHUNKED: of the current chunk */
	int state;              /* EB_CHUNKED: where in the framing */
	uint32_t digits;        /* hex digits of the size line so far */
	bool done;              /* the request has ended: nothing more is forwarded */
};

/* egress_route_rewrite, also saying how the body is framed: Content-Length (one header, digits
 * only), Transfer-Encoding: chunked (one header, that coding alone) or neither (no body).
 * Both, several, or a malformed one: ERR_PARSE, nothing written that may be sent. */
long egress_route_rewrite_framed(const struct egress_head *h, const struct egress_route *rt,
				 const uint8_t *secret, size_t secret_len, char *out, size_t cap,
				 struct egress_body *b);

/* How many of in's n bytes belong to the body (forward those; the rest is past the request's
 * end and is dropped), or ERR_PARSE on a malformed chunk line. b->done once it has ended. */
long egress_body_take(struct egress_body *b, const uint8_t *in, size_t n);

#endif
