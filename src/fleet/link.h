/* link.h: agenticd's side of the fleet (docs/FLEET.md "agenticd and the worker"). When
 * fleet_endpoints is set it starts the fleet worker (`agentic fleet-worker`, the one process
 * of the node that speaks to etcd), starts it again a second after it died, sends it this
 * node's record when the record changes, and keeps what the worker last said: etcd's state
 * and the fleet's nodes. agenticd's loop never waits on etcd; with etcd gone, this node's own
 * sandboxes are served as before and only the fleet's view goes stale (and says so).
 *
 * Owns: the worker's pid and socket, the record and sandbox list last sent, etcd's state, the
 * fleet's nodes and sandboxes as last read. Calls: the libraries, the fleet's wire format,
 * config, and the sandbox table (read only: this node's sandboxes, their state and tier). The loop hands it its socket's
 * events, SIGCHLD and its tick; the admin API reads fleet_link_info. */
#ifndef AGENTIC_FLEET_LINK_H
#define AGENTIC_FLEET_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "config/config.h"

struct fleet_link_config {
	const struct config *cfg;
	const char *self_exe;
	int epfd;
	uint32_t tag;        /* the loop's epoll kind for the worker's socket */
};

/* Starts the worker when the config names a fleet: 0 (also when it names none), or -EINVAL
 * with err saying which setting is wrong. */
int fleet_link_init(const struct fleet_link_config *c, char *err, size_t err_size);
bool fleet_link_on(void);

/* The worker's socket is readable. */
void fleet_link_event(void);
/* SIGCHLD: reaps the worker when it is the one that ended (by pid; never another child). */
void fleet_link_reap(void);
/* Starts a worker that died (a second later), and sends the record when it changed: live is
 * how many sandbox slots are taken now. */
void fleet_link_tick(int64_t now, uint32_t live);
int64_t fleet_link_next_deadline(void);
/* agenticd stops: the worker revokes the node's lease (the others see it lost at once) and
 * exits. */
void fleet_link_shutdown(void);

/* The fleet as this node sees it, a JSON document: {"node","etcd","error","endpoint",
 * "nodes":[...]} (etcd "off" when no fleet is configured). 0, or ERR_LIMIT. */
int fleet_link_info(struct buf *out);
/* The fleet's sandboxes as this node last read them: {"node","etcd","error","endpoint","more","sandboxes":
 * [{"name","node","state","tier"}...]} (state "lost" when its node is); records of no secret.
 * 0, or ERR_LIMIT. */
int fleet_link_sandboxes(struct buf *out);
/* Drains this node (on) or ends its draining: its record says so, and placement will put no
 * new sandbox here; its running ones stay. Kept across restarts (state_dir/fleet-draining).
 * 0, ERR_STATE when no fleet is configured, or -errno. */
int fleet_link_drain(bool on);
/* The fleet's gauges in Prometheus text (nothing without a fleet): 0, or ERR_LIMIT. */
int fleet_link_metrics(struct buf *out);

#endif
