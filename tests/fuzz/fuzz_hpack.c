/* fuzz_hpack.c: decodes arbitrary header blocks through one decoder, checks the dynamic table's
 * invariants after each block, and checks that what was decoded survives hpack_encode and a
 * second decode unchanged.
 *
 * Input: one config octet, then the blocks. Config bits 0-3 choose SETTINGS_HEADER_TABLE_SIZE
 * (n * 256, 15 meaning 4096); bit 7 set means the rest is one block, else each block is a
 * 2-octet big-endian length and that many octets (the last one cut to what is left). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h2/hpack.h"

#define RECORD_BYTES (256u * 1024u)
#define MAX_RECORDED 4096

struct record {
	uint8_t bytes[RECORD_BYTES];   /* names and values, back to back */
	size_t used;
	size_t off[MAX_RECORDED], name_len[MAX_RECORDED], value_len[MAX_RECORDED];
	size_t n;
	size_t next;                   /* the field the second decode must match next */
	int overflow;                  /* too much to record or re-encode: skip the check */
	struct buf out;
	uint8_t out_storage[RECORD_BYTES + 64u * 1024u];
};

static struct record rec;
static struct hpack_dec dec, check;

static int on_field(void *ctx, const char *name, size_t name_len, const char *value,
		    size_t value_len)
{
	struct record *r = ctx;

	if (name_len > HPACK_MAX_FIELD_BYTES || value_len > HPACK_MAX_FIELD_BYTES)
		abort();
	if (r->overflow)
		return 0;
	if (r->n == MAX_RECORDED || RECORD_BYTES - r->used < name_len + value_len ||
	    hpack_encode(&r->out, name, name_len, value, value_len) != 0) {
		r->overflow = 1;
		return 0;
	}
	r->off[r->n] = r->used;
	r->name_len[r->n] = name_len;
	r->value_len[r->n] = value_len;
	memcpy(r->bytes + r->used, name, name_len);
	memcpy(r->bytes + r->used + name_len, value, value_len);
	r->used += name_len + value_len;
	r->n++;
	return 0;
}

static int on_again(void *ctx, const char *name, size_t name_len, const char *value,
		    size_t value_len)
{
	struct record *r = ctx;
	size_t i = r->next++;

	if (i >= r->n || name_len != r->name_len[i] || value_len != r->value_len[i] ||
	    memcmp(name, r->bytes + r->off[i], name_len) != 0 ||
	    memcmp(value, r->bytes + r->off[i] + name_len, value_len) != 0)
		abort();
	return 0;
}

static void check_table(const struct hpack_dec *d)
{
	uint32_t sum = 0;

	if (d->size > d->max_size || d->max_size > d->settings_max ||
	    d->settings_max > HPACK_TABLE_BYTES || d->count > HPACK_MAX_ENTRIES)
		abort();
	for (uint32_t age = 0; age < d->count; age++) {
		uint32_t slot = (d->newest + age) % HPACK_MAX_ENTRIES;
		uint32_t len = (uint32_t)d->ent[slot].name_len + d->ent[slot].value_len;

		/* each entry's bytes end where the next newer one's begin */
		if (age > 0) {
			uint32_t newer = (d->newest + age - 1) % HPACK_MAX_ENTRIES;

			if ((d->ent[slot].off + len) % HPACK_TABLE_BYTES != d->ent[newer].off)
				abort();
		}
		sum += len + 32;
	}
	if (sum != d->size)
		abort();
}

/* Returns what hpack_decode returned: after an error the connection would end. */
static int run_block(const uint8_t *block, size_t len)
{
	int rc;

	rec.used = 0;
	rec.n = 0;
	rec.next = 0;
	rec.overflow = 0;
	buf_init(&rec.out, rec.out_storage, sizeof(rec.out_storage));
	rc = hpack_decode(&dec, block, len, on_field, &rec);
	if (rc != 0 && rc != HPACK_ERR_COMPRESSION && rc != HPACK_ERR_TOO_BIG)
		abort();
	if (rc != 0)
		return rc;
	check_table(&dec);
	if (rec.overflow)
		return 0;
	hpack_dec_init(&check, 0);
	if (hpack_decode(&check, rec.out.data, rec.out.len, on_again, &rec) != 0 ||
	    rec.next != rec.n || check.count != 0)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t table;
	size_t len;

	if (size < 1)
		return 0;
	table = (data[0] & 0x0f) == 0x0f ? 4096u : (data[0] & 0x0fu) * 256u;
	hpack_dec_init(&dec, table);
	if (data[0] & 0x80) {
		run_block(data + 1, size - 1);
		return 0;
	}
	data++;
	size--;
	while (size >= 2) {
		len = (size_t)data[0] << 8 | data[1];
		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		if (run_block(data, len) != 0)
			return 0;
		data += len;
		size -= len;
	}
	return 0;
}
