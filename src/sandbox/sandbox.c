/* sandbox.c: the sandbox table, the control-uid map, and a sandbox as JSON. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "json/json.h"
#include "workspace/host.h"
#include "sandbox/sandbox.h"

/* The table and the uid map, in storage agenticd.c takes from its region at start. */
static struct sandbox_table {
	const struct config *cfg;
	struct sandbox *sb;
	uint32_t nsb;                 /* = max_sandboxes */
	uint32_t live;                /* slots not SB_FREE */
	struct idalloc uids;
} T;

void sandbox_table_init(const struct config *cfg, struct sandbox *sb, uint32_t nsb,
			uint64_t *uid_bits)
{
	T.cfg = cfg;
	T.sb = sb;
	T.nsb = nsb;
	T.live = 0;
	idalloc_init(&T.uids, uid_bits, cfg->control_uid_min,
		     cfg->control_uid_max - cfg->control_uid_min + 1);
	for (uint32_t i = 0; i < nsb; i++) {
		sb[i].subnet = -1;
		sb[i].waiter = -1;
		sb[i].init_pidfd = sb[i].peer_pidfd = -1;
		sb[i].agent_egress_fd = -1;
	}
}

const struct config *sandbox_config(void)
{
	return T.cfg;
}

uint32_t sandbox_slots(void)
{
	return T.nsb;
}

uint64_t sandbox_transcript_budget(const struct sandbox *sb)
{
	return sb->transcript_bytes ? sb->transcript_bytes : T.cfg->transcript_budget_bytes;
}

uint64_t sandbox_transcript_owed(const struct sandbox *except)
{
	uint64_t owed = 0;

	for (uint32_t i = 0; i < T.nsb; i++) {
		const struct sandbox *sb = &T.sb[i];
		uint64_t budget = sandbox_transcript_budget(sb);

		if (sb != except && sb->state != SB_FREE && sb->transcript_used < budget)
			owed += budget - sb->transcript_used;
	}
	return owed;
}

struct sandbox *sandbox_slot(uint32_t i)
{
	return i < T.nsb ? &T.sb[i] : NULL;
}

uint32_t sandbox_index(const struct sandbox *sb)
{
	return (uint32_t)(sb - T.sb);
}

uint32_t sandbox_live(void)
{
	return T.live;
}

struct idalloc *sandbox_uid_map(void)
{
	return &T.uids;
}

static bool in_use(const struct sandbox *sb)
{
	return sb->state != SB_FREE;
}

struct sandbox *sandbox_by_name(const char *name)
{
	for (uint32_t i = 0; i < T.nsb; i++)
		if (in_use(&T.sb[i]) && !T.sb[i].pool && strcmp(T.sb[i].name, name) == 0)
			return &T.sb[i];
	return NULL;
}

struct sandbox *sandbox_by_uid(uint32_t uid)
{
	for (uint32_t i = 0; i < T.nsb; i++)
		if (in_use(&T.sb[i]) && T.sb[i].uid == uid &&
		    (T.sb[i].uid_taken || T.sb[i].state == SB_CONFLICT))
			return &T.sb[i];
	return NULL;
}

struct sandbox *sandbox_by_container(const char *id)
{
	size_t n = strlen(id);

	if (n == 0)
		return NULL;
	for (uint32_t i = 0; i < T.nsb; i++)
		if (in_use(&T.sb[i]) && T.sb[i].ct_exists &&
		    strncmp(T.sb[i].container_id, id, n) == 0)
			return &T.sb[i];
	return NULL;
}

struct sandbox *sandbox_new(void)
{
	for (uint32_t i = 0; i < T.nsb; i++) {
		struct sandbox *sb = &T.sb[i];
		uint32_t gen = sb->gen;

		if (in_use(sb))
			continue;
		memset(sb, 0, offsetof(struct sandbox, call));
		sb->call_active = false;
		sb->gen = gen + 1;
		sb->subnet = -1;
		sb->waiter = -1;
		sb->init_pidfd = -1;
		sb->peer_pidfd = -1;
		sb->agent_egress_fd = -1;
		sb->state = SB_CREATING;
		sb->lc = LC_NEW;
		T.live++;
		return sb;
	}
	return NULL;
}

void sandbox_claim_undo(struct sandbox *sb)
{
	snprintf(sb->name, sizeof(sb->name), "%s", sb->agent_id);
	sb->ncmd = sb->nlabels = sb->nmounts = 0;
	sb->cmd_len = sb->labels_len = sb->mounts_len = 0;
	sb->nclaim_env = 0;
	sb->claim_env_len = 0;
	sb->posture.at_create = 0;
	sb->egress_json[0] = '\0';
}

void sandbox_free(struct sandbox *sb)
{
	sandbox_release_ids(sb);
	sb->pool = sb->claimed = false;
	if (sb->init_pidfd >= 0)
		close(sb->init_pidfd);
	sb->init_pidfd = -1;
	if (sb->peer_pidfd >= 0)
		close(sb->peer_pidfd);
	sb->peer_pidfd = -1;
	sb->state = SB_FREE;
	sb->lc = LC_FREE;
	T.live--;
}

void sandbox_table_reset(void)
{
	for (uint32_t i = 0; i < T.nsb; i++) {
		struct sandbox *sb = &T.sb[i];
		uint32_t gen = sb->gen;

		if (sb->init_pidfd >= 0)
			close(sb->init_pidfd);
		if (sb->peer_pidfd >= 0)
			close(sb->peer_pidfd);
		runlog_abandon(sb);
		memset(sb, 0, sizeof(*sb));
		sb->gen = gen + 1;
		sb->subnet = -1;
		sb->waiter = -1;
		sb->init_pidfd = sb->peer_pidfd = -1;
		sb->agent_egress_fd = -1;
	}
	idalloc_init(&T.uids, T.uids.bits, T.uids.first, T.uids.count);
	subnet_reset();
	T.live = 0;
}

int sandbox_take_uid(struct sandbox *sb)
{
	int r = idalloc_take(&T.uids, &sb->uid);

	if (r == 0)
		sb->uid_taken = true;
	return r;
}

int sandbox_take_subnet(struct sandbox *sb)
{
	uint32_t idx;
	int r = idalloc_take(subnet_map(), &idx);

	if (r != 0)
		return r;
	sb->subnet = (int32_t)idx;
	subnet_text(sb->subnet, sb->subnet_text, sizeof(sb->subnet_text));
	return 0;
}

void sandbox_release_ids(struct sandbox *sb)
{
	if (sb->uid_taken) {
		/* two containers claiming one uid (found at start): the other keeps it reserved */
		for (uint32_t i = 0; i < T.nsb; i++) {
			struct sandbox *o = &T.sb[i];

			if (o != sb && in_use(o) && !o->uid_taken && o->uid == sb->uid) {
				o->uid_taken = true;
				sb->uid_taken = false;
				break;
			}
		}
	}
	if (sb->uid_taken)
		idalloc_free(&T.uids, sb->uid);
	sb->uid_taken = false;
	if (sb->subnet >= 0)
		idalloc_free(subnet_map(), (uint32_t)sb->subnet);
	sb->subnet = -1;
}

const char *sandbox_state_name(const struct sandbox *sb)
{
	switch (sb->state) {
	case SB_CREATING: return "creating";
	case SB_READY: return "ready";
	case SB_REMOVING: return "removing";
	case SB_CONFLICT: return "conflict";
	default: return "free";
	}
}

void sandbox_time_write(struct json_writer *w, const char *key, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char s[64];

	if (key)
		json_key(w, key);
	if (!ms) {
		json_null_write(w);
		return;
	}
	gmtime_r(&t, &tm);
	snprintf(s, sizeof(s), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	json_str_write(w, s);
}

static const char *agent_state(const struct sandbox *sb)
{
	if (!sb->agent)
		return "disconnected";
	if (!sb->agent_authed)
		return "authenticating";
	if (sb->agent_ready)
		return "ready";
	return sb->agent_registered ? "registered" : "connected";
}

void sandbox_json(struct json_writer *w, const struct sandbox *sb)
{
	const struct config *cfg = T.cfg;
	char path[LIMIT_PATH_BYTES];
	const char *p, *q;
	uint32_t i = 0;

	json_obj_begin(w);
	json_key(w, "name");
	json_str_write(w, sb->name);
	json_key(w, "instance_id");
	json_str_write(w, sb->instance_id);
	json_key(w, "state");
	json_str_write(w, sandbox_state_name(sb));
	json_key(w, "container_id");
	json_str_write(w, sb->container_id);
	json_key(w, "container_status");
	json_str_write(w, !sb->ct_exists ? "absent" : sb->running ? "running" : "stopped");
	json_key(w, "runtime");
	json_str_write(w, sb->vm ? "vm" : "docker");
	json_key(w, "image");
	json_str_write(w, sb->image);
	json_key(w, "control_uid");
	json_int_write(w, sb->uid);
	json_key(w, "workload_uid");
	json_int_write(w, cfg->workload_uid);
	json_key(w, "network");
	json_str_write(w, sb->network);
	json_key(w, "network_managed");
	json_bool_write(w, sb->net_managed);
	json_key(w, "subnet");
	if (sb->subnet_text[0])
		json_str_write(w, sb->subnet_text);
	else
		json_null_write(w);
	json_key(w, "agent");
	json_str_write(w, agent_state(sb));
	sandbox_time_write(w, "agent_seen_at", sb->agent_seen_ms);
	sandbox_time_write(w, "created_at", sb->created_ms);
	sandbox_time_write(w, "ready_at", sb->ready_ms);
	/* the run's transcript, and why it is not being written (a full disk): its output waits */
	json_key(w, "run");
	if (sb->run.open)
		json_str_write(w, sb->run.name);
	else
		json_null_write(w);
	json_key(w, "transcript_error");
	if (sb->run.error)
		json_str_write(w, strerror(-sb->run.error));
	else
		json_null_write(w);
	json_key(w, "workspace");
	if (host_instance_dir(cfg, sb->instance_id, path, sizeof(path)) == 0 &&
	    strlen(path) + 11 < sizeof(path)) {
		strcat(path, "/workspace");
		json_str_write(w, path);
	} else {
		json_null_write(w);
	}
	json_key(w, "disk_bytes");
	json_int_write(w, (int64_t)sb->disk_bytes);
	json_key(w, "transcript_bytes");
	json_int_write(w, (int64_t)sandbox_transcript_budget(sb));
	json_key(w, "transcript_used_bytes");
	json_int_write(w, (int64_t)sb->transcript_used);
	json_key(w, "writable_root");
	json_bool_write(w, sb->writable_root);
	json_key(w, "cmd");
	json_arr_begin(w);
	for (p = NULL; (p = strrun_next(sb->cmd, sb->cmd_len, p));)
		json_str_write(w, p);
	json_arr_end(w);
	json_key(w, "labels");
	json_obj_begin(w);
	for (p = NULL; (p = strrun_next(sb->labels, sb->labels_len, p)) &&
	     (q = strrun_next(sb->labels, sb->labels_len, p)); p = q) {
		json_key(w, p);
		json_str_write(w, q);
	}
	json_obj_end(w);
	json_key(w, "posture");
	posture_json(w, &sb->posture);
	json_key(w, "mounts");
	json_arr_begin(w);
	for (p = NULL; (p = strrun_next(sb->mounts, sb->mounts_len, p)) &&
	     (q = strrun_next(sb->mounts, sb->mounts_len, p)); p = q, i++) {
		json_obj_begin(w);
		json_key(w, "source");
		json_str_write(w, p);
		json_key(w, "target");
		json_str_write(w, q);
		json_key(w, "read_only");
		json_bool_write(w, (sb->mount_ro >> i) & 1);
		json_obj_end(w);
	}
	json_arr_end(w);
	json_obj_end(w);
}

pid_t sandbox_pidfd_pid(int pidfd)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strstr(buf, "\nPid:\t");
	if (!p)
		return -1;
	n = strtol(p + 6, NULL, 10);
	return n > 0 ? (pid_t)n : 0;
}

void sandbox_read_pid_ns(struct sandbox *sb)
{
	char path[64];
	ssize_t n;
	int fd;

	if (sb->init_pidfd >= 0)
		close(sb->init_pidfd);
	sb->init_pidfd = -1;
	sb->pid_ns[0] = '\0';
	if (sb->pid <= 0)
		return;
	fd = (int)syscall(SYS_pidfd_open, (pid_t)sb->pid, 0);
	if (fd < 0)
		return;
	snprintf(path, sizeof(path), "/proc/%lld/ns/pid", (long long)sb->pid);
	n = readlink(path, sb->pid_ns, sizeof(sb->pid_ns) - 1);
	sb->pid_ns[n > 0 ? n : 0] = '\0';
	/* still alive after the read: the namespace read was that process's */
	if (sandbox_pidfd_pid(fd) != (pid_t)sb->pid) {
		close(fd);
		sb->pid_ns[0] = '\0';
		return;
	}
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	sb->init_pidfd = fd;
}

int sandbox_check_binds(const struct sandbox *sb, const struct policy_mount_id *init_id,
			char *why, size_t why_size)
{
	const char *src, *dst = NULL;
	char what[512];
	int r;

	if (init_id && (r = policy_mount_verify(sb->pid, sb->pid_ns, "/sbin/agentic-init", init_id,
						what, sizeof(what))) != 0) {
		snprintf(why, why_size, "the sandbox's init is not the copy agenticd wrote: %s", what);
		return r;
	}

	for (uint32_t i = 0; i < sb->nmounts; i++) {
		src = strrun_next(sb->mounts, sb->mounts_len, dst);
		dst = strrun_next(sb->mounts, sb->mounts_len, src);
		if (!src || !dst) {
			snprintf(why, why_size, "mount %u is missing from the sandbox's record", i);
			return ERR_STATE;
		}
		r = policy_mount_verify(sb->pid, sb->pid_ns, dst, &sb->mount_id[i], what,
					sizeof(what));
		if (r != 0) {
			snprintf(why, why_size, "mount %s:%s: %s", src, dst, what);
			return r;
		}
	}
	return 0;
}
