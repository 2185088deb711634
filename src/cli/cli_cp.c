/* cli_cp.c: `agentic cp`, one file either way between the host and a sandbox, streamed
 * through the admin API's file routes (GET and PUT /api/v1/containers/NAME/files?path=P),
 * which read and write it inside the sandbox as its workload user (docs/API.md "Files"). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/cli_internal.h"

const char cli_cp_help[] =
	"usage: agentic cp [--socket PATH] SANDBOX:PATH LOCAL\n"
	"       agentic cp [--socket PATH] LOCAL SANDBOX:PATH\n"
	"Copies one file out of or into a sandbox, streamed. The sandbox side is read or\n"
	"written inside the sandbox as its workload user (uid 10001): what that user may not\n"
	"read or write fails (HTTP 403), a FIFO, device or socket is refused, symlinks are\n"
	"followed as the kernel follows them for that user. Into a sandbox, missing parent\n"
	"directories are made and an existing file is replaced; PATH ending in '/' takes\n"
	"LOCAL's name. LOCAL '-' is stdin or stdout; a LOCAL directory takes PATH's name; a\n"
	"download is written to a temporary file beside LOCAL and renamed once complete.\n"
	"A full disk budget in the sandbox is HTTP 507. Exit status: 0, 1 failed, 2 usage.\n";

/* "NAME:PATH" with a sandbox's name before the first ':' (no '/' in it): the parts. */
static bool remote_split(const char *arg, char *name, size_t ncap, const char **path)
{
	const char *colon = strchr(arg, ':');
	size_t n = colon ? (size_t)(colon - arg) : 0;

	if (!colon || n == 0 || n >= ncap || memchr(arg, '/', n))
		return false;
	memcpy(name, arg, n);
	name[n] = '\0';
	*path = colon + 1;
	return true;
}

/* /api/v1/containers/NAME/files?path=P with P percent-encoded; -1 (said why) on a bad name
 * or a target that does not fit. */
static int files_target(const char *name, const char *path, const char *leaf, char *out,
			size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n;

	if (cli_name_target(name, out, cap) != 0)
		return -1;
	n = strlen(out);
	n += (size_t)snprintf(out + n, cap - n, "/files?path=");
	for (int part = 0; part < 2; part++) {
		for (const unsigned char *p = (const unsigned char *)(part ? leaf : path); p && *p; p++) {
			if (n + 4 > cap) {
				fprintf(stderr, "agentic cp: the path is too long\n");
				return -1;
			}
			if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
				out[n++] = (char)*p;
			} else {
				out[n++] = '%';
				out[n++] = hex[*p >> 4];
				out[n++] = hex[*p & 15];
			}
		}
	}
	out[n] = '\0';
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s && s[1] ? s + 1 : s ? "" : p;
}

/* ---- out of the sandbox ---- */

/* The local file to write: "-" (stdout), or a temporary file beside the destination (a
 * directory: PATH's name in it) to be renamed to dst. -1 when none can be made. */
static int download_open(const char *local, const char *rpath, char *dst, char *tmp, size_t cap)
{
	struct stat st;
	int fd;

	if (!strcmp(local, "-"))
		return 1;
	if (stat(local, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(dst, cap, "%s/%s", local, base_name(rpath));
	else
		snprintf(dst, cap, "%s", local);
	if ((size_t)snprintf(tmp, cap, "%s.agentic-cp-XXXXXX", dst) >= cap) {
		fprintf(stderr, "agentic cp: %s: the path is too long\n", local);
		return -1;
	}
	fd = mkstemp(tmp);
	if (fd < 0)
		fprintf(stderr, "agentic cp: cannot write beside %s: %s\n", dst, strerror(errno));
	else
		fchmod(fd, 0644);
	return fd;
}

static int download(const struct opts *o, const char *target, const char *local,
		    const char *rpath)
{
	static uint8_t reqbuf[16384];
	static char dst[LIMIT_PATH_BYTES], tmp[LIMIT_PATH_BYTES];
	struct http_exchange_opts xo = { .body_limit = 0, .read_timeout_ms = -1 };
	struct buf req;
	int fd = download_open(local, rpath, dst, tmp, sizeof(dst)), r, rc = 1;

	if (fd < 0)
		return 1;
	buf_init(&req, reqbuf, sizeof(reqbuf));
	if (http_conn_init(&cli_conn, o->socket) != 0 ||
	    http_request_write(&req, "GET", target, "agenticd", NULL, NULL, 0) != 0 ||
	    http_conn_begin(&cli_conn, req.data, req.len, &xo) != 0) {
		fprintf(stderr, "agentic cp: cannot send the request to %s\n", o->socket);
	} else if ((r = cli_read_answer(fd)) == ANSWER_OUT_FAILED) {
		fprintf(stderr, "agentic cp: cannot write %s: %s\n", fd == 1 ? "stdout" : dst,
			strerror(errno));
	} else if (r != HTTP_EV_DONE) {
		fprintf(stderr, "agentic cp: the copy did not complete (agenticd at %s: %s)\n",
			o->socket, r == HTTP_ERR_CONNECT ? strerror(cli_conn.sys_errno) : err_str(r));
	} else if (cli_conn.parser.status != 200) {
		cli_api_error(cli_conn.parser.status);
	} else if (fd != 1 && (fsync(fd) != 0 || rename(tmp, dst) != 0)) {
		fprintf(stderr, "agentic cp: cannot write %s: %s\n", dst, strerror(errno));
	} else {
		rc = 0;
	}
	http_conn_close(&cli_conn);
	if (fd != 1) {
		close(fd);
		if (rc)
			unlink(tmp);
	}
	return rc;
}

/* ---- into the sandbox ---- */

static int dial(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

static int send_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The body from in as chunks. 0; -1 when the socket took no more (agenticd answered early,
 * its answer says why); -2 when in could not be read (said). */
static int send_body(int s, int in, const char *local)
{
	static char data[65536 + 16];
	ssize_t n;

	for (;;) {
		int h;

		n = read(in, data + 16, sizeof(data) - 16);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "agentic cp: cannot read %s: %s\n", local, strerror(errno));
			return -2;
		}
		if (n == 0)
			return send_all(s, "0\r\n\r\n", 5);
		h = snprintf(data, 16, "%zx\r\n", (size_t)n);
		memmove(data + 16 - h, data, (size_t)h);
		memcpy(data + 16 + n, "\r\n", 2);
		if (send_all(s, data + 16 - h, (size_t)h + (size_t)n + 2) != 0)
			return -1;
	}
}

/* agenticd's answer on s: the status, its body in cli_body (via the parser); -1 when none. */
static int read_answer(int s)
{
	static uint8_t rb[16384];
	struct http_parser p;
	char head[LIMIT_HTTP_HEAD_BYTES];
	size_t len = 0;
	ssize_t n;

	http_parser_init(&p, HTTP_PARSE_RESPONSE, head, sizeof(head));
	p.body_limit = BODY_MAX;
	while ((n = recv(s, rb, sizeof(rb), 0)) >= 0) {
		for (size_t off = 0;;) {
			struct http_slice sl;
			size_t used = 0;
			int ev = n ? http_parser_feed(&p, rb + off, (size_t)n - off, &used, &sl)
				   : http_parser_finish(&p);

			off += used;
			if (ev < 0 || (n == 0 && ev != HTTP_EV_DONE))
				return -1;
			if (ev == HTTP_EV_BODY && len + sl.len <= BODY_MAX) {
				memcpy(cli_body + len, sl.data, sl.len);
				len += sl.len;
			}
			if (ev == HTTP_EV_DONE) {
				cli_body[len] = '\0';
				cli_body_taken(len);
				return p.status;
			}
			if (ev == HTTP_EV_NEED_MORE)
				break;
		}
	}
	return -1;
}

static int upload(const struct opts *o, const char *target, const char *local)
{
	static char head[LIMIT_HTTP_HEAD_BYTES];
	int in = strcmp(local, "-") ? open(local, O_RDONLY | O_CLOEXEC) : 0, s, r, status;
	struct stat st;

	if (in < 0 || fstat(in, &st) != 0) {
		fprintf(stderr, "agentic cp: cannot read %s: %s\n", local, strerror(errno));
		return 1;
	}
	if (S_ISDIR(st.st_mode)) {
		fprintf(stderr, "agentic cp: %s is a directory: cp copies one file\n", local);
		return 1;
	}
	if ((s = dial(o->socket)) < 0) {
		fprintf(stderr, "agentic cp: cannot reach agenticd at %s: %s\n", o->socket,
			strerror(-s));
		return 1;
	}
	if ((size_t)snprintf(head, sizeof(head), "PUT %s HTTP/1.1\r\nHost: agenticd\r\n"
			     "Content-Type: application/octet-stream\r\n"
			     "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n", target) >=
	    sizeof(head) || send_all(s, head, strlen(head)) != 0) {
		fprintf(stderr, "agentic cp: cannot send the request to %s\n", o->socket);
		close(s);
		return 1;
	}
	r = send_body(s, in, local);
	if (in)
		close(in);
	status = r == -2 ? -2 : read_answer(s);
	close(s);
	if (status == 200)
		return 0;
	if (status > 0)
		return cli_api_error(status);
	if (status == -1)
		fprintf(stderr, "agentic cp: no complete answer from agenticd at %s\n", o->socket);
	return 1;
}

int cli_verb_cp(int argc, char **argv, struct opts *o)
{
	static char target[3 * LIMIT_PATH_BYTES + 256];
	const char *args[2] = { NULL, NULL }, *rpath;
	char name[64];
	int n = 0, c;
	bool down;

	for (int i = 1; i < argc; i++) {
		if ((c = cli_common_opt(o, argc, argv, &i)) < 0)
			return cli_usage_error(cli_cp_help);
		if (c)
			continue;
		if (n == 2 || (argv[i][0] == '-' && argv[i][1]))
			return cli_usage_error(cli_cp_help);
		args[n++] = argv[i];
	}
	if (n != 2)
		return cli_usage_error(cli_cp_help);
	down = remote_split(args[0], name, sizeof(name), &rpath);
	if (down == remote_split(args[1], name, sizeof(name), &rpath)) {
		fprintf(stderr, "agentic cp: one side must be SANDBOX:PATH, the other local\n");
		return 2;
	}
	if (!*rpath) {
		fprintf(stderr, "agentic cp: SANDBOX:PATH needs a path\n");
		return 2;
	}
	if (down)
		return files_target(name, rpath, NULL, target, sizeof(target)) != 0 ? 2
		       : download(o, target, args[1], rpath);
	if (files_target(name, rpath, rpath[strlen(rpath) - 1] == '/' && strcmp(args[0], "-")
			 ? base_name(args[0]) : NULL, target, sizeof(target)) != 0)
		return 2;
	return upload(o, target, args[0]);
}
