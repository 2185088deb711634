/* broker_events.c: the broker's start, the loop's events for its sockets, the reaper, the
 * tick (spares, arming, deferred refusal lines, lingering workers) and the stop. */
#include <errno.h>
#include <sys/wait.h>

#include "egress/broker_slot.h"

void egress_init(const struct config *c, const char *exe, int loop_fd,
		 const struct egress_tags *tags, void *storage, size_t len)
{
	bst.cfg = c;
	bst.epfd = loop_fd;
	bst.self_exe = exe;
	bst.tags = *tags;
	bst.nl_fd = -1;
	if (!broker_table_init(storage, len))
		return;
	broker_conn_load();
	broker_own_init();
}

void egress_event(uint32_t idx, bool ctl, uint32_t events)
{
	struct eslot *s;

	if (ctl && idx == EGRESS_NETLINK_SLOT) {
		broker_own_drain();
		/* an armed worker holds the list from its arming: armed again, with the new one */
		broker_disarm_stale();
		return;
	}
	ASSERT(idx < bst.nslots);
	if (!(s = &bst.slots[idx])->used)
		return;
	if (ctl) {
		if (s->ctl >= 0)
			broker_ctl_readable(s);
		return;
	}
	if (s->call)
		broker_step(s);
	/* what step queued goes now, not at the loop's next EPOLLOUT: a round trip of the
	 * workload's crosses this hop several times */
	if (s->call)
		grpc_call_flush(s->call);
	(void)events;
}

bool egress_is_worker(int pid)
{
	for (uint32_t i = 0; i < bst.nslots; i++)
		if (bst.slots[i].used && bst.slots[i].pid == pid)
			return true;
	return false;
}

void egress_reap(void)
{
	for (uint32_t i = 0; i < bst.nslots; i++) {
		struct eslot *s = &bst.slots[i];
		int st;
		pid_t r;

		if (!s->used || s->pid <= 0)
			continue;
		r = waitpid(s->pid, &st, WNOHANG);
		if (r == 0 || (r < 0 && errno != ECHILD))
			continue;
		if (r > 0 && (WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0)))
			log_info("egress worker ended", "name=%s conn=%llu status=%d signal=%d",
				 log_q(s->name), (unsigned long long)s->conn,
				 WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		s->pid = 0;
		/* what it left in the control socket is read first, then its end */
		if (s->ctl >= 0)
			broker_ctl_readable(s);
		if (s->call)
			broker_step(s);
		broker_slot_maybe_free(s);
	}
}


static int64_t spare_due(void)
{
	return bst.spare_backoff_until > bst.spare_defer_until ? bst.spare_backoff_until : bst.spare_defer_until;
}

void egress_tick(int64_t now)
{
	/* a change own_fresh drained (a start packet's) ends the armed workers it concerns too */
	broker_disarm_stale();
	if (bst.spare_wanted && now >= spare_due()) {
		bst.spare_wanted = false;
		broker_spare_fill();
	}
	/* after the spares: arming takes one, and a spare just started may be the one */
	if (bst.arm_wanted && now >= spare_due()) {
		bst.arm_wanted = false;
		broker_arm_all();
	}
	/* refusals not written in a second that is over: one line says how many (the last one's
	 * reason stands for them) */
	for (uint32_t i = 0; i < bst.nbuckets; i++) {
		struct bucket *b = &bst.buckets[i];
		struct sandbox *sb = sandbox_slot(i);

		if (!b->suppressed || b->refused_sec == now / 1000)
			continue;
		if (!sb || sb->gen != b->gen || sb->state == SB_FREE || !transcript_of(sb)->run.open) {
			b->suppressed = 0;
			continue;
		}
		if (broker_audit_refused(sb, sb->name, sb->instance_id, broker_conn_next(), b->suppressed_reason,
				  b->suppressed_status, 0, "closed", b->suppressed - 1) == 0)
			b->suppressed = 0;
	}
	for (uint32_t i = 0; i < bst.nslots; i++) {
		struct eslot *s = &bst.slots[i];

		/* a direct connection's worker outlives no sandbox: its workload's socket died
		 * with the container, and it would find out; this does not wait for that */
		if (s->used && (s->direct || s->armed) && s->pid > 0 &&
		    (s->sb->gen != s->sb_gen || s->sb->state == SB_FREE)) {
			broker_worker_kill(s);
			continue;
		}
		if (s->used && !s->call && s->pid > 0 && s->linger_until && now >= s->linger_until) {
			log_warn("egress worker killed: it outlived its connection", "name=%s conn=%llu",
				 log_q(s->name), (unsigned long long)s->conn);
			broker_worker_kill(s);
			s->linger_until = 0;
		}
	}
}

int64_t egress_next_deadline(void)
{
	int64_t next = bst.spare_wanted || bst.arm_wanted ? spare_due() : INT64_MAX;

	for (uint32_t i = 0; i < bst.nslots; i++)
		if (bst.slots[i].used && !bst.slots[i].call && bst.slots[i].pid > 0 && bst.slots[i].linger_until &&
		    bst.slots[i].linger_until < next)
			next = bst.slots[i].linger_until;
	for (uint32_t i = 0; i < bst.nbuckets; i++)
		if (bst.buckets[i].suppressed && (bst.buckets[i].refused_sec + 1) * 1000 < next)
			next = (bst.buckets[i].refused_sec + 1) * 1000;
	return next;
}

void egress_shutdown(void)
{
	bst.stopping = true;
	for (uint32_t i = 0; i < bst.nslots; i++) {
		struct eslot *s = &bst.slots[i];

		if (!s->used)
			continue;
		broker_stopped_line(s);
		if (s->call)
			broker_call_end(s, GRPC_UNAVAILABLE, "agenticd is stopping");
		broker_close_data(s);
		broker_close_ctl(s);
	}
}
