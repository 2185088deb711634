/* broker.h: agenticd's half of the egress path (docs/EGRESS.md): the AgentService/Egress call
 * of a sandbox's init, relayed to a worker process (`agentic egress-worker`) per connection,
 * the credit both ways, the worker's control packets (secrets, its audit record), the audit
 * lines agenticd writes itself, and the per-sandbox rate limit.
 *
 * A fixed table of egress_max_connections slots, each with its two buffers, and a table of
 * each sandbox slot's egress state (egress_of), taken from the daemon's region at start
 * (egress_storage_bytes); nothing is allocated after. Its files: broker_slot.h. */
#ifndef AGENTIC_MGMT_EGRESS_H
#define AGENTIC_MGMT_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc/grpc.h"

struct config;
struct egress_policy;
struct sandbox;

/* The buffers a slot holds: what the worker has not taken yet (up), one chunk read from it
 * and not yet queued to the init (down). Pure, exposed for the unit test. */
struct egress_credit {
	uint32_t up_len;        /* bytes held for the worker, from up_off */
	uint32_t up_off;
	uint64_t up_in;         /* data bytes received from the init, cumulative */
	uint64_t up_consumed;   /* of them, written to the worker */
	uint64_t up_reported;   /* the consumed count last sent to the init */
	uint64_t down_sent;     /* data bytes queued to the init, cumulative */
	uint64_t down_acked;    /* the init's consumed count */
};
/* A chunk of n data bytes from the init fits (the init keeps to the window): true. */
bool egress_credit_up_fits(const struct egress_credit *c, size_t n);
/* The consumed count is due to the init (half a window written since the last report). */
bool egress_credit_report_due(const struct egress_credit *c);
/* How many bytes may be read from the worker now for the init (0: the window is full). */
uint32_t egress_credit_down_room(const struct egress_credit *c);
/* The init reported consumed: false when it is above what was sent; a count below the last
 * (0: a chunk that carries none) changes nothing. */
bool egress_credit_down_ack(struct egress_credit *c, uint64_t consumed);

/* The rate limit: a token bucket of rate tokens refilled evenly over a minute, full at first
 * (at == 0). Takes one at now (monotonic ms): false when none is left. */
struct egress_bucket {
	int64_t at;             /* the last refill; 0: not used yet */
	uint64_t milli;         /* tokens * 1000 */
};
bool egress_bucket_take(struct egress_bucket *b, uint32_t rate, int64_t now);

/* A sandbox's egress state, in a table of the broker's own (a slot a sandbox slot, taken
 * with the rest at start), written only by the broker: the init's proxy listener taken over
 * for direct connections (egress_listener_take): a dup from the init (pidfd_getfd), -1:
 * none; the init's pid it came from; watched while checked and the sandbox is served. */
struct egress_sb {
	uint32_t gen;                 /* the sandbox's generation it is of */
	int lfd;
	int64_t lfd_pid;
	bool lfd_watched;
	bool lfd_ok;                  /* checked, and accept worked on it so far */
	bool armable;                 /* a connection came: a worker waits for the next */
};
/* sb's (none yet, or a sandbox slot used again: lfd -1, nothing else set). */
const struct egress_sb *egress_of(const struct sandbox *sb);

size_t egress_storage_bytes(const struct config *cfg);
/* The loop's epoll tags for the broker's sockets (the high 32 bits of an event's data, an
 * index in the low): a slot's data and control sockets, a sandbox slot's listener. */
struct egress_tags {
	uint32_t data, ctl, listen;
};
/* At start: the config, this binary (the worker is `self_exe egress-worker`), the loop's
 * epoll fd (the slots' sockets are watched there with tags and the slot index), storage. */
void egress_init(const struct config *cfg, const char *self_exe, int epfd,
		 const struct egress_tags *tags, void *storage, size_t len);

/* At start, once agenticd holds its lock and before any worker: every process of the egress
 * uids (egress_uid - egress_max_connections + 1 .. egress_uid) whose parent is no agenticd, a
 * worker a killed agenticd left, is killed, and waited for until it has exited, so that no uid
 * of a new worker is one a live old worker holds. 0, or -1 with err set (one would not die in
 * STALE_KILL_MS: agenticd refuses to start). */
int egress_stale_kill(const struct config *cfg, char *err, size_t cap);

/* The Egress method's handlers (agent_connect.c's method table names them; its start says
 * init_ok: the caller is the registered init of its sandbox, that asked for egress). */
void egress_call_start(struct grpc_call *call, bool init_ok);
void egress_call_message(struct grpc_call *call, const ProtobufCMessage *msg);
void egress_call_half_close(struct grpc_call *call);
void egress_call_writable(struct grpc_call *call);
void egress_call_done(struct grpc_call *call, int status, const char *message);

/* Direct connections (broker_direct.c), for an init that registered with
 * agentic-egress-listener: takes its listener over and watches it; true when the init is to
 * stop accepting on it (the registration's answer says egress=direct), false when it goes
 * on carrying its connections over Egress calls. */
bool egress_listener_take(struct sandbox *sb, int init_fd);
/* Reads a host-side secret file into out (EGRESS_SECRET_BYTES): a regular file of root's
 * with no group or other bits, at most that big, not a symbolic link; one trailing newline
 * dropped. Its length, or -1. (A VM's credentials; a route's secret is read the same way, from
 * secret_dir: egress_secret_check.) */
long egress_secret_read(const char *path, uint8_t *out);
/* Every route's secret_file of pol names a file below secret_dir, reached from it without a
 * "..", a symbolic link (the file itself included) or another mount, or one not there yet (it
 * is read by the same rule when asked for: openat2 with RESOLVE_BENEATH from the directory).
 * 0, or -1 with why naming the route and the rule (never a byte of the file). */
int egress_secret_check(const struct config *cfg, const struct egress_policy *pol, char *why,
			size_t cap);
/* Not watched any more (the init is gone or going); kept. */
void egress_listener_stop(struct sandbox *sb);
/* Closed: only once no process of the sandbox can hold it (its slot given up, or another
 * init registered). */
void egress_listener_drop(struct sandbox *sb);
/* Is fd what the init must have announced: a listening TCP socket on 127.0.0.1:port? (The
 * number it said could name anything of its.) */
bool egress_listener_ok(int fd, uint16_t port);
/* sb's policy was replaced: a worker armed with the one before is ended. */
void egress_policy_changed(struct sandbox *sb);
/* The listener of sandbox slot idx is readable (the loop's TAG_EGRESS_LISTEN). */
void egress_listen_event(uint32_t idx);

/* A slot's data (ctl false) or control socket is ready (the loop's TAG_EGRESS_*); with
 * EGRESS_NETLINK_SLOT (ctl true), the netlink socket that says this host's addresses changed. */
#define EGRESS_NETLINK_SLOT UINT32_MAX
void egress_event(uint32_t slot, bool ctl, uint32_t events);
/* SIGCHLD: reaps the workers (only those: other children are share.c's). */
void egress_reap(void);
/* Workers whose call ended and which linger are killed after a grace. */
void egress_tick(int64_t now);
int64_t egress_next_deadline(void);
/* SIGTERM: every call and socket closed; the workers see EOF and audit control_lost. */
void egress_shutdown(void);
/* Is pid one of the workers? (share.c's reaping must leave them alone.) */
bool egress_is_worker(int pid);

#endif
