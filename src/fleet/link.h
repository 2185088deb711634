/* link.h: agenticd's side of the fleet (docs/FLEET.md "agenticd and the worker"). When
 * fleet_endpoints is set it starts the fleet worker (`agentic fleet-worker`, the one process
 * of the node that speaks to etcd), starts it again a second after it died, sends it this
 * node's record when the record changes, and keeps what the worker last said: etcd's state
 * and the fleet's nodes. agenticd's loop never waits on etcd; with etcd gone, this node's own
 * sandboxes are served as before and only the fleet's view goes stale (and says so).
 *
 * Owns: the worker's pid and socket, the record and sandbox list last sent, etcd's state (the
 * fleet's nodes and sandboxes as last read are link_view.c's). Calls: the libraries, the
 * fleet's wire format, config, and the sandbox table (read only: this node's sandboxes, their
 * state and tier). The loop hands it its socket's events, SIGCHLD and its tick; the admin API
 * reads fleet_link_info. */
#ifndef AGENTIC_FLEET_LINK_H
#define AGENTIC_FLEET_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "config/config.h"
/* fleet_link_owner and fleet_link_node_next: the view's questions */
#include "fleet/link_view.h"

/* Where placement put a create: the node, its address and the placement's number; or error,
 * a word (fleet_unavailable: no answer from etcd in time; the worker's words otherwise:
 * name_taken, no_capacity, node_unknown, node_lost, node_draining, no_runtime, no_address, contention,
 * etcd_down, etcd_denied). */
struct fleet_link_placed {
	char node[64];
	char addr[64];
	int64_t seq;
	int attempts;        /* the transactions it took (each after a read of the counts) */
	const char *error;
};

/* The bit of a placement's id that says the create is the E2B API's. */
#define FLEET_PLACE_E2B (1ull << 62) /* (a JSON number between the processes: int64) */
/* Creates waiting for their placement at once, at most. */
#define FLEET_PLACE_MAX 64

struct fleet_link_config {
	const struct config *cfg;
	const char *self_exe;
	int epfd;
	uint32_t tag;        /* the loop's epoll kind for the worker's (index 0) and the relay's
			      * (1) sockets */
	/* a connection another node relayed, its TLS peer's name: the admin API's to serve
	 * (adopt[0]), or the E2B listener's (adopt[1]: its relay-out asked for that) */
	void (*adopt[2])(int fd, const char *node);
	/* a placement's answer (fleet_link_place), for the create waiting as id: the E2B API's
	 * (placed[1]) when id has FLEET_PLACE_E2B, else the admin API's */
	void (*placed[2])(uint64_t id, const struct fleet_link_placed *p);
	/* the VM runtime's accelerator as VMs start now ("tcg" or "kvm", read at each record:
	 * auto's probe may decide it later), or NULL when this node runs no VMs: its record then
	 * lists the runtime "docker" alone */
	const char *vm_accel;
	/* the Docker runtime's tagged images, each ended by '\n', and whether that is all of them
	 * (read anew at each image event): the record lists them, for placement by image */
	const char *images;
	const bool *images_whole;
};

/* Starts the worker when the config names a fleet: 0 (also when it names none), or -EINVAL
 * with err saying which setting is wrong. */
int fleet_link_init(const struct fleet_link_config *c, char *err, size_t err_size);
bool fleet_link_on(void);

/* The worker's socket (which 0) or the relay's (1) is readable. */
void fleet_link_event(uint32_t which);
/* SIGCHLD: reaps the worker, the relay and the relayed requests that ended (each by its pid;
 * never another child). */
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
/* Relays one request to node at addr (docs/FLEET.md "One front door"), to its admin API or
 * (e2b) its E2B listener: a relay-out of its own takes a copy of the client's connection and
 * pre (the request's bytes read so far, the head written again) and answers the client itself.
 * 0 (the caller closes its copy and forgets the connection), ERR_LIMIT when
 * FLEET_RELAY_OUT_MAX requests are being relayed (or pre is too long), or -errno. */
int fleet_relay_out(int client, const char *node, const char *addr, const void *pre,
		    size_t len, bool e2b);

/* Placement (docs/FLEET.md "Placement"): the worker is asked where the create id for sandbox
 * name goes (pin "": any node; runtime "docker" or "vm"; image: the one it runs, which that
 * node's engine must have), and the answer comes through the config's placed hook, within
 * 10 s ("fleet_unavailable" then). 0; ERR_STATE when etcd is not up (the create fails now,
 * clearly); ERR_LIMIT when FLEET_PLACE_MAX creates wait already. */
int fleet_link_place(uint64_t id, const char *name, const char *pin, const char *runtime,
		     const char *image);
/* ---- link_place.c: what the front ends share of placement ---- */
/* A create relayed to the node placement chose carries "Agentic-Placement: SEQ NAME". */
#define FLEET_PLACEMENT_HEADER "agentic-placement"
/* The fields a placed create's head is written again without (http_head_rewrite's drop). */
extern const char *const fleet_placed_drop[];
/* A placement's refusal (fleet_link_placed's error) for the client: the message and *status,
 * or NULL (*status 503) for a word that is no refusal (etcd did not answer). */
const char *fleet_place_refusal(const char *word, int *status);
/* The placement header's value: its number and the sandbox's name (a valid one). 0, or -1. */
int fleet_placement_parse(const char *h, long long *seq, char *name, size_t cap);

/* A placed create reached this node: its number, echoed in the record ("placed") so that the
 * deciders count it in slots_free from now on. */
void fleet_link_admitted(int64_t seq);
/* A create placed here failed: its name, claimed in etcd for this node, is released now
 * rather than by the sweep (best effort: the sweep stays the backstop). */
void fleet_link_release(const char *name);
/* This node's name ("" without a fleet). */
const char *fleet_link_node(void);

/* The fleet's gauges in Prometheus text (nothing without a fleet): 0, or ERR_LIMIT. */
int fleet_link_metrics(struct buf *out);

#endif
