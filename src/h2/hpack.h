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

#define HPACK_TABLE_BYTES 4096       /* SETTINGS_HEADER_TABLE_SIZE we advertise (default) */
#define HPACK_MAX_FIELD_BYTES 16384  /* one decoded name or value (after Huffman) */

#define HPACK_ERR_COMPRESSION (ERR_BASE - 100) /* malformed block: COMPRESSION_ERROR */
#define HPACK_ERR_TOO_BIG (ERR_BASE - 101)     /* a field over HPACK_MAX_FIELD_BYTES */

/* Returns 0 to go on; any negative value stops decoding and is returned by hpack_decode. */
typedef int (*hpack_field_fn)(void *ctx, const char *name, size_t name_len,
			      const char *value, size_t value_len);

struct hpack_dec {
	/* dynamic table: a ring of entries over `storage` (name then value, back to back) */
	uint8_t storage[HPACK_TABLE_BYTES];
	uint32_t max_size;      /* current limit set by the encoder's size updates */
	uint32_t settings_max;  /* the most it may set: what we advertised */
	/* ... implementation-private fields (entry offsets, counts, scratch) ... */
};

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

#endif
