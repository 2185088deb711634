/* broker_table.c: the egress broker's state and its table of connection slots, taken from the
 * daemon's region at start; the credit both ways and the rate's token bucket (pure). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "egress/broker_slot.h"

struct broker_state bst;
struct json_token broker_toks[POLICY_TOKENS];

static size_t r64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

size_t egress_storage_bytes(const struct config *c)
{
	return r64((size_t)c->egress_max_connections * sizeof(struct eslot)) +
	       (size_t)c->egress_max_connections * (EGRESS_WINDOW + EGRESS_CHUNK) +
	       r64((size_t)c->max_sandboxes * sizeof(struct bucket)) +
	       r64((size_t)c->max_sandboxes * sizeof(struct egress_sb));
}

bool broker_table_init(void *storage, size_t len)
{
	uint8_t *p = storage;

	bst.nslots = bst.cfg->egress_max_connections;
	bst.nbuckets = bst.cfg->max_sandboxes;
	if (len < egress_storage_bytes(bst.cfg)) {
		bst.nslots = bst.nbuckets = 0;
		return false;
	}
	bst.slots = (struct eslot *)p;
	p += r64((size_t)bst.nslots * sizeof(struct eslot));
	for (uint32_t i = 0; i < bst.nslots; i++) {
		bst.slots[i].up = p;
		p += EGRESS_WINDOW;
		bst.slots[i].down = p;
		p += EGRESS_CHUNK;
		bst.slots[i].data = bst.slots[i].ctl = bst.slots[i].pidfd = -1;
	}
	bst.buckets = (struct bucket *)p;
	p += r64((size_t)bst.nbuckets * sizeof(struct bucket));
	bst.sbs = (struct egress_sb *)p;
	for (uint32_t i = 0; i < bst.nbuckets; i++)
		bst.sbs[i].lfd = -1;
	return true;
}

struct egress_sb *broker_sb(const struct sandbox *sb)
{
	uint32_t i = sandbox_index(sb);
	struct egress_sb *e;

	ASSERT(i < bst.nbuckets);
	e = &bst.sbs[i];
	if (e->gen != sb->gen) {
		memset(e, 0, sizeof(*e));
		e->gen = sb->gen;
		e->lfd = -1;
	}
	return e;
}

const struct egress_sb *egress_of(const struct sandbox *sb)
{
	static const struct egress_sb none = { .lfd = -1 };

	if (!bst.sbs || bst.sbs[sandbox_index(sb)].gen != sb->gen)
		return &none;
	return &bst.sbs[sandbox_index(sb)];
}

/* ---- credit (pure) ---- */

bool egress_credit_up_fits(const struct egress_credit *c, size_t n)
{
	return c->up_len + n <= EGRESS_WINDOW && c->up_in + n - c->up_consumed <= EGRESS_WINDOW;
}

bool egress_credit_report_due(const struct egress_credit *c)
{
	return c->up_consumed - c->up_reported >= EGRESS_WINDOW / 2;
}

uint32_t egress_credit_down_room(const struct egress_credit *c)
{
	uint64_t inflight = c->down_sent - c->down_acked;

	if (inflight >= EGRESS_WINDOW)
		return 0;
	return EGRESS_WINDOW - inflight < EGRESS_CHUNK ? (uint32_t)(EGRESS_WINDOW - inflight)
						       : EGRESS_CHUNK;
}

bool egress_credit_down_ack(struct egress_credit *c, uint64_t consumed)
{
	/* a chunk without a count (0) or with an older one says nothing new */
	if (consumed > c->down_sent)
		return false;
	if (consumed > c->down_acked)
		c->down_acked = consumed;
	return true;
}

/* ---- the rate limit's token bucket (pure) ---- */

bool egress_bucket_take(struct egress_bucket *b, uint32_t rate, int64_t now)
{
	uint64_t cap = (uint64_t)rate * 1000;

	if (!rate)
		return false;
	if (!b->at) {
		b->at = now;
		b->milli = cap;
	}
	/* rate a minute: rate * 1000 milli-tokens in 60000 ms; the time that did not make a
	 * whole milli-token yet stays counted (at moves by what was turned into tokens only) */
	if (now > b->at) {
		uint64_t add = (uint64_t)(now - b->at) * rate / 60;

		b->milli += add;
		b->at += (int64_t)(add * 60 / rate);
	}
	if (b->milli >= cap) {
		b->milli = cap;
		b->at = now;
	}
	if (b->milli < 1000)
		return false;
	b->milli -= 1000;
	ASSERT(b->milli < cap);
	return true;
}
