/* daemon.h: agenticd's own state (struct daemon, the one `agenticd`) and the lifecycle's hooks
 * as it wires them, for daemon/ and the tests that stand a daemon up. No module includes this:
 * each has a header of its own (its interface), and the loop's epoll tags are base/looptag.h.
 *
 * One process, one thread, one epoll loop. Every table is sized from the config and taken once
 * at start from one region (daemon_budget says how much); nothing grows after. Runtime calls
 * never block the loop: each is an engine job stepped when its socket is ready. */
#ifndef AGENTIC_DAEMON_DAEMON_H
#define AGENTIC_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "base/looptag.h"
#include "config/config.h"
#include "daemon/seccomp.h"
#include "docker/docker.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/netpool.h"
#include "runtime/runtime_docker.h"
#include "runtime/runtime_vm.h"
#include "sandbox/reqcheck.h"

struct grpc_server;

struct daemon {
	struct config cfg;
	struct docker_client dc;
	char engine_version[64];
	int epfd, sigfd, timerfd, lock_fd;
	struct grpc_server *grpc;
	struct grpc_server *admin_grpc; /* gRPC on the admin socket: connections handed over */
	uint32_t nsb;                 /* = max_sandboxes */
	struct netpool pool;          /* warm networks */
	struct runtime_docker docker; /* the Docker runtime */
	struct runtime_vm vm;         /* the VM runtime, in front of it */
	struct runtime *rt;           /* = &vm.rt: what the lifecycle drives */
	char vm_kernel_dir[LIMIT_PATH_BYTES];
	void *rt_storage;             /* the runtime's call slots, in the region */
	struct lc_sb *lc_slots;       /* the lifecycle's per-slot table, in the region */
	bool stopping;
	bool admin_group_known;
	gid_t admin_gid;
	char self_exe[LIMIT_PATH_BYTES];
	char init_exe[LIMIT_PATH_BYTES]; /* state_dir/agentic-init: bound into sandboxes */
	struct policy_mount_id init_id; /* what init_exe is on the engine's host */
	bool in_container;            /* agenticd itself runs in a container */
	char engine_place[24];        /* "linux" or "docker-desktop-vm" */
	/* Whose sandboxes are whose when several agenticd share one engine: every container and
	 * network this daemon makes carries the label agentic-daemon=<owner>, and recovery and
	 * the event stream look only at those. The owner is a hash of the agentshare root, so a
	 * restarted daemon on the same root is the same owner. */
	char owner[17];
	char owner_label[32];         /* "agentic-daemon=<owner>", a Docker label filter */
	char seccomp_opt[SECCOMP_OPT_BYTES]; /* SecurityOpt "seccomp=<profile>", set at start */
	size_t budget;
};

extern struct daemon *agenticd;

/* The lifecycle's hooks as agenticd wires them: answers to the admin API, exec sessions and
 * transcripts ended, the agent socket told (tests/sim runs these, with its own answers). */
extern const struct lifecycle_hooks agenticd_hooks;

#endif
