/* priv.h: the privilege model inside a sandbox (docs/SECURITY.md): the control process's drop to
 * its own uid with only CAP_SETUID/CAP_SETGID, the workload child's drop to 10001 with no
 * capabilities, and reading back what the kernel says in /proc/<pid>/status. */
#ifndef AGENTIC_INIT_PRIV_H
#define AGENTIC_INIT_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* CAP_SETGID (6) and CAP_SETUID (7): the control process keeps exactly these. */
#define PRIV_CONTROL_CAPS ((uint64_t)0xc0)

struct priv_status {
	uint32_t uid[4], gid[4];  /* real, effective, saved, filesystem */
	uint32_t ngroups;
	uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
	int no_new_privs;         /* -1 when the kernel did not say */
	int seccomp;              /* -1 when the kernel did not say */
};

/* Parses the text of a /proc/<pid>/status file. 0, or ERR_PARSE when a field we need is
 * missing or malformed. */
int priv_status_parse(const char *text, struct priv_status *st);
/* Reads and parses /proc/self/status (pid 0) or /proc/<pid>/status. */
int priv_status_read(pid_t pid, struct priv_status *st);

/* The control drop: KEEPCAPS, no groups, setresgid/setresuid to id, capabilities effective and
 * permitted {SETUID, SETGID}, inheritable none, KEEPCAPS cleared. Then checks the result from
 * /proc/self/status: uid and gid id everywhere, no groups, CapEff = CapPrm = c0, CapInh =
 * CapAmb = 0, NoNewPrivs 1. 0, or a negative errno with the failing step in *step. */
int priv_drop_to_control(uint32_t id, const char **step);

/* The workload drop, for the child between fork and exec: raw syscalls only (async-signal-safe):
 * clear ambient, no groups, setresgid/setresuid to (uid, gid), not dumpable (until an execve),
 * capabilities all zero. Returns 0 or a negative errno; the caller reports it through a pipe
 * and _exit()s. */
int priv_drop_to_workload(uint32_t uid, uint32_t gid);

/* True when st is exactly what a workload must be (docs/SECURITY.md, the first invariant). */
bool priv_is_workload(const struct priv_status *st, uint32_t uid, uint32_t gid);
/* True when st is exactly what the control process must be (§10 item 2). */
bool priv_is_control(const struct priv_status *st, uint32_t id);

#endif
