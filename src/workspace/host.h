/* host.h: the host around agenticd: its directories and sockets, the start-up lock, the
 * admin peer check, sd_notify, and where an instance lives in the agentshare. */
#ifndef AGENTIC_MGMT_HOST_H
#define AGENTIC_MGMT_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "docker/docker.h"
#include "config/config.h"

/* Makes agent_socket_dir (0755) and its parent (0700 root, or 0710 root:admin_gid when the
 * admin socket shares it), and the admin socket's directory. */
int host_prepare_dirs(const struct config *cfg, bool admin_group_known, gid_t admin_gid,
		      char *err, size_t err_size);
/* flock on ADMIN_SOCKET.lock, held for the daemon's life: -EWOULDBLOCK when another owns it.
 * Then the daemon's uid ranges claimed host-wide (host_claim_uids): -EEXIST when they meet
 * another running agenticd's. */
int host_lock(const struct config *cfg, int *lock_fd, char *err, size_t err_size);
/* The directory where every agenticd of this host claims its uid ranges (host_uids.c). */
#define HOST_UID_CLAIMS_DIR "/run/agentic-uids"
/* Claims cfg's control, VM, egress and (in a fleet) fleet uids: 0 with *claim_fd the claim's
 * descriptor, locked for the daemon's life; -EEXIST (err names both daemons' ranges and the
 * settings) when a running agenticd's claim meets them; another -errno when the directory
 * cannot be used. */
int host_claim_uids(const struct config *cfg, int *claim_fd, char *err, size_t err_size);
/* The daemon's owner id (the agentic-daemon label; struct daemon.owner): 16 hex digits of a
 * 64-bit FNV-1a hash of agentshare_root, resolved through symlinks when it exists. */
int host_owner(const struct config *cfg, char *out, size_t size);
/* Listens on a Unix socket at path (a stale socket is replaced, anything else refused) with
 * mode and group, taking no passed descriptors where the kernel can refuse them. */
int host_listen(const char *path, mode_t mode, gid_t gid, int *fd, char *err, size_t err_size);
/* false once a listener could not refuse passed descriptors (a kernel before 6.16) */
extern bool host_rights_refused;
/* Warns (one log line each) about subordinate-uid ranges in path (/etc/subuid) that overlap
 * the control uid range; returns how many do. A missing file has none. */
int host_warn_subuid(const struct config *cfg, const char *path);
/* 0 when the peer may use the admin API; else -EACCES with why. */
int host_admin_peer_ok(int fd, bool group_known, gid_t gid, uid_t *uid, pid_t *pid, char *why,
		       size_t why_size);
/* sd_notify READY=1 to $NOTIFY_SOCKET (path or @abstract); 0 when it is unset. */
int host_notify_ready(void);
/* mkdir -p, mode for the last directory (0755 above it): 0 or -errno. */
int host_mkdirs(const char *path, mode_t mode);
/* agentshare_root/instances/<id>: -ENAMETOOLONG when it does not fit. */
int host_instance_dir(const struct config *cfg, const char *id, char *out, size_t size);
/* state_dir/agentic-init into out: a copy of the binary self (root's, 0555), written when
 * missing or when its bytes differ, and what agenticd binds into sandboxes as their init, a
 * path the engine can bind also when agenticd runs in a container. sha gets the binary's
 * sha256 in hex. 0 written, 1 already there, or -errno with err. */
int host_init_copy(const struct config *cfg, const char *self, char *out, size_t out_size,
		   char sha[65], char *err, size_t err_size);
/* Whether agenticd runs in a container (the engine's /.dockerenv, or a mount namespace other
 * than pid 1's). */
bool host_in_container(void);
/* The root directory the paths the engine binds are walked from (policy_root_set), an O_PATH
 * fd: "/" on the host; in a container, that of the process behind the engine's socket (its
 * SO_PEERCRED pid, visible with --pid host; dockerd, or the host's init when systemd holds
 * the socket): its mounts are those the engine resolves bind sources in. -errno with err. */
int host_engine_root(const struct config *cfg, bool in_container, char *err, size_t err_size);
/* Where agenticd stands against the engine: on a Linux host's engine; in a container of a
 * Docker Desktop engine (its VM's kernel, the Linux posture); or outside Desktop's VM, where
 * peer credentials do not cross (refused). kernel: our uname release. */
enum engine_place { ENGINE_LINUX, ENGINE_DESKTOP_VM, ENGINE_DESKTOP_OUTSIDE };
enum engine_place host_engine_place(const struct docker_info *info, const char *kernel,
				    bool in_container);
/* uname's release into out. */
const char *host_kernel_release(char *out, size_t size);

#endif
