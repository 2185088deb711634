/* config.h: agenticd's configuration: built-in defaults, the `key = value` file, and the
 * environment overrides. Every key is documented in config/agenticd.conf. */
#ifndef AGENTIC_MGMT_CONFIG_H
#define AGENTIC_MGMT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/base.h"
#include "egress/policy.h"

#define CONFIG_PATH_DEFAULT "/etc/agentic/agenticd.conf"
/* CONFIG_MAX_ALLOWED_MOUNTS, CONFIG_STR_BYTES, CONFIG_LINE_BYTES and CONFIG_FILE_MAX_BYTES
 * are in base/limits.h. */

struct config {
	char docker_host[CONFIG_STR_BYTES];     /* unix:///PATH */
	char agent_socket_dir[CONFIG_STR_BYTES];
	char admin_socket[CONFIG_STR_BYTES];
	char admin_group[CONFIG_STR_BYTES];
	char agentshare_root[CONFIG_STR_BYTES];
	char state_dir[CONFIG_STR_BYTES]; /* agenticd's own files: the init binary's copy */
	char profiles_dir[CONFIG_STR_BYTES];
	char default_image[CONFIG_STR_BYTES];
	uint32_t control_uid_min, control_uid_max;
	uint32_t workload_uid, workload_gid;
	uint32_t subnet_pool_base;              /* host byte order, network address */
	uint32_t subnet_pool_prefix;            /* /16 by default; each sandbox gets a /28 */
	uint32_t max_sandboxes;
	uint32_t warm_sandboxes;                /* kept ready to be claimed (docs/WARM_POOL.md) */
	uint32_t max_admin_connections;
	uint64_t max_message_bytes;
	uint32_t max_streams_per_connection;
	uint64_t exec_spill_max_bytes;          /* output one exec client may be behind, on disk */
	uint32_t ready_timeout_ms, stop_grace_ms;
	uint64_t default_memory_bytes;
	uint32_t default_pids_limit;
	uint64_t default_nano_cpus;
	uint64_t default_disk_bytes;            /* a workspace's size, when a request names none */
	uint64_t transcript_budget_bytes;       /* a sandbox's runs on the agentshare, when a
						 * request names none */
	uint32_t n_mount_allowlist;
	char mount_allowlist[CONFIG_MAX_ALLOWED_MOUNTS][CONFIG_STR_BYTES];
	char seccomp_profile[CONFIG_STR_BYTES]; /* a profile file; empty: the built-in profile */
	enum log_level log_level;               /* lines above it are not written */
	/* egress (docs/EGRESS.md) */
	uint32_t egress_max_connections;        /* workers at once, in all */
	uint32_t egress_per_sandbox;            /* Egress calls per init connection */
	uint32_t egress_direct;                 /* 1: the worker gets the workload's socket */
	uint32_t egress_uid;                    /* the workers' uid and gid */
	char egress_ca_file[CONFIG_STR_BYTES];  /* trust anchors for credential routes */
	char secret_dir[CONFIG_STR_BYTES];      /* where a route's secret_file may be */
	uint32_t egress_io_timeout_ms;          /* a worker's idle limit either way */
	uint64_t egress_audit_max_bytes;        /* a run's egress.jsonl, at most */
	/* the most egress an E2B sandbox may get (docs/E2B.md "Network options"): a policy file,
	 * "": none at all; and its policy, normalised, as config_e2b_egress_load read it */
	char e2b_egress_policy[CONFIG_STR_BYTES];
	char e2b_egress_json[EGRESS_POLICY_BYTES];
	bool min_tier_t1;                       /* min_tier = T1: a create that would be T0 is refused */
	/* the VM runtime (docs/VM.md) */
	char vm_kernel_dir[CONFIG_STR_BYTES];   /* vmlinuz and modules/; "": beside the binary */
	char vm_accel[CONFIG_STR_BYTES];        /* auto, tcg or kvm */
	uint32_t vm_uid_offset;                 /* QEMU's uid: the control uid + this */
	uint32_t vm_ready_timeout_ms;           /* a VM's boot and its init's registration */
	char vm_credentials_dir[CONFIG_STR_BYTES]; /* a VM's credential_refs: ID's secret is ID */
	/* the E2B-compatible API (docs/E2B.md) */
	char e2b_listen[CONFIG_STR_BYTES];      /* HOST:PORT of its TCP listener; "": off */
	uint32_t e2b_max_connections;           /* its connections at once */
	char e2b_base_image[CONFIG_STR_BYTES];  /* the image of E2B's template "base" */
	/* the fleet (docs/FLEET.md) */
	char fleet_endpoints[CONFIG_STR_BYTES]; /* etcd's members, HOST:PORT,...; "": no fleet */
	char fleet_node[CONFIG_STR_BYTES];      /* this node's name, its certificate's CN */
	char fleet_ca_file[CONFIG_STR_BYTES];   /* the fleet's CA (etcd's and the nodes') */
	char fleet_cert_file[CONFIG_STR_BYTES]; /* this node's certificate chain */
	char fleet_key_file[CONFIG_STR_BYTES];  /* its EC key */
	char fleet_etcd_name[CONFIG_STR_BYTES]; /* the name etcd's certificates carry */
	char fleet_advertise[CONFIG_STR_BYTES]; /* HOST:PORT the other nodes reach this one at */
	char fleet_listen[CONFIG_STR_BYTES];    /* HOST:PORT the relay listens on ("": none) */
	uint32_t fleet_lease_s;                 /* the node's lease: lost this long after it stops */
	uint32_t fleet_uid;                     /* the fleet worker's uid once it holds its key */
};

/* "HOST:PORT" (an IPv4 literal, or [IPv6]) into a socket address: 0 or -EINVAL. */
int config_listen_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len);

/* Fills cfg with the built-in defaults (config/agenticd.conf documents each). */
void config_defaults(struct config *cfg);

/* Applies `key = value` lines from text[0..len) on top of cfg. Comments start with '#'; blank
 * lines are fine. On error returns ERR_PARSE with "LINE: what is wrong" in err (the caller adds
 * the file name), and cfg is left exactly as it was. */
int config_parse(struct config *cfg, const char *text, size_t len, char *err, size_t err_size);

/* Reads and applies a file. A missing file at the default path is not an error (defaults
 * stand); a missing file named explicitly is. err gets "FILE:LINE: ..." on failure. */
int config_load(struct config *cfg, const char *path, int explicit_path, char *err,
		size_t err_size);

/* The i-th key the parser knows, or NULL past the last. */
const char *config_key_name(size_t i);

/* Reads the policy file e2b_egress_policy names (root's or agenticd's own, not writable by
 * group or other, a regular file of at most EGRESS_POLICY_BYTES, egress/policy.h's format)
 * into e2b_egress_json, normalised; unset: "". At start: a bad file stops agenticd. 0, or
 * ERR_PARSE / -errno with "e2b_egress_policy FILE: what is wrong" in err and cfg unchanged. */
int config_e2b_egress_load(struct config *cfg, char *err, size_t err_size);

/* Environment overrides named in the docs (AGENTSHARE_ROOT). */
void config_apply_env(struct config *cfg);

/* Sets the log level of cfg and logs, at debug, every key's value in force (one line each). */
void config_log_apply(const struct config *cfg);

/* Cross-field checks (uid range excludes 0 and the workload ids, pool can hold /28s, ...).
 * ERR_PARSE with the reason in err. */
int config_validate(const struct config *cfg, char *err, size_t err_size);

#endif
