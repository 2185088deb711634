/* image.c: `agentic vm-image`, the VM runtime's root filesystem: an image's export, our init
 * and the guest's modules as one newc initramfs, cached by image id and inputs.
 *
 * Decisions this file takes where the design leaves room:
 * - The cache key hashes the init binary's bytes and, per module in load order, its name, its
 *   size and its bytes (not only name and size: a rebuilt module of the same size is a new
 *   image). KEY = the image id's hex, "-", the hash's first 16 hex digits.
 * - A hard link of the image is written as a symbolic link to "/" + its target: the reader
 *   keeps no table of earlier files, and the target's bytes are gone by then.
 * - Character and block devices are left out (the guest mounts devtmpfs); so is the image's
 *   own /init, its lib/modules/agentic (a link there would send our modules elsewhere) and
 *   anything under it, which are ours.
 * - The container is created from the image's id (not its name), so what is exported is the
 *   image the key names even when the tag moves meanwhile. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bearssl.h>

#include "docker/docker.h"
#include "http/http.h"
#include "json/json.h"
#include "vmimage.h"

const char vm_image_help[] =
	"usage: agentic vm-image --docker SOCK --image REF --init PATH --modules DIR --cache DIR\n"
	"                        --out FILE\n"
	"\n"
	"Builds the VM runtime's root filesystem, a newc cpio (the kernel's initramfs format):\n"
	"the image REF's files as `docker export` gives them (a container is created, never\n"
	"started, and removed), then /dev /proc /sys /run /tmp /workspace when the image lacks\n"
	"them, PATH as /init, and DIR's load-order and NAME.ko files under\n"
	"/lib/modules/agentic/ (DIR is build/vm/modules after `make vm-kernel`). Setuid and\n"
	"setgid bits are cleared; device nodes are left out (the guest mounts devtmpfs).\n"
	"\n"
	"The result is kept in the cache DIR (made 0700 when missing) as IMAGEID-HASH.cpio, HASH\n"
	"over the init and the modules; FILE is a hard link to it (a copy across filesystems).\n"
	"A second run with the same inputs only links. SOCK is the engine's Unix socket\n"
	"(/var/run/docker.sock or unix:///...). Exit 0 done, 1 failed, 2 bad usage.\n";

#define PROG "agentic-vm-image"
#define MODULES_MAX 32u
#define MODULE_NAME_MAX 64u
#define LOAD_ORDER_MAX 4096u
#define INSPECT_MAX (1024u * 1024u)
#define INSPECT_TOKENS 16384u
#define ERRBODY_MAX 1024u
#define OUT_BUF (256u * 1024u)
#define ENGINE_TIMEOUT_MS 60000
#define KEY_HEX 16u
#define KEY_BYTES (64u + 1u + KEY_HEX + 1u)

/* Directories the guest needs, written when the image has none by that name. */
static const struct { const char *path; uint32_t mode; } guest_dirs[] = {
	{ "dev", 0755 }, { "proc", 0755 }, { "sys", 0755 }, { "run", 0755 },
	{ "tmp", 01777 }, { "workspace", 0755 }, { "lib", 0755 }, { "lib/modules", 0755 },
	{ "lib/modules/agentic", 0755 },
};
#define MODDIR "lib/modules/agentic"

struct build {
	const char *sock, *image, *init, *modules, *cache, *out;
	struct docker_client dc;
	bool dc_ready;
	char image_id[65];                    /* hex, without "sha256:" */
	char key[KEY_BYTES];
	int init_fd;
	uint64_t init_size;
	char mod_name[MODULES_MAX][MODULE_NAME_MAX];
	int mod_fd[MODULES_MAX];
	uint64_t mod_size[MODULES_MAX];
	uint32_t nmods;
	char container[DOCKER_ID_SIZE];
	char cache_file[LIMIT_PATH_BYTES];
	char tmp_file[LIMIT_PATH_BYTES];      /* set while it exists */
	int tmp_fd;
	bool seen[ARRAY_LEN(guest_dirs)];
	int write_err;                        /* the first failed write's errno */
	const char *why;                      /* why an entry of the image was refused */
	struct vm_entry link_entry;           /* a hard link, as the symbolic link written */
	struct vm_cpio cpio;
	struct vm_tar tar;
	struct http_conn conn;
	size_t olen;
	uint8_t obuf[OUT_BUF];
	size_t blen;
	char body[INSPECT_MAX];               /* the inspect answer, or an error's */
	struct json_token tok[INSPECT_TOKENS];
};

static struct build build;
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see agentic vm-image --help)\n");
	return 2;
}

/* The one line a failure prints: exit status 1. */
__attribute__((format(printf, 1, 2))) static int failf(const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, PROG ": %s\n", line);
	return 1;
}

static int parse_args(struct build *b, int argc, char **argv)
{
	static const char *const names[] = { "--docker", "--image", "--init", "--modules",
					     "--cache", "--out" };
	const char **slots[] = { &b->sock, &b->image, &b->init, &b->modules, &b->cache, &b->out };

	for (int i = 1; i < argc; i++) {
		size_t k = 0;

		while (k < ARRAY_LEN(names) && strcmp(argv[i], names[k]) != 0)
			k++;
		if (k == ARRAY_LEN(names))
			return usage_error("unknown argument '%s'", argv[i]);
		if (++i == argc || !argv[i][0])
			return usage_error("%s needs a value", names[k]);
		*slots[k] = argv[i];
	}
	for (size_t k = 0; k < ARRAY_LEN(names); k++)
		if (!*slots[k])
			return usage_error("%s is required", names[k]);
	/* the reference goes into a request path as it is */
	for (const char *p = b->image; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("._-:/@", *p)))
			return usage_error("--image '%s' is not an image reference "
					   "(letters, digits and . _ - : / @)", b->image);
	if (strlen(b->image) > 255 || strstr(b->image, ".."))
		return usage_error("--image '%s' is not an image reference", b->image);
	return 0;
}

/* ---- the inputs and the key ---- */
static int open_file(const char *dir, const char *name, int *fd, uint64_t *size)
{
	char path[LIMIT_PATH_BYTES];
	struct stat st;

	if ((size_t)snprintf(path, sizeof(path), "%s%s%s", dir ? dir : "", dir ? "/" : "",
			     name) >= sizeof(path))
		return failf("path too long: %s/%s", dir ? dir : "", name);
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0 || fstat(*fd, &st) != 0)
		return failf("cannot read %s: %s%s", path, strerror(errno),
			     dir ? " (make vm-kernel builds build/vm/modules)" : "");
	if (!S_ISREG(st.st_mode))
		return failf("%s is not a regular file", path);
	*size = (uint64_t)st.st_size;
	return 0;
}

static bool module_name_ok(const char *s, size_t len)
{
	if (len == 0 || len >= MODULE_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

static int read_modules(struct build *b)
{
	char text[LOAD_ORDER_MAX + 1], file[MODULE_NAME_MAX + 4];
	size_t len;
	int fd, r;
	uint64_t size;

	if ((r = open_file(b->modules, "load-order", &fd, &size)) != 0)
		return r;
	r = fd_read_all(fd, text, LOAD_ORDER_MAX, &len);
	close(fd);
	if (r != 0)
		return failf("cannot read %s/load-order: %s", b->modules,
			     r == ERR_LIMIT ? "over 4096 bytes" : err_str(r));
	text[len] = '\0';
	for (char *line = text, *nl; *line; line = nl) {
		size_t n;

		nl = strchr(line, '\n');
		nl = nl ? nl + 1 : line + strlen(line);
		n = (size_t)(nl - line);
		while (n && (line[n - 1] == '\n' || line[n - 1] == ' ' || line[n - 1] == '\r'))
			n--;
		if (n == 0)
			continue;
		if (!module_name_ok(line, n))
			return failf("%s/load-order: '%.*s' is not a module name", b->modules,
				     (int)(n > 80 ? 80 : n), line);
		if (b->nmods == MODULES_MAX)
			return failf("%s/load-order names over %u modules", b->modules,
				     MODULES_MAX);
		memcpy(b->mod_name[b->nmods], line, n);
		b->mod_name[b->nmods][n] = '\0';
		snprintf(file, sizeof(file), "%s.ko", b->mod_name[b->nmods]);
		if ((r = open_file(b->modules, file, &b->mod_fd[b->nmods],
				   &b->mod_size[b->nmods])) != 0)
			return r;
		b->nmods++;
	}
	if (b->nmods == 0)
		return failf("%s/load-order names no module", b->modules);
	return 0;
}

static int hash_fd(br_sha256_context *h, int fd, const char *what)
{
	uint8_t buf[65536];
	off_t off = 0;
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		br_sha256_update(h, buf, (size_t)n);
		off += n;
	}
	if (n < 0)
		return failf("cannot read %s: %s", what, strerror(errno));
	return 0;
}

#define LAYOUT_VERSION "agentic-vm-initramfs-2" /* 2: /dev/console */

static int make_key(struct build *b)
{
	static const char hex[] = "0123456789abcdef";
	br_sha256_context h;
	uint8_t sum[32], size_be[8];
	int r;

	br_sha256_init(&h);
	/* what add_ours writes changes with this: an older cache entry is not this layout */
	br_sha256_update(&h, LAYOUT_VERSION, sizeof(LAYOUT_VERSION));
	if ((r = hash_fd(&h, b->init_fd, b->init)) != 0)
		return r;
	for (uint32_t i = 0; i < b->nmods; i++) {
		br_sha256_update(&h, b->mod_name[i], strlen(b->mod_name[i]) + 1);
		for (int k = 0; k < 8; k++)
			size_be[k] = (uint8_t)(b->mod_size[i] >> (56 - 8 * k));
		br_sha256_update(&h, size_be, sizeof(size_be));
		if ((r = hash_fd(&h, b->mod_fd[i], b->mod_name[i])) != 0)
			return r;
	}
	br_sha256_out(&h, sum);
	memcpy(b->key, b->image_id, 64);
	b->key[64] = '-';
	for (uint32_t i = 0; i < KEY_HEX / 2; i++) {
		b->key[65 + 2 * i] = hex[sum[i] >> 4];
		b->key[66 + 2 * i] = hex[sum[i] & 15];
	}
	b->key[KEY_BYTES - 1] = '\0';
	return 0;
}

/* ---- the engine ---- */
typedef int (*body_fn)(struct build *b, const uint8_t *data, size_t len);

/* Keeps the answer's body in b->body (ERRBODY_MAX of an error's). */
static int body_keep(struct build *b, const uint8_t *data, size_t len)
{
	size_t cap = b->conn.parser.status == 200 ? sizeof(b->body) - 1 : ERRBODY_MAX;

	if (b->blen + len > cap)
		len = cap - b->blen;
	memcpy(b->body + b->blen, data, len);
	b->blen += len;
	b->body[b->blen] = '\0';
	return 0;
}

/* One blocking GET on the engine's socket (src/http's client connection): the body goes to
 * fn while the status is 200 and into b->body otherwise. 0 with *status, or a negative code
 * (fn's own, or the transport's). */
static int engine_get(struct build *b, const char *target, body_fn fn, uint64_t limit,
		      int *status)
{
	uint8_t req[LIMIT_DOCKER_TARGET_BYTES + 256];
	struct http_exchange_opts opts = { .body_limit = limit, .read_timeout_ms = ENGINE_TIMEOUT_MS };
	struct http_slice s;
	struct buf rb;
	int r;

	b->blen = 0;
	b->body[0] = '\0';
	buf_init(&rb, req, sizeof(req));
	if ((r = http_request_write(&rb, "GET", target, "docker", NULL, NULL, 0)) != 0)
		return r;
	if ((r = http_conn_init(&b->conn, b->dc.socket_path)) != 0 ||
	    (r = http_conn_begin(&b->conn, req, rb.len, &opts)) != 0)
		return r;
	for (;;) {
		r = http_conn_wait(&b->conn, &s);
		if (r == HTTP_EV_BODY && s.len)
			r = b->conn.parser.status == 200 ? fn(b, s.data, s.len) :
							    body_keep(b, s.data, s.len);
		else if (r == HTTP_EV_HEAD || r == HTTP_EV_BODY || r == HTTP_EV_NEED_MORE)
			r = 0;
		else if (r == HTTP_EV_DONE)
			break;
		else if (r >= 0)
			r = ERR_STATE;
		if (r != 0) {
			http_conn_close(&b->conn);
			return r;
		}
	}
	*status = b->conn.parser.status;
	http_conn_close(&b->conn);
	return 0;
}

/* The engine's {"message": ...} of an error answer, or "". */
static const char *engine_message(struct build *b, char *out, size_t size)
{
	struct json_doc doc;
	int m;

	out[0] = '\0';
	if (json_parse(&doc, b->body, b->blen, b->tok, INSPECT_TOKENS) == 0 &&
	    (m = json_obj_get(&doc, 0, "message")) >= 0)
		json_str(&doc, m, out, size);
	return out;
}

static int image_id(struct build *b)
{
	char target[LIMIT_DOCKER_TARGET_BYTES], id[80], msg[512];
	struct json_doc doc;
	int r, status = 0, tok;

	snprintf(target, sizeof(target), "/v%s/images/%s/json", b->dc.version, b->image);
	r = engine_get(b, target, body_keep, INSPECT_MAX - 1, &status);
	if (r != 0)
		return failf("cannot inspect image %s on %s: %s", b->image, b->sock, err_str(r));
	if (status == 404)
		return failf("image %s is not on the engine (tools/build-images makes "
			     "agentic/*:local)", b->image);
	if (status != 200)
		return failf("the engine refused to inspect image %s (HTTP %d): %s", b->image,
			     status, engine_message(b, msg, sizeof(msg)));
	if (json_parse(&doc, b->body, b->blen, b->tok, INSPECT_TOKENS) != 0 ||
	    (tok = json_obj_get(&doc, 0, "Id")) < 0 || json_str(&doc, tok, id, sizeof(id)) != 71 ||
	    strncmp(id, "sha256:", 7) != 0 || strspn(id + 7, "0123456789abcdef") != 64)
		return failf("the engine's inspect of image %s has no sha256 Id", b->image);
	memcpy(b->image_id, id + 7, 65);
	return 0;
}

static int engine_connect(struct build *b)
{
	char host[LIMIT_PATH_BYTES], text[1024];
	struct docker_client_config cfg = { .docker_host = host, .connections = 1,
					    .response_limit = LIMIT_DOCKER_REQUEST_BYTES };
	struct docker_error err;
	size_t need;
	int r;

	if ((size_t)snprintf(host, sizeof(host), "%s%s",
			     strncmp(b->sock, "unix://", 7) == 0 ? "" : "unix://",
			     b->sock) >= sizeof(host))
		return failf("--docker path too long");
	/* the static build's allocator serves power-of-two blocks: twice the need holds it */
	need = docker_client_footprint(&cfg);
	if (need == 0 || (r = alloc_budget(2 * need + 65536)) != 0 ||
	    (r = docker_client_init(&b->dc, &cfg)) != 0)
		return failf("cannot set up the engine client for %s: %s", b->sock,
			     need ? err_str(r) : "bad socket path");
	b->dc_ready = true;
	/* from here on, memory is what it is: an allocation is a bug */
	alloc_seal();
	if ((r = docker_client_negotiate(&b->dc, &err)) != 0)
		return failf("cannot talk to the engine at %s: %s (is dockerd running?)", b->sock,
			     docker_error_text(&err, text, sizeof(text)));
	return 0;
}

/* ---- the cpio, into the cache's temporary file ---- */
static int flush_out(struct build *b)
{
	size_t off = 0;

	while (off < b->olen) {
		ssize_t n = write(b->tmp_fd, b->obuf + off, b->olen - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			b->write_err = errno;
			return -errno;
		}
		off += (size_t)n;
	}
	b->olen = 0;
	return 0;
}

static int out_write(void *ctx, const void *data, size_t len)
{
	struct build *b = ctx;
	const uint8_t *p = data;

	while (len) {
		size_t n = sizeof(b->obuf) - b->olen;
		int r;

		if (n > len)
			n = len;
		memcpy(b->obuf + b->olen, p, n);
		b->olen += n;
		p += n;
		len -= n;
		if (b->olen == sizeof(b->obuf) && (r = flush_out(b)) != 0)
			return r;
	}
	return 0;
}

static int on_entry(void *ctx, const struct vm_entry *e)
{
	struct build *b = ctx;
	struct vm_entry *l = &b->link_entry;

	if (stop_signal)
		return -EINTR;
	if (strcmp(e->path, "init") == 0 || strncmp(e->path, "init/", 5) == 0 ||
	    strcmp(e->path, MODDIR) == 0 || strncmp(e->path, MODDIR "/", sizeof(MODDIR)) == 0 ||
	    e->type == VM_CHR ||
	    e->type == VM_BLK)
		return VM_TAR_SKIP;
	for (size_t i = 0; i < ARRAY_LEN(guest_dirs); i++)
		if (strcmp(e->path, guest_dirs[i].path) == 0)
			b->seen[i] = true;
	if (e->type == VM_REG && e->size > VM_CPIO_FILE_MAX) {
		b->why = "file over 4 GiB, which newc cannot hold";
		return ERR_LIMIT;
	}
	if (e->type != VM_HARDLINK)
		return vm_cpio_entry(&b->cpio, e);
	if (strlen(e->link) + 1 >= sizeof(l->link)) {
		b->why = "hard link whose target is over 4095 bytes";
		return ERR_LIMIT;
	}
	*l = *e;
	l->link[0] = '/';
	memcpy(l->link + 1, e->link, strlen(e->link) + 1);
	l->type = VM_SYMLINK;
	l->mode = 0777;
	return vm_cpio_entry(&b->cpio, l);
}

static int on_data(void *ctx, const uint8_t *data, size_t len)
{
	struct build *b = ctx;

	if (stop_signal)
		return -EINTR;
	return vm_cpio_data(&b->cpio, data, len);
}

static int export_body(struct build *b, const uint8_t *data, size_t len)
{
	return vm_tar_feed(&b->tar, data, len);
}

/* A file of ours: an entry, then fd's size bytes. */
static int add_file(struct build *b, const char *path, uint32_t mode, int fd, uint64_t size)
{
	struct vm_entry e;
	uint8_t buf[65536];
	uint64_t off = 0;
	int r;

	memset(&e, 0, sizeof(e));
	e.type = VM_REG;
	snprintf(e.path, sizeof(e.path), "%s", path);
	e.mode = mode;
	e.size = size;
	if ((r = vm_cpio_entry(&b->cpio, &e)) != 0)
		return r;
	while (off < size) {
		size_t want = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		ssize_t n = pread(fd, buf, want, (off_t)off);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		if ((r = vm_cpio_data(&b->cpio, buf, (size_t)n)) != 0)
			return r;
		off += (uint64_t)n;
	}
	return 0;
}

/* What the guest needs beside the image: directories, /init, the modules, the trailer. */
static int add_ours(struct build *b)
{
	struct vm_entry e;
	char list[MODULES_MAX * MODULE_NAME_MAX], path[64 + MODULE_NAME_MAX];
	size_t n = 0;
	int r;

	memset(&e, 0, sizeof(e));
	e.type = VM_DIR;
	for (size_t i = 0; i < ARRAY_LEN(guest_dirs); i++) {
		if (b->seen[i])
			continue;
		snprintf(e.path, sizeof(e.path), "%s", guest_dirs[i].path);
		e.mode = guest_dirs[i].mode;
		if ((r = vm_cpio_entry(&b->cpio, &e)) != 0)
			return r;
	}
	/* the kernel opens /dev/console on the initramfs for /init's stdin, stdout and stderr
	 * before devtmpfs is mounted: without it the init runs with no descriptor 0, 1 or 2 and
	 * says nothing on the console */
	memset(&e, 0, sizeof(e));
	e.type = VM_CHR;
	snprintf(e.path, sizeof(e.path), "dev/console");
	e.mode = 0600;
	e.rdev_major = 5;
	e.rdev_minor = 1;
	if ((r = vm_cpio_entry(&b->cpio, &e)) != 0)
		return r;
	if ((r = add_file(b, "init", 0755, b->init_fd, b->init_size)) != 0)
		return r;
	for (uint32_t i = 0; i < b->nmods; i++) {
		snprintf(path, sizeof(path), MODDIR "/%s.ko", b->mod_name[i]);
		if ((r = add_file(b, path, 0644, b->mod_fd[i], b->mod_size[i])) != 0)
			return r;
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s\n", b->mod_name[i]);
	}
	memset(&e, 0, sizeof(e));
	e.type = VM_REG;
	snprintf(e.path, sizeof(e.path), MODDIR "/load-order");
	e.mode = 0644;
	e.size = n;
	if ((r = vm_cpio_entry(&b->cpio, &e)) != 0 || (r = vm_cpio_data(&b->cpio, list, n)) != 0)
		return r;
	return vm_cpio_finish(&b->cpio);
}

static int remove_container(struct build *b)
{
	struct docker_error err;
	char text[1024];

	if (!b->container[0])
		return 0;
	if (docker_container_remove(&b->dc, b->container, true, &err) != 0)
		return failf("cannot remove export container %.12s: %s (docker rm -f it)",
			     b->container, docker_error_text(&err, text, sizeof(text)));
	b->container[0] = '\0';
	return 0;
}

static int export_image(struct build *b)
{
	static const char *const cmd[] = { "/nonexistent", NULL };
	static const struct docker_kv labels[] = { { "agentic-vm-export", "1" }, { NULL, NULL } };
	char image[80], target[LIMIT_DOCKER_TARGET_BYTES], msg[512], text[1024];
	struct docker_container_spec spec = { .image = image, .entrypoint = cmd, .cmd = cmd,
					      .labels = labels, .network_mode = "none" };
	struct docker_error err;
	int r, status = 0;

	snprintf(image, sizeof(image), "sha256:%s", b->image_id);
	if (docker_container_create(&b->dc, &spec, b->container, &err) != 0) {
		b->container[0] = '\0';
		return failf("cannot create a container of image %s to export: %s", b->image,
			     docker_error_text(&err, text, sizeof(text)));
	}
	vm_cpio_init(&b->cpio, out_write, b);
	vm_tar_init(&b->tar, on_entry, on_data, b);
	snprintf(target, sizeof(target), "/v%s/containers/%s/export", b->dc.version, b->container);
	r = engine_get(b, target, export_body, 0, &status);
	if (r == 0 && status != 200)
		return failf("the engine refused to export image %s (HTTP %d): %s", b->image,
			     status, engine_message(b, msg, sizeof(msg)));
	if (r == 0)
		r = vm_tar_finish(&b->tar);
	if (stop_signal)
		return failf("stopped by signal %d", (int)stop_signal);
	if (r != 0 && b->write_err)
		return failf("cannot write %s: %s", b->tmp_file, strerror(b->write_err));
	if (r != 0 && b->why)
		return failf("image %s holds a %s: %s", b->image, b->why,
			     log_q(b->tar.entry.path));
	if (r != 0 && b->tar.why)
		return failf("the export of image %s is not a tar vm-image reads: %s%s%s",
			     b->image, b->tar.why, b->tar.entry.path[0] ? " at " : "",
			     b->tar.entry.path[0] ? log_q(b->tar.entry.path) : "");
	if (r != 0)
		return failf("cannot read the export of image %s: %s", b->image, err_str(r));
	if ((r = add_ours(b)) != 0 || (r = flush_out(b)) != 0)
		return failf("cannot write %s: %s", b->tmp_file, err_str(r));
	return 0;
}

/* ---- files ---- */
static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = fd < 0 || fsync(fd) != 0 ? -errno : 0;

	if (fd >= 0)
		close(fd);
	return r;
}

static const char *dir_of(const char *path, char *out, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return ".";
	snprintf(out, size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	return out;
}

static int copy_fd(int from, int to)
{
	uint8_t buf[65536];
	ssize_t n;

	while ((n = read(from, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(to, buf + off, (size_t)(n - off));
			if (w < 0)
				return -errno;
			off += w;
		}
	return n < 0 ? -errno : 0;
}

/* FILE becomes the cache file: a hard link put in place by rename, or a copy across
 * filesystems. */
static int publish(struct build *b)
{
	char tmp[LIMIT_PATH_BYTES], dir[LIMIT_PATH_BYTES];
	struct stat a, o;
	int from, to, r = 0;

	if (stat(b->cache_file, &a) == 0 && stat(b->out, &o) == 0 && a.st_dev == o.st_dev &&
	    a.st_ino == o.st_ino)
		return 0;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", b->out, (long)getpid()) >= sizeof(tmp))
		return failf("--out path too long");
	if (link(b->cache_file, tmp) != 0) {
		if (errno != EXDEV)
			return failf("cannot link %s to %s: %s", tmp, b->cache_file,
				     strerror(errno));
		from = open(b->cache_file, O_RDONLY | O_CLOEXEC);
		to = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (from < 0 || to < 0)
			r = -errno;
		if (r == 0)
			r = copy_fd(from, to);
		if (r == 0 && fsync(to) != 0)
			r = -errno;
		if (from >= 0)
			close(from);
		if (to >= 0 && close(to) != 0 && r == 0)
			r = -errno;
		if (r != 0) {
			if (to >= 0)
				unlink(tmp);
			return failf("cannot copy %s to %s: %s", b->cache_file, b->out,
				     strerror(-r));
		}
	}
	if (rename(tmp, b->out) != 0) {
		r = errno;
		unlink(tmp);
		return failf("cannot put %s in place: %s", b->out, strerror(r));
	}
	/* renaming onto a link of the same file does nothing: the temporary name stays */
	unlink(tmp);
	fsync_dir(dir_of(b->out, dir, sizeof(dir)));
	return 0;
}

/* Temp files a build killed midway left (".KEY.tmp-PID" whose PID is gone): removed, read
 * with getdents64 into static memory (nothing allocated after the seal). */
static void cache_sweep(const char *dir)
{
	static char dents[8192];
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n;

	if (dfd < 0)
		return;
	while ((n = syscall(SYS_getdents64, dfd, dents, sizeof(dents))) > 0) {
		for (long off = 0; off < n;) {
			unsigned short reclen;
			const char *name = dents + off + 19, *t;
			long pid;

			memcpy(&reclen, dents + off + 16, sizeof(reclen));
			off += reclen;
			if (name[0] != '.' || !(t = strstr(name, ".tmp-")))
				continue;
			pid = strtol(t + 5, NULL, 10);
			if (pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 &&
			    errno == ESRCH)
				unlinkat(dfd, name, 0);
		}
	}
	close(dfd);
}

static int cache_open(struct build *b)
{
	struct stat st;

	if (mkdir(b->cache, 0700) != 0 && errno != EEXIST)
		return failf("cannot make the cache directory %s: %s%s", b->cache, strerror(errno),
			     errno == ENOENT ? " (make its parent first)" : "");
	if (stat(b->cache, &st) != 0 || !S_ISDIR(st.st_mode))
		return failf("the cache %s is not a directory", b->cache);
	cache_sweep(b->cache);
	if ((size_t)snprintf(b->cache_file, sizeof(b->cache_file), "%s/%s.cpio", b->cache,
			     b->key) >= sizeof(b->cache_file))
		return failf("--cache path too long");
	return 0;
}

static int build_miss(struct build *b)
{
	int r;

	snprintf(b->tmp_file, sizeof(b->tmp_file), "%s/.%s.tmp-%ld", b->cache, b->key,
		 (long)getpid());
	b->tmp_fd = open(b->tmp_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (b->tmp_fd < 0) {
		r = failf("cannot create %s: %s", b->tmp_file, strerror(errno));
		b->tmp_file[0] = '\0';
		return r;
	}
	r = export_image(b);
	if (remove_container(b) != 0 && r == 0)
		r = 1;
	if (r == 0 && fsync(b->tmp_fd) != 0)
		r = failf("cannot write %s: %s", b->tmp_file, strerror(errno));
	if (close(b->tmp_fd) != 0 && r == 0)
		r = failf("cannot write %s: %s", b->tmp_file, strerror(errno));
	b->tmp_fd = -1;
	if (r == 0 && rename(b->tmp_file, b->cache_file) != 0)
		r = failf("cannot rename %s to %s: %s", b->tmp_file, b->cache_file,
			  strerror(errno));
	if (r != 0) {
		unlink(b->tmp_file);
		return r;
	}
	b->tmp_file[0] = '\0';
	if (fsync_dir(b->cache) != 0)
		return failf("cannot sync the cache directory %s: %s", b->cache, strerror(errno));
	return 0;
}

static int run(struct build *b)
{
	struct stat st;
	int r;
	bool hit;

	if ((r = open_file(NULL, b->init, &b->init_fd, &b->init_size)) != 0 ||
	    (r = read_modules(b)) != 0 || (r = engine_connect(b)) != 0 ||
	    (r = image_id(b)) != 0 || (r = make_key(b)) != 0 || (r = cache_open(b)) != 0)
		return r;
	hit = stat(b->cache_file, &st) == 0 && S_ISREG(st.st_mode);
	if (!hit && (r = build_miss(b)) != 0)
		return r;
	if ((r = publish(b)) != 0)
		return r;
	log_info("vm image", "image=%s key=%s cache=%s out=%s", log_q(b->image), log_q(b->key),
		 hit ? "hit" : "built", log_q(b->out));
	return 0;
}

int vm_image_main(int argc, char **argv)
{
	struct build *b = &build;
	struct sigaction sa = { .sa_handler = on_signal };
	int r;

	b->init_fd = b->tmp_fd = -1;
	if ((r = parse_args(b, argc, argv)) != 0)
		return r;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	r = run(b);
	if (b->dc_ready)
		docker_client_free(&b->dc);
	return r ? 1 : 0;
}
