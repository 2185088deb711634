/* profile.h: startup profiles: one JSON file each in profiles_dir, read strictly (an unknown
 * field or a wrong type is refused, naming the file and the field), and the set of them as
 * agenticd holds it (loaded at start and on SIGHUP; a bad file is kept as invalid with its
 * reason and cannot be used, and never stops the daemon). The CLI checks a file offline with
 * the same parser (`agentic profiles check FILE`). docs/PROFILES.md is the format.
 * All storage is the caller's or static: nothing is allocated after start. */
#ifndef AGENTIC_PROFILE_PROFILE_H
#define AGENTIC_PROFILE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "egress/policy.h"

#define PROFILE_ID_BYTES 64         /* [a-z0-9][a-z0-9_.-]*, with its NUL */
#define PROFILE_MAX 64              /* profiles in profiles_dir */
#define PROFILE_FILE_BYTES (16u * 1024u)   /* one profile file, at most */
#define PROFILE_ENV_MAX 64
#define PROFILE_CMD_MAX 64
#define PROFILE_MOUNTS_MAX 8
#define PROFILE_EGRESS_MAX EGRESS_ALLOW_MAX
#define PROFILE_CREDS_MAX 8
#define PROFILE_PROBES_MAX 4
#define PROFILE_JSON_TOKENS 4096    /* JSON values of one file */
#define PROFILE_PROBE_TIMEOUT_S 10  /* a probe's timeout_seconds when it names none */
#define PROFILE_PROBE_TIMEOUT_MAX_S 3600
/* resources: the ranges agenticd.conf allows for its defaults */
#define PROFILE_MEMORY_MIN (6ull << 20)
#define PROFILE_MEMORY_MAX (1ull << 40)
#define PROFILE_PIDS_MIN 8
#define PROFILE_PIDS_MAX (1u << 22)
#define PROFILE_NANO_CPUS_MIN 10000000ull           /* 0.01 */
#define PROFILE_NANO_CPUS_MAX (1024ull * 1000000000ull)
_Static_assert(PROFILE_ID_BYTES >= 2 && PROFILE_MAX >= 1 && PROFILE_FILE_BYTES >= 1024,
	       "an id, a profile and a file of some size fit");
_Static_assert(PROFILE_JSON_TOKENS >= PROFILE_ENV_MAX * 2 + PROFILE_CMD_MAX + 64,
	       "a file with every list full of short values parses");
_Static_assert(PROFILE_PROBE_TIMEOUT_S >= 1 && PROFILE_PROBE_TIMEOUT_S <= PROFILE_PROBE_TIMEOUT_MAX_S,
	       "the default timeout is one a file may name");

struct profile_mount {
	const char *source, *target;
	bool read_only;
};

struct profile_cred_ref {
	const char *id, *provider, *allowed_use;
	const char *target_type;     /* "env" or "file" */
	const char *target_name;
};

struct profile_probe {           /* a readiness probe: a command run in the sandbox */
	const char *cmd[PROFILE_CMD_MAX + 1];
	uint32_t ncmd;
	int32_t timeout_s;
};

struct profile {
	char id[PROFILE_ID_BYTES];
	const char *description;     /* NULL: none */
	const char *image;           /* NULL: default_image */
	const char *runtime;         /* NULL or "docker" (a VM runtime is another word) */
	const char *env[PROFILE_ENV_MAX + 1];     /* "KEY=VALUE", non-secret values */
	uint32_t nenv;
	const char *cmd[PROFILE_CMD_MAX + 1];
	uint32_t ncmd;
	uint64_t memory_bytes;       /* resources; 0: agenticd's default */
	uint32_t pids;
	uint64_t nano_cpus;
	uint64_t disk_bytes;
	struct profile_mount mounts[PROFILE_MOUNTS_MAX];
	uint32_t nmounts;
	const char *network;         /* NULL: the managed network; else an operator's network */
	/* egress: the policy normalised (egress/policy.h), "" when the profile has none */
	char egress_json[EGRESS_POLICY_BYTES];
	uint32_t negress;            /* its allow entries and routes */
	bool egress_report;          /* its mode is "report" */
	struct profile_cred_ref creds[PROFILE_CREDS_MAX];
	uint32_t ncreds;
	struct profile_probe probes[PROFILE_PROBES_MAX];
	uint32_t nprobes;
	char text[PROFILE_FILE_BYTES]; /* the strings above */
	uint32_t text_len;
};

/* Reads one profile's JSON (docs/PROFILES.md). 0, or ERR_PARSE with err = "FIELD:
 * what is wrong" (the caller adds the file name); p is then unusable, except p->id: the id
 * when it was read before the error, else "". Uses a static token array: one caller at a
 * time. */
int profile_parse(struct profile *p, const void *json, size_t len, char *err, size_t err_size);

/* Why the Docker (shared-kernel) runtime must refuse p: non-empty credential_refs, or an env
 * entry that looks like a raw credential (credscan.h). NULL when it may run; else a message
 * for the user that names the field (never a value). */
const char *profile_shared_kernel_refusal(const struct profile *p, char *why, size_t size);

/* ---- the set agenticd holds ---- */

struct profile_entry {
	char file[256];              /* its file name in the directory */
	char id[PROFILE_ID_BYTES];   /* "" when the file could not be read that far */
	bool valid;
	char error[256];             /* why it is invalid: "FILE: FIELD: ..." */
	struct profile p;            /* valid only when valid */
};

struct profile_set {
	struct profile_entry e[PROFILE_MAX];
	uint32_t n;
	uint32_t skipped;            /* files past PROFILE_MAX, not read */
	char dir_error[256];         /* the directory itself could not be read ("" if it could) */
};

/* Reads every *.json of dir into set (replacing what it held), in name order; names starting
 * with '.' are skipped. A missing directory is an empty set, not an error. A file that is
 * a symbolic link (never followed), not a regular file, larger than PROFILE_FILE_BYTES, not
 * owned by root or by this process's user, or writable by group or other is invalid with that
 * reason; a directory that is not owned so, or writable by group or other, is not read at
 * all (dir_error says why). Two files with one id: both invalid. Returns the count of
 * invalid entries (each logged by the caller). Static buffers: one caller at a time. */
int profile_set_load(struct profile_set *set, const char *dir);
/* The valid profile with that id, or NULL; entry_out (may be NULL) gets the entry even when
 * it is invalid, so a caller can say why. */
const struct profile *profile_set_find(const struct profile_set *set, const char *id,
				       const struct profile_entry **entry_out);

#endif
