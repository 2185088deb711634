/* metrics.c: the counters behind GET /metrics and their Prometheus text (metrics.h). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/metrics.h"

struct hist {
	uint64_t bucket[12], sum_ms, count;
};

/* upper bounds in ms; one bucket more counts what is above the last */
static const int64_t prov_le[] = { 250, 500, 750, 1000, 1500, 2000, 3000, 5000, 10000 };
static const int64_t exec_le[] = { 1, 2, 5, 10, 20, 50, 100, 250, 500, 1000, 5000 };
_Static_assert(ARRAY_LEN(prov_le) < 12 && ARRAY_LEN(exec_le) < 12, "buckets fit struct hist");

static struct hist prov, exec_rtt;
static uint64_t refusals[METRICS_REFUSAL_REASONS];
static uint64_t execs_started, stream_bytes[2];
static uint64_t egress_conns[3], egress_bytes[2];

void metrics_egress(int decision, uint64_t up, uint64_t down)
{
	if (decision >= 0 && decision < 3)
		egress_conns[decision]++;
	egress_bytes[0] += up;
	egress_bytes[1] += down;
}

static void observe(struct hist *h, const int64_t *le, size_t n, int64_t ms)
{
	size_t i = 0;

	while (i < n && ms > le[i])
		i++;
	h->bucket[i]++;
	h->sum_ms += (uint64_t)(ms < 0 ? 0 : ms);
	h->count++;
}

void metrics_provision(int64_t ms)
{
	observe(&prov, prov_le, ARRAY_LEN(prov_le), ms);
}

void metrics_exec_latency(int64_t ms)
{
	observe(&exec_rtt, exec_le, ARRAY_LEN(exec_le), ms);
}

void metrics_refusal(int reason)
{
	if (reason >= 0 && reason < METRICS_REFUSAL_REASONS)
		refusals[reason]++;
}

void metrics_exec_started(void)
{
	execs_started++;
}

void metrics_exec_bytes(int stream, uint64_t n)
{
	stream_bytes[stream ? 1 : 0] += n;
}

static int hist_render(struct buf *b, const char *name, const char *help, const int64_t *le,
		       size_t n, const struct hist *h)
{
	uint64_t cum = 0;
	int r = buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (size_t i = 0; i < n; i++) {
		cum += h->bucket[i];
		r |= buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, (double)le[i] / 1000.0,
			   (unsigned long long)cum);
	}
	cum += h->bucket[n];
	return r | buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.3f\n%s_count %llu\n", name,
		   (unsigned long long)cum, name, (double)h->sum_ms / 1000.0, name,
		   (unsigned long long)h->count);
}

size_t metrics_resident_bytes(void)
{
	static char status[4096];
	/* read(2), not stdio: nothing may allocate once the daemon serves */
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	const char *v;
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, status, sizeof(status) - 1);
	close(fd);
	status[n > 0 ? n : 0] = '\0';
	v = strstr(status, "\nVmRSS:");
	return v ? (size_t)strtoull(v + 8, NULL, 10) * 1024 : 0;
}

int metrics_render(struct buf *b, const struct metrics_view *v)
{
	static const char *const states[] = { "creating", "ready", "removing", "conflict" };
	size_t start = b->len;
	int r;

	/* one family, two ways to count it: each sandbox is in one state and in one tier */
	r = buf_printf(b, "# HELP agentic_sandboxes Sandboxes by lifecycle state, and by posture "
		   "tier.\n# TYPE agentic_sandboxes gauge\n");
	for (int i = 0; i < 4; i++)
		r |= buf_printf(b, "agentic_sandboxes{state=\"%s\"} %u\n", states[i], v->sandboxes[i]);
	r |= buf_printf(b, "agentic_sandboxes{tier=\"T0\"} %u\nagentic_sandboxes{tier=\"T1\"} %u\n",
		   v->tiers[0], v->tiers[1]);
	r |= buf_printf(b, "# HELP agentic_warm_sandboxes Warm sandboxes not claimed yet (made or "
		   "being made), in none of the counts above.\n# TYPE agentic_warm_sandboxes gauge\n"
		   "agentic_warm_sandboxes %u\n", v->warm);
	r |= buf_printf(b, "# HELP agentic_agents_connected Sandboxes whose agent is connected and ready.\n"
		   "# TYPE agentic_agents_connected gauge\nagentic_agents_connected %u\n",
		   v->agents_connected);
	r |= hist_render(b, "agentic_provision_seconds", "Create request to sandbox ready.", prov_le,
		    ARRAY_LEN(prov_le), &prov);
	r |= hist_render(b, "agentic_exec_seconds", "Exec round trip: request sent to the init until "
		    "its result.", exec_le, ARRAY_LEN(exec_le), &exec_rtt);
	r |= buf_printf(b, "# HELP agentic_execs_total Commands started.\n# TYPE agentic_execs_total counter\n"
		   "agentic_execs_total %llu\n", (unsigned long long)execs_started);
	r |= buf_printf(b, "# HELP agentic_stream_bytes_total Workload output bytes received (and written "
		   "to transcripts).\n# TYPE agentic_stream_bytes_total counter\n"
		   "agentic_stream_bytes_total{stream=\"stdout\"} %llu\n"
		   "agentic_stream_bytes_total{stream=\"stderr\"} %llu\n",
		   (unsigned long long)stream_bytes[0], (unsigned long long)stream_bytes[1]);
	r |= buf_printf(b, "# HELP agentic_egress_connections_total Egress connections ended, by "
		   "decision.\n# TYPE agentic_egress_connections_total counter\n"
		   "agentic_egress_connections_total{decision=\"allow\"} %llu\n"
		   "agentic_egress_connections_total{decision=\"deny\"} %llu\n"
		   "agentic_egress_connections_total{decision=\"would_deny\"} %llu\n"
		   "# HELP agentic_egress_bytes_total Egress bytes relayed (up: from workloads).\n"
		   "# TYPE agentic_egress_bytes_total counter\n"
		   "agentic_egress_bytes_total{direction=\"up\"} %llu\n"
		   "agentic_egress_bytes_total{direction=\"down\"} %llu\n",
		   (unsigned long long)egress_conns[0], (unsigned long long)egress_conns[1],
		   (unsigned long long)egress_conns[2], (unsigned long long)egress_bytes[0],
		   (unsigned long long)egress_bytes[1]);
	r |= buf_printf(b, "# HELP agentic_identity_rejections_total Agent connections refused, by reason.\n"
		   "# TYPE agentic_identity_rejections_total counter\n");
	for (uint32_t i = 0; i < v->nrefusals && i < METRICS_REFUSAL_REASONS; i++)
		r |= buf_printf(b, "agentic_identity_rejections_total{reason=\"%s\"} %llu\n",
			   v->refusal_names[i], (unsigned long long)refusals[i]);
	r |= buf_printf(b, "# HELP agentic_posture_taints_total Taints recorded since agenticd "
		   "started, by reason.\n# TYPE agentic_posture_taints_total counter\n");
	for (uint32_t i = 0; i < v->ntaints; i++)
		r |= buf_printf(b, "agentic_posture_taints_total{reason=\"%s\"} %llu\n",
			   v->taint_names[i], (unsigned long long)v->taints[i]);
	r |= buf_printf(b, "# HELP agentic_admin_rejections_total Admin connections refused (peer "
		   "credentials).\n# TYPE agentic_admin_rejections_total counter\n"
		   "agentic_admin_rejections_total %llu\n", (unsigned long long)v->refused_admins);
	r |= buf_printf(b, "# HELP agentic_memory_budget_bytes Memory budget computed at start.\n"
		   "# TYPE agentic_memory_budget_bytes gauge\nagentic_memory_budget_bytes %zu\n"
		   "# HELP agentic_memory_resident_bytes Resident memory now (VmRSS).\n"
		   "# TYPE agentic_memory_resident_bytes gauge\nagentic_memory_resident_bytes %zu\n",
		   v->budget, v->resident);
	/* a line that did not fit leaves out nothing: the whole text is refused */
	if (r != 0) {
		b->len = start;
		return ERR_LIMIT;
	}
	return 0;
}
