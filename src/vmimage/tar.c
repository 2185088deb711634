/* tar.c: the resumable tar reader (ustar, GNU long names, pax path/linkpath/size) of vm-image. */
#include <errno.h>
#include <string.h>

#include "vmimage.h"

enum { ST_HEADER, ST_DATA, ST_LONG, ST_PAX, ST_PAD, ST_END, ST_ERROR };
enum { PX_LEN, PX_KEY, PX_VAL, PX_NL };
/* which value a GNU long record or a pax record fills */
enum { TO_NONE, TO_PATH, TO_LINK, TO_SIZE };

/* ustar header fields: offset, length */
#define F_NAME 0, 100
#define F_MODE 100, 8
#define F_UID 108, 8
#define F_GID 116, 8
#define F_SIZE 124, 12
#define F_MTIME 136, 12
#define F_CHKSUM 148, 8
#define F_TYPE 156
#define F_LINK 157, 100
#define F_MAGIC 257
#define F_DEVMAJOR 329, 8
#define F_DEVMINOR 337, 8
#define F_PREFIX 345, 155

static int fail(struct vm_tar *t, int code, const char *why)
{
	t->state = ST_ERROR;
	t->err = code;
	t->why = why;
	return code;
}

void vm_tar_init(struct vm_tar *t, vm_tar_entry_fn on_entry, vm_tar_data_fn on_data, void *ctx)
{
	memset(t, 0, sizeof(*t));
	t->on_entry = on_entry;
	t->on_data = on_data;
	t->ctx = ctx;
	t->state = ST_HEADER;
}

int vm_path_normalize(const char *in, char out[VM_PATH_MAX])
{
	size_t n = 0;

	while (*in) {
		const char *end = strchr(in, '/');
		size_t len = end ? (size_t)(end - in) : strlen(in);

		if (len == 2 && in[0] == '.' && in[1] == '.')
			return ERR_PARSE;
		if (len > 0 && !(len == 1 && in[0] == '.')) {
			if (n + (n > 0) + len >= VM_PATH_MAX)
				return ERR_LIMIT;
			if (n > 0)
				out[n++] = '/';
			memcpy(out + n, in, len);
			n += len;
		}
		in += len;
		if (*in == '/')
			in++;
	}
	out[n] = '\0';
	return 0;
}

/* A numeric field: octal digits (leading spaces allowed, ended by a space or NUL, an empty
 * field is 0), or base-256 when its first byte has the high bit. 0, or ERR_PARSE for other
 * bytes, a negative base-256 value (*negative set instead when negative is not NULL), or one
 * over 2^63. */
static int field_num(const uint8_t *f, size_t len, uint64_t *out, bool *negative)
{
	uint64_t v = 0;
	size_t i = 0;

	if (negative)
		*negative = false;
	if (f[0] & 0x80) {
		if (f[0] & 0x40) {
			if (!negative)
				return ERR_PARSE;
			*negative = true;
			*out = 0;
			return 0;
		}
		v = f[0] & 0x3f;
		for (i = 1; i < len; i++) {
			if (v >> 55)
				return ERR_PARSE;
			v = v << 8 | f[i];
		}
		*out = v;
		return 0;
	}
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return ERR_PARSE;
		v = v << 3 | (uint64_t)(f[i] - '0');
	}
	if (i < len && f[i] != ' ' && f[i] != '\0')
		return ERR_PARSE;
	*out = v;
	return 0;
}

static bool checksum_ok(const uint8_t *h)
{
	uint64_t want;
	uint32_t sum_u = 0;
	int32_t sum_s = 0;

	if (h[148] & 0x80 || field_num(h + F_CHKSUM, &want, NULL) != 0)
		return false;
	for (size_t i = 0; i < VM_TAR_BLOCK; i++) {
		uint8_t c = i >= 148 && i < 156 ? ' ' : h[i];
		sum_u += c;
		sum_s += (int8_t)c;
	}
	return want == sum_u || (sum_s >= 0 && want == (uint64_t)sum_s);
}

static bool all_zero(const uint8_t *h)
{
	for (size_t i = 0; i < VM_TAR_BLOCK; i++)
		if (h[i])
			return false;
	return true;
}

/* A fixed-width string field (NUL-terminated unless it fills the field) appended to out. */
static void field_str(const uint8_t *f, size_t len, char *out, size_t *n)
{
	for (size_t i = 0; i < len && f[i]; i++)
		out[(*n)++] = (char)f[i];
	out[*n] = '\0';
}

/* The entry's path as the records before it or the header give it, normalized. The raw text
 * is built in long_path (free once read), so an error can name it. */
static int entry_path(struct vm_tar *t)
{
	const uint8_t *h = t->hdr;
	char *raw = t->long_path;
	size_t n = 0;
	int r;

	if (!t->have_path) {
		/* POSIX ustar only: GNU keeps times where the prefix would be */
		if (memcmp(h + F_MAGIC, "ustar\0", 6) == 0 && h[345]) {
			field_str(h + F_PREFIX, raw, &n);
			raw[n++] = '/';
		}
		field_str(h + F_NAME, raw, &n);
	}
	r = vm_path_normalize(raw, t->entry.path);
	if (r != 0) {
		memcpy(t->entry.path, raw, VM_PATH_MAX);
		return fail(t, r, r == ERR_PARSE ? "path with a \"..\" component"
						 : "path over 4096 bytes");
	}
	return 0;
}

static int entry_link(struct vm_tar *t)
{
	char *raw = t->long_link;
	size_t n = 0;
	int r;

	if (!t->have_link)
		field_str(t->hdr + F_LINK, raw, &n);
	if (t->entry.type != VM_HARDLINK) {
		memcpy(t->entry.link, raw, VM_PATH_MAX);
		return 0;
	}
	r = vm_path_normalize(raw, t->entry.link);
	if (r == 0 && !t->entry.link[0])
		r = ERR_PARSE;
	if (r != 0)
		return fail(t, r, "hard link whose target is empty or has a \"..\" component");
	return 0;
}

static int type_of(uint8_t flag, enum vm_type *out)
{
	static const struct { uint8_t flag; enum vm_type type; } map[] = {
		{ '0', VM_REG }, { '\0', VM_REG }, { '7', VM_REG }, { '1', VM_HARDLINK },
		{ '2', VM_SYMLINK }, { '3', VM_CHR }, { '4', VM_BLK }, { '5', VM_DIR },
		{ '6', VM_FIFO },
	};
	for (size_t i = 0; i < ARRAY_LEN(map); i++)
		if (map[i].flag == flag) {
			*out = map[i].type;
			return 0;
		}
	return ERR_PARSE;
}

/* Data of `size` bytes follows this header: to_state, then the padding. */
static void expect_data(struct vm_tar *t, int to_state, uint64_t size)
{
	t->remaining = size;
	t->pad = (uint32_t)((VM_TAR_BLOCK - size % VM_TAR_BLOCK) % VM_TAR_BLOCK);
	t->state = size ? to_state : (t->pad ? ST_PAD : ST_HEADER);
}

static int file_entry(struct vm_tar *t, uint64_t size)
{
	const uint8_t *h = t->hdr;
	struct vm_entry *e = &t->entry;
	uint64_t mode, uid, gid, mtime, maj = 0, min = 0;
	bool neg;
	int r;

	e->path[0] = e->link[0] = '\0';
	if (type_of(h[F_TYPE], &e->type) != 0)
		return fail(t, ERR_PARSE, "tar entry of a type vm-image does not read");
	if ((r = entry_path(t)) != 0 || (r = entry_link(t)) != 0)
		return r;
	if (field_num(h + F_MODE, &mode, NULL) || field_num(h + F_UID, &uid, NULL) ||
	    field_num(h + F_GID, &gid, NULL) || field_num(h + F_MTIME, &mtime, &neg) ||
	    uid > UINT32_MAX || gid > UINT32_MAX)
		return fail(t, ERR_PARSE, "malformed mode, owner or time in a tar header");
	if ((e->type == VM_CHR || e->type == VM_BLK) &&
	    (field_num(h + F_DEVMAJOR, &maj, NULL) || field_num(h + F_DEVMINOR, &min, NULL) ||
	     maj > UINT32_MAX || min > UINT32_MAX))
		return fail(t, ERR_PARSE, "malformed device numbers in a tar header");
	e->mode = (uint32_t)(mode & 01777);
	e->uid = (uint32_t)uid;
	e->gid = (uint32_t)gid;
	e->mtime = neg || mtime > INT64_MAX ? 0 : (int64_t)mtime;
	e->rdev_major = (uint32_t)maj;
	e->rdev_minor = (uint32_t)min;
	/* as Go's archive/tar: only regular files carry data, whatever the size field says */
	e->size = e->type == VM_REG ? size : 0;
	t->have_path = t->have_link = t->have_size = false;
	r = e->path[0] ? t->on_entry(t->ctx, e) : VM_TAR_SKIP;
	if (r < 0)
		return fail(t, r, "stopped by its reader");
	t->deliver = r == 0;
	expect_data(t, ST_DATA, e->size);
	return 0;
}

static int header_done(struct vm_tar *t)
{
	const uint8_t *h = t->hdr;
	uint64_t size;

	t->have = 0;
	if (all_zero(h)) {
		t->state = ST_END;
		return 0;
	}
	t->entry.path[0] = '\0';
	if (!checksum_ok(h))
		return fail(t, ERR_PARSE, "tar header checksum mismatch");
	if (field_num(h + F_SIZE, &size, NULL) != 0)
		return fail(t, ERR_PARSE, "malformed size in a tar header");
	switch (h[F_TYPE]) {
	case 'L':
	case 'K':
		if (size > VM_PATH_MAX)
			return fail(t, ERR_LIMIT, "GNU long name over 4096 bytes");
		if (size == 0)
			return fail(t, ERR_PARSE, "empty GNU long name");
		t->long_len = 0;
		t->long_to = h[F_TYPE] == 'L' ? TO_PATH : TO_LINK;
		expect_data(t, ST_LONG, size);
		return 0;
	case 'x':
	case 'g':
		/* a global header's values are read and dropped: docker export writes none */
		t->pax_state = PX_LEN;
		t->rec_len = t->rec_read = 0;
		t->deliver = h[F_TYPE] == 'x';
		expect_data(t, ST_PAX, size);
		return 0;
	default:
		return file_entry(t, t->have_size ? t->pax_size : size);
	}
}

static int long_done(struct vm_tar *t)
{
	char *dst = t->long_to == TO_PATH ? t->long_path : t->long_link;

	if (t->long_len < VM_PATH_MAX)
		dst[t->long_len] = '\0';
	else if (dst[VM_PATH_MAX - 1] != '\0')
		return fail(t, ERR_LIMIT, "GNU long name over 4096 bytes");
	if (t->long_to == TO_PATH)
		t->have_path = dst[0] != '\0';
	else
		t->have_link = dst[0] != '\0';
	return 0;
}

static int pax_target(const struct vm_tar *t)
{
	if (t->key_len >= VM_TAR_KEY_MAX)
		return TO_NONE;
	if (t->key_len == 4 && memcmp(t->key, "path", 4) == 0)
		return TO_PATH;
	if (t->key_len == 8 && memcmp(t->key, "linkpath", 8) == 0)
		return TO_LINK;
	if (t->key_len == 4 && memcmp(t->key, "size", 4) == 0)
		return TO_SIZE;
	return TO_NONE;
}

/* A record's value is complete: it applies to the next entry. */
static int pax_commit(struct vm_tar *t)
{
	int to = t->deliver ? pax_target(t) : TO_NONE;

	if (to == TO_PATH) {
		t->long_path[t->val_len] = '\0';
		t->have_path = t->val_len > 0;
	} else if (to == TO_LINK) {
		t->long_link[t->val_len] = '\0';
		t->have_link = t->val_len > 0;
	} else if (to == TO_SIZE) {
		if (t->val_len == 0 || t->val_len > 19)
			return fail(t, ERR_PARSE, "malformed pax size");
		t->pax_size = 0;
		for (uint32_t i = 0; i < t->val_len; i++) {
			char c = t->num[i];
			if (c < '0' || c > '9')
				return fail(t, ERR_PARSE, "malformed pax size");
			t->pax_size = t->pax_size * 10 + (uint64_t)(c - '0');
		}
		t->have_size = true;
	}
	return 0;
}

/* One byte of a pax value: kept when it is one we read. */
static int pax_value_byte(struct vm_tar *t, uint8_t c)
{
	int to = t->deliver ? pax_target(t) : TO_NONE;

	if (to == TO_NONE)
		return 0;
	if (to == TO_SIZE) {
		if (t->val_len >= sizeof(t->num) - 1)
			return fail(t, ERR_PARSE, "malformed pax size");
		t->num[t->val_len++] = (char)c;
		return 0;
	}
	if (c == '\0')
		return fail(t, ERR_PARSE, "pax path holding a NUL byte");
	if (t->val_len >= VM_PATH_MAX - 1)
		return fail(t, ERR_LIMIT, "pax path over 4096 bytes");
	(to == TO_PATH ? t->long_path : t->long_link)[t->val_len++] = (char)c;
	return 0;
}

/* The pax records' bytes: "LEN KEY=VALUE\n", LEN counting the whole record. */
static int pax_byte(struct vm_tar *t, uint8_t c)
{
	t->rec_read++;
	switch (t->pax_state) {
	case PX_LEN:
		if (c == ' ' && t->rec_read > 1) {
			t->pax_state = PX_KEY;
			t->key_len = 0;
			return 0;
		}
		if (c < '0' || c > '9' || (t->rec_read == 1 && c == '0'))
			return fail(t, ERR_PARSE, "malformed pax record");
		t->rec_len = t->rec_len * 10 + (uint64_t)(c - '0');
		if (t->rec_len > VM_TAR_RECORD_MAX)
			return fail(t, ERR_LIMIT, "pax record over 1 MiB");
		return 0;
	case PX_KEY:
		if (t->rec_read >= t->rec_len)
			return fail(t, ERR_PARSE, "malformed pax record");
		if (c == '=') {
			if (t->key_len == 0)
				return fail(t, ERR_PARSE, "malformed pax record");
			t->val_len = 0;
			t->pax_state = t->rec_read + 1 == t->rec_len ? PX_NL : PX_VAL;
			return 0;
		}
		if (t->key_len < VM_TAR_KEY_MAX)
			t->key[t->key_len] = (char)c;
		if (t->key_len < VM_TAR_KEY_MAX)
			t->key_len++;
		return 0;
	case PX_VAL:
		if (t->rec_read + 1 == t->rec_len)
			t->pax_state = PX_NL;
		return pax_value_byte(t, c);
	default:
		if (c != '\n')
			return fail(t, ERR_PARSE, "malformed pax record");
		t->pax_state = PX_LEN;
		t->rec_len = t->rec_read = 0;
		return pax_commit(t);
	}
}

/* Data bytes of the current state; returns how many of in it took, or a negative code. */
static int data_bytes(struct vm_tar *t, const uint8_t *in, size_t len, size_t *took)
{
	size_t n = len < t->remaining ? len : (size_t)t->remaining;
	int r = 0;

	*took = n;
	if (t->state == ST_DATA && t->deliver && n) {
		r = t->on_data(t->ctx, in, n);
		if (r < 0)
			return fail(t, r, "stopped by its reader");
	} else if (t->state == ST_LONG) {
		char *dst = t->long_to == TO_PATH ? t->long_path : t->long_link;
		memcpy(dst + t->long_len, in, n);
		t->long_len += (uint32_t)n;
	} else if (t->state == ST_PAX) {
		for (size_t i = 0; i < n && r == 0; i++)
			r = pax_byte(t, in[i]);
		if (r != 0)
			return r;
	}
	t->remaining -= n;
	if (t->remaining)
		return 0;
	if (t->state == ST_LONG && (r = long_done(t)) != 0)
		return r;
	if (t->state == ST_PAX && (t->pax_state != PX_LEN || t->rec_read))
		return fail(t, ERR_PARSE, "pax header ends inside a record");
	t->state = t->pad ? ST_PAD : ST_HEADER;
	return 0;
}

int vm_tar_feed(struct vm_tar *t, const uint8_t *data, size_t len)
{
	while (len > 0) {
		size_t n;
		int r = 0;

		switch (t->state) {
		case ST_ERROR:
			return t->err;
		case ST_END:
			return 0;
		case ST_HEADER:
			n = VM_TAR_BLOCK - t->have;
			if (n > len)
				n = len;
			memcpy(t->hdr + t->have, data, n);
			t->have += (uint32_t)n;
			if (t->have == VM_TAR_BLOCK)
				r = header_done(t);
			break;
		case ST_PAD:
			n = len < t->pad ? len : t->pad;
			t->pad -= (uint32_t)n;
			if (t->pad == 0)
				t->state = ST_HEADER;
			break;
		default:
			r = data_bytes(t, data, len, &n);
			break;
		}
		if (r < 0)
			return r;
		data += n;
		len -= n;
	}
	return t->state == ST_ERROR ? t->err : 0;
}

int vm_tar_finish(struct vm_tar *t)
{
	if (t->state == ST_ERROR)
		return t->err;
	if (t->state != ST_END)
		return fail(t, ERR_PARSE, "tar stream ends before its end-of-archive block");
	return 0;
}
