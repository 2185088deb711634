/* hpack.c: HPACK (RFC 7541) header block decoder with its dynamic table, and a static-only encoder. */
#include <stdbool.h>
#include <string.h>

#include "hpack.h"

_Static_assert(sizeof(struct hpack_dec) <= 38u * 1024u, "hpack.h states the decoder's size");

/* RFC 7541 4.1: what an entry costs beyond its name and value. */
#define ENTRY_OVERHEAD 32
/* Integers past this are refused (RFC 7541 5.1 lets a decoder limit them): no length or index
 * we can accept comes near it, and it keeps the arithmetic in 32 bits. */
#define INT_MAX_VALUE 0x7fffffffu

struct static_entry {
	const char *name;
	const char *value;
	uint8_t name_len;
	uint8_t value_len;
};

#define S(n, v) { n, v, sizeof(n) - 1, sizeof(v) - 1 }

/* RFC 7541 Appendix A; static_table[i] is index i + 1. */
static const struct static_entry static_table[] = {
	S(":authority", ""),
	S(":method", "GET"),
	S(":method", "POST"),
	S(":path", "/"),
	S(":path", "/index.html"),
	S(":scheme", "http"),
	S(":scheme", "https"),
	S(":status", "200"),
	S(":status", "204"),
	S(":status", "206"),
	S(":status", "304"),
	S(":status", "400"),
	S(":status", "404"),
	S(":status", "500"),
	S("accept-charset", ""),
	S("accept-encoding", "gzip, deflate"),
	S("accept-language", ""),
	S("accept-ranges", ""),
	S("accept", ""),
	S("access-control-allow-origin", ""),
	S("age", ""),
	S("allow", ""),
	S("authorization", ""),
	S("cache-control", ""),
	S("content-disposition", ""),
	S("content-encoding", ""),
	S("content-language", ""),
	S("content-length", ""),
	S("content-location", ""),
	S("content-range", ""),
	S("content-type", ""),
	S("cookie", ""),
	S("date", ""),
	S("etag", ""),
	S("expect", ""),
	S("expires", ""),
	S("from", ""),
	S("host", ""),
	S("if-match", ""),
	S("if-modified-since", ""),
	S("if-none-match", ""),
	S("if-range", ""),
	S("if-unmodified-since", ""),
	S("last-modified", ""),
	S("link", ""),
	S("location", ""),
	S("max-forwards", ""),
	S("proxy-authenticate", ""),
	S("proxy-authorization", ""),
	S("range", ""),
	S("referer", ""),
	S("refresh", ""),
	S("retry-after", ""),
	S("server", ""),
	S("set-cookie", ""),
	S("strict-transport-security", ""),
	S("transfer-encoding", ""),
	S("user-agent", ""),
	S("vary", ""),
	S("via", ""),
	S("www-authenticate", ""),
};

#define STATIC_COUNT ((uint32_t)ARRAY_LEN(static_table))
_Static_assert(ARRAY_LEN(static_table) == 61, "RFC 7541 Appendix A has 61 entries");

/* ---- the dynamic table ---- */

void hpack_dec_init(struct hpack_dec *d, uint32_t settings_max)
{
	if (settings_max > HPACK_TABLE_BYTES)
		settings_max = HPACK_TABLE_BYTES;
	d->settings_max = settings_max;
	d->max_size = settings_max;
	d->size = 0;
	d->count = 0;
	d->newest = 0;
	d->head = 0;
}

static uint32_t slot_of(const struct hpack_dec *d, uint32_t age)
{
	return (d->newest + age) % HPACK_MAX_ENTRIES;
}

static uint32_t entry_size(const struct hpack_dec *d, uint32_t slot)
{
	return (uint32_t)d->ent[slot].name_len + d->ent[slot].value_len + ENTRY_OVERHEAD;
}

static void table_evict_to(struct hpack_dec *d, uint32_t limit)
{
	while (d->size > limit) {
		ASSERT(d->count > 0);
		d->size -= entry_size(d, slot_of(d, d->count - 1u));
		d->count--;
	}
}

static void ring_write(struct hpack_dec *d, const uint8_t *src, size_t len)
{
	size_t first = HPACK_TABLE_BYTES - d->head;

	if (first > len)
		first = len;
	memcpy(d->storage + d->head, src, first);
	memcpy(d->storage, src + first, len - first);
	d->head = (uint16_t)((d->head + len) % HPACK_TABLE_BYTES);
}

/* RFC 7541 4.4: evict from the old end until the entry fits; an entry larger than the whole
 * table empties it and is not added. Neither source may point into storage. */
static void table_insert(struct hpack_dec *d, const uint8_t *name, size_t name_len,
			 const uint8_t *value, size_t value_len)
{
	size_t need = name_len + value_len + ENTRY_OVERHEAD;

	if (need > d->max_size) {
		table_evict_to(d, 0);
		return;
	}
	table_evict_to(d, d->max_size - (uint32_t)need);
	/* Now size + need <= max_size <= HPACK_TABLE_BYTES, and each entry costs at least 32,
	 * so the bytes written here cannot reach those of the oldest entry still kept, and
	 * count stays within HPACK_MAX_ENTRIES. */
	d->newest = (uint16_t)slot_of(d, HPACK_MAX_ENTRIES - 1);
	d->ent[d->newest].off = d->head;
	d->ent[d->newest].name_len = (uint16_t)name_len;
	d->ent[d->newest].value_len = (uint16_t)value_len;
	ring_write(d, name, name_len);
	ring_write(d, value, value_len);
	d->count++;
	d->size += (uint32_t)need;
	ASSERT(d->count <= HPACK_MAX_ENTRIES && d->size <= d->max_size);
}

/* Returns len contiguous bytes of storage from off: in place, or copied to buf when they wrap
 * or when copy is set. */
static const uint8_t *ring_read(struct hpack_dec *d, uint32_t off, size_t len, uint8_t *buf,
				bool copy)
{
	size_t first = HPACK_TABLE_BYTES - off;

	if (first >= len && !copy)
		return d->storage + off;
	if (first > len)
		first = len;
	memcpy(buf, d->storage + off, first);
	memcpy(buf + first, d->storage, len - first);
	return buf;
}

struct field {
	const uint8_t *name;
	size_t name_len;
	const uint8_t *value;
	size_t value_len;
};

/* Looks up index (RFC 7541 2.3.3: static, then dynamic) for its name, and its value when
 * want_value. copy_name puts a dynamic entry's name into name_buf, for an insertion that may
 * evict that entry. */
static int table_get(struct hpack_dec *d, uint32_t index, bool want_value, bool copy_name,
		     struct field *f)
{
	uint32_t slot, off;

	if (index == 0 || index > STATIC_COUNT + d->count)
		return HPACK_ERR_COMPRESSION;
	if (index <= STATIC_COUNT) {
		const struct static_entry *s = &static_table[index - 1];

		f->name = (const uint8_t *)s->name;
		f->name_len = s->name_len;
		f->value = (const uint8_t *)s->value;
		f->value_len = s->value_len;
		return 0;
	}
	slot = slot_of(d, index - STATIC_COUNT - 1);
	off = d->ent[slot].off;
	f->name_len = d->ent[slot].name_len;
	f->name = ring_read(d, off, f->name_len, d->name_buf, copy_name);
	if (want_value) {
		f->value_len = d->ent[slot].value_len;
		off = (uint32_t)((off + f->name_len) % HPACK_TABLE_BYTES);
		f->value = ring_read(d, off, f->value_len, d->value_buf, false);
	}
	return 0;
}

/* ---- primitives (RFC 7541 5) ---- */

/* Reads an integer whose first octet (at *pp < end) holds `prefix` bits of it. */
static int read_int(const uint8_t **pp, const uint8_t *end, unsigned prefix, uint32_t *out)
{
	const uint8_t *p = *pp;
	uint32_t mask = (1u << prefix) - 1;
	uint64_t v = *p++ & mask;

	if (v == mask) {
		unsigned shift = 0;
		uint8_t b;

		do {
			/* past 5 continuation octets the value is over INT_MAX_VALUE or padded with
			 * zero groups; either way we refuse it */
			if (p == end || shift > 28)
				return HPACK_ERR_COMPRESSION;
			b = *p++;
			v += (uint64_t)(b & 0x7f) << shift;
			if (v > INT_MAX_VALUE)
				return HPACK_ERR_COMPRESSION;
			shift += 7;
		} while (b & 0x80);
	}
	*pp = p;
	*out = (uint32_t)v;
	return 0;
}

/* Reads a string literal; a Huffman-coded one is decoded into buf. */
static int read_string(const uint8_t **pp, const uint8_t *end, uint8_t *buf,
		       const uint8_t **str, size_t *len)
{
	bool huffman;
	uint32_t n;
	int rc;

	if (*pp == end)
		return HPACK_ERR_COMPRESSION;
	huffman = (**pp & 0x80) != 0;
	rc = read_int(pp, end, 7, &n);
	if (rc < 0)
		return rc;
	if ((size_t)(end - *pp) < n)
		return HPACK_ERR_COMPRESSION;
	if (huffman) {
		rc = hpack_huffman_decode(*pp, n, buf, HPACK_MAX_FIELD_BYTES, len);
		if (rc < 0)
			return rc;
		*str = buf;
	} else {
		if (n > HPACK_MAX_FIELD_BYTES)
			return HPACK_ERR_TOO_BIG;
		*str = *pp;
		*len = n;
	}
	*pp += n;
	return 0;
}

/* ---- header blocks (RFC 7541 6) ---- */

/* A literal field (6.2): index_bits is the prefix of its name index, 0 meaning a new name. */
static int read_literal(struct hpack_dec *d, const uint8_t **pp, const uint8_t *end,
			unsigned index_bits, bool indexing, struct field *f)
{
	uint32_t index;
	int rc;

	rc = read_int(pp, end, index_bits, &index);
	if (rc < 0)
		return rc;
	if (index == 0)
		rc = read_string(pp, end, d->name_buf, &f->name, &f->name_len);
	else
		rc = table_get(d, index, false, indexing, f);
	if (rc < 0)
		return rc;
	rc = read_string(pp, end, d->value_buf, &f->value, &f->value_len);
	if (rc < 0)
		return rc;
	if (indexing)
		table_insert(d, f->name, f->name_len, f->value, f->value_len);
	return 0;
}

int hpack_decode(struct hpack_dec *d, const uint8_t *block, size_t len, hpack_field_fn fn,
		 void *ctx)
{
	const uint8_t *p = block, *end;
	bool at_start = true;
	struct field f;
	uint32_t v;
	int rc;

	/* an empty list; block may be NULL then, and NULL + 0 is not valid C */
	if (len == 0)
		return 0;
	end = block + len;
	while (p < end) {
		uint8_t b = *p;

		if (b & 0x80) {
			rc = read_int(&p, end, 7, &v);
			if (rc == 0)
				rc = table_get(d, v, true, false, &f);
		} else if (b & 0x40) {
			rc = read_literal(d, &p, end, 6, true, &f);
		} else if (b & 0x20) {
			/* 6.3 and 4.2: only before the first field, never above what we
			 * advertised */
			if (!at_start)
				return HPACK_ERR_COMPRESSION;
			rc = read_int(&p, end, 5, &v);
			if (rc < 0)
				return rc;
			if (v > d->settings_max)
				return HPACK_ERR_COMPRESSION;
			d->max_size = v;
			table_evict_to(d, v);
			continue;
		} else {
			/* without indexing (0000) and never indexed (0001) decode alike; the
			 * difference matters only to an intermediary re-encoding the field */
			rc = read_literal(d, &p, end, 4, false, &f);
		}
		if (rc < 0)
			return rc;
		at_start = false;
		rc = fn(ctx, (const char *)f.name, f.name_len, (const char *)f.value, f.value_len);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- encoder ---- */

static size_t int_len(unsigned prefix, size_t v)
{
	size_t mask = ((size_t)1 << prefix) - 1, n = 1;

	if (v < mask)
		return 1;
	for (v -= mask; v >= 0x80; v >>= 7)
		n++;
	return n + 1;
}

static uint8_t *put_int(uint8_t *p, uint8_t flags, unsigned prefix, size_t v)
{
	size_t mask = ((size_t)1 << prefix) - 1;

	if (v < mask) {
		*p++ = (uint8_t)(flags | v);
		return p;
	}
	*p++ = (uint8_t)(flags | mask);
	for (v -= mask; v >= 0x80; v >>= 7)
		*p++ = (uint8_t)(0x80 | (v & 0x7f));
	*p++ = (uint8_t)v;
	return p;
}

static uint8_t *put_string(uint8_t *p, const char *s, size_t len)
{
	p = put_int(p, 0x00, 7, len);
	if (len > 0)  /* s may be NULL then */
		memcpy(p, s, len);
	return p + len;
}

int hpack_encode(struct buf *out, const char *name, size_t name_len, const char *value,
		 size_t value_len)
{
	size_t room = out->cap - out->len, need;
	uint32_t name_index = 0;
	uint8_t *p = out->data + out->len;

	for (uint32_t i = 0; i < STATIC_COUNT; i++) {
		const struct static_entry *s = &static_table[i];

		if (s->name_len != name_len || memcmp(s->name, name, name_len) != 0)
			continue;
		if (s->value_len == value_len &&
		    (value_len == 0 || memcmp(s->value, value, value_len) == 0)) {
			if (room < int_len(7, i + 1))
				return ERR_LIMIT;
			out->len += (size_t)(put_int(p, 0x80, 7, i + 1) - p);
			return 0;
		}
		if (name_index == 0)
			name_index = i + 1;
	}
	/* checked apart first, so that the sum below cannot wrap */
	if (name_len > room || value_len > room)
		return ERR_LIMIT;
	need = int_len(4, name_index) + int_len(7, value_len) + value_len;
	if (name_index == 0)
		need += int_len(7, name_len) + name_len;
	if (need > room)
		return ERR_LIMIT;
	p = put_int(p, 0x00, 4, name_index);
	if (name_index == 0)
		p = put_string(p, name, name_len);
	p = put_string(p, value, value_len);
	out->len += need;
	return 0;
}
