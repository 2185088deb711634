/* fuzz_vm_tar.c: vm-image's tar reader (src/vmimage/tar.c) into the newc writer on arbitrary bytes.
 * The first byte picks a piece size; reading in pieces must give exactly the cpio (and the
 * error) that one whole feed gives, and every entry handed out must have a normalized path
 * (relative, no "." "..", or empty component) and no setuid or setgid bit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmimage/vmimage.h"

struct out {
	struct vm_cpio cpio;
	uint64_t hash;
	uint64_t len;
	uint64_t entries;
};

static int sink(void *ctx, const void *data, size_t len)
{
	struct out *o = ctx;
	const uint8_t *p = data;

	for (size_t i = 0; i < len; i++)
		o->hash = (o->hash ^ p[i]) * 1099511628211ull;
	o->len += len;
	return 0;
}

static void check_path(const char *p)
{
	if (!p[0] || p[0] == '/')
		abort();
	for (const char *c = p; *c;) {
		const char *end = strchr(c, '/');
		size_t n = end ? (size_t)(end - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			abort();
		c += n + (end != NULL);
		if (end && !*c)
			abort();
	}
}

static int on_entry(void *ctx, const struct vm_entry *e)
{
	struct out *o = ctx;

	check_path(e->path);
	if (e->type == VM_HARDLINK)
		check_path(e->link);
	if (e->mode & ~01777u || (e->type != VM_REG && e->size))
		abort();
	o->entries++;
	if (e->type == VM_HARDLINK)
		return VM_TAR_SKIP;
	if (e->type == VM_REG && e->size > 1u << 20)
		return VM_TAR_SKIP;
	return vm_cpio_entry(&o->cpio, e);
}

static int on_data(void *ctx, const uint8_t *data, size_t len)
{
	struct out *o = ctx;
	return vm_cpio_data(&o->cpio, data, len);
}

static int run(const uint8_t *d, size_t n, size_t piece, struct out *o)
{
	static struct vm_tar t;
	int r = 0;

	memset(o, 0, sizeof(*o));
	vm_cpio_init(&o->cpio, sink, o);
	vm_tar_init(&t, on_entry, on_data, o);
	for (size_t at = 0; at < n && r == 0; at += piece)
		r = vm_tar_feed(&t, d + at, n - at < piece ? n - at : piece);
	if (r == 0)
		r = vm_tar_finish(&t);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct out whole, split;
	int rw, rs;

	if (size < 1)
		return 0;
	rw = run(data + 1, size - 1, size, &whole);
	rs = run(data + 1, size - 1, (size_t)data[0] % 97 + 1, &split);
	if (rw != rs || whole.hash != split.hash || whole.len != split.len ||
	    whole.entries != split.entries)
		abort();
	return 0;
}
