/* replay.c: what the init sent agenticd and agenticd has not yet acknowledged writing to the
 * transcript (OutputAck, agent.proto). A ring of records in send order; an ack frees its head,
 * a resume sends it all again. No allocation: the ring lives in the channel's storage. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "base/base.h"
#include "init/init.h"

/* A record: this header, the command id, the data, padded to REC_ALIGN. A record that would
 * cross the ring's end is preceded by a pad record filling the rest, so none ever wraps. */
struct rec {
	uint8_t kind;             /* enum init_out_kind, or 0 for a pad */
	uint8_t id_len;
	uint8_t success, unused;
	uint32_t len;             /* data bytes (pad: the whole pad record's size) */
	uint64_t off;             /* output: stream offset; result: seq */
	int64_t duration_us;      /* result: its duration_ms is this / 1000 */
	int32_t exit_code;
	uint32_t error_len;       /* a result's error text, stored after the id in place of data */
};
/* Records start at multiples of the header's size, so the room left before the ring's end is
 * never too small for a pad's header. */
#define REC_ALIGN 32u
_Static_assert(sizeof(struct rec) == REC_ALIGN, "a header is one alignment unit");
_Static_assert(LIMIT_INIT_REPLAY_BYTES % REC_ALIGN == 0, "a pad header always fits");

static size_t rec_size(size_t id_len, size_t len)
{
	return (sizeof(struct rec) + id_len + len + REC_ALIGN - 1) & ~(size_t)(REC_ALIGN - 1);
}

static struct rec *at(const struct init_replay *r, uint64_t pos)
{
	return (struct rec *)(void *)(r->mem + pos % LIMIT_INIT_REPLAY_BYTES);
}

void init_replay_setup(struct init_replay *r, void *mem)
{
	memset(r, 0, sizeof(*r));
	r->mem = mem;
}

/* The bytes a record of this size needs at the tail, a pad included. */
static size_t need(const struct init_replay *r, size_t size)
{
	size_t phys = (size_t)(r->tail % LIMIT_INIT_REPLAY_BYTES);

	return phys + size > LIMIT_INIT_REPLAY_BYTES ? LIMIT_INIT_REPLAY_BYTES - phys + size : size;
}

static size_t out_size(const struct init_out *o)
{
	size_t id = strnlen(o->command_id, LIMIT_INIT_COMMAND_ID);

	return rec_size(id, o->kind == INIT_OUT_RESULT
			    ? strnlen(o->error ? o->error : "", INIT_ERROR_BYTES - 1) : o->len);
}

int init_replay_room(const struct init_replay *r, const struct init_out *o)
{
	return need(r, out_size(o)) <= LIMIT_INIT_REPLAY_BYTES - (r->tail - r->head);
}

int init_replay_push(struct init_replay *r, const struct init_out *o, uint64_t off)
{
	size_t size = out_size(o), phys = (size_t)(r->tail % LIMIT_INIT_REPLAY_BYTES);
	size_t id = strnlen(o->command_id, LIMIT_INIT_COMMAND_ID);
	const char *err = o->kind == INIT_OUT_RESULT && o->error ? o->error : "";
	bool caught_up = r->send == r->tail;
	struct rec *h;

	if (!init_replay_room(r, o))
		return -EAGAIN;
	if (phys + size > LIMIT_INIT_REPLAY_BYTES) {
		h = at(r, r->tail);
		memset(h, 0, sizeof(*h));
		h->len = (uint32_t)(LIMIT_INIT_REPLAY_BYTES - phys);
		r->tail += h->len;
	}
	h = at(r, r->tail);
	memset(h, 0, sizeof(*h));
	h->kind = (uint8_t)o->kind;
	h->id_len = (uint8_t)id;
	h->off = off;
	memcpy(h + 1, o->command_id, id);
	if (o->kind == INIT_OUT_RESULT) {
		h->exit_code = o->exit_code;
		h->duration_us = o->duration_us;
		h->success = (uint8_t)o->success;
		h->error_len = (uint32_t)strnlen(err, INIT_ERROR_BYTES - 1);
		memcpy((uint8_t *)(h + 1) + id, err, h->error_len);
	} else {
		h->len = (uint32_t)o->len;
		memcpy((uint8_t *)(h + 1) + id, o->data, o->len);
	}
	r->tail += size;
	/* a pushed record went out just before the push: the send cursor follows the tail
	 * unless a resume left records to send again before it */
	if (caught_up)
		r->send = r->tail;
	return 0;
}

/* Moves pos past pad records. */
static uint64_t skip_pads(const struct init_replay *r, uint64_t pos)
{
	while (pos < r->tail && at(r, pos)->kind == 0)
		pos += at(r, pos)->len;
	return pos;
}

static size_t size_of(const struct rec *h)
{
	return rec_size(h->id_len, h->kind == INIT_OUT_RESULT ? h->error_len : h->len);
}

void init_replay_ack(struct init_replay *r, const uint64_t stream_next[2], uint64_t results)
{
	for (;;) {
		const struct rec *h;
		int acked;

		r->head = skip_pads(r, r->head);
		if (r->head >= r->tail)
			break;
		h = at(r, r->head);
		acked = h->kind == INIT_OUT_RESULT
			? h->off <= results
			: h->off + h->len <= stream_next[h->kind == INIT_OUT_STDERR];
		if (!acked)
			break;
		r->head += size_of(h);
	}
	if (r->send < r->head)
		r->send = r->head;
}

void init_replay_rewind(struct init_replay *r)
{
	r->send = r->head;
}

int init_replay_next(struct init_replay *r, struct init_out *o, uint64_t *off)
{
	const struct rec *h;
	const char *p;

	r->send = skip_pads(r, r->send);
	if (r->send >= r->tail)
		return 0;
	h = at(r, r->send);
	p = (const char *)(h + 1);
	memset(o, 0, sizeof(*o));
	memcpy(r->id, p, h->id_len);
	r->id[h->id_len] = '\0';
	o->kind = (enum init_out_kind)h->kind;
	o->command_id = r->id;
	*off = h->off;
	if (h->kind == INIT_OUT_RESULT) {
		memcpy(r->error, p + h->id_len, h->error_len);
		r->error[h->error_len] = '\0';
		o->exit_code = h->exit_code;
		o->duration_us = h->duration_us;
		o->duration_ms = h->duration_us / 1000;
		o->success = h->success;
		o->error = r->error;
	} else {
		o->data = (const uint8_t *)p + h->id_len;
		o->len = h->len;
	}
	return 1;
}

void init_replay_sent(struct init_replay *r)
{
	r->send += size_of(at(r, r->send));
}
