/* linkpath.c: the lexical reading of a symlink found in the share: where it points, folded
 * ("." and ".." resolved as text, never followed) and placed under the root
 * (prune_link_resolve). */
#include <errno.h>
#include <string.h>

#include "prune/prune.h"

/* Appends the components of s to the absolute path out[0..*n), folding "." and "..". */
static int path_fold(char *out, size_t *n, size_t cap, const char *s)
{
	while (*s) {
		const char *c;
		size_t len;

		while (*s == '/')
			s++;
		if (!*s)
			break;
		c = s;
		while (*s && *s != '/')
			s++;
		len = (size_t)(s - c);
		if (len == 1 && c[0] == '.')
			continue;
		if (len == 2 && c[0] == '.' && c[1] == '.') {
			while (*n > 1 && out[*n - 1] != '/')
				(*n)--;
			if (*n > 1)
				(*n)--;
			continue;
		}
		if ((*n > 1) + len + 1 > cap - *n)
			return ERR_LIMIT;
		if (*n > 1)
			out[(*n)++] = '/';
		memcpy(out + *n, c, len);
		*n += len;
	}
	out[*n] = '\0';
	return 0;
}

static int path_normalize(char *out, size_t cap, const char *a, const char *b, const char *c)
{
	size_t n = 1;
	int r;

	if (cap < 2)
		return ERR_LIMIT;
	out[0] = '/';
	out[1] = '\0';
	r = path_fold(out, &n, cap, a);
	if (r == 0 && b)
		r = path_fold(out, &n, cap, b);
	if (r == 0 && c)
		r = path_fold(out, &n, cap, c);
	return r;
}

/* Root-relative rest of the absolute normalized path abs when it lies under root. */
static const char *path_under(const char *root, const char *abs)
{
	char nroot[LIMIT_PATH_BYTES];
	size_t len;

	if (!root || path_normalize(nroot, sizeof(nroot), root, NULL, NULL) != 0)
		return NULL;
	len = strlen(nroot);
	if (len == 1)
		return abs + 1;
	if (strncmp(abs, nroot, len) != 0)
		return NULL;
	if (abs[len] == '\0')
		return abs + len;
	return abs[len] == '/' ? abs + len + 1 : NULL;
}

int prune_link_resolve(const char *root, const char *alt_root, const char *link_dir,
		       const char *target, char *out, size_t out_size)
{
	const char *rest;
	int r;

	if (target[0] == '/')
		r = path_normalize(out, out_size, target, NULL, NULL);
	else
		r = path_normalize(out, out_size, root, link_dir, target);
	if (r < 0)
		return r;
	rest = path_under(root, out);
	if (!rest)
		rest = path_under(alt_root, out);
	if (!rest)
		return PRUNE_OUTSIDE;
	memmove(out, rest, strlen(rest) + 1);
	return 0;
}
