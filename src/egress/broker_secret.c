/* broker_secret.c: a route's secret file (below secret_dir, checked at a policy's set, read
 * when a worker asks) and the answer to the worker's {"secret": route}. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "egress/broker_slot.h"
#include "egress/policy.h"

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t b64_encode(const uint8_t *in, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);

		out[o++] = b64_alphabet[(v >> 18) & 63];
		out[o++] = b64_alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? b64_alphabet[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

/* routes[i].secret_file of the policy the worker got, into path: 0 or -1. */
static int secret_path(const struct eslot *s, int64_t i, char *path, size_t cap)
{
	struct json_doc d;
	int routes, r;

	if (json_parse(&d, s->policy, strlen(s->policy), broker_toks, POLICY_TOKENS) != 0 ||
	    broker_toks[0].type != JSON_OBJECT || (routes = json_obj_get(&d, 0, "routes")) < 0 ||
	    broker_toks[routes].type != JSON_ARRAY || i < 0 || i >= (int64_t)broker_toks[routes].children)
		return -1;
	r = json_first(&d, routes);
	while (r >= 0 && i-- > 0)
		r = json_next(&d, routes, r);
	if (r < 0 || broker_toks[r].type != JSON_OBJECT ||
	    json_str(&d, json_obj_get(&d, r, "secret_file"), path, cap) <= 0 || path[0] != '/')
		return -1;
	return 0;
}

/* path's part below dir (no leading '/'), or NULL when path does not name something below
 * it. */
static const char *secret_rel(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (strncmp(path, dir, n) != 0 || (n > 1 && path[n] != '/'))
		return NULL;
	path += n;
	while (*path == '/')
		path++;
	return *path ? path : NULL;
}

/* Opens a route's secret file: below dir (secret_dir), resolved from its descriptor
 * with openat2 so that no "..", symbolic link (the last component's too), magic link or
 * other mount leads out of it. The descriptor, or -errno (-EXDEV: not below secret_dir). */
static int secret_open(const char *dir, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	const char *rel = secret_rel(dir, path);
	int dfd, fd;

	if (!rel)
		return -EXDEV;
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
	fd = fd < 0 ? -errno : fd;
	close(dfd);
	return fd;
}

int egress_secret_check(const struct config *c, const struct egress_policy *pol, char *why,
			size_t cap)
{
	for (uint32_t i = 0; i < pol->nroutes; i++) {
		int fd = secret_open(c->secret_dir, pol->routes[i].secret_file);

		if (fd >= 0) {
			close(fd);
			continue;
		}
		/* one not there yet is read when it is asked for, by the same rule */
		if (fd == -ENOENT && secret_rel(c->secret_dir, pol->routes[i].secret_file))
			continue;
		snprintf(why, cap, "egress.routes[%u].secret_file: must name a file in secret_dir "
			 "(%s), reached without a symbolic link, \"..\" or another mount", i,
			 c->secret_dir);
		return -1;
	}
	return 0;
}

/* Reads the secret from fd (closed): regular, root's, no group or other bits, at most
 * EGRESS_SECRET_BYTES, one trailing newline dropped. Its length, or -1. */
static long secret_read_fd(int fd, uint8_t *out)
{
	struct stat st;
	long n = 0;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 077) || st.st_size > (off_t)EGRESS_SECRET_BYTES) {
		close(fd);
		return -1;
	}
	while (n < (long)EGRESS_SECRET_BYTES) {
		ssize_t k = read(fd, out + n, EGRESS_SECRET_BYTES - (size_t)n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			n = -1;
			break;
		}
		if (k == 0)
			break;
		n += k;
	}
	close(fd);
	if (n > 0 && out[n - 1] == '\n')
		n--;
	return n > 0 ? n : -1;
}

long egress_secret_read(const char *path, uint8_t *out)
{
	return secret_read_fd(open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK), out);
}

void broker_secret_answer(struct eslot *s, int64_t route)
{
	static uint8_t secret[EGRESS_SECRET_BYTES];
	static char pkt[EGRESS_SECRET_BYTES * 2 + 64];
	char path[LIMIT_PATH_BYTES];
	long n = -1;
	size_t len;

	if (secret_path(s, route, path, sizeof(path)) == 0)
		n = secret_read_fd(secret_open(bst.cfg->secret_dir, path), secret);
	if (n < 0) {
		len = (size_t)snprintf(pkt, sizeof(pkt), "{\"error\":\"secret_unavailable\"}");
		log_warn("egress secret unavailable", "name=%s conn=%llu route=%lld",
			 log_q(s->name), (unsigned long long)s->conn, (long long)route);
	} else {
		len = (size_t)snprintf(pkt, sizeof(pkt), "{\"secret_b64\":\"");
		len += b64_encode(secret, (size_t)n, pkt + len);
		len += (size_t)snprintf(pkt + len, sizeof(pkt) - len, "\"}");
	}
	if (send(s->ctl, pkt, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
		log_warn("egress secret answer not sent", "name=%s conn=%llu", log_q(s->name),
			 (unsigned long long)s->conn);
	explicit_bzero(secret, sizeof(secret));
	explicit_bzero(pkt, sizeof(pkt));
}
