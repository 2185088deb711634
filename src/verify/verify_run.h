/* verify_run.h: inside the verifier (src/verify only): a verification's slot on the loop
 * (verify_run.c moves it from step to step), and what verify_gather.c, below it, reads of the
 * host and agenticd into the slot's facts: a container's host side, a sandbox's, a VM's QEMU. */
#ifndef AGENTIC_VERIFY_RUN_H
#define AGENTIC_VERIFY_RUN_H

#include "agent/exec.h"
#include "runtime/engine.h"
#include "verify/verify.h"

#define VERIFY_RUNS LIMIT_VERIFY_RUNS
#define VERIFY_DEADLINE_MS LIMIT_VERIFY_MS
#define VERIFY_WALK_MAX LIMIT_VERIFY_WALK_ENTRIES
#define VERIFY_PROBE_ARGS 40

enum step { ST_FREE = 0, ST_INSPECT, ST_NETS, ST_PROBE };

struct vrun {
	enum step step;
	struct sandbox *sb;           /* NULL: a container */
	uint32_t sb_gen;
	char target[160];
	bool require_dedicated;
	struct verify_client client;
	int64_t started_ms, t0, deadline;
	struct engine_job job;
	uint32_t net_next;
	bool finish_due;              /* finished outside a callback of the caller's: at tick */
	int err_status;
	const char *err_code, *err_msg;
	struct verify_facts facts;
	struct exec_collect probe;
	int32_t exec;                 /* the probe's session while it runs, else -1 */
	int listen_fd;
	char workspace[LIMIT_PATH_BYTES + 16]; /* facts.workspace */
	char addr[VERIFY_TARGETS][32];
	const char *argv[VERIFY_PROBE_ARGS];
	struct verify_result result;
	char json[VERIFY_JSON_BYTES];
};

/* verify_parse.c's token array (the inspect parsers') */
#define VERIFY_PARSE_TOKENS 16384

/* verify_gather.c's state, taken at start (verify_gather_init) */
struct verify_host {
	struct verify_config c;
	char docker_socket[CONFIG_STR_BYTES];
	char docker_socket_real[LIMIT_PATH_BYTES];
	bool apparmor, selinux;
	char text[65536];             /* a /proc file being read */
};
void verify_gather_init(const struct verify_config *vc);
/* What the host and agenticd say of v's target, read at once (small local reads). */
void verify_host_facts(struct vrun *v);
/* A VM's host side: its QEMU (uid, namespaces, seccomp, command line) and its directory. */
void verify_vm_facts(struct vrun *v);
/* A small file's text, NUL-terminated and cut at the buffer's size, in the gatherer's buffer
 * until the next read; NULL when it cannot be opened. */
char *verify_file_text(const char *path);

#endif
