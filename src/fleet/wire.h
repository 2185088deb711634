/* wire.h: what agenticd and its fleet worker say to each other (docs/FLEET.md "agenticd and
 * the worker"), and the keys the fleet keeps in etcd. Packets on a SEQPACKET socket, JSON:
 * - agenticd -> worker, first: the settings (fleet_settings_write / _parse);
 * - agenticd -> worker, then: this node's record, whenever it changes (the JSON object that
 *   goes into etcd as it is: agenticd writes it, from its own state);
 * - worker -> agenticd: {"etcd":"up|down|denied","error":WORD,"endpoint":HOST:PORT} when etcd's
 *   state changes, and {"nodes":[...]} when the fleet's records changed
 *   (fleet_snapshot_write): each node's record as the worker read it back, its fields checked
 *   one by one (a node writes its own record, and a node may be hostile), with its state. */
#ifndef AGENTIC_FLEET_WIRE_H
#define AGENTIC_FLEET_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "fleet/etcd.h"

/* every key of the fleet, what the worker watches (each node may read it all) */
#define FLEET_PREFIX "agentic/"
#define FLEET_NODES_PREFIX "agentic/nodes/"
#define FLEET_ALIVE_PREFIX "agentic/alive/"
/* a sandbox's fleet record: agentic/sandboxes/NODE/NAME, {"state","tier"}, written by NODE */
#define FLEET_SANDBOXES_PREFIX "agentic/sandboxes/"

/* placement (docs/FLEET.md "Placement"): agentic/names/NAME, the node a placed sandbox's name
 * went to (its text only), and agentic/placements/NODE, {"n":N}, how many placements NODE has
 * had; every node may write both */
#define FLEET_NAMES_PREFIX "agentic/names/"
#define FLEET_PLACEMENTS_PREFIX "agentic/placements/"

/* Nodes a fleet holds at most (the snapshot lists no more), a record's bytes, a node name's. */
#define FLEET_NODES_MAX 64
#define FLEET_RECORD_BYTES 1024
#define FLEET_NODE_NAME_MAX 63
#define FLEET_SETTINGS_BYTES 2048
#define FLEET_SNAPSHOT_BYTES (FLEET_NODES_MAX * (FLEET_RECORD_BYTES + 64) + 64)
/* A node's own sandboxes it records (a node with more records the first this many) and the
 * sandboxes of the fleet a view lists; one entry's bytes in a packet, at most. */
#define FLEET_SANDBOXES_MAX 1024
#define FLEET_SB_ENTRY_BYTES 112
#define FLEET_SB_PACKET_BYTES (FLEET_SANDBOXES_MAX * FLEET_SB_ENTRY_BYTES + 64)
/* Connections a node's relay serves at once (more wait in the listen queue's place: refused),
 * requests it relays to other nodes at once, and the bytes of a relayed request agenticd had
 * read when it chose to relay (the head written again, and the body's first bytes; for a
 * placed create, its whole body: a head and a create of the largest each API takes fit). */
#define FLEET_RELAY_MAX 64
#define FLEET_RELAY_OUT_MAX 64
#define FLEET_RELAY_PREFIX_BYTES (LIMIT_HTTP_HEAD_BYTES + LIMIT_ADMIN_BODY_BYTES + 1024u)
_Static_assert(LIMIT_E2B_HEAD_BYTES + LIMIT_E2B_BODY_BYTES + 1024u <= FLEET_RELAY_PREFIX_BYTES,
	       "a placed E2B create fits a relay's prefix");
/* The ALPN protocol a relay-out offers for a request to the owner's E2B listener (none: its
 * admin API); the owner's relay child takes it and says "api":"e2b" to agenticd. */
#define FLEET_RELAY_E2B_ALPN "agentic-e2b"
/* An etcd call's deadline, dial and handshake included. */
#define FLEET_CALL_MS 3000

struct fleet_settings {
	char endpoints[512];
	char server_name[256];
	char ca_file[256], cert_file[256], key_file[256];
	char node[FLEET_NODE_NAME_MAX + 1];
	int64_t lease_s;
	int64_t uid;     /* the worker's, once it has read its key */
};

/* A node's name: 1 to 63 of [a-z0-9-], not starting or ending with '-' (it is a key's last
 * part and a certificate's common name). */
bool fleet_node_name_ok(const char *s, size_t len);

/* The settings as a packet into out: its length, or ERR_LIMIT. */
long fleet_settings_write(const struct fleet_settings *s, char *out, size_t cap);
/* 0, or ERR_PARSE when a field is missing or out of its range. */
int fleet_settings_parse(const char *pkt, size_t len, struct fleet_settings *s);

/* The settings packet, the first agenticd sends a fleet program on fd (waiting 5 s at most):
 * 0, ERR_STATE when none came, or ERR_PARSE. */
int fleet_settings_recv(int fd, struct fleet_settings *s);
/* Once its key is in memory a fleet program needs no privilege: it becomes uid (its group too,
 * no supplementary groups), which leaves it no capability, with no_new_privs; the kernel makes
 * a process dumpable again on a uid change, so it is made not dumpable again. 0 or -errno. */
int fleet_drop_root(uid_t uid);

/* One message on a Unix socket with fd (when >= 0) passed with it: sendmsg's result. Only ever
 * toward a fleet program: agenticd takes no descriptor from one (its ends refuse them,
 * fd_refuse_rights), so a program taken over cannot hand it a socket whose close lingers. */
ssize_t fleet_send_fd(int sock, const void *msg, size_t len, int fd);
/* One message into buf, and the one descriptor passed with it into *fd (-1: none): recvmsg's
 * result. For the relay's own processes, from agenticd. */
ssize_t fleet_recv_fd(int sock, void *buf, size_t cap, int *fd, int flags);

/* The node a key names after prefix (a valid node name), or NULL. */
const char *fleet_key_node(const struct etcd_kv *kv, const char *prefix);
/* node has an alive key under a lease among alive's (one put without a lease counts for
 * nothing: a stolen certificate could keep a node up for ever with it). */
bool fleet_node_alive(const char *node, const struct etcd_kv *alive, size_t na);

/* A sandbox's name as agenticd allows one: ^[a-z][a-z0-9-]{1,62}$ (the rule of
 * sandbox/reqcheck.c's policy_name_valid, which the worker cannot call). */
bool fleet_sandbox_name_ok(const char *s, size_t len);

/* The {"fleet_sandboxes":[...],"more":BOOL} packet from the sandbox records read
 * (agentic/sandboxes/NODE/NAME) and the alive keys: each record whose key names a valid node
 * and sandbox and whose value is {"state": creating|ready|removing, "tier": T0|T1}, as
 * {"name","node","state","tier"}; the state "lost" when its node has no alive key under a
 * lease. sbs: ns pointers to the records, in the order listed. Its length, or ERR_LIMIT. */
long fleet_sandboxes_write(const struct etcd_kv *const *sbs, size_t ns, bool more,
			   const struct etcd_kv *alive, size_t na, char *out, size_t cap);

/* The {"nodes":[...]} packet from the records (agentic/nodes/NAME) and alive keys
 * (agentic/alive/NAME) read: each record whose key names a valid node and whose value is a
 * JSON object, with its known fields only (addr, version, draining, slots, slots_free,
 * runtimes), its name from the key, and "state": "up", "draining" or "lost" (no alive key).
 * Its length, or ERR_LIMIT. */
long fleet_snapshot_write(const struct etcd_kv *nodes, size_t nn, const struct etcd_kv *alive,
			  size_t na, char *out, size_t cap);

#endif
