/* e2b_keys.c: the E2B API keys (e2b_keys.h): minted, checked in constant time against their
 * SHA-256 (BearSSL), listed, removed, and kept in state_dir/e2b-keys. Calls base and BearSSL
 * only; the admin API's key routes and the E2B listener's auth call it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bearssl.h>

#include "base/base.h"
#include "e2b/e2b_keys.h"

#define KEY_RAW (E2B_KEY_HEX / 2)
#define LINE_BYTES (E2B_KEY_ID_BYTES + E2B_KEY_NAME_BYTES + 24 + 64 + 4)

static struct {
	char path[LIMIT_PATH_BYTES], tmp[LIMIT_PATH_BYTES];
	struct e2b_key_info info[LIMIT_E2B_KEYS];
	uint8_t hash[LIMIT_E2B_KEYS][32];
	uint32_t n;
	char error[LIMIT_PATH_BYTES + 160];
} K;

static const char hexd[] = "0123456789abcdef";

static void hex_write(char *out, const uint8_t *in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexd[in[i] >> 4];
		out[2 * i + 1] = hexd[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static bool lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[n] == '\0' || s[n] == ' ';
}

static void sha256(const char *s, uint8_t out[32])
{
	br_sha256_context h;

	br_sha256_init(&h);
	br_sha256_update(&h, s, strlen(s));
	br_sha256_out(&h, out);
}

bool e2b_key_name_valid(const char *name)
{
	size_t n = strlen(name);

	/* never a key's shape: a key pasted where its name goes would be kept and shown */
	return n >= 1 && n < E2B_KEY_NAME_BYTES && strncmp(name, E2B_KEY_PREFIX, 4) != 0 &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

const char *e2b_keys_error(void)
{
	return K.error;
}

static int refuse(int r, const char *fmt, const char *what)
{
	snprintf(K.error, sizeof(K.error), fmt, K.path, what);
	return r;
}

/* One line "ID NAME CREATED HASH" into slot i: 0 or ERR_PARSE. */
static int line_read(char *line, uint32_t i)
{
	char *id = strtok(line, " "), *name = strtok(NULL, " "), *cr = strtok(NULL, " ");
	char *hash = strtok(NULL, " ");
	uint64_t created;

	if (!id || !name || !cr || !hash || strtok(NULL, " ") || strlen(id) != 16 ||
	    !lower_hex(id, 16) || !e2b_key_name_valid(name) ||
	    parse_u64(cr, INT64_MAX, &created) != 0 || strlen(hash) != 64 || !lower_hex(hash, 64))
		return ERR_PARSE;
	memcpy(K.info[i].id, id, E2B_KEY_ID_BYTES);
	snprintf(K.info[i].name, sizeof(K.info[i].name), "%s", name);
	K.info[i].created = (int64_t)created;
	for (int b = 0; b < 32; b++)
		K.hash[i][b] = (uint8_t)(hex_value(hash[2 * b]) << 4 | hex_value(hash[2 * b + 1]));
	return 0;
}

/* The file's lines into the table: 0, or ERR_PARSE / ERR_LIMIT with K.error set. */
static int lines_read(char *text)
{
	char line[LINE_BYTES];
	uint32_t no = 0;

	for (char *p = text, *nl; *p; p = nl + 1) {
		no++;
		if (!(nl = strchr(p, '\n')) || (size_t)(nl - p) >= sizeof(line)) {
			snprintf(K.error, sizeof(K.error), "%s: line %u is not a key's (ID NAME "
				 "CREATED SHA256HEX, ended by a newline)", K.path, no);
			return ERR_PARSE;
		}
		if (K.n == LIMIT_E2B_KEYS) {
			snprintf(K.error, sizeof(K.error), "%s: more than %d keys", K.path,
				 LIMIT_E2B_KEYS);
			return ERR_LIMIT;
		}
		memcpy(line, p, (size_t)(nl - p));
		line[nl - p] = '\0';
		if (line_read(line, K.n) != 0) {
			snprintf(K.error, sizeof(K.error), "%s: line %u is not a key's (ID NAME "
				 "CREATED SHA256HEX)", K.path, no);
			return ERR_PARSE;
		}
		K.n++;
	}
	return 0;
}

int e2b_keys_open(const char *state_dir)
{
	static char text[LIMIT_E2B_KEYS * LINE_BYTES + 1];
	struct stat st;
	size_t len;
	int fd, r;

	K.n = 0;
	K.error[0] = '\0';
	if ((size_t)snprintf(K.path, sizeof(K.path), "%s/e2b-keys", state_dir) >= sizeof(K.path) ||
	    (size_t)snprintf(K.tmp, sizeof(K.tmp), "%s/.e2b-keys.tmp", state_dir) >= sizeof(K.tmp))
		return refuse(-ENAMETOOLONG, "%s%s: the path is too long", "");
	fd = open(K.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return refuse(-errno, "%s: %s", strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 07777) != 0600) {
		close(fd);
		return refuse(-EPERM, "%s%s is not a regular file of root's with mode 0600: the keys' "
			      "hashes are for root alone (chown root and chmod 0600 it, or remove it "
			      "and make the keys again)", "");
	}
	r = fd_read_all(fd, text, sizeof(text) - 1, &len);
	close(fd);
	if (r != 0)
		return refuse(r, "%s: %s", r == ERR_LIMIT ? "too big for the keys it may hold"
							  : strerror(-r));
	text[len] = '\0';
	if ((r = lines_read(text)) != 0)
		K.n = 0;
	return r;
}

bool e2b_key_valid(const char *key)
{
	uint8_t h[32];
	unsigned match = 0;

	if (strlen(key) != E2B_KEY_BYTES - 1 || strncmp(key, E2B_KEY_PREFIX, 4) != 0 ||
	    !lower_hex(key + 4, E2B_KEY_HEX))
		return false;
	sha256(key, h);
	for (uint32_t i = 0; i < K.n; i++) {
		unsigned d = 0;

		for (int b = 0; b < 32; b++)
			d |= (unsigned)(h[b] ^ K.hash[i][b]);
		/* 1 when d is 0, without a branch on it */
		match |= 1u & ((d - 1u) >> 8);
	}
	memset(h, 0, sizeof(h));
	return match != 0;
}

/* The table into the file: temp (0600, root's), fsync, rename, fsync of the directory. */
static int keys_write(void)
{
	char line[LINE_BYTES], hex[65], dir[LIMIT_PATH_BYTES], *slash;
	int fd, r = 0;

	fd = open(K.tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) != 0)
		r = -errno;
	for (uint32_t i = 0; r == 0 && i < K.n; i++) {
		int n;

		hex_write(hex, K.hash[i], 32);
		n = snprintf(line, sizeof(line), "%s %s %lld %s\n", K.info[i].id, K.info[i].name,
			     (long long)K.info[i].created, hex);
		if (write(fd, line, (size_t)n) != n)
			r = errno ? -errno : -EIO;
	}
	if (r == 0 && fsync(fd) != 0)
		r = -errno;
	close(fd);
	if (r == 0 && rename(K.tmp, K.path) != 0)
		r = -errno;
	if (r != 0) {
		unlink(K.tmp);
		return r;
	}
	snprintf(dir, sizeof(dir), "%s", K.path);
	if ((slash = strrchr(dir, '/')))
		*slash = '\0';
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	return 0;
}

int e2b_key_create(const char *name, char *key_out, char *id_out)
{
	uint8_t raw[KEY_RAW], idraw[8];
	struct e2b_key_info *k = &K.info[K.n];
	int r;

	if (!name || !*name)
		name = "default";
	if (!e2b_key_name_valid(name))
		return -EINVAL;
	if (K.n == LIMIT_E2B_KEYS)
		return ERR_LIMIT;
	if ((r = random_bytes(raw, sizeof(raw))) != 0 || (r = random_bytes(idraw, 8)) != 0)
		return r;
	memcpy(key_out, E2B_KEY_PREFIX, 4);
	hex_write(key_out + 4, raw, sizeof(raw));
	memset(raw, 0, sizeof(raw));
	hex_write(k->id, idraw, 8);
	snprintf(k->name, sizeof(k->name), "%s", name);
	k->created = (int64_t)time(NULL);
	sha256(key_out, K.hash[K.n]);
	K.n++;
	if ((r = keys_write()) != 0) {
		K.n--;
		memset(key_out, 0, E2B_KEY_BYTES);
		return r;
	}
	memcpy(id_out, k->id, E2B_KEY_ID_BYTES);
	return 0;
}

const struct e2b_key_info *e2b_key_at(uint32_t i)
{
	return i < K.n ? &K.info[i] : NULL;
}

int e2b_key_remove(const char *id)
{
	struct e2b_key_info info;
	uint8_t hash[32];
	uint32_t i;
	int r;

	for (i = 0; i < K.n && strcmp(K.info[i].id, id) != 0; i++)
		;
	if (i == K.n)
		return -ENOENT;
	info = K.info[i];
	memcpy(hash, K.hash[i], 32);
	memmove(&K.info[i], &K.info[i + 1], (K.n - i - 1) * sizeof(K.info[0]));
	memmove(&K.hash[i], &K.hash[i + 1], (K.n - i - 1) * sizeof(K.hash[0]));
	K.n--;
	if ((r = keys_write()) == 0)
		return 0;
	memmove(&K.info[i + 1], &K.info[i], (K.n - i) * sizeof(K.info[0]));
	memmove(&K.hash[i + 1], &K.hash[i], (K.n - i) * sizeof(K.hash[0]));
	K.info[i] = info;
	memcpy(K.hash[i], hash, 32);
	K.n++;
	return r;
}
