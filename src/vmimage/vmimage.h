/* vmimage.h: the VM runtime's root filesystem: a resumable tar reader and a newc cpio writer.
 *
 * `agentic vm-image` (image.c) turns a container's `docker export` tar into the guest's
 * initramfs. The tar reader is a push engine (BearSSL style): it is fed the stream in pieces
 * of any size, holds one 512-byte header, one name and one link target in its own struct and
 * nothing else, and calls back once per entry and once per piece of a file's data. The cpio
 * writer writes the kernel's initramfs format (newc, "070701") through a caller's sink. No
 * I/O and no allocation in either. */
#ifndef AGENTIC_VM_IMAGE_H
#define AGENTIC_VM_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Longest path or link target an entry may have, in bytes with its NUL; a GNU long name, a
 * pax path or linkpath over it is refused (ERR_LIMIT), as is a pax record over
 * VM_TAR_RECORD_MAX. A pax record is read as it comes: only path, linkpath and size are kept,
 * other keys (xattrs, times; a key over VM_TAR_KEY_MAX is no key we read) are read past. */
#define VM_PATH_MAX 4096u
#define VM_TAR_KEY_MAX 64u
#define VM_TAR_RECORD_MAX (1024u * 1024u)
#define VM_TAR_BLOCK 512u
/* newc sizes are 8 hex digits */
#define VM_CPIO_FILE_MAX 0xffffffffull

enum vm_type { VM_REG, VM_DIR, VM_SYMLINK, VM_HARDLINK, VM_CHR, VM_BLK, VM_FIFO };

struct vm_entry {
	enum vm_type type;
	char path[VM_PATH_MAX];   /* normalized: relative, no "." or empty component, no "..";
				   * "" is the archive's root */
	char link[VM_PATH_MAX];   /* symlink: the target as stored; hardlink: the other entry's
				   * path, normalized as path is */
	uint32_t mode;            /* permission bits only, setuid and setgid cleared */
	uint32_t uid, gid;
	uint64_t size;            /* bytes of data (regular files; 0 for every other type) */
	int64_t mtime;
	uint32_t rdev_major, rdev_minor;
};

/* An entry, before its data. 0: its data (if any) follows through on_data; VM_TAR_SKIP: its
 * data is read and dropped; a negative code stops the reader, which returns it. */
#define VM_TAR_SKIP 1
typedef int (*vm_tar_entry_fn)(void *ctx, const struct vm_entry *e);
/* The next len bytes (len > 0) of the current entry's data; 0 or a negative code. */
typedef int (*vm_tar_data_fn)(void *ctx, const uint8_t *data, size_t len);

struct vm_tar {
	vm_tar_entry_fn on_entry;
	vm_tar_data_fn on_data;
	void *ctx;
	const char *why;          /* after an error: a short phrase of ours for the user */
	/* internal state */
	int state;
	int err;
	uint8_t hdr[VM_TAR_BLOCK];
	uint32_t have;            /* bytes of hdr read */
	uint64_t remaining;       /* bytes of the current entry's data still to come */
	uint32_t pad;             /* bytes to the next 512 boundary after it */
	bool deliver;             /* the data goes to on_data */
	/* GNU 'L'/'K' and pax 'x' values for the next header */
	char long_path[VM_PATH_MAX];
	char long_link[VM_PATH_MAX];
	uint32_t long_len;        /* bytes of the GNU long value being read */
	uint8_t long_to;          /* which of the two it fills */
	bool have_path, have_link, have_size;
	uint64_t pax_size;
	/* one pax record being read */
	uint64_t rec_len, rec_read;
	char key[VM_TAR_KEY_MAX];
	char num[20];             /* a pax size's digits */
	uint32_t key_len, val_len;
	int pax_state;
	struct vm_entry entry;
};

/* Prepares t; on_entry and on_data are required. */
void vm_tar_init(struct vm_tar *t, vm_tar_entry_fn on_entry, vm_tar_data_fn on_data, void *ctx);
/* Feeds len bytes. 0; ERR_PARSE (a bad checksum, a malformed number or pax record, an entry
 * type we do not read, a path with a ".." component), ERR_LIMIT (a name over VM_PATH_MAX), or
 * a callback's negative code. t->why says what was wrong and t->entry.path (when not empty)
 * where. An error is final: later calls return it again. Bytes after the end-of-archive block
 * are ignored. */
int vm_tar_feed(struct vm_tar *t, const uint8_t *data, size_t len);
/* The stream ended: 0 when the end-of-archive block was read, else ERR_PARSE (truncated). */
int vm_tar_finish(struct vm_tar *t);

/* Normalizes a tar path into out (VM_PATH_MAX): leading "/" and "./" dropped, "." and empty
 * components dropped. ERR_PARSE for a ".." component, ERR_LIMIT when it does not fit. */
int vm_path_normalize(const char *in, char out[VM_PATH_MAX]);

/* ---- newc writer ---- */
/* Writes all len bytes or returns a negative code. */
typedef int (*vm_write_fn)(void *ctx, const void *data, size_t len);

struct vm_cpio {
	vm_write_fn write;
	void *ctx;
	uint32_t next_ino;
	uint64_t left;            /* data bytes the current entry still needs */
	uint32_t pad;             /* padding after them */
	bool done;
};

void vm_cpio_init(struct vm_cpio *w, vm_write_fn write, void *ctx);
/* Writes an entry's header and name (a symlink's target too, as its data). Types VM_REG,
 * VM_DIR, VM_SYMLINK, VM_CHR, VM_BLK, VM_FIFO; e->path must not be empty. A regular file's
 * e->size bytes then follow through vm_cpio_data. -EINVAL for a hardlink or an empty path,
 * ERR_LIMIT for a file over VM_CPIO_FILE_MAX, ERR_STATE while data is still owed or after the
 * trailer, or the sink's code. */
int vm_cpio_entry(struct vm_cpio *w, const struct vm_entry *e);
/* The current file's next bytes; ERR_STATE for more than it has left. */
int vm_cpio_data(struct vm_cpio *w, const void *data, size_t len);
/* The trailer ("TRAILER!!!"); ERR_STATE while data is still owed. */
int vm_cpio_finish(struct vm_cpio *w);

#endif
