/* broker_slot.h: the egress broker's own header, for its files only (egress/broker*.c): the
 * table of connection slots, the broker's state, and the functions its files call one another
 * with. The files, from the bottom: broker_table (the state, the credit and the bucket),
 * broker_stale, broker_secret, broker_own (this host's addresses), broker_audit (the lines
 * agenticd writes, the connection numbers, the rate limit), broker_relay (a slot's life and
 * its bytes both ways), broker_worker (starting and killing workers), broker_call (the Egress
 * call), broker_direct (direct connections, armed workers), broker_ctl (the worker's control
 * packets), broker_events (start, the loop's events, the tick, the stop). A file calls only
 * files before it. */
#ifndef AGENTIC_EGRESS_BROKER_SLOT_H
#define AGENTIC_EGRESS_BROKER_SLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "egress/broker.h"
#include "json/json.h"
#include "lifecycle/lifecycle.h"
#include "metrics/metrics.h"
#include "sandbox/sandbox.h"
#include "transcript/runlog.h"

#define CTL_BYTES (16u * 1024u)        /* a control packet, at most */
#define LINGER_GRACE_MS 10000          /* beyond io_timeout_ms, for a worker whose call ended */
#define POLICY_TOKENS 2048
#define SPARE_DEFER_MS 100             /* a spare taken: the next is started at a connection's
					* end, or this long after, whichever comes first */

/* ---- the table ---- */

struct eslot {
	bool used;
	struct grpc_call *call;        /* NULL once the call ended */
	struct sandbox *sb;            /* while the call lives, and sb_gen still matches */
	uint32_t sb_gen;
	char name[SB_NAME_BYTES];
	char instance[SB_ID_BYTES];
	uint64_t conn;
	pid_t pid;                     /* 0 once reaped */
	int pidfd;                     /* to signal it without a pid reuse race */
	int data, ctl;                 /* -1: closed */
	uint32_t data_events;          /* what data is watched for now */
	bool data_watched;             /* in the epoll set: only while something is wanted, as a
					* hung-up socket reports EPOLLHUP whatever the mask */
	bool record_seen, ctl_eof, reaped_logged;
	bool secret_asked;             /* one secret a worker: its one route's */
	bool spare;                    /* started ahead: no sandbox, no call, no start packet yet */
	bool direct;                   /* the worker has the workload's socket: no call, ever */
	bool armed;                    /* the worker waits in accept on its sandbox's listener */
	bool quiet;                    /* ended without a connection: no worker_failed line */
	bool own_asked;                /* one request for this host's addresses a connection */
	bool own_old;                  /* armed, and this host's addresses changed since in a way
					* its policy sees: disarm_stale ends it */
	uint32_t served;               /* connections its worker had before this one (reuse) */
	int64_t started_ms, linger_until;
	struct egress_credit cr;
	bool up_eof_in;                /* the init's eof arrived */
	bool up_shut;                  /* and the worker's side was shut down */
	bool up_dead;                  /* writing to the worker failed: what comes is dropped */
	bool down_eof_read, down_eof_sent, report_owed;
	uint32_t down_len;             /* a chunk read and not yet queued */
	uint8_t *up, *down;
	char policy[EGRESS_POLICY_BYTES]; /* as the worker got it: its route indices name these */
};

struct bucket {
	uint32_t gen;
	struct egress_bucket b;
	/* refusal lines written in the second refused_sec, and those not written since the last */
	int64_t refused_sec;
	uint32_t refused_lines;
	uint64_t suppressed;
	const char *suppressed_reason; /* the last one not written, and its status */
	int suppressed_status;
};


/* The broker's state: set at egress_init, the slots' and buckets' storage from the daemon's
 * region. */
struct broker_state {
	const struct config *cfg;
	const char *self_exe;
	int epfd;
	struct egress_tags tags;       /* the loop's epoll tags for the broker's sockets */
	struct eslot *slots;
	struct bucket *buckets;
	struct egress_sb *sbs;         /* a sandbox slot's egress state (egress_of) */
	uint32_t nslots, nbuckets;     /* nbuckets: the sandbox slots, of buckets and sbs */
	bool stopping;                 /* SIGTERM: no new worker */
	bool egress_used;              /* a connection came: a spare worker is kept from now on */
	bool spare_wanted;             /* one was claimed: egress_tick starts the next */
	bool arm_wanted;               /* a sandbox may want a worker armed on its listener */
	int64_t spare_backoff_until;   /* a spare ended unclaimed: none again until then */
	int64_t spare_defer_until;     /* one was taken: the next waits for a connection's end
					* or this (SPARE_DEFER_MS), whichever comes first */
	/* the netlink socket that says this host's addresses changed; -1: none (each worker
	 * reads them itself) */
	int nl_fd;
};
extern struct broker_state bst;
/* a policy's tokens, for one parse at a time (the rate, a route's secret file) */
extern struct json_token broker_toks[POLICY_TOKENS];

/* The epoll data of slot (or sandbox slot) idx's socket with tag. */
static inline uint64_t broker_tag(uint32_t tag, uint32_t idx)
{
	return ((uint64_t)tag << 32) | idx;
}

/* egress_of, to write: sb's, reset when its slot holds another sandbox now. */
struct egress_sb *broker_sb(const struct sandbox *sb);

/* broker_table.c: carves storage (egress_storage_bytes of cfg) into the slots and buckets;
 * false when it is too small (no slot then). */
bool broker_table_init(void *storage, size_t len);

/* broker_secret.c: answers a worker's {"secret": route} (route of the policy it got). */
void broker_secret_answer(struct eslot *s, int64_t route);

/* broker_own.c: this host's addresses. */
void broker_own_init(void);    /* the netlink socket, watched with tags.ctl */
void broker_own_drain(void);   /* reads the changes, marks the armed workers they concern */
int broker_own_send(struct eslot *s); /* the list as it is now, to s's worker: 0 or -1 */

/* broker_audit.c: the lines agenticd writes, connection numbers, the rate limit. */
struct egress_audit;
int broker_audit_open(struct sandbox *sb);
int broker_audit_line(struct sandbox *sb, const char *name, const char *instance, uint64_t conn,
		      const struct egress_audit *f);
int broker_audit_refused(struct sandbox *sb, const char *name, const char *instance,
			 uint64_t conn, const char *reason, int status, int64_t duration_ms,
			 const char *end, uint64_t suppressed);
void broker_conn_load(void);
uint64_t broker_conn_next(void);
bool broker_rate_take(struct sandbox *sb);
void broker_audit_refusal(struct sandbox *sb, const char *reason, int status);

/* broker_relay.c: a slot's life and its bytes both ways. */
void broker_close_data(struct eslot *s);
void broker_close_ctl(struct eslot *s);
void broker_slot_maybe_free(struct eslot *s);
void broker_worker_failed_line(struct eslot *s);
void broker_stopped_line(struct eslot *s);
void broker_call_end(struct eslot *s, int status, const char *why);
void broker_step(struct eslot *s);

/* broker_worker.c: workers started, told their connection, killed. */
int broker_worker_start(struct eslot *s, int data, bool rate_limited);
void broker_worker_kill(struct eslot *s);
void broker_spare_fill(void);

/* broker_call.c: the Egress call; a slot for a connection. */
/* Why broker_conn_take gave no slot: its audit line and metric are written already (BUSY,
 * RATE), or its log line (AUDIT, START). */
enum take { TAKE_OK, TAKE_BUSY, TAKE_RATE, TAKE_AUDIT, TAKE_START };
extern const char broker_answer_429[];
extern const size_t broker_answer_429_len;
void broker_slot_claim(struct eslot *s, struct sandbox *sb, bool reuse);
struct eslot *broker_slot_pick(const struct sandbox *sb);
enum take broker_conn_take(struct sandbox *sb, int data, struct eslot **out);

/* broker_direct.c: direct connections and armed workers. */
void broker_listen_watch(struct sandbox *sb, bool on);
void broker_disarm_stale(void);
void broker_arm_all(void);
bool broker_rearm(struct eslot *s);
void broker_armed_accepted(struct eslot *s);

/* broker_ctl.c: the worker's control packets. */
void broker_ctl_readable(struct eslot *s);

#endif
