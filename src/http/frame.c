/* frame.c: the exec stream's frame heads, written and read (frame.h). */
#include "base/be.h"
#include "frame.h"

void frame_head_put(uint8_t head[FRAME_HEAD_BYTES], enum frame_type type, uint32_t len)
{
	head[0] = (uint8_t)type;
	head[1] = head[2] = head[3] = 0;
	be32_put(head + 4, len);
}

int frame_head_type(const uint8_t head[FRAME_HEAD_BYTES])
{
	return head[0];
}

uint32_t frame_head_len(const uint8_t head[FRAME_HEAD_BYTES])
{
	return be32_get(head + 4);
}

void frame_reader_init(struct frame_reader *r)
{
	r->have = 0;
	r->left = 0;
}

size_t frame_reader_head(struct frame_reader *r, const void *in, size_t len)
{
	const uint8_t *p = in;
	size_t n = 0;

	while (r->have < FRAME_HEAD_BYTES && n < len)
		r->head[r->have++] = p[n++];
	if (n && r->have == FRAME_HEAD_BYTES)
		r->left = frame_head_len(r->head);
	return n;
}

void frame_reader_take(struct frame_reader *r, uint32_t n)
{
	r->left -= n < r->left ? n : r->left;
	if (r->left == 0)
		r->have = 0;
}
