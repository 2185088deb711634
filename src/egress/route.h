/* route.h: a credential route, once the worker has matched it (docs/EGRESS.md "What a worker
 * does", step 5): TLS to the upstream with BearSSL, the request rewritten (origin form, Host,
 * credential headers dropped, the route's header injected, Connection: close, the body as
 * framed and nothing after it), the response relayed as it arrives with the secret's bytes
 * masked. Blocking, in the worker process; memory is the struct's and the stack's. */
#ifndef AGENTIC_EGRESS_ROUTE_H
#define AGENTIC_EGRESS_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "egress/policy.h"

/* The request head as the worker parsed it (egress/head.h); the route needs these. */
struct egress_head {
	char method[EGRESS_METHOD_BYTES];
	char host[EGRESS_HOST_BYTES];   /* lowercase */
	uint16_t port;
	char path[2048];                /* origin form, the query included (forwarded, never logged) */
	const char *raw;                /* the whole head as received, with its final CRLFCRLF */
	size_t raw_len;
	const char *rest;               /* bytes received after the head (the body's start) */
	size_t rest_len;
};

enum egress_end { EE_CLOSED, EE_BYTE_CAP, EE_CONTROL_LOST, EE_UPSTREAM_ERROR, EE_CLIENT_GONE,
		  EE_TIMEOUT };
const char *egress_end_word(enum egress_end e);

struct egress_route_result {
	int status;                     /* the status the workload got: the upstream's, or our 400/502; 0: none */
	uint64_t bytes_up, bytes_down;  /* as the workload sent and received them */
	enum egress_end end;
	enum egress_reason reason;      /* ER_ROUTE, ER_REDIRECT_RETURNED, ER_UPSTREAM_TLS_FAILED,
					 * ER_BAD_REQUEST (bad framing) */
};

struct egress_route_call {
	int client_fd;                  /* the workload's bytes (the worker's fd 3) */
	int upstream_fd;                /* TCP, connected to the upstream */
	const struct egress_route *route;
	const struct egress_head *head;
	const uint8_t *secret;          /* never logged; the caller wipes it after */
	size_t secret_len;
	const char *ca_file;            /* PEM bundle of trust anchors */
	uint64_t max_bytes;
	int io_timeout_ms;              /* no byte either way for this long: EE_TIMEOUT */
};

/* Runs the route to its end. On ER_UPSTREAM_TLS_FAILED (before any byte was forwarded) it has
 * answered the workload 502 itself, and on ER_BAD_REQUEST 400 (then the status; no upstream
 * status arrived). bytes_up counts the head too (raw_len + rest_len + what followed). */
void egress_route_run(const struct egress_route_call *c, struct egress_route_result *r);

/* Pieces exposed for unit tests and the fuzz target. */
/* Writes the rewritten head into out: its length, or ERR_LIMIT / ERR_PARSE. */
long egress_route_rewrite(const struct egress_head *h, const struct egress_route *rt,
			  const uint8_t *secret, size_t secret_len, char *out, size_t cap);
/* Masks every occurrence of a secret in a stream fed piece by piece: keeps back up to
 * len - 1 bytes that could start one. */
struct egress_mask {
	const uint8_t *secret;
	size_t len;
	uint8_t held[EGRESS_SECRET_BYTES];
	size_t nheld;
	uint16_t border[EGRESS_SECRET_BYTES]; /* the secret's KMP table (route.c) */
};
void egress_mask_init(struct egress_mask *m, const uint8_t *secret, size_t len);
/* Appends in (n bytes) and writes what is settled to out (cap >= n + len): its length. */
size_t egress_mask_feed(struct egress_mask *m, const uint8_t *in, size_t n, uint8_t *out);
/* What is held, at the end of the stream (never a whole secret). */
size_t egress_mask_flush(struct egress_mask *m, uint8_t *out);

#endif
