/* etcd.h: the fleet worker's client of etcd's v3 API (docs/FLEET.md "Speaking etcd"): gRPC
 * over HTTP/2 (src/grpc's client) over TLS (src/tls, BearSSL) over TCP, to one member at a
 * time of the endpoints it was given, the next one after a failure. The node's certificate is
 * its identity: etcd (--client-cert-auth with auth enabled) takes the user from its common
 * name and applies that user's roles, so no password or token is held or sent.
 *
 * Blocking calls with a deadline each: the worker is its own process and has nothing else to
 * do while etcd answers but to keep agenticd's packets queued in its socket. One connection,
 * one call at a time; every call's memory comes from the client's storage, taken at
 * etcd_init. Errors are negative: -ETIMEDOUT, -ECONNREFUSED and the like for the transport
 * (the connection is dropped and the next call dials again), ETCD_ERR_DENIED when etcd refused
 * the call for this certificate's user, ETCD_ERR_FAILED for any other refusal. etcd_error()
 * says why in one word for the log; no key's value, certificate or key byte is ever in it. */
#ifndef AGENTIC_FLEET_ETCD_H
#define AGENTIC_FLEET_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define ETCD_ERR_DENIED (-1001)
#define ETCD_ERR_FAILED (-1002)

/* Endpoints at most, and a key's and a value's bytes at most (a node record is far below). */
#define ETCD_ENDPOINTS_MAX 8
#define ETCD_KEY_BYTES 256
#define ETCD_VALUE_BYTES 2048
/* Key-value pairs one range answers at most (etcd_range asks for no more). */
#define ETCD_RANGE_MAX 256

struct etcd_config {
	const char *endpoints; /* etcd_endpoints_parse's list */
	const char *server_name; /* the name every member's certificate carries */
	const char *ca_file, *cert_file, *key_file;
	int timeout_ms;          /* each call's deadline, the dial and handshake included */
};

/* One key-value pair of an answer, copied out of it. */
struct etcd_kv {
	char key[ETCD_KEY_BYTES];
	size_t key_len;
	char value[ETCD_VALUE_BYTES];
	size_t value_len;
	int64_t mod_revision;
	int64_t lease;
};

/* One endpoint, "HOST:PORT" (an IPv4 literal, or an IPv6 one in brackets; "https://" before it
 * is allowed, as etcd's own flags write it) of len bytes: 0, or ERR_PARSE. The list form,
 * comma-separated, fills up to max entries (text: each as written, for the log): how many, or
 * ERR_PARSE when one does not parse, there are more than max, or none. */
int etcd_endpoint_parse(const char *s, size_t len, struct sockaddr_storage *ss, socklen_t *sl);
int etcd_endpoints_parse(const char *list, struct sockaddr_storage *ss, socklen_t *sl,
			 char (*text)[64], size_t max);

/* Loads the CA and the node's certificate and key, and takes the client's memory: 0, or a
 * negative errno / ERR_PARSE with etcd_error() naming the file's fault ("ca_file_unreadable",
 * "no_client_key" ...). An endpoint list that does not parse is ERR_PARSE ("bad_endpoint"). */
int etcd_init(const struct etcd_config *cfg);

/* The calls. key and range_end are bytes (range_end NULL: the one key; a prefix's end from
 * etcd_prefix_end). */
int etcd_lease_grant(int64_t ttl_s, int64_t *id, int64_t *granted_ttl);
/* *ttl is what is left; 0 or less when the lease is gone. */
int etcd_lease_keepalive(int64_t id, int64_t *ttl);
int etcd_lease_revoke(int64_t id);
int etcd_put(const char *key, const void *value, size_t len, int64_t lease);
int etcd_delete(const char *key);
/* Up to max pairs of [key, range_end) into out, in key order: how many, or a negative error.
 * *more: etcd has more than that. A range (range_end set) is read in pages of ETCD_RANGE_MAX,
 * all at one revision: *rev's when it is not 0, else the first page's; *rev (when rev is not
 * NULL) is set to the revision read. */
int etcd_range(const char *key, const char *range_end, struct etcd_kv *out, size_t max,
	       bool *more, int64_t *rev);
/* Watches [key, range_end) from revision from: each change after it, a put or a delete, is
 * handed to on_event (kv valid during the call; a delete's value empty) while any call here
 * or etcd_wait runs the connection. 0 once etcd has the watch; a negative error. One watch at
 * a time: a new one ends the last. It ends when the connection does, or etcd cancels it (its
 * start was compacted, the member lost its leader): etcd_watching() turns false, and the
 * caller reads again and watches from that read's revision. */
int etcd_watch(const char *key, const char *range_end, int64_t from,
	       void (*on_event)(const struct etcd_kv *kv, bool deleted, void *ctx), void *ctx);
bool etcd_watching(void);
void etcd_watch_stop(void);
/* Waits up to timeout_ms for fd to be readable, running etcd's connection meanwhile (a
 * watch's events are handed on here): 1 when fd is readable (or hung up), else 0. */
int etcd_wait(int fd, int timeout_ms);
/* A transaction's compare: key's create or mod revision equal to rev (a key that does not
 * exist has 0 for both), or its value equal to value (len bytes; a missing key fails it). */
enum etcd_cmp_target { ETCD_CMP_CREATE, ETCD_CMP_MOD, ETCD_CMP_VALUE };
struct etcd_cmp {
	const char *key;
	enum etcd_cmp_target target;
	int64_t rev;
	const void *value;
	size_t len;
};
/* A transaction's op: a put of value (len bytes, no lease), or the key's delete (value NULL). */
struct etcd_op {
	const char *key;
	const void *value;
	size_t len;
};
#define ETCD_TXN_MAX 4
/* When every compare holds, every op, all at one revision: 1; 0 when a compare did not hold
 * (nothing was done); or a negative error. At most ETCD_TXN_MAX of each. */
int etcd_txn(const struct etcd_cmp *cmp, size_t nc, const struct etcd_op *op, size_t no);
/* The end of the prefix range of key (its last byte plus one) into out (ETCD_KEY_BYTES). */
void etcd_prefix_end(const char *key, char *out);

/* Drops the connection (the next call dials again). */
void etcd_close(void);
/* The endpoint in use or last tried, and the last failure in one word. */
const char *etcd_endpoint(void);
const char *etcd_error(void);

#endif
