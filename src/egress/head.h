/* head.h: the request head a workload sends its proxy (docs/EGRESS.md "What a worker does",
 * step 1), read strictly: `CONNECT host:port HTTP/1.x` (authority form, IPv6 as [addr]:port)
 * or an absolute-form `METHOD http://host[:port]/path HTTP/1.x`, then header lines, lines
 * ending in CRLF or LF, at most EGRESS_HEAD_MAX bytes. Origin form, other schemes, userinfo,
 * bad ports, control characters and folded lines are refused. Pure: no I/O, no allocation. */
#ifndef AGENTIC_EGRESS_HEAD_H
#define AGENTIC_EGRESS_HEAD_H

#include <stdbool.h>
#include <stddef.h>

#include "egress/route.h"

#define EGRESS_HEAD_MAX 8192u

enum egress_head_rc {
	EGRESS_HEAD_MORE = 0,      /* no end of head yet, and fewer than EGRESS_HEAD_MAX bytes */
	EGRESS_HEAD_DONE = 1,      /* *h is filled */
};

/* Reads buf[0..len), the bytes received so far. EGRESS_HEAD_DONE with *h filled (h->raw and
 * h->rest point into buf; for CONNECT h->path is empty; an IPv6 host is stored without its
 * brackets), EGRESS_HEAD_MORE, or ERR_PARSE (malformed, or no end within EGRESS_HEAD_MAX
 * bytes). A request line already complete and malformed is refused without waiting for
 * the rest. */
int egress_head_parse(const char *buf, size_t len, struct egress_head *h);

/* True for the CONNECT form. */
bool egress_head_is_connect(const struct egress_head *h);
/* A DNS name or an IPv4 literal (n bytes of s, not NUL-terminated): labels of letters, digits,
 * '-' and '_', 1..63 bytes each, at most 253 in all, no empty label (so no leading, trailing or
 * doubled dot), copied to out (EGRESS_HOST_BYTES) lowercase. 0 or ERR_PARSE. The request
 * head's host and the ClientHello's server name are read by this one rule. */
int egress_name_parse(const char *s, size_t n, char *out);

#endif
