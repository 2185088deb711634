/* hpack.h: HPACK (RFC 7541) header compression for HTTP/2.
 *
 * Decoder: complete (static table, dynamic table with size updates, every literal form,
 * Huffman). It decodes one whole header block at a time (the h2 layer gathers HEADERS and
 * CONTINUATION frames into a bounded buffer first), and keeps its dynamic table in a fixed
 * array inside struct hpack_dec: no allocation. Decoded names and values are handed to a
 * callback and live only for the duration of that call.
 * Encoder: static-table indexes and literals without indexing (never touches its own dynamic
 * table), enough for a server or client that sends few headers. */
#ifndef AGENTIC_HPACK_H
#define AGENTIC_HPACK_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* HPACK_TABLE_BYTES and HPACK_MAX_FIELD_BYTES are in base/limits.h. */

/* Codes in ERR_RANGE_HPACK (base.h); err_str() gives their text. */
#define HPACK_ERR_COMPRESSION (ERR_RANGE_HPACK - 1) /* malformed block: COMPRESSION_ERROR */
#define HPACK_ERR_TOO_BIG (ERR_RANGE_HPACK - 2)     /* a field over HPACK_MAX_FIELD_BYTES */

/* Returns 0 to go on; any negative value stops decoding and is returned by hpack_decode. */
typedef int (*hpack_field_fn)(void *ctx, const char *name, size_t name_len,
			      const char *value, size_t value_len);

/* An entry costs its name and value plus 32 octets (RFC 7541 4.1), so a table of
 * HPACK_TABLE_BYTES holds at most this many entries. */
#define HPACK_MAX_ENTRIES (HPACK_TABLE_BYTES / 32)

/* sizeof(struct hpack_dec) is 37652 bytes on x86-64: the table storage (4 KiB), two scratch
 * strings (2 x 16 KiB) and the entry ring (128 x 6 bytes). Embed it in the connection; it needs
 * no other memory. */
struct hpack_dec {
	/* dynamic table: a ring of entries over `storage` (name then value, back to back) */
	uint8_t storage[HPACK_TABLE_BYTES];
	uint32_t max_size;      /* current limit set by the encoder's size updates */
	uint32_t settings_max;  /* the most it may set: what we advertised */
	/* Implementation-private below. Entry bytes wrap around the end of `storage`; ent[] is a
	 * ring too, ent[newest] being dynamic index 1 (RFC 7541 2.3.3). */
	uint32_t size;          /* sum of the entries' sizes, name + value + 32 each */
	uint16_t count;         /* entries in the table */
	uint16_t newest;        /* slot in ent[] of the most recent entry */
	uint16_t head;          /* offset in storage where the next entry's bytes go */
	struct {
		uint16_t off;   /* offset of the name in storage; the value follows it */
		uint16_t name_len;
		uint16_t value_len;
	} ent[HPACK_MAX_ENTRIES];
	/* Where a name or value is made contiguous when it was Huffman-coded or wraps in storage,
	 * and where an indexed name is kept while inserting may evict its entry. */
	uint8_t name_buf[HPACK_MAX_FIELD_BYTES];
	uint8_t value_buf[HPACK_MAX_FIELD_BYTES];
};

/* settings_max is what we advertise as SETTINGS_HEADER_TABLE_SIZE, cut to HPACK_TABLE_BYTES;
 * the table starts empty with that limit. */
void hpack_dec_init(struct hpack_dec *d, uint32_t settings_max);
/* Decodes one complete header block, calling fn for each field in order. Returns 0,
 * HPACK_ERR_COMPRESSION, HPACK_ERR_TOO_BIG, or what fn returned. After an error the
 * decoder's table state is undefined: the connection must end (COMPRESSION_ERROR). */
int hpack_decode(struct hpack_dec *d, const uint8_t *block, size_t len, hpack_field_fn fn,
		 void *ctx);

/* Appends one header field to out: an indexed field when name and value match the static
 * table, else a literal without indexing (static name index when one matches), no Huffman.
 * ERR_LIMIT when out is full (out unchanged). */
int hpack_encode(struct buf *out, const char *name, size_t name_len, const char *value,
		 size_t value_len);

/* RFC 7541 Appendix B: the Huffman code of each octet and of EOS (256), LSB-aligned. The
 * decoder works from it; tests use it to check the table and to Huffman-encode. */
struct hpack_huffman_sym {
	uint32_t code;
	uint8_t bits;
};
extern const struct hpack_huffman_sym hpack_huffman_code[257];

/* Decodes a Huffman-coded string into out (at most cap octets) and sets *out_len. Returns 0,
 * HPACK_ERR_COMPRESSION (EOS in the string, padding over 7 bits or not all ones) or
 * HPACK_ERR_TOO_BIG (the result exceeds cap). */
int hpack_huffman_decode(const uint8_t *in, size_t len, uint8_t *out, size_t cap,
			 size_t *out_len);

#endif
