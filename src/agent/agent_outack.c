/* agent_outack.c: output acks (OutputAck, agent.proto) on a sandbox's Connect stream: what the
 * init sends again after a resume is written once, in order, as the transcript decides; a
 * failed transcript write stalls the stream until a retry (agent_tick).
 *
 * One ack at least every OUT_ACK_BYTES of the init's replay ring, and one per result. A chunk
 * takes its data plus at most OUT_RECORD_BYTES there (replay.c: a 32-byte header, a command id
 * of up to 128 bytes, 32-byte alignment), so even a stream of 1-byte writes is acked long
 * before the ring (LIMIT_INIT_REPLAY_BYTES) fills. */
#include <errno.h>

#include "agent.pb-c.h"
#include "agent/agent_slot.h"
#include "agent/exec.h"
#include "transcript/runlog.h"

/* stdio's stdout and stderr macros hide OutputAck's fields of those names; nothing below
 * writes to a stdio stream. */
#undef stdout
#undef stderr

_Static_assert(OUT_ACK_BYTES * 4 <= LIMIT_INIT_REPLAY_BYTES,
	       "acks come well before the ring fills");

/* Sends the ack (a resume when one is owed), or notes it owed while the queue is full. */
void agent_out_ack_send(struct sandbox *sb)
{
	Agentic__Sandbox__V1__OutputAck oa = AGENTIC__SANDBOX__V1__OUTPUT_ACK__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	const struct agent_sb *a = agent_slot(sb);
	int r;

	if (!a->call || !a->output_ack)
		return;
	oa.stdout = transcript_of(sb)->out_next[0];
	oa.stderr = transcript_of(sb)->out_next[1];
	oa.results = transcript_of(sb)->out_results;
	oa.resume = transcript_of(sb)->out_resume_owed;
	oa.epoch = transcript_of(sb)->out_epoch;
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_OUTPUT_ACK;
	m.output_ack = &oa;
	r = grpc_call_send(a->call, &m.base);
	if (r == -EAGAIN) {
		transcript_out_ack_owed(sb, true);
		return;
	}
	transcript_out_ack_owed(sb, false);
	if (r < 0) {
		agent_drop(sb, "cannot send an output ack");
		return;
	}
	transcript_out_acked(sb);
}

/* The init is to send again all it holds, in a new epoch: what arrives stamped with an older
 * one is dropped unread, since the resend brings it again in order. */
void agent_out_resume(struct sandbox *sb)
{
	if (!agent_slot(sb)->output_ack)
		return;
	/* a new epoch for each resume, even one that must wait for queue room: chunks sent
	 * before the init hears of it must never match */
	transcript_out_resume(sb);
	agent_out_ack_send(sb);
}

/* A transcript write failed (its error is logged and shown by the API): nothing more is
 * written until the init sends again, from what the transcript has, OUT_RETRY_MS later. The
 * workload blocks meanwhile, once the init's buffers are full: no byte is lost. */
static void out_stall(struct sandbox *sb)
{
	transcript_out_stall(sb, clock_mono_ms() + OUT_RETRY_MS);
}

void agent_tick(int64_t now)
{
	for (uint32_t i = 0; transcript_any_stalled() && i < sandbox_slots(); i++) {
		struct sandbox *sb = sandbox_slot(i);
		const struct agent_sb *a;

		if (sb->state == SB_FREE)
			continue;
		a = agent_slot(sb);
		if (!a->call || !a->ready || !transcript_of(sb)->out_stalled || now < transcript_of(sb)->out_retry_ms)
			continue;
		/* a run that could not be opened (a full disk at a container restart) is tried
		 * again first: until it is open nothing can be written */
		if (!transcript_of(sb)->run.open)
			runlog_ready(sb);
		if (transcript_of(sb)->run.open)
			agent_out_resume(sb);
		else
			out_stall(sb);
	}
}

int64_t agent_next_deadline(void)
{
	int64_t next = INT64_MAX;

	for (uint32_t i = 0; transcript_any_stalled() && i < sandbox_slots(); i++) {
		const struct sandbox *sb = sandbox_slot(i);

		if (sb->state != SB_FREE && agent_slot(sb)->call && transcript_of(sb)->out_stalled &&
		    transcript_of(sb)->out_retry_ms < next)
			next = transcript_of(sb)->out_retry_ms;
	}
	return next;
}

void agent_out_chunk(struct sandbox *sb, const Agentic__Sandbox__V1__OutputChunk *o, int s)
{
	uint64_t next, end = o->offset + o->data.len, skip;
	size_t n;

	ASSERT(s == 0 || s == 1);
	next = transcript_of(sb)->out_next[s];
	if (o->epoch != transcript_of(sb)->out_epoch || transcript_of(sb)->out_stalled || transcript_of(sb)->out_resume_owed ||
	    !o->data.len || end <= next)
		return;
	if (!transcript_of(sb)->run.open) {
		out_stall(sb);
		return;
	}
	if (o->offset > next) {
		/* Only a run begun while its init ran on (agenticd restarted and could not adopt
		 * the run) lacks the bytes before, and then nothing of it is written yet; or a
		 * cut stream's adopted run, whose metrics.json missed the last bytes dropped
		 * (acked before the restart): they count as dropped. Any other gap is a slip: the
		 * init is asked to send again rather than bytes skipped. Logged once per stream,
		 * so an init cannot flood the log. */
		if (!transcript_of(sb)->out_gap_logged)
			log_warn("transcript gap", "name=%s stream=%s bytes=%llu accepted=%d", log_q(sb->name),
				 s ? "stderr" : "stdout", (unsigned long long)(o->offset - next),
				 next == 0);
		transcript_out_gap_logged(sb);
		if (next != 0 && !runlog_skip(sb, s, o->offset - next)) {
			agent_out_resume(sb);
			return;
		}
		next = o->offset;
	}
	skip = next - o->offset;
	n = exec_output(sb, o->stream_id, s, o->data.data + skip, o->data.len - skip, true);
	transcript_out_took(sb, s, next + n, n + OUT_RECORD_BYTES);
	if (n < o->data.len - skip)
		out_stall(sb);
	else if (transcript_of(sb)->out_unacked >= OUT_ACK_BYTES)
		agent_out_ack_send(sb);
}

void agent_out_result(struct sandbox *sb, const Agentic__Sandbox__V1__CommandResult *r)
{
	if (r->epoch != transcript_of(sb)->out_epoch || transcript_of(sb)->out_stalled || transcript_of(sb)->out_resume_owed ||
	    r->seq <= transcript_of(sb)->out_results)
		return;
	if (!transcript_of(sb)->run.open ||
	    !exec_result(sb, r->command_id, r->exit_code, r->duration_ms, r->duration_us, r->error,
			 r->seq)) {
		out_stall(sb);
		return;
	}
	transcript_out_result(sb, r->seq);
	agent_out_ack_send(sb);
}
