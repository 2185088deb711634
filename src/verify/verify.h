/* verify.h: the verifier (docs/VERIFY.md): live evidence, from the engine, the host's /proc
 * and a probe run as the workload, that a sandbox (or any container on the engine) is what
 * agentic says it is. Pass/fail only: every reason is fixed text with numbers or ids agentic
 * owns, never an env value, token, transcript byte or host inventory.
 *
 * Two halves. The pure one reads what was gathered (the engine's inspect answers, a
 * mountinfo, a /proc status, the probe's key=value output) into facts and turns facts into
 * the checks' verdicts (verify_evaluate): unit-tested. The other runs a verification on the
 * loop: engine calls on its own job queue, the probe through the exec engine with an internal
 * sink, a listener for the host-reachability checks; nothing blocks, and the client is told
 * through its callback. */
#ifndef AGENTIC_MGMT_VERIFY_H
#define AGENTIC_MGMT_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"
#include "docker/docker.h"
#include "json/json.h"
#include "config/config.h"

struct sandbox;

/* The checks, AGV-001 .. AGV-051, in order: ids are stable and never renumbered. AGV-046..051
 * are a VM's (its QEMU on the host, its guest's interfaces); the engine's are a container's. */
#define VERIFY_CHECKS 51
#define VERIFY_REASON_BYTES 128
#define VERIFY_MOUNTS 24
#define VERIFY_NETS 4
#define VERIFY_PATH_BYTES 256
#define VERIFY_JSON_BYTES LIMIT_VERIFY_JSON_BYTES
/* AGV-044's reason names this many of the checks that did not run (" AGV-NNN" each) */
#define VERIFY_NOT_RUN_NAMED 8
_Static_assert(48 + 8 * VERIFY_NOT_RUN_NAMED + 4 < VERIFY_REASON_BYTES,
	       "AGV-044's reason holds the ids it names");

enum verify_status { VERIFY_PASS = 0, VERIFY_FAIL, VERIFY_INFO, VERIFY_SKIP };

struct verify_check {
	uint8_t status;               /* enum verify_status */
	/* a SKIP of a check that cannot apply to the target (an inside check of a container
	 * agentic did not make); any other SKIP is a check that applies but could not run, and
	 * leaves the evidence incomplete */
	bool inapplicable;
	char reason[VERIFY_REASON_BYTES];
};

/* "AGV-012", its title, "PASS" ...; NULL past the end. */
const char *verify_check_id(unsigned i);
const char *verify_check_title(unsigned i);
const char *verify_status_name(enum verify_status s);

/* ---- facts ---- */

struct verify_mount {
	char type[12];                /* bind, volume, tmpfs ... */
	char source[VERIFY_PATH_BYTES];
	char dest[VERIFY_PATH_BYTES];
	bool rw;
	char propagation[12];
};

/* The control tmpfs: a mount of a process's mountinfo, or the engine's options for it. */
struct verify_tmpfs {
	bool found;
	char fstype[16];
	bool noexec, nosuid, nodev;
	bool has_mode, has_uid, has_gid;
	uint32_t mode, uid, gid;
};

/* A container as the engine's inspect answer shows it (only what the checks read; Config.Env
 * is never looked at). */
struct verify_ct {
	char id[65];
	bool running;
	int64_t pid;
	bool has_uid_label;
	uint32_t control_uid;         /* label agentic-control-uid */
	char instance_id[40];         /* label agentic-instance-id, "" none */
	char managed_network[128];    /* label agentic-managed-network, "" none */
	uint32_t ncap_drop;
	bool cap_drop_all;
	uint32_t ncap_add;
	bool cap_add_setuid, cap_add_setgid;
	bool nnp;                     /* SecurityOpt no-new-privileges (=true) */
	bool seccomp_unconfined;
	bool seccomp_profile;         /* SecurityOpt seccomp=<profile> */
	bool apparmor_unconfined;     /* AppArmorProfile or SecurityOpt apparmor=unconfined */
	bool apparmor_profile;        /* a profile named */
	bool selinux_label;           /* ProcessLabel or SecurityOpt label= */
	bool privileged;
	bool host_pid, host_ipc, host_uts, host_userns, host_net;
	uint32_t ndevices, ndevice_rules;
	struct verify_mount mount[VERIFY_MOUNTS];
	uint32_t nmounts;             /* all of them; the first VERIFY_MOUNTS kept */
	struct verify_tmpfs tmpfs_cfg;  /* HostConfig.Tmpfs (or a tmpfs mount) at /run/agentic */
	bool readonly_rootfs;
	bool storage_size;            /* HostConfig.StorageOpt has size */
	int64_t pids_limit, memory;
	char net_name[VERIFY_NETS][128];
	char net_id[VERIFY_NETS][65];
	char net_ip[VERIFY_NETS][16];  /* the container's IPv4 address on it, "" none */
	uint32_t nnets;               /* all of them; the first VERIFY_NETS kept */
};

/* A network as the engine shows it. */
struct verify_net {
	bool read;
	bool internal, inhibit_ipv4, default_deny, ipv6;
	char gateway[16];             /* IPv4 of the first IPAM config, "" none */
	char subnet[20];
};

/* A process's status as /proc/<pid>/status (or the probe) says. */
struct verify_proc {
	bool read;
	uint32_t uid[4], gid[4];
	uint32_t ngroups;
	uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
	int no_new_privs, seccomp;    /* -1 unknown */
};

/* Which connect of the probe went where (-1: not tried). */
enum verify_target { VERIFY_TO_GATEWAY = 0, VERIFY_TO_DOCKER0, VERIFY_TO_PRIMARY, VERIFY_TARGETS };

/* A VM's QEMU as the host sees it (AGV-046..050). */
struct verify_vm {
	bool running;                 /* QEMU is there (its pid still the one that started) */
	struct verify_proc qemu;      /* its /proc status */
	uint32_t uid;                 /* the uid it must run as */
	int64_t uid_other;            /* another process holding that uid or gid, 0 none */
	bool uid_subordinate, kvm;
	bool ns_read;                 /* its namespaces could be read */
	bool own_net, own_ipc, own_mnt, own_root; /* not agenticd's (the host's) */
	int ifaces;                   /* interfaces of its network namespace but lo, -1 unread */
	bool sandbox_on;              /* its command line has -sandbox on with the denials */
	bool dir_read;                /* the VM's directory (its control socket's) */
	uint32_t dir_mode, dir_uid, dir_gid;
};

struct verify_facts {
	bool is_sandbox;
	bool is_vm;                   /* a VM sandbox: vm, not ct, is what the host shows */
	struct verify_vm vm;
	struct verify_ct ct;
	uint32_t net_index;           /* which of ct.net_* is the sandbox's own network */
	struct verify_net net[VERIFY_NETS];
	/* agenticd's own */
	uint32_t uid_min, uid_max, workload_uid, workload_gid;
	bool uid_taken_by_other;      /* another sandbox of the table holds ct.control_uid */
	const char *agent_socket_dir;
	const char *docker_socket;    /* the engine's socket path, and its realpath */
	const char *docker_socket_real;
	const char *agentshare_root;
	const char *self_exe;
	const char *workspace;        /* this sandbox's workspace directory, or NULL */
	/* the host's view */
	struct verify_proc init_host;
	struct verify_proc init_self;  /* the init's own report (registration), .read false: none */
	struct verify_tmpfs tmpfs;
	/* /run/agentic's own inode, stat'ed through /proc/<pid>/root: a chmod or chown after the
	 * mount changes it, not the mount's options */
	bool tmpfs_dir_read;
	uint32_t tmpfs_dir_mode, tmpfs_dir_uid, tmpfs_dir_gid;
	bool lsm_apparmor, lsm_selinux; /* the host kernel runs them */
	bool target_known[VERIFY_TARGETS];
	int target_connect[VERIFY_TARGETS]; /* the probe's connect.N index, -1 none */
	int listener_errno;          /* agenticd's listener could not be opened: why, else 0 */
	/* agenticd's listener took a connection at the target's address from one of the
	 * container's addresses: the host's own reading, whatever the probe says */
	bool host_reached[VERIFY_TARGETS];
	/* it also held a connection it cannot place (or its queue was full): a check that
	 * depends on its queue cannot be judged */
	bool listener_foreign;
	/* the probe's output (NUL-terminated), NULL when it did not run */
	const char *probe;
	const char *probe_error;      /* fixed words: why it did not run or answer */
	/* the sandbox's agentshare */
	uint64_t disk_bytes;
	int64_t workspace_img_bytes;  /* -1: none */
	bool writable_root;
	uint32_t runs_checked, runs_bad;
	char runs_why[64];            /* the first bad entry's kind and mode, fixed words */
	bool share_dev_known, share_same_dev, require_dedicated;
	/* the posture */
	bool t1;
	char posture_text[96];
};

/* The inspect answers. 0, or ERR_PARSE (not the object it should be). */
int verify_ct_parse(const char *json, size_t len, struct verify_ct *ct);
int verify_net_parse(const char *json, size_t len, struct verify_net *net);
/* The mount at mount_point in a mountinfo text; t->found false when there is none. */
void verify_mountinfo_find(const char *text, const char *mount_point, struct verify_tmpfs *t);
/* A /proc/<pid>/status text; 0 or ERR_PARSE. */
int verify_status_parse(const char *text, struct verify_proc *p);
/* The probe's output: the value of key (a whole line "key=value"); 0, or -ENOENT. */
int verify_probe_get(const char *out, const char *key, char *val, size_t size);
/* The probe's status lines under prefix ("self.", "pid1."); 0 or -ENOENT when incomplete. */
int verify_probe_status(const char *out, const char *prefix, struct verify_proc *p);

/* ---- verdicts ---- */

struct verify_result {
	struct verify_check check[VERIFY_CHECKS];
	uint32_t passed, failed, info, skipped;
	uint32_t not_run;             /* of the skipped: checks that applied but could not run */
};

/* Every check's verdict from the facts (pure). */
void verify_evaluate(const struct verify_facts *f, struct verify_result *r);
/* "fail" (a check failed), "incomplete" (none failed, but one that applies could not run:
 * no evidence for what it checks), else "pass". */
const char *verify_result_word(const struct verify_result *r);
/* Check i applies to the target but could not run (a SKIP that applies); AGV-044 (index 43),
 * which rests on the others, is not counted with them when they leave it unproven. */
static inline bool verify_check_not_run(const struct verify_result *r, unsigned i)
{
	return i != 43 && r->check[i].status == VERIFY_SKIP && !r->check[i].inapplicable;
}

/* What the result says about its target, for the JSON. */
struct verify_meta {
	bool is_sandbox;
	const char *container_id;
	const struct sandbox *sb;     /* NULL for a container */
	const char *run;              /* the sandbox's open run, or NULL */
	int64_t started_ms;           /* wall */
	int64_t duration_ms;
};
/* The result object (docs/VERIFY.md). */
void verify_result_json(struct json_writer *w, const struct verify_result *r,
			const struct verify_meta *m);

/* ---- a verification on the loop ---- */

struct runtime_vm;

struct verify_config {
	const struct config *cfg;
	struct runtime_vm *vm;        /* VM sandboxes' QEMU, or NULL */
	struct docker_client *dc;
	const char *self_exe;
	int epfd;                     /* the loop's epoll, or -1 */
	uint32_t tag;                 /* epoll tag kind of the verifier's engine jobs */
};

/* The answer, to the admin connection (conn, gen) that asked: status 200 with the result
 * object's JSON, or an error status, code and message (json then NULL). */
struct verify_client {
	void (*done)(int32_t conn, uint32_t gen, int status, const char *code,
		     const char *message, const char *json, size_t len);
	int32_t conn;
	uint32_t gen;
};

void verify_init(const struct verify_config *vc);
/* The verifier's static storage (its runs, buffers and token array), for the budget. */
size_t verify_table_bytes(void);
/* Begins verifying sb (sb non-NULL) or the container id (a sandbox's container is verified
 * as its sandbox). 0: client.done comes later, from the loop, never from inside this call;
 * else an HTTP status with code and message set (nothing began). */
int verify_start(struct sandbox *sb, const char *container, bool require_dedicated,
		 const struct verify_client *client, const char **code, const char **message);
void verify_ready(uint32_t id);             /* an engine job's socket is ready */
void verify_tick(int64_t now);
int64_t verify_next_deadline(int64_t now);
/* The open run's verify.json, for GET: 0 with an fd, -ENOENT when there is none. */
int verify_last_open(const struct sandbox *sb, int *fd);

#endif
