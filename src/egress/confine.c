/* confine.c: a worker's Landlock domain (confine.h). A worker a crafted request took over runs
 * as a host process of its own uid: without this it could connect to any port of anything the
 * host reaches and read every world-readable file. The policy is known only at the start
 * packet (a spare is started before its sandbox), so the worker applies it to itself then,
 * before it reads a byte of the workload's; Landlock stacks and never loosens, so agenticd
 * arms a worker again only for the same policy. The constants of the ABIs newer than the
 * kernel headers this builds with are spelled out here. */
#include "egress/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LL_FS_ABI1 ((1ull << 13) - 1)            /* EXECUTE .. MAKE_SYM */
#define LL_FS_REFER (1ull << 13)                 /* ABI 2 */
#define LL_FS_TRUNCATE (1ull << 14)              /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ull << 15)             /* ABI 5 */
#define LL_NET_BIND_TCP (1ull << 0)              /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ull << 1)
#define LL_RULE_NET_PORT 2
#define LL_SCOPE_ABSTRACT_UNIX (1ull << 0)       /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ull << 1)
#define DNS_PORT 53

struct ll_ruleset {
	uint64_t fs, net, scoped;
};

struct ll_port {
	uint64_t allowed_access;
	uint64_t port;
} __attribute__((packed));

/* One file the worker may still open, with access (no rule when it is not there). */
static int allow_file(int rs, const char *path, uint64_t access)
{
	struct landlock_path_beneath_attr pb = { .allowed_access = access };
	int fd = open(path, O_PATH | O_CLOEXEC), r = 0;

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == EACCES ? 0 : -errno;
	pb.parent_fd = fd;
	if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0)
		r = -errno;
	close(fd);
	return r;
}

static int allow_port(int rs, uint16_t port)
{
	struct ll_port np = { LL_NET_CONNECT_TCP, port };

	return syscall(SYS_landlock_add_rule, rs, LL_RULE_NET_PORT, &np, 0) == 0 ? 0 : -errno;
}

static int add_rules(int rs, const struct egress_policy *p, const char *ca_file, bool net)
{
	int r = allow_file(rs, "/dev/null", LANDLOCK_ACCESS_FS_READ_FILE |
				       LANDLOCK_ACCESS_FS_WRITE_FILE);

	if (r == 0)
		r = allow_file(rs, "/etc/hosts", LANDLOCK_ACCESS_FS_READ_FILE);
	if (r == 0)
		r = allow_file(rs, "/etc/resolv.conf", LANDLOCK_ACCESS_FS_READ_FILE);
	if (r == 0 && ca_file[0])
		r = allow_file(rs, ca_file, LANDLOCK_ACCESS_FS_READ_FILE);
	if (r == 0 && net)
		r = allow_port(rs, DNS_PORT);
	for (uint32_t i = 0; r == 0 && net && i < p->nallow; i++)
		r = allow_port(rs, p->allow[i].port);
	for (uint32_t i = 0; r == 0 && net && i < p->nroutes; i++)
		r = allow_port(rs, p->routes[i].up_port);
	return r;
}

int egress_confine(const struct egress_policy *p, const char *ca_file)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	struct ll_ruleset attr = { .fs = LL_FS_ABI1 };
	bool net;
	int rs, r;

	if (abi < 1)
		return errno == ENOSYS || errno == EOPNOTSUPP ? 0 : -errno;
	if (abi >= 2)
		attr.fs |= LL_FS_REFER;
	if (abi >= 3)
		attr.fs |= LL_FS_TRUNCATE;
	if (abi >= 5)
		attr.fs |= LL_FS_IOCTL_DEV;
	net = abi >= 4 && p->mode == EGRESS_ENFORCE;
	if (net)
		attr.net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
	if (abi >= 6)
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
	rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (rs < 0)
		return -errno;
	r = add_rules(rs, p, ca_file, net);
	if (r == 0 && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		       syscall(SYS_landlock_restrict_self, rs, 0) != 0))
		r = -errno;
	close(rs);
	return r == 0 ? (int)abi : r;
}
