/* policy.c: request checks (names, labels, mounts) and secret scrubbing of free text. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "mgmt/policy.h"

bool policy_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n < 2 || n > 63 || name[0] < 'a' || name[0] > 'z')
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '-'))
			return false;
	return true;
}

bool policy_label_key_allowed(const char *key)
{
	return *key && strncasecmp(key, "agentic-", 8) != 0;
}

/* True when path equals root or lies below it, component-wise ("/srv/a" is not under "/sr"). */
static bool path_within(const char *path, const char *root)
{
	size_t n = strlen(root);

	if (n == 1 && root[0] == '/')
		return path[0] == '/';
	return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Absolute, no empty, "." or ".." components, no trailing slash (but "/"). */
static bool path_clean(const char *p)
{
	if (p[0] != '/')
		return false;
	for (const char *c = p + 1; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += n;
		if (*c == '/') {
			c++;
			if (!*c)
				return false;
		}
	}
	return true;
}

static const char *const protected_host[] = {
	"/proc", "/sys", "/dev", "/etc", "/run", "/var/run", "/var/lib/docker", "/boot",
};

/* A protected place is refused, and so is any ancestor (mounting /var brings /var/run). */
static bool touches(const char *path, const char *place)
{
	return path_within(path, place) || path_within(place, path);
}

int policy_mount_check(const struct config *cfg, const char *src_real, const char *dst,
		       char *why, size_t why_size)
{
	static const char *const protected_dst[] = {
		"/workspace", "/sbin/agentic-init", "/run/agentic", "/run/agentic-sandbox",
		"/proc", "/sys", "/dev",
	};
	const char *docker_sock = cfg->docker_host + strlen("unix://");
	bool allowed = false;

	if (!path_clean(src_real) || !path_clean(dst)) {
		snprintf(why, why_size, "mount paths must be absolute and plain (no '.', '..', '//' "
			 "or trailing '/')");
		return ERR_PARSE;
	}
	if (strcmp(src_real, "/") == 0 || strcmp(dst, "/") == 0) {
		snprintf(why, why_size, "mounting / is never allowed");
		return -EPERM;
	}
	for (size_t i = 0; i < ARRAY_LEN(protected_host); i++)
		if (touches(src_real, protected_host[i])) {
			snprintf(why, why_size, "host path %s overlaps protected %s", src_real,
				 protected_host[i]);
			return -EPERM;
		}
	if (touches(src_real, cfg->agentshare_root) || touches(src_real, docker_sock) ||
	    touches(src_real, cfg->agent_socket_dir)) {
		snprintf(why, why_size, "host path %s overlaps agentic's own state or the docker "
			 "socket", src_real);
		return -EPERM;
	}
	for (size_t i = 0; i < ARRAY_LEN(protected_dst); i++)
		if (touches(dst, protected_dst[i])) {
			snprintf(why, why_size, "sandbox path %s overlaps %s, which agentic manages", dst,
				 protected_dst[i]);
			return -EPERM;
		}
	for (uint32_t i = 0; i < cfg->n_mount_allowlist; i++)
		if (path_within(src_real, cfg->mount_allowlist[i]))
			allowed = true;
	if (!allowed) {
		snprintf(why, why_size, "host path %s is not under mount_allowlist (%s)", src_real,
			 cfg->n_mount_allowlist ? "see agenticd.conf" : "empty: no host mounts allowed");
		return -EPERM;
	}
	return 0;
}

static bool tokenish(int c)
{
	return isalnum(c) || c == '+' || c == '/' || c == '=' || c == '_' || c == '-' || c == '.';
}

/* Characters of an environment-variable-like key. */
static bool keychar(int c)
{
	return isalnum(c) || c == '_' || c == '-';
}

/* Characters of base64, base64url and hex. */
static bool keyish(int c)
{
	return isalnum(c) || c == '+' || c == '=' || c == '_' || c == '-';
}

static bool secret_key_name(const char *start, size_t n)
{
	static const char *const words[] = {
		"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH",
	};
	char up[128];

	if (n >= sizeof(up))
		n = sizeof(up) - 1;
	for (size_t i = 0; i < n; i++)
		up[i] = (char)toupper((unsigned char)start[i]);
	up[n] = '\0';
	for (size_t i = 0; i < ARRAY_LEN(words); i++)
		if (strstr(up, words[i]))
			return true;
	return false;
}

static bool has_token_prefix(const char *s)
{
	static const char *const prefixes[] = {
		"ghp_", "gho_", "ghs_", "github_pat_", "sk-", "xoxb-", "xoxp-", "xoxa-", "AKIA",
		"glpat-", "Bearer ", "bearer ",
	};

	for (size_t i = 0; i < ARRAY_LEN(prefixes); i++)
		if (strncmp(s, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

/* Replaces text[start..end) with the marker, cutting the tail of the text when the marker
 * is longer than what it replaces and the buffer is full; returns the index after it. */
static size_t replace(char *text, size_t size, size_t start, size_t end)
{
	static const char mark[] = "[redacted]";
	size_t len = strlen(text), m = sizeof(mark) - 1;
	size_t tail = len - end;

	if (start + m >= size) {
		text[start] = '\0';
		return start;
	}
	if (start + m + tail >= size)
		tail = size - 1 - start - m;
	memmove(text + start + m, text + end, tail);
	memcpy(text + start, mark, m);
	text[start + m + tail] = '\0';
	return start + m;
}

int policy_redact(char *text, size_t size)
{
	size_t i = 0;
	int count = 0;

	if (!memchr(text, '\0', size))
		text[size - 1] = '\0';
	while (text[i]) {
		size_t j = i;

		/* KEY=VALUE or KEY: VALUE with a secret-naming key */
		if (keychar((unsigned char)text[i]) && (i == 0 || !keychar((unsigned char)text[i - 1]))) {
			while (keychar((unsigned char)text[j]))
				j++;
			if ((text[j] == '=' || text[j] == ':') && secret_key_name(text + i, j - i)) {
				size_t v = j + 1, e;
				while (text[v] == ' ' || text[v] == '"' || text[v] == '\'')
					v++;
				if (strncmp(text + v, "[redacted]", 10) == 0) {
					i = v + 10; /* already scrubbed */
					continue;
				}
				e = v;
				while (text[e] && text[e] != ' ' && text[e] != '"' && text[e] != '\'' &&
				       text[e] != '\n' && text[e] != ',')
					e++;
				if (e > v) {
					i = replace(text, size, v, e);
					count++;
					continue;
				}
			}
			j = i;
		}
		if (has_token_prefix(text + i) && (i == 0 || !tokenish((unsigned char)text[i - 1]))) {
			size_t e = i;
			if (text[e] == 'B' || text[e] == 'b')
				e += 7; /* "Bearer " */
			while (tokenish((unsigned char)text[e]))
				e++;
			i = replace(text, size, i, e);
			count++;
			continue;
		}
		if (keyish((unsigned char)text[i]) && (i == 0 || !keyish((unsigned char)text[i - 1]))) {
			size_t e = i, digits = 0, letters = 0;
			while (keyish((unsigned char)text[e])) {
				digits += isdigit((unsigned char)text[e]) != 0;
				letters += isalpha((unsigned char)text[e]) != 0;
				e++;
			}
			/* long runs mixing digits and letters look like keys; words and paths (split at
			 * '/' and '.') rarely do */
			if (e - i >= 24 && digits >= 4 && letters >= 4) {
				i = replace(text, size, i, e);
				count++;
				continue;
			}
		}
		i++;
	}
	return count;
}
