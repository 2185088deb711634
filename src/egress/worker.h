/* worker.h: the egress worker's own header, for its files only (egress/worker*.c): its state
 * and the functions they call one another with. From the bottom: worker_io (its two
 * descriptors, the control channel), worker_dial (resolving, the address check, connecting),
 * worker_relay (the bytes both ways), worker (the process: the start packet, a connection's
 * request, its kind, its audit record). */
#ifndef AGENTIC_EGRESS_WORKER_H
#define AGENTIC_EGRESS_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egress/head.h"
#include "egress/policy.h"
#include "egress/route.h"

#define FD_DATA 3
#define FD_CTL 4
#define CTL_MAX 16384u                 /* a control packet, either way */
#define CTL_TOKENS 4096u
#define HEAD_TIMEOUT_MS 10000
#define HELLO_TIMEOUT_MS 10000
#define CONNECT_TIMEOUT_MS 10000
#define CTL_TIMEOUT_MS 10000          /* the start packet, a secret's answer */
#define OWN_FRESH_MS 50                /* this host's addresses sent with the start, used at
					* dial up to this old; older, asked again */
#define IO_TIMEOUT_DEFAULT_MS 300000
#define RELAY_BUF (256u * 1024u)
#define CA_FILE_DEFAULT "/etc/ssl/certs/ca-certificates.crt"
#define OWN_RECORD 17u                 /* an own address from agenticd: family (4|6), 16 bytes */
#define OWN_MAX (CTL_MAX / OWN_RECORD)

enum decision { D_ALLOW, D_DENY, D_WOULD_DENY };

struct worker {
	/* from agenticd's first packet */
	char sandbox[SB_NAME_BYTES];
	char instance[128];
	int64_t conn;
	bool rate_limited;
	struct egress_policy policy;
	char ca_file[LIMIT_PATH_BYTES];
	int io_timeout_ms;
	/* the audit record */
	const char *kind;
	struct egress_head head;
	bool have_head;
	enum decision decision;
	enum egress_reason reason;
	int status;
	uint64_t bytes_up, bytes_down;
	enum egress_end end;
	int64_t start_ms;
	bool ctl_lost;
	bool listen;                  /* FD_DATA is the sandbox's listener: accept one first */
	bool reuse;                   /* after the record, agenticd's next start packet or eof */
	bool own_ask;                 /* agenticd answers {"own": true} with this host's addresses */
	/* this host's addresses as agenticd sent them at dial time (own >= 0; 0: none), or -1:
	 * getifaddrs here; one byte more than the records, for ctl_recv's terminator */
	long own;
	int64_t own_ms;               /* when own came (monotonic) */
	uint8_t own_rec[OWN_MAX * OWN_RECORD + 1];
	/* the request head as received, and what followed it */
	char headbuf[EGRESS_HEAD_MAX];
	size_t headlen;
};

/* worker_io.c */
/* Waits for ev on fd for at most ms (-1: no limit), watching the control socket: agenticd
 * gone (hangup) sets w->ctl_lost. 1 when fd is ready, 0 on timeout, -1 when control is lost
 * or poll failed. */
int worker_wait_fd(struct worker *w, int fd, short ev, int ms);
bool worker_send_all(int fd, const void *data, size_t len);
/* Our own refusal to the workload (status, the reason word as the body), our side ended. */
void worker_refuse(struct worker *w, int status, enum egress_reason reason);
/* The start packet into buf (cap), with its one descriptor at FD_DATA: its length, or -1. */
long worker_ctl_recv_start(struct worker *w, char *buf, size_t cap);
/* This host's addresses from agenticd (w->own, w->own_rec), or w->own -1. */
void worker_own_recv(struct worker *w);
/* Asks agenticd for them first. */
void worker_ask_own(struct worker *w);
/* Route i's secret into secret (cap): its length, or -1. */
long worker_ask_secret(struct worker *w, uint32_t i, uint8_t *secret, size_t cap);

/* worker_dial.c */
/* The address families this host can use, probed once (again after a reset). */
void worker_families_probe(void);
void worker_families_reset(void);
/* host:port resolved, checked against the policy, connected: the fd, or -1 refused. */
int worker_dial(struct worker *w, const char *host, uint16_t port);

/* worker_relay.c */
/* Bytes both ways between FD_DATA and up until the end (w->end); status_sniff: the
 * upstream's status line into w->status. */
void worker_relay(struct worker *w, int up, bool status_sniff);
/* A failure of FD_DATA told apart from agenticd's going (w->end). */
void worker_settle_end(struct worker *w);

#endif
