/* frame.h: the frames of the upgraded exec stream (docs/API.md: "The exec stream"), shared by
 * agenticd and the CLI: an 8-byte head (the type in byte 0, three zero bytes, the payload's
 * length big-endian in bytes 4..7), then the payload. Pure: no I/O, no allocation.
 *
 * A frame_reader takes a stream of frames fed in pieces of any size: it holds a head until it
 * is whole, then says how much payload is left while the caller takes it (in pieces, as its
 * consumer has room). A frame of an unknown type is the caller's to skip. */
#ifndef AGENTIC_HTTP_FRAME_H
#define AGENTIC_HTTP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FRAME_HEAD_BYTES 8

enum frame_type {
	FRAME_STDIN = 0,   /* client to agenticd; an empty one ends stdin */
	FRAME_STDOUT = 1,
	FRAME_STDERR = 2,
	FRAME_EXIT = 3,    /* the last frame: a JSON object with exit_code (and error) */
	FRAME_RESIZE = 4,  /* client to agenticd, a tty exec's: rows, cols (16 bits BE each) */
};

/* Writes a head for a payload of len bytes. */
void frame_head_put(uint8_t head[FRAME_HEAD_BYTES], enum frame_type type, uint32_t len);
/* A whole head's type byte and payload length. */
int frame_head_type(const uint8_t head[FRAME_HEAD_BYTES]);
uint32_t frame_head_len(const uint8_t head[FRAME_HEAD_BYTES]);

struct frame_reader {
	uint8_t head[FRAME_HEAD_BYTES];
	uint8_t have;      /* head bytes so far; FRAME_HEAD_BYTES while a frame is open */
	uint32_t left;     /* payload bytes of the open frame not taken yet */
};

void frame_reader_init(struct frame_reader *r);
/* Takes head bytes from in[0..len) until the head is whole; returns how many it took (0 when
 * a frame is open already: its payload comes first). */
size_t frame_reader_head(struct frame_reader *r, const void *in, size_t len);
/* True while a frame is open: its head is whole and frame_reader_take has not closed it. */
static inline bool frame_reader_open(const struct frame_reader *r)
{
	return r->have == FRAME_HEAD_BYTES;
}
/* The open frame's type. */
static inline int frame_reader_type(const struct frame_reader *r)
{
	return r->head[0];
}
/* n (<= left) payload bytes of the open frame were taken; the frame closes once none is left
 * (an empty frame closes at take(0)). */
void frame_reader_take(struct frame_reader *r, uint32_t n);

#endif
