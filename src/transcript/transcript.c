/* transcript.c: the transcript state of every sandbox slot (struct transcript_sb): its table
 * (storage agenticd.c takes at start), the accessor, a slot's reset when it is reused (seen by
 * its gen: the module resets its own entry, the sandbox table never calls up; runlog_abandon
 * forgets it at once), the budget other modules owe, and the writes they ask for (transcript_op: the egress
 * audit's charge, the output-ack stream's state as agent_outack.c drives it). */
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "sandbox/sandbox.h"
#include "transcript/runlog.h"

static struct {
	struct transcript_sb *slots;
	uint32_t n;
	struct transcript_sb scratch; /* no table set up (a unit test): every sandbox's */
} T;

static uint32_t nstalled; /* entries with out_stalled set */

static void stalled_set(struct transcript_sb *t, bool on)
{
	if (t->out_stalled != on)
		nstalled = on ? nstalled + 1 : nstalled - 1;
	t->out_stalled = on;
}

bool transcript_any_stalled(void)
{
	return nstalled != 0;
}

void transcript_init(struct transcript_sb *slots, uint32_t n)
{
	T.slots = slots;
	T.n = slots ? n : 0;
	if (T.n)
		memset(slots, 0, sizeof(*slots) * T.n);
	nstalled = T.scratch.out_stalled; /* the scratch entry (no table) keeps its state */
}

/* The entry as the slot's next gen finds it: no run, nothing counted, its files closed. */
static void slot_reset(struct transcript_sb *t, uint32_t gen)
{
	for (int f = 0; f < RUN_FILES; f++)
		if (t->run.open && t->run.fd[f] >= 0)
			close(t->run.fd[f]);
	if (t->run.open && t->run.dirfd >= 0)
		close(t->run.dirfd);
	stalled_set(t, false);
	memset(t, 0, sizeof(*t));
	t->gen = gen;
	t->run.dirfd = -1;
	memset(t->run.fd, -1, sizeof(t->run.fd));
}

/* not inlined in this file's own callers: one copy keeps the binary small */
__attribute__((noinline)) const struct transcript_sb *transcript_of(const struct sandbox *sb)
{
	struct transcript_sb *t = &T.scratch;

	if (T.n) {
		uint32_t i = sandbox_index(sb);

		ASSERT(i < T.n);
		t = &T.slots[i];
	}
	if (t->gen != sb->gen)
		slot_reset(t, sb->gen);
	return t;
}

void runlog_abandon(struct sandbox *sb)
{
	struct transcript_sb *t = (struct transcript_sb *)transcript_of(sb);

	slot_reset(t, t->gen);
}

uint64_t transcript_owed(const struct sandbox *except)
{
	uint64_t owed = 0;

	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		const struct sandbox *sb = sandbox_slot(i);
		uint64_t budget = sandbox_transcript_budget(sb);

		if (sb != except && sb->state != SB_FREE && transcript_of(sb)->used < budget)
			owed += budget - transcript_of(sb)->used;
	}
	return owed;
}

void transcript_op(const struct transcript_sb *tc, enum transcript_op op, uint64_t a, uint64_t b)
{
	struct transcript_sb *t = (struct transcript_sb *)tc; /* the table's: not const */
	uint64_t *next;

	/* switches of four cases at most: compares, no jump table in the read-only data */
	switch (op) {
	case TR_CHARGE:
		t->used += a;
		return;
	case TR_OUT_STALL:
		stalled_set(t, true);
		t->out_retry_ms = (int64_t)a;
		return;
	case TR_OUT_TOOK:
		next = &t->out_next[a & 1];
		ASSERT(b >= *next); /* offsets only go forward */
		*next = b;
		t->out_unacked += a >> 1;
		return;
	case TR_OUT_RESULT:
		t->out_results = a;
		return;
	default:
		break;
	}
	switch (op) {
	case TR_OUT_CONNECT:
		stalled_set(t, false);
		t->out_ack_owed = t->out_resume_owed = false;
		t->out_gap_logged = false;
		return;
	case TR_OUT_ACK_OWED:
		t->out_ack_owed = a;
		return;
	case TR_OUT_ACKED:
		t->out_resume_owed = false;
		t->out_unacked = 0;
		return;
	case TR_OUT_RESUME:
		if (!t->out_resume_owed)
			t->out_epoch++;
		stalled_set(t, false);
		t->out_resume_owed = true;
		return;
	default:
		break;
	}
	if (op == TR_OUT_GAP)
		t->out_gap_logged = true;
}
