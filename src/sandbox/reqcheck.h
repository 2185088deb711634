/* reqcheck.h: what a create request may ask for: names, labels, host mounts; and the scrubbing
 * of secret-shaped text before anything reaches a log line or an error. */
#ifndef AGENTIC_MGMT_POLICY_H
#define AGENTIC_MGMT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

/* ^[a-z][a-z0-9-]{1,62}$ */
bool policy_name_valid(const char *name);

/* Request labels may not use the reserved `agentic-` prefix (any case). */
bool policy_label_key_allowed(const char *key);

/* Checks a requested bind mount SRC:DST. src must resolve (the caller passes the host's
 * realpath of it) to a path under one of cfg->mount_allowlist, and neither it nor dst may be a
 * protected place (the docker socket, /, /proc, /sys, /dev, /etc, /run, /var/run, agentshare,
 * or an ancestor of any of them; dst also not /workspace, /sbin/agentic-init or
 * /run/agentic*). 0, or ERR_PARSE (malformed) / -EPERM (refused) with the reason in why. */
int policy_mount_check(const struct config *cfg, const char *src_real, const char *dst,
		       char *why, size_t why_size);

/* What a checked mount source is (st_dev, st_ino): the bind in the container must be that. */
struct policy_mount_id {
	uint64_t dev, ino;
};

/* The engine resolves a mount source again when it starts the container, following symlinks;
 * so src_real (a realpath) is accepted only when nobody but root can change what it names
 * until then. Walks it from the engine's root (policy_root_set) without following symlinks:
 * every directory on the way, down to the source's parent, must be root's and writable by
 * root alone, or sticky with the entry below it root's (no one else may rename or replace that entry). The source's own owner and
 * mode do not matter: its contents may change, it cannot be swapped. Records what it is in
 * id. 0; -EPERM when refused (a component others could change, or a symlink met: the path
 * changed since its realpath) or -errno when a component cannot be opened, the reason in why. */
int policy_mount_source(const char *src_real, struct policy_mount_id *id, char *why,
			size_t why_size);

/* Mount sources, and the paths below, are walked from root (an O_PATH directory fd, kept):
 * the engine's root directory (host_engine_root), whose mounts the walk follows. -1, the
 * default: "/". In a container agenticd's own directories are its image's, not those the
 * engine resolves. */
void policy_root_set(int root);

/* dir_real (a realpath) as policy_mount_source walks it, and the directory itself root's and
 * writable by root alone: nobody else may rename, make or replace an entry in it. id gets
 * what it is. 0, -EPERM or -errno with why. */
int policy_dir_fixed(const char *dir_real, struct policy_mount_id *id, char *why,
		     size_t why_size);

/* 0 when path, in agenticd's own view, is id (what the engine's host has there); -EPERM or
 * -errno with why. */
int policy_same_file(const char *path, const struct policy_mount_id *id, char *why,
		     size_t why_size);

/* Before a sandbox starts: the init binary's copy at path is still the file agenticd wrote
 * (id), reached as policy_mount_source walks it. 0, -EPERM or -errno with why. */
int policy_init_check(const char *path, const struct policy_mount_id *id, char *why,
		      size_t why_size);

/* After the container started: what is at dst in the mount namespace of process pid, whose
 * /proc/PID/ns/pid must still read pid_ns, must be id. dst (a clean absolute path) is walked
 * from that process's root without following symlinks, so the container's files cannot lead
 * the check elsewhere. 0; -EPERM when something else (or a symlink) is there, or -errno when
 * it cannot be looked at (the process is gone), the reason in why. */
int policy_mount_verify(int64_t pid, const char *pid_ns, const char *dst,
			const struct policy_mount_id *id, char *why, size_t why_size);

/* Replaces secret-shaped substrings in text (in place): values of KEY=VALUE pairs whose key
 * names a secret (TOKEN, SECRET, PASSWORD, PASSWD, KEY, CREDENTIAL, AUTH), bearer tokens,
 * well-known token prefixes (ghp_, github_pat_, sk-, xox?-, AKIA, glpat-), and any run of 24
 * or more base64/hex-looking characters. Each becomes "[redacted]"; when that would not fit in
 * size, the end of the text is cut. Returns the number of replacements. */
int policy_redact(char *text, size_t size);

#endif
