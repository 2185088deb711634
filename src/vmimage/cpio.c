/* cpio.c: the newc ("070701") writer of vm-image: the format the kernel unpacks as initramfs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "vmimage.h"

static const uint8_t zeros[4];

void vm_cpio_init(struct vm_cpio *w, vm_write_fn write, void *ctx)
{
	memset(w, 0, sizeof(*w));
	w->write = write;
	w->ctx = ctx;
	w->next_ino = 1;
}

static uint32_t pad4(uint64_t n)
{
	return (uint32_t)((4 - n % 4) % 4);
}

static uint32_t mode_bits(enum vm_type type)
{
	switch (type) {
	case VM_DIR:
		return S_IFDIR;
	case VM_SYMLINK:
		return S_IFLNK;
	case VM_CHR:
		return S_IFCHR;
	case VM_BLK:
		return S_IFBLK;
	case VM_FIFO:
		return S_IFIFO;
	default:
		return S_IFREG;
	}
}

/* One header and its name (padded); nlink 2 for directories, 1 for the rest, as
 * gen_init_cpio writes them. */
static int header(struct vm_cpio *w, const char *name, uint32_t mode, const struct vm_entry *e,
		  uint64_t size)
{
	char h[111];
	size_t namesize = strlen(name) + 1;
	int r;

	snprintf(h, sizeof(h),
		 "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		 e ? w->next_ino++ : 0, mode, e ? e->uid : 0, e ? e->gid : 0,
		 e && e->type == VM_DIR ? 2u : 1u,
		 e ? (uint32_t)(e->mtime > (int64_t)UINT32_MAX ? UINT32_MAX : e->mtime) : 0,
		 (uint32_t)size, 0u, 0u, e ? e->rdev_major : 0, e ? e->rdev_minor : 0,
		 (uint32_t)namesize, 0u);
	if ((r = w->write(w->ctx, h, 110)) != 0 || (r = w->write(w->ctx, name, namesize)) != 0)
		return r;
	return w->write(w->ctx, zeros, pad4(110 + namesize));
}

int vm_cpio_entry(struct vm_cpio *w, const struct vm_entry *e)
{
	uint64_t size = 0;
	int r;

	if (w->left || w->done)
		return ERR_STATE;
	if (e->type == VM_HARDLINK || !e->path[0])
		return -EINVAL;
	if (e->type == VM_REG)
		size = e->size;
	else if (e->type == VM_SYMLINK)
		size = strlen(e->link);
	if (size > VM_CPIO_FILE_MAX)
		return ERR_LIMIT;
	r = header(w, e->path, mode_bits(e->type) | (e->mode & 07777), e, size);
	if (r != 0)
		return r;
	if (e->type == VM_SYMLINK) {
		if ((r = w->write(w->ctx, e->link, size)) != 0)
			return r;
		return w->write(w->ctx, zeros, pad4(size));
	}
	w->left = size;
	w->pad = pad4(size);
	return 0;
}

int vm_cpio_data(struct vm_cpio *w, const void *data, size_t len)
{
	int r;

	if (len > w->left)
		return ERR_STATE;
	if (len && (r = w->write(w->ctx, data, len)) != 0)
		return r;
	w->left -= len;
	if (w->left == 0 && w->pad) {
		r = w->write(w->ctx, zeros, w->pad);
		w->pad = 0;
		return r;
	}
	return 0;
}

int vm_cpio_finish(struct vm_cpio *w)
{
	int r;

	if (w->left || w->done)
		return ERR_STATE;
	r = header(w, "TRAILER!!!", 0, NULL, 0);
	if (r == 0)
		w->done = true;
	return r;
}
