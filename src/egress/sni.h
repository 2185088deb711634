/* sni.h: the server name a TLS ClientHello asks for (RFC 6066 server_name, host_name type),
 * read strictly from the first bytes a workload sends through a CONNECT tunnel. The hello may
 * span several handshake records; at most EGRESS_HELLO_MAX bytes of it are read. Pure: no
 * I/O, no allocation (the reassembly buffer is on the stack). */
#ifndef AGENTIC_EGRESS_SNI_H
#define AGENTIC_EGRESS_SNI_H

#include <stddef.h>
#include <stdint.h>

#include "egress/policy.h"

#define EGRESS_HELLO_MAX 16384u    /* the ClientHello message, header included */
/* What the worker buffers for it: the message and the headers of the records it spans. */
#define EGRESS_HELLO_BUF (EGRESS_HELLO_MAX + 5u * 8u)

enum egress_sni_rc {
	EGRESS_SNI_MORE = 0,       /* the hello is not complete yet */
	EGRESS_SNI_FOUND = 1,      /* name is filled */
	EGRESS_SNI_NONE = 2,       /* a whole, well-formed hello without a host_name */
};

/* Reads buf[0..len): EGRESS_SNI_FOUND with the name (lowercase, NUL-terminated, a valid DNS
 * name of at most 253 bytes) in name[EGRESS_HOST_BYTES], EGRESS_SNI_NONE, EGRESS_SNI_MORE,
 * or ERR_PARSE (not a TLS handshake record, not a ClientHello, a length that does not add
 * up, a hello over EGRESS_HELLO_MAX, more than one server_name extension, a name that is no
 * DNS name). */
int egress_sni_parse(const uint8_t *buf, size_t len, char name[EGRESS_HOST_BYTES]);

#endif
