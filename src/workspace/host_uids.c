/* host_uids.c: the uid ranges of every agenticd on this host, claimed in one directory
 * (host.h, host_claim_uids; docs/FLEET.md "Nodes on one host"). A uid is the kernel's, not a
 * daemon's: two agenticd on one host (fleet nodes sharing a host, or two installs) whose
 * control, VM, egress or fleet uids met could signal each other's inits, QEMUs, egress
 * workers or fleet worker, and one's start-up kill of stale egress workers would take the
 * other's live ones. Each agenticd writes its ranges to HOST_UID_CLAIMS_DIR/PID.claim and holds
 * an exclusive flock on it while it runs; a claim whose lock nobody holds is a dead daemon's,
 * and removed. A start whose ranges meet a live claim is refused, naming both. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "workspace/host.h"

#define CLAIM_BYTES 1024
#define RANGES 4

struct uid_range {
	char what[16]; /* control, vm, egress, fleet */
	uint32_t lo, hi;
};

/* The settings that set each range, for the refusal. */
static const char *setting_of(const char *what)
{
	if (strcmp(what, "control") == 0)
		return "control_uid_min..control_uid_max";
	if (strcmp(what, "vm") == 0)
		return "control_uid_min..control_uid_max + vm_uid_offset";
	if (strcmp(what, "egress") == 0)
		return "egress_uid - egress_max_connections + 1..egress_uid";
	return "fleet_uid";
}

static size_t ranges_of(const struct config *cfg, struct uid_range *r)
{
	size_t n = 0;

	r[n++] = (struct uid_range){ "control", cfg->control_uid_min, cfg->control_uid_max };
	r[n++] = (struct uid_range){ "vm", cfg->control_uid_min + cfg->vm_uid_offset,
				     cfg->control_uid_max + cfg->vm_uid_offset };
	r[n++] = (struct uid_range){ "egress", cfg->egress_uid - (cfg->egress_max_connections - 1),
				     cfg->egress_uid };
	if (cfg->fleet_endpoints[0])
		r[n++] = (struct uid_range){ "fleet", cfg->fleet_uid, cfg->fleet_uid };
	return n;
}

/* A live claim's text against ours: 0, or -EEXIST with why in err. */
static int claim_check(const char *text, const struct uid_range *mine, size_t nmine,
		       char *err, size_t err_size)
{
	char who[LIMIT_PATH_BYTES] = "?";
	struct uid_range theirs[RANGES];
	size_t n = 0;

	for (const char *p = text; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] == '\n')) {
		unsigned lo, hi;
		char what[16];

		if (sscanf(p, "admin_socket %1023[^\n]", who) == 1)
			continue;
		if (n < RANGES && sscanf(p, "%15s %u %u", what, &lo, &hi) == 3 && lo <= hi) {
			snprintf(theirs[n].what, sizeof(theirs[n].what), "%s", what);
			theirs[n].lo = lo;
			theirs[n++].hi = hi;
		}
	}
	for (size_t i = 0; i < nmine; i++)
		for (size_t k = 0; k < n; k++) {
			if (mine[i].hi < theirs[k].lo || theirs[k].hi < mine[i].lo)
				continue;
			snprintf(err, err_size, "this agenticd's %s uids %u..%u (%s) meet the %s uids "
				 "%u..%u of the agenticd serving %s on this host: give each agenticd "
				 "on a host uid ranges of its own (docs/FLEET.md \"Nodes on one host\")",
				 mine[i].what, mine[i].lo, mine[i].hi, setting_of(mine[i].what),
				 theirs[k].what, theirs[k].lo, theirs[k].hi, who);
			return -EEXIST;
		}
	return 0;
}

/* Every claim in the directory: a dead daemon's removed, a live one's checked against ours. */
static int claims_scan(int dfd, const struct uid_range *mine, size_t nmine, char *err,
		       size_t err_size)
{
	int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0), r = 0;
	DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	struct dirent *de;

	if (!dir) {
		if (dup_fd >= 0)
			close(dup_fd);
		snprintf(err, err_size, "cannot read %s: %s", HOST_UID_CLAIMS_DIR, strerror(errno));
		return -errno;
	}
	while (r == 0 && (de = readdir(dir)) != NULL) {
		size_t len = strlen(de->d_name);
		char text[CLAIM_BYTES + 1];
		ssize_t got;
		int fd;

		if (len < 7 || strcmp(de->d_name + len - 6, ".claim") != 0)
			continue;
		fd = openat(dfd, de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
			(void)unlinkat(dfd, de->d_name, 0); /* its agenticd is gone */
			close(fd);
			continue;
		}
		got = read(fd, text, CLAIM_BYTES);
		close(fd);
		text[got > 0 ? got : 0] = '\0';
		r = claim_check(text, mine, nmine, err, err_size);
	}
	closedir(dir);
	return r;
}

int host_claim_uids(const struct config *cfg, int *claim_fd, char *err, size_t err_size)
{
	struct uid_range mine[RANGES];
	size_t n = ranges_of(cfg, mine);
	char name[32], text[CLAIM_BYTES];
	int dfd, lfd = -1, fd = -1, len, r;
	struct stat st;

	if (mkdir(HOST_UID_CLAIMS_DIR, 0700) != 0 && errno != EEXIST) {
		snprintf(err, err_size, "cannot make %s: %s", HOST_UID_CLAIMS_DIR, strerror(errno));
		return -errno;
	}
	dfd = open(HOST_UID_CLAIMS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &st) != 0 || st.st_uid != 0 || (st.st_mode & 022)) {
		snprintf(err, err_size, "%s is not a directory of root's that only root may write",
			 HOST_UID_CLAIMS_DIR);
		if (dfd >= 0)
			close(dfd);
		return -EPERM;
	}
	/* one daemon at a time between reading the claims and writing its own */
	lfd = openat(dfd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lfd < 0 || flock(lfd, LOCK_EX) != 0) {
		snprintf(err, err_size, "cannot lock %s/.lock: %s", HOST_UID_CLAIMS_DIR, strerror(errno));
		r = -errno;
		goto out;
	}
	if ((r = claims_scan(dfd, mine, n, err, err_size)) != 0)
		goto out;
	snprintf(name, sizeof(name), "%d.claim", (int)getpid());
	fd = openat(dfd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	len = snprintf(text, sizeof(text), "admin_socket %s\n", cfg->admin_socket);
	for (size_t i = 0; i < n && len > 0 && (size_t)len < sizeof(text); i++)
		len += snprintf(text + len, sizeof(text) - (size_t)len, "%s %u %u\n", mine[i].what,
				mine[i].lo, mine[i].hi);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0 || len <= 0 || (size_t)len >= sizeof(text) ||
	    write(fd, text, (size_t)len) != len) {
		snprintf(err, err_size, "cannot write %s/%s: %s", HOST_UID_CLAIMS_DIR, name,
			 strerror(errno));
		r = -EIO;
		if (fd >= 0) {
			(void)unlinkat(dfd, name, 0);
			close(fd);
		}
		goto out;
	}
	*claim_fd = fd;
out:
	if (lfd >= 0)
		close(lfd); /* the lock goes with it */
	close(dfd);
	return r;
}
