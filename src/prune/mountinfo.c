/* mountinfo.c: the mount points below the agentshare root, read from /proc/self/mountinfo. */
#include <stdlib.h>
#include <string.h>

#include "prune/prune.h"

#define FIELD_MOUNT_POINT 4 /* proc(5): "36 35 98:0 /mnt1 /mnt2 rw ..." -> /mnt2 */

void prune_mounts_init(struct prune_mounts *m, char *bytes, size_t bytes_cap, uint32_t *off,
		       uint32_t cap)
{
	m->bytes = bytes;
	m->bytes_len = 0;
	m->bytes_cap = bytes_cap;
	m->off = off;
	m->n = 0;
	m->cap = cap;
}

static int mounts_add(struct prune_mounts *m, const char *rel, size_t len)
{
	if (m->n == m->cap || len + 1 > m->bytes_cap - m->bytes_len || m->bytes_len > UINT32_MAX)
		return ERR_LIMIT;
	memcpy(m->bytes + m->bytes_len, rel, len);
	m->bytes[m->bytes_len + len] = '\0';
	m->off[m->n++] = (uint32_t)m->bytes_len;
	m->bytes_len += len + 1;
	return 0;
}

static int mounts_cmp(const void *a, const void *b, void *ctx)
{
	const char *bytes = ctx;

	return strcmp(bytes + *(const uint32_t *)a, bytes + *(const uint32_t *)b);
}

bool prune_mounts_below(const struct prune_mounts *m, const char *rel)
{
	size_t len = strlen(rel);
	uint32_t lo = 0, hi = m->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (strcmp(m->bytes + m->off[mid], rel) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Every path starting with rel sorts from here on, "rel b" before "rel/b" included. */
	for (; lo < m->n; lo++) {
		const char *p = m->bytes + m->off[lo];
		if (strncmp(p, rel, len) != 0)
			return false;
		if (p[len] == '\0' || p[len] == '/')
			return true;
	}
	return false;
}

void prune_mountinfo_init(struct prune_mountinfo *p, const char *root, struct prune_mounts *out)
{
	memset(p, 0, offsetof(struct prune_mountinfo, path));
	p->out = out;
	p->root = root;
	p->root_len = strlen(root);
	p->path[0] = '\0';
}

/* The mount point is complete: keep it when it lies below the root. */
static int mount_point_done(struct prune_mountinfo *p)
{
	size_t rl = p->root_len;

	if (p->esc_len)
		return ERR_PARSE;
	if (p->len <= rl + 1 || memcmp(p->path, p->root, rl) != 0 || p->path[rl] != '/')
		return 0;
	return mounts_add(p->out, p->path + rl + 1, p->len - rl - 1);
}

static int path_byte(struct prune_mountinfo *p, uint8_t c)
{
	if (p->esc_len) {
		if (c < '0' || c > '7')
			return ERR_PARSE;
		p->esc_val = p->esc_val * 8 + (uint32_t)(c - '0');
		if (++p->esc_len <= 3)
			return 0;
		if (p->esc_val == 0 || p->esc_val > 0xff)
			return ERR_PARSE; /* no path holds a NUL */
		c = (uint8_t)p->esc_val;
		p->esc_len = 0;
	} else if (c == '\\') {
		p->esc_len = 1;
		p->esc_val = 0;
		return 0;
	}
	if (p->len + 1 >= sizeof(p->path))
		return ERR_LIMIT;
	p->path[p->len++] = (char)c;
	return 0;
}

int prune_mountinfo_feed(struct prune_mountinfo *p, const void *data, size_t len)
{
	const uint8_t *d = data;

	for (size_t i = 0; i < len && p->err == 0; i++) {
		uint8_t c = d[i];

		if (c == '\n') {
			if (p->field <= FIELD_MOUNT_POINT)
				p->err = ERR_PARSE;
			p->field = 0;
			p->len = 0;
			p->in_line = false;
			continue;
		}
		p->in_line = true;
		if (c == '\0') {
			p->err = ERR_PARSE; /* the kernel never writes one */
		} else if (c == ' ') {
			if (p->field == FIELD_MOUNT_POINT)
				p->err = mount_point_done(p);
			p->field++;
		} else if (p->field == FIELD_MOUNT_POINT) {
			p->err = path_byte(p, c);
		}
	}
	return p->err;
}

int prune_mountinfo_finish(struct prune_mountinfo *p)
{
	if (p->err)
		return p->err;
	if (p->in_line)
		return p->err = ERR_PARSE;
	qsort_r(p->out->off, p->out->n, sizeof(uint32_t), mounts_cmp, p->out->bytes);
	return 0;
}
