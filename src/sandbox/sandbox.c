/* sandbox.c: the sandbox table and the control-uid map. */
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
/* sandbox_json reads the agent's state (agent_of): it moves above agent (admin) */

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
		sb[i].init_pidfd = -1;
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

struct sandbox *sandbox_slot(uint32_t i)
{
	return i < T.nsb ? &T.sb[i] : NULL;
}

uint32_t sandbox_index(const struct sandbox *sb)
{
	uint32_t i = (uint32_t)(sb - T.sb);

	ASSERT(i < T.nsb);
	return i;
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
		memset(sb, 0, sizeof(*sb));
		sb->gen = gen + 1;
		sb->subnet = -1;
		sb->waiter = -1;
		sb->init_pidfd = -1;
		sb->state = SB_CREATING;
		sb->lc = LC_NEW;
		T.live++;
		ASSERT(T.live <= T.nsb);
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
	sb->expires_at = 0;
	sb->ttl_ms = 0;
}

void sandbox_free(struct sandbox *sb)
{
	ASSERT(sb->state != SB_FREE && T.live > 0);
	sandbox_release_ids(sb);
	sb->pool = sb->claimed = false;
	if (sb->init_pidfd >= 0)
		close(sb->init_pidfd);
	sb->init_pidfd = -1;
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
		memset(sb, 0, sizeof(*sb));
		sb->gen = gen + 1;
		sb->subnet = -1;
		sb->waiter = -1;
		sb->init_pidfd = -1;
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
		ASSERT(idalloc_free(&T.uids, sb->uid) == 0);
	sb->uid_taken = false;
	if (sb->subnet >= 0)
		ASSERT(idalloc_free(subnet_map(), (uint32_t)sb->subnet) == 0);
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

pid_t sandbox_pidfd_pid(int pidfd)
{
	char path[64], buf[512], *p;
	long n;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	if (file_read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
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

/* ---- what the modules above tell a sandbox's record ---- */

void sandbox_waiter_set(struct sandbox *sb, enum sb_waiter_kind kind, int32_t conn,
			uint32_t gen)
{
	sb->waiter_kind = kind;
	sb->waiter = conn;
	sb->waiter_gen = gen;
}

void sandbox_egress_json_set(struct sandbox *sb, const char *json)
{
	snprintf(sb->egress_json, sizeof(sb->egress_json), "%s", json);
}

bool sandbox_e2b_json_set(struct sandbox *sb, const char *json)
{
	return (size_t)snprintf(sb->e2b_json, sizeof(sb->e2b_json), "%s", json) <
	       sizeof(sb->e2b_json);
}

void sandbox_auth_mark(struct sandbox *sb, int64_t mono_ms)
{
	sb->t_auth = mono_ms;
}

void sandbox_init_log_set(struct sandbox *sb, const char *text, size_t len)
{
	if (len >= sizeof(sb->init_log))
		len = sizeof(sb->init_log) - 1;
	memcpy(sb->init_log, text, len);
	sb->init_log[len] = '\0';
	sb->log_len = (uint32_t)len;
}

void sandbox_init_log_append(struct sandbox *sb, const char *data, size_t len)
{
	size_t cap = sizeof(sb->init_log) - 1;

	if (len > cap) {
		data += len - cap;
		len = cap;
	}
	if (sb->log_len + len > cap) {
		size_t drop = sb->log_len + len - cap;

		memmove(sb->init_log, sb->init_log + drop, sb->log_len - drop);
		sb->log_len -= (uint32_t)drop;
	}
	memcpy(sb->init_log + sb->log_len, data, len);
	sb->log_len += (uint32_t)len;
	sb->init_log[sb->log_len] = '\0';
}
