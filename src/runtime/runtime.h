/* runtime.h: what runs a sandbox, seen from the lifecycle: networks and containers made,
 * started, read, stopped and removed, the engine's container events, and the host side of a
 * workspace. Docker is the first implementation (runtime_docker.c); a VM runtime or a test's
 * fake is another `struct runtime_ops`, and the lifecycle (src/lifecycle) does not change.
 *
 * Two kinds of operation:
 *  - asynchronous calls (runtime_call): one at a time per call slot, answered later through
 *    the sink's call_done. These are what a create, a remove and the warm pool do on the loop.
 *  - synchronous calls for recovery, before the loop serves anyone (list, inspect, remove now).
 *
 * The contract a runtime (and a fake) keeps:
 *  - call() never calls back from inside itself. It returns 0 when the call is begun (or
 *    queued behind others), or an error (the result's outcome and text say what) and then
 *    nothing is pending and call_done never comes for it.
 *  - call_done comes exactly once per begun call, from tick() or from ready() (the loop's
 *    I/O), never from inside another runtime function the lifecycle called. The lifecycle may
 *    begin the slot's next call from inside call_done: the slot is free by then.
 *  - container events come through the sink's event, from tick() or ready(), for containers
 *    this runtime made (their id as call_done gave it); in any order relative to call
 *    answers, at any moment a container could really change. Two kinds:
 *     - its life (START, DIE, DESTROY): only what happened from the runtime's setup on
 *       (recovery reads the state as it was then);
 *     - what was done to it behind the lifecycle's back (EXEC, NET_CONNECT, CHANGED): also
 *       what happened while no runtime of this daemon ran, from the last event an earlier
 *       one saw (the Docker runtime keeps that time on disk), so a `docker exec` done while
 *       agenticd was down still comes. These may come more than once (a reopened stream
 *       replays its second): whoever takes them treats a repeat as nothing new. NET_CONNECT
 *       comes for the container's own network too (at its start): the sink tells them apart.
 *    The notice names the engine's action by a fixed word, never by anything a command line
 *    or a workload chose.
 *  - CT_INSPECT with check_net reads the engine's view of the container's networks too
 *    (res.net): exactly its own attached, and when managed_net, that network Internal and
 *    with IPv4 inhibited. recovery's inspect fills rt_container.net the same way.
 *  - a create whose answer is lost (RT_ENGINE, RT_UNREADABLE) may have made its object: the
 *    lifecycle removes a network of its name, and a container of its name that carries its
 *    instance label.
 *  - results are outcomes, not engine codes: RT_GONE (the object is not there: a remove of it
 *    is done), RT_NAME_TAKEN, RT_OVERLAPS (network create: the subnet overlaps a network the
 *    runtime did not make), RT_IMAGE_MISSING, RT_ROOT_UNBOUNDED (a writable root asked, the
 *    runtime cannot bound it), RT_ENGINE (anything else: text says what the engine said).
 *  - reset: a runtime holds no state about sandboxes beyond its call slots; after stop() and
 *    start() it answers as a fresh one (the simulator restarts agenticd this way).
 */
#ifndef AGENTIC_MGMT_RUNTIME_H
#define AGENTIC_MGMT_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sandbox;

#define RT_ID_BYTES 65        /* a container or network id: 64 hex digits and a NUL */
#define RT_TEXT_BYTES 1024    /* the engine's words for a failure */

enum rt_op {
	RT_NET_CREATE = 1,    /* name, subnet -> id */
	RT_NET_SCAN,          /* every network on the engine: each_subnet(ctx, NULL, false) once
			       * (a fresh reading begins), then each_subnet(ctx, cidr, ours) per
			       * subnet, all right before call_done */
	RT_CT_CREATE,         /* the sandbox's container (spec from sb and sb->req) -> id */
	RT_CT_START,          /* id */
	RT_CT_INSPECT,        /* id or name -> id, running, pid, exit_code, instance_id */
	RT_CT_LOGS,           /* id: the init's last lines into sb->init_log/log_len */
	RT_CT_STOP,           /* id, stop_grace_s */
	RT_CT_REMOVE,         /* id (forced) */
	RT_NET_REMOVE,        /* id or name */
	RT_CT_RENAME,         /* id, name (a warm sandbox claimed: its new name) */
};

enum rt_outcome {
	RT_OK = 0,
	RT_GONE,
	RT_NAME_TAKEN,
	RT_OVERLAPS,
	RT_IMAGE_MISSING,
	RT_ROOT_UNBOUNDED,
	RT_UNREADABLE,        /* the engine answered, the answer could not be read */
	RT_ENGINE,
};

/* The engine's view of a container's networks. why is a fixed word: "verified",
 * "other_network" (another one attached), "not_attached" (its own one is not),
 * "not_internal", "no_inhibit_ipv4" (managed only), "unreadable". */
struct rt_netcheck {
	bool read;                    /* the check ran */
	bool ok;                      /* its own network alone; managed: Internal, inhibit_ipv4 */
	bool other;                   /* a network other than its own is attached */
	const char *why;
};

struct rt_result {
	enum rt_outcome outcome;
	char text[RT_TEXT_BYTES];     /* set when outcome != RT_OK */
	char id[RT_ID_BYTES];         /* NET_CREATE, CT_CREATE, CT_INSPECT */
	char instance_id[RT_ID_BYTES]; /* CT_INSPECT: its agentic-instance-id label, "": none */
	bool running;                 /* CT_INSPECT */
	int64_t pid;                  /* CT_INSPECT: the container's PID 1 on the host, 0: none */
	int64_t exit_code;            /* CT_INSPECT */
	struct rt_netcheck net;       /* CT_INSPECT with check_net */
};

/* One asynchronous call, in the caller's storage, untouched by the caller until call_done. */
struct rt_call {
	enum rt_op op;
	uint32_t slot;                /* the caller's slot, < runtime_slots(): sandbox i is i,
				       * the warm pool is RT_SLOT_POOL(nsb) */
	struct sandbox *sb;           /* CT_CREATE and CT_LOGS read or write it; NULL for the pool */
	const char *name;             /* NET_CREATE: the network's name; CT_RENAME: the new one */
	const char *subnet;           /* NET_CREATE: its /28 */
	const char *id;               /* the container or network the call is about */
	bool managed_net;             /* CT_CREATE: sb->network is ours (a label says so);
				       * CT_INSPECT with check_net: read that network too */
	bool check_net;               /* CT_INSPECT: res.net (one more engine call when
				       * managed_net) */
	int stop_grace_s;             /* CT_STOP */
	int (*each_subnet)(void *ctx, const char *cidr, bool ours); /* NET_SCAN */
	struct rt_result res;
};
#define RT_SLOT_POOL(nsb) (nsb)
#define RT_SLOTS(nsb) ((nsb) + 1)

enum rt_event {
	RT_EV_START = 1,
	RT_EV_DIE,
	RT_EV_DESTROY,
	RT_EV_EXEC,          /* a process begun in it from outside (`docker exec`) */
	RT_EV_NET_CONNECT,   /* a network connected to it (its own one too, at its start) */
	RT_EV_CHANGED,       /* its limits, files or name changed, or an image made of it */
};

struct rt_notice {
	enum rt_event ev;
	const char *container_id;
	const char *source;           /* the engine's action word ("exec_start", "connect",
				       * "update", "extract-to-dir", "commit", "rename") */
	const char *net_name;         /* NET_CONNECT: the network's name, */
	const char *net_id;           /* and its id */
	const char *old_name;         /* CHANGED by "rename": the name before, */
	const char *new_name;         /* and after (NULL when the engine gave none) */
};

/* Where a runtime reports: set by whoever drives it (lifecycle_start for agenticd). */
struct runtime_sink {
	void (*call_done)(void *ctx, struct rt_call *c);
	void (*event)(void *ctx, const struct rt_notice *n);
	void *ctx;
};

/* What recovery reads back from the engine. Strings live until the next synchronous call. */
struct rt_container {
	char id[RT_ID_BYTES];
	const char *name;
	bool running;
	int64_t pid;
	const char *instance_id;      /* its labels: agentic-instance-id, */
	const char *control_uid;      /* agentic-control-uid, */
	const char *managed_network;  /* agentic-managed-network (NULL: none) */
	struct rt_netcheck net;       /* its networks, as CT_INSPECT with check_net reads them */
	bool execs;                   /* a `docker exec` runs in it now (its ExecIDs) */
};

struct rt_network {
	char id[RT_ID_BYTES];
	const char *name;
	const char *subnet;           /* first IPAM config, NULL when none */
	bool internal;
};

struct runtime_ops {
	/* Asynchronous: see the contract above. */
	int (*call)(void *self, struct rt_call *c);
	/* The loop: calls due to step (timeouts, freed connections), events to deliver. now is
	 * monotonic ms. */
	void (*tick)(void *self, int64_t now);
	/* The next time (monotonic ms) tick() must run, or INT64_MAX; <= now: at once. */
	int64_t (*next_deadline)(void *self, int64_t now);
	/* An fd the runtime asked the loop to watch is ready (tag's index). */
	void (*ready)(void *self, uint32_t id);
	/* Opens the event stream (after recovery); stop() closes it and ends nothing else. */
	void (*start)(void *self);
	void (*stop)(void *self);

	/* Synchronous (recovery). Each returns 0 or a negative code with err set; inspect and
	 * net_inspect return -ENOENT (and only then) when the object is not there. */
	int (*containers)(void *self, int (*fn)(void *ctx, const char *id), void *ctx, char *err,
			  size_t err_size);   /* this daemon's containers */
	int (*inspect)(void *self, const char *id, struct rt_container *out, char *err,
		       size_t err_size);
	int (*networks)(void *self, int (*fn)(void *ctx, const char *id, const char *name),
			void *ctx, char *err, size_t err_size); /* this daemon's networks */
	int (*net_inspect)(void *self, const char *id, struct rt_network *out, char *err,
			   size_t err_size);
	/* Removes now: 0 also when it was not there (RT_GONE is success here). */
	int (*remove_now)(void *self, bool network, const char *id, char *err, size_t err_size);
	/* Every network's subnets, as RT_NET_SCAN feeds them (NULL first). */
	int (*scan_now)(void *self, int (*each_subnet)(void *ctx, const char *cidr, bool ours),
			void *ctx, char *err, size_t err_size);

	/* The host side of a workspace (share.h): the image and its loop mount, which a
	 * simulator replaces with nothing. Same contracts as share_make_workspace,
	 * share_mount_workspace and share_retire. */
	int (*workspace_make)(void *self, const struct sandbox *sb, char *err, size_t err_size);
	int (*workspace_mount)(void *self, const struct sandbox *sb, char *err, size_t err_size);
	void (*workspace_retire)(void *self, const struct sandbox *sb, bool drop_workspace);
};

struct runtime {
	const struct runtime_ops *ops;
	void *self;
	struct runtime_sink sink;
	const char *name;             /* "docker": the agentic-runtime label */
};

static inline int runtime_call(struct runtime *rt, struct rt_call *c)
{
	return rt->ops->call(rt->self, c);
}

#endif
