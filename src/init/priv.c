/* priv.c: dropping and checking privileges inside a sandbox, as the kernel sees them. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "init/priv.h"

static int parse_ids(const char *v, uint32_t out[4])
{
	unsigned long a[4];

	if (sscanf(v, "%lu %lu %lu %lu", &a[0], &a[1], &a[2], &a[3]) != 4)
		return ERR_PARSE;
	for (int i = 0; i < 4; i++)
		out[i] = (uint32_t)a[i];
	return 0;
}

static int parse_hex(const char *v, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(v, &end, 16);
	return errno || end == v ? ERR_PARSE : 0;
}

int priv_status_parse(const char *text, struct priv_status *st)
{
	unsigned seen = 0;
	const char *line = text;

	memset(st, 0, sizeof(*st));
	st->no_new_privs = -1;
	st->seccomp = -1;
	while (*line) {
		const char *nl = strchr(line, '\n');
		const char *v = strchr(line, ':');
		size_t klen;
		int r = 0;

		if (!nl)
			nl = line + strlen(line);
		if (v && v < nl) {
			klen = (size_t)(v - line);
			v++;
			while (*v == '\t' || *v == ' ')
				v++;
#define KEY(name) (klen == sizeof(name) - 1 && memcmp(line, name, klen) == 0)
			if (KEY("Uid")) {
				r = parse_ids(v, st->uid);
				seen |= 1;
			} else if (KEY("Gid")) {
				r = parse_ids(v, st->gid);
				seen |= 2;
			} else if (KEY("Groups")) {
				for (const char *c = v; c < nl; c++)
					if (*c >= '0' && *c <= '9' && (c == v || c[-1] == ' '))
						st->ngroups++;
				seen |= 4;
			} else if (KEY("CapInh")) {
				r = parse_hex(v, &st->cap_inh);
				seen |= 8;
			} else if (KEY("CapPrm")) {
				r = parse_hex(v, &st->cap_prm);
				seen |= 16;
			} else if (KEY("CapEff")) {
				r = parse_hex(v, &st->cap_eff);
				seen |= 32;
			} else if (KEY("CapBnd")) {
				r = parse_hex(v, &st->cap_bnd);
				seen |= 64;
			} else if (KEY("CapAmb")) {
				r = parse_hex(v, &st->cap_amb);
				seen |= 128;
			} else if (KEY("NoNewPrivs")) {
				st->no_new_privs = atoi(v);
			} else if (KEY("Seccomp")) {
				st->seccomp = atoi(v);
			}
#undef KEY
		}
		if (r)
			return ERR_PARSE;
		line = *nl ? nl + 1 : nl;
	}
	return seen == 255 ? 0 : ERR_PARSE;
}

int priv_status_read(pid_t pid, struct priv_status *st)
{
	char path[64], text[8192];
	size_t len = 0;
	ssize_t r;
	int fd;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (len < sizeof(text) - 1 && (r = read(fd, text + len, sizeof(text) - 1 - len)) > 0)
		len += (size_t)r;
	close(fd);
	text[len] = '\0';
	return priv_status_parse(text, st);
}

static int capset_raw(uint64_t eff, uint64_t prm, uint64_t inh)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = {
		{ (uint32_t)eff, (uint32_t)prm, (uint32_t)inh },
		{ (uint32_t)(eff >> 32), (uint32_t)(prm >> 32), (uint32_t)(inh >> 32) },
	};

	return syscall(SYS_capset, &hdr, data) == 0 ? 0 : -errno;
}

bool priv_is_control(const struct priv_status *st, uint32_t id)
{
	for (int i = 0; i < 4; i++)
		if (st->uid[i] != id || st->gid[i] != id)
			return false;
	return st->ngroups == 0 && st->cap_eff == PRIV_CONTROL_CAPS &&
	       st->cap_prm == PRIV_CONTROL_CAPS && st->cap_inh == 0 && st->cap_amb == 0 &&
	       st->no_new_privs == 1;
}

bool priv_is_workload(const struct priv_status *st, uint32_t uid, uint32_t gid)
{
	for (int i = 0; i < 4; i++)
		if (st->uid[i] != uid || st->gid[i] != gid)
			return false;
	return st->ngroups == 0 && st->cap_eff == 0 && st->cap_prm == 0 && st->cap_inh == 0 &&
	       st->cap_amb == 0 && st->no_new_privs == 1;
}

int priv_drop_to_control(uint32_t id, const char **step)
{
	struct priv_status st;
	int r;

#define STEP(name, call)                       \
	do {                                   \
		*step = name;                  \
		if ((call) != 0)               \
			return errno ? -errno : -EPERM; \
	} while (0)
	errno = 0;
	STEP("prctl(PR_SET_KEEPCAPS, 1)", prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0));
	STEP("setgroups(0)", syscall(SYS_setgroups, 0, NULL));
	STEP("setresgid", syscall(SYS_setresgid, id, id, id));
	STEP("setresuid", syscall(SYS_setresuid, id, id, id));
	*step = "capset";
	r = capset_raw(PRIV_CONTROL_CAPS, PRIV_CONTROL_CAPS, 0);
	if (r)
		return r;
	STEP("prctl(PR_SET_KEEPCAPS, 0)", prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0));
	*step = "reading /proc/self/status";
	r = priv_status_read(0, &st);
	if (r)
		return r;
	*step = "checking /proc/self/status (uid, gid, groups, CapEff/CapPrm c0, CapInh/CapAmb 0, "
		"NoNewPrivs 1)";
	return priv_is_control(&st, id) ? 0 : -EPERM;
#undef STEP
}

int priv_drop_to_workload(uint32_t uid, uint32_t gid)
{
	long r;

	r = syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (r == 0)
		r = syscall(SYS_setgroups, 0, NULL);
	if (r == 0)
		r = syscall(SYS_setresgid, gid, gid, gid);
	if (r == 0)
		r = syscall(SYS_setresuid, uid, uid, uid);
	/* Not dumpable before the capabilities go: a command's child shares its supervisor's
	 * memory until its execve (spawn.c), and the supervisor holds CAP_SETUID. Until capset
	 * the child's permitted set is more than a workload's, which keeps a workload's ptrace out
	 * (cap_ptrace_access_check); from then on this flag does, whatever fs.suid_dumpable left
	 * after the uid change. Clearing capabilities does not set it again; execve gives the
	 * command's own memory the usual dumpability. */
	if (r == 0)
		r = syscall(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (r == 0)
		r = capset_raw(0, 0, 0);
	return r == 0 ? 0 : -errno;
}
