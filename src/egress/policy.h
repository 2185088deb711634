/* policy.h: a sandbox's egress policy (docs/EGRESS.md "Policy"): read strictly from JSON (the
 * object form, or the older list of {host, port}), written back normalised, and the
 * decisions the egress worker takes with it. Pure: no I/O, no allocation; every string is
 * copied into the struct, so a policy outlives the text it was read from. */
#ifndef AGENTIC_EGRESS_POLICY_H
#define AGENTIC_EGRESS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/base.h"

#define EGRESS_POLICY_BYTES 8192u   /* a policy's JSON, as read and as written normalised */
#define EGRESS_ALLOW_MAX 32
#define EGRESS_ROUTES_MAX 8
#define EGRESS_METHODS_MAX 8
#define EGRESS_PREFIXES_MAX 8
#define EGRESS_RANGES_MAX 8
#define EGRESS_HOST_BYTES 254       /* a DNS name (253) and its NUL */
#define EGRESS_HEADER_BYTES 64
#define EGRESS_VALUE_BYTES 256      /* a route's value template */
#define EGRESS_PREFIX_BYTES 256
#define EGRESS_METHOD_BYTES 16
#define EGRESS_SECRET_BYTES 4096u   /* a secret file, at most */
#define EGRESS_RATE_DEFAULT 600u
#define EGRESS_MAX_BYTES_DEFAULT (1ull << 30)

enum egress_mode { EGRESS_ENFORCE = 0, EGRESS_REPORT = 1 };

/* The decision words of the audit (docs/EGRESS.md "Audit"): egress_reason_word names them. */
enum egress_reason {
	ER_ALLOWLISTED = 0,
	ER_ROUTE,
	ER_HOST_NOT_ALLOWED,
	ER_METHOD_NOT_ALLOWED,
	ER_PATH_NOT_ALLOWED,
	ER_SNI_MISMATCH,
	ER_NO_SNI,
	ER_ADDRESS_NOT_ALLOWED,
	ER_DNS_FAILED,
	ER_CONNECT_FAILED,
	ER_UPSTREAM_TLS_FAILED,
	ER_RATE_LIMITED,
	ER_BAD_REQUEST,
	ER_BUSY,
	ER_WORKER_FAILED,
	ER_SECRET_UNAVAILABLE,
	ER_REDIRECT_RETURNED,
	ER_COUNT
};
const char *egress_reason_word(enum egress_reason r);
/* s in ASCII lowercase, in place (a name, a header). */
void egress_lower(char *s);
/* s is an IPv4 or IPv6 address literal. */
bool egress_ip_literal(const char *s);
/* path's n bytes hold nothing an upstream may read as another path: no dot segment (raw,
 * percent-encoded, or behind ";parameters"), encoded slash or backslash, backslash, control
 * byte or space. */
bool egress_path_plain(const char *path, size_t n);

struct egress_allow {
	char host[EGRESS_HOST_BYTES];  /* lowercase; for a suffix entry, what follows "*." */
	uint16_t port;                 /* 443 unless named */
	bool suffix;                   /* "*.host": any name ending in ".host", not host itself */
};

struct egress_route {
	char host[EGRESS_HOST_BYTES];  /* what the workload names, lowercase */
	uint16_t port;                 /* 80 unless named */
	char up_host[EGRESS_HOST_BYTES]; /* upstream's name (SNI, certificate, Host) */
	uint16_t up_port;              /* 443 unless named */
	char header[EGRESS_HEADER_BYTES];  /* lowercase */
	char value[EGRESS_VALUE_BYTES];    /* with one "{secret}" */
	char secret_file[LIMIT_PATH_BYTES];
	char methods[EGRESS_METHODS_MAX][EGRESS_METHOD_BYTES];  /* uppercase */
	uint32_t nmethods;
	char prefixes[EGRESS_PREFIXES_MAX][EGRESS_PREFIX_BYTES];
	uint32_t nprefixes;
};

enum egress_range_kind { ERANGE_LOOPBACK, ERANGE_PRIVATE, ERANGE_LINK_LOCAL, ERANGE_HOST,
			 ERANGE_CIDR };

struct egress_range {
	enum egress_range_kind kind;
	int family;                    /* ERANGE_CIDR: AF_INET or AF_INET6 */
	uint8_t addr[16];
	uint8_t bits;
};

struct egress_policy {
	enum egress_mode mode;
	struct egress_allow allow[EGRESS_ALLOW_MAX];
	uint32_t nallow;
	struct egress_route routes[EGRESS_ROUTES_MAX];
	uint32_t nroutes;
	uint32_t rate_per_minute;      /* >= 1 */
	uint64_t max_bytes;            /* per connection, up plus down, >= 1 */
	struct egress_range ranges[EGRESS_RANGES_MAX];
	uint32_t nranges;
};

/* Reads json (len bytes: an object, or the older array of {host, port}) into *out. 0, or
 * ERR_PARSE with a message in err naming the field ("egress.routes[0].secret_file: must be an
 * absolute path"), never a value's bytes. */
int egress_policy_parse(const char *json, size_t len, struct egress_policy *out, char *err,
			size_t errcap);
/* A DNS name: letters, digits and '-' in labels of 1 to 63 bytes, none starting or ending
 * with '-', at most 253 bytes, the last label not all digits (that would be an address). */
bool egress_dns_name_ok(const char *s);
/* "ADDRESS/BITS" (IPv4 or IPv6, no leading zero in BITS) into g as an ERANGE_CIDR: false when
 * it is not one. The bits past the prefix are not checked. */
bool egress_cidr_parse(const char *s, struct egress_range *g);
/* The normalised object form (every default spelled out), NUL-terminated: its length, or
 * ERR_LIMIT when cap is too small. egress_policy_parse reads it back to the same policy. */
long egress_policy_write(const struct egress_policy *p, char *out, size_t cap);

/* Decisions. Names are compared lowercase; the caller passes them as the request named them. */
/* CONNECT host:port: ER_ALLOWLISTED or ER_HOST_NOT_ALLOWED. */
enum egress_reason egress_match_connect(const struct egress_policy *p, const char *host,
					uint16_t port);
/* An absolute-form request: ER_ROUTE (with *route its index), ER_HOST_NOT_ALLOWED (no route
 * for host:port), ER_METHOD_NOT_ALLOWED, ER_PATH_NOT_ALLOWED (path without its query). */
enum egress_reason egress_match_route(const struct egress_policy *p, const char *host,
				      uint16_t port, const char *method, const char *path,
				      uint32_t *route);

/* This host's own addresses (the worker reads them with getifaddrs), for ERANGE_HOST. */
struct egress_own_addrs {
	struct sockaddr_storage addr[32];
	uint32_t n;
};
/* May a connection go to sa? Public addresses: yes. Loopback, private, link-local, CGNAT, ULA
 * and this host's own: only when a range of the policy covers them. 0.0.0.0/8, multicast,
 * broadcast and the unspecified address: never. IPv4-mapped IPv6 is judged as IPv4. */
bool egress_addr_allowed(const struct egress_policy *p, const struct sockaddr *sa,
			 const struct egress_own_addrs *own);

#endif
