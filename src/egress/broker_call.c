/* broker_call.c: agenticd's half of the egress path (docs/EGRESS.md "The wire", "agenticd ↔
 * worker"): the init's Egress call, and a slot for each connection. One slot per connection:
 * the init's Egress call (or a direct connection's socket), a worker process started for it
 * with its data and control socketpairs, and the credit both ways. The slot outlives the call
 * until the worker has exited and its control socket is read out (its audit record counts in
 * the metrics), and the call may outlive the worker until what it wrote has reached the init.
 * The other broker*.c files: broker_slot.h. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "egress/broker_slot.h"

static struct eslot *slot_of(struct grpc_call *call)
{
	return grpc_call_user(call);
}

static void refuse(struct grpc_call *call, int status, const char *why)
{
	grpc_call_set_user(call, NULL);
	grpc_call_finish(call, status, why, NULL, 0);
}

/* Slot s (free, or a spare's, which keeps its worker and sockets, or, reuse, the slot of sb's
 * worker whose connection ended, which keeps them too) is sb's next connection's now: its
 * name, instance and policy as they are, a connection number. */
void broker_slot_claim(struct eslot *s, struct sandbox *sb, bool reuse)
{
	uint8_t *up = s->up, *down = s->down;
	bool keep = s->used && (s->spare || reuse);
	pid_t pid = keep ? s->pid : 0;
	int pidfd = keep ? s->pidfd : -1, d = keep ? s->data : -1, ctl = keep ? s->ctl : -1;
	uint32_t served = reuse ? s->served + 1 : 0;

	memset(s, 0, sizeof(*s));
	s->up = up;
	s->down = down;
	s->pid = pid;
	s->pidfd = pidfd;
	s->data = d;
	s->ctl = ctl;
	s->used = true;
	s->sb = sb;
	s->sb_gen = sb->gen;
	snprintf(s->name, sizeof(s->name), "%s", sb->name);
	snprintf(s->instance, sizeof(s->instance), "%s", sb->instance_id);
	snprintf(s->policy, sizeof(s->policy), "%s", sb->egress_json);
	s->conn = broker_conn_next();
	s->started_ms = clock_mono_ms();
	s->served = served;
}

/* The slot for sb's next connection: a live spare (its worker started ahead) before a free
 * one, or NULL when there is neither or sb holds egress_per_sandbox already. A slot is held
 * until its worker is reaped, after the call too: a worker still resolving or connecting does
 * not see its connection go, and one that a workload resets at once frees the init's slot and
 * stream for the next. Counted per sandbox (its armed worker too), so that one sandbox's
 * churn never holds more than egress_per_sandbox of them. */
struct eslot *broker_slot_pick(const struct sandbox *sb)
{
	struct eslot *s = NULL;
	uint32_t held = 0;

	for (uint32_t i = 0; i < bst.nslots; i++) {
		/* a spare is taken while it lives (ctl_over and the reaper unmark a dead one) */
		if (bst.slots[i].used && bst.slots[i].spare && bst.slots[i].ctl >= 0 && bst.slots[i].pid > 0 &&
		    (!s || !s->spare))
			s = &bst.slots[i];
		else if (!bst.slots[i].used && !s)
			s = &bst.slots[i];
		else if (bst.slots[i].used && !bst.slots[i].spare && bst.slots[i].sb == sb &&
			 bst.slots[i].sb_gen == sb->gen)
			held++;
	}
	return held < bst.cfg->egress_per_sandbox ? s : NULL;
}

/* A new connection of sb: a slot, a token of its rate, the run's audit, and the slot's worker
 * told its connection (data: the workload's socket for a direct connection, -1 for a call,
 * whose bytes go through the slot's data socket). */
enum take broker_conn_take(struct sandbox *sb, int data, struct eslot **out)
{
	struct eslot *s = NULL;
	int r;

	s = broker_slot_pick(sb);
	if (!s) {
		metrics_egress(1, 0, 0);
		broker_audit_refusal(sb, "busy", 0);
		return TAKE_BUSY;
	}
	/* Over rate_per_minute: refused without a worker. A worker started only to say 429 would
	 * let a sandbox that churns connections make agenticd fork and exec as fast as it can
	 * open them, whatever its rate. */
	if (!broker_rate_take(sb)) {
		metrics_egress(1, 0, 0);
		broker_audit_refusal(sb, "rate_limited", 429);
		return TAKE_RATE;
	}
	/* before the slot is taken: a run that cannot be audited in costs no spare */
	if ((r = broker_audit_open(sb)) < 0) {
		log_warn("egress connection not audited, refused", "name=%s error=%s",
			 log_q(sb->name), log_q(err_str(r)));
		metrics_egress(1, 0, 0);
		return TAKE_AUDIT;
	}
	close(r);
	broker_slot_claim(s, sb, false);
	bst.egress_used = true;
	r = broker_worker_start(s, data, false);
	if (r != 0) {
		log_warn("egress worker not started", "name=%s error=%s", log_q(sb->name),
			 log_q(err_str(r)));
		broker_worker_failed_line(s);
		if (s->pid > 0) {
			/* a spare's: it goes with its socket, and is reaped as any worker */
			broker_close_data(s);
			broker_close_ctl(s);
		} else {
			s->used = false;
		}
		return TAKE_START;
	}
	/* The next connection's worker is started when a connection ends, or SPARE_DEFER_MS
	 * after this take (egress_tick): a spare's fork and exec take a core for half a
	 * millisecond, and started at once it fell on this connection's own TLS handshake, when
	 * the workload, the worker and the upstream each want a core (a host of two has two). Two
	 * are kept, so a second connection meanwhile still finds one. */
	if (!bst.spare_wanted || bst.spare_defer_until < clock_mono_ms())
		bst.spare_defer_until = clock_mono_ms() + SPARE_DEFER_MS;
	bst.spare_wanted = true;
	*out = s;
	return TAKE_OK;
}

const char broker_answer_429[] = "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\n"
				 "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n"
				 "rate_limited\n";
const size_t broker_answer_429_len = sizeof(broker_answer_429) - 1;

/* Answers the init's call with 429 (rate_limited) and ends it. */
static void rate_refuse(struct grpc_call *call)
{
	Agentic__Sandbox__V1__EgressChunk m = AGENTIC__SANDBOX__V1__EGRESS_CHUNK__INIT;

	m.data.data = (uint8_t *)broker_answer_429;
	m.data.len = sizeof(broker_answer_429) - 1;
	m.eof = true;
	if (grpc_call_send(call, &m.base) != 0) {
		refuse(call, GRPC_RESOURCE_EXHAUSTED, "no message buffer for the egress call");
		return;
	}
	refuse(call, GRPC_OK, NULL);
}

void egress_call_start(struct grpc_call *call, bool init_ok)
{
	const struct grpc_peer *p = grpc_call_peer(call);
	struct sandbox *sb = p->slot < 0 ? NULL : sandbox_slot((uint32_t)p->slot);
	struct eslot *s = NULL;

	grpc_call_set_user(call, NULL);
	/* the caller must be the registered init of a ready sandbox, that asked for egress */
	if (!sb || sb->state != SB_READY || sb->gen != p->tag || sb->uid != p->uid ||
	    lifecycle_going(sb) || !init_ok) {
		refuse(call, GRPC_PERMISSION_DENIED, "the caller is no registered init with egress");
		return;
	}
	if (bst.stopping) {
		refuse(call, GRPC_UNAVAILABLE, "agenticd is stopping");
		return;
	}
	if (!sb->egress_json[0]) {
		refuse(call, GRPC_FAILED_PRECONDITION, "egress is off for this sandbox");
		return;
	}
	if (!transcript_of(sb)->run.open) {
		refuse(call, GRPC_FAILED_PRECONDITION, "the sandbox has no open run to audit in");
		return;
	}
	switch (broker_conn_take(sb, -1, &s)) {
	case TAKE_OK:
		break;
	case TAKE_BUSY:
		refuse(call, GRPC_RESOURCE_EXHAUSTED, "no egress connection free");
		return;
	case TAKE_RATE:
		rate_refuse(call);
		return;
	case TAKE_AUDIT:
		refuse(call, GRPC_UNAVAILABLE, "the run's egress audit cannot be opened");
		return;
	case TAKE_START:
		refuse(call, GRPC_UNAVAILABLE, "the egress worker could not start");
		return;
	}
	s->call = call;
	grpc_call_set_user(call, s);
	broker_step(s); /* the data socket watched from now on */
	grpc_call_flush(call);
	log_debug("egress connection", "name=%s conn=%llu", log_q(s->name),
		  (unsigned long long)s->conn);
}

void egress_call_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Sandbox__V1__EgressChunk *m = (const void *)msg;
	struct eslot *s = slot_of(call);

	if (!s)
		return;
	if (!egress_credit_down_ack(&s->cr, m->consumed)) {
		broker_call_end(s, GRPC_INVALID_ARGUMENT, "consumed out of range");
		return;
	}
	if (m->data.len) {
		if (s->up_eof_in || m->data.len > EGRESS_CHUNK ||
		    !egress_credit_up_fits(&s->cr, m->data.len)) {
			broker_call_end(s, GRPC_RESOURCE_EXHAUSTED, "over the egress window");
			return;
		}
		s->cr.up_in += m->data.len;
		if (s->up_dead) {
			/* nobody reads them any more: counted consumed, so the init's credit stays */
			s->cr.up_consumed += m->data.len;
		} else {
			if (s->cr.up_off + s->cr.up_len + m->data.len > EGRESS_WINDOW) {
				memmove(s->up, s->up + s->cr.up_off, s->cr.up_len);
				s->cr.up_off = 0;
			}
			ASSERT(s->cr.up_off + s->cr.up_len + m->data.len <= EGRESS_WINDOW);
			memcpy(s->up + s->cr.up_off + s->cr.up_len, m->data.data, m->data.len);
			s->cr.up_len += (uint32_t)m->data.len;
		}
	}
	if (m->eof)
		s->up_eof_in = true;
	broker_step(s);
}

void egress_call_half_close(struct grpc_call *call)
{
	struct eslot *s = slot_of(call);

	if (!s)
		return;
	s->up_eof_in = true;
	broker_step(s);
}

void egress_call_writable(struct grpc_call *call)
{
	struct eslot *s = slot_of(call);

	if (s)
		broker_step(s);
}

void egress_call_done(struct grpc_call *call, int status, const char *message)
{
	struct eslot *s = slot_of(call);

	(void)status;
	(void)message;
	if (!s)
		return;
	/* the init cancelled, or its connection went: the worker sees EOF and ends */
	s->call = NULL;
	broker_close_data(s);
	s->linger_until = clock_mono_ms() + bst.cfg->egress_io_timeout_ms + LINGER_GRACE_MS;
	broker_slot_maybe_free(s);
}
