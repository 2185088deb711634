/* agent_slot.c: the agent state of every sandbox slot (struct agent_sb, agent.h), the one
 * writer of it being src/agent/, and what the module was handed at start; the calls that only
 * end or answer a sandbox's stream (shutdown, drop, forget). Below every other file of the
 * module. */
#include <string.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "agent/agent_slot.h"

const struct config *agent_cfg;
struct grpc_server *agent_server;
uint64_t agent_nrefused;

/* The table: agenticd's, taken from its region at start, else a scratch one (tests). */
static struct agent_sb scratch[AGENT_SCRATCH_SLOTS];
static struct agent_sb *slots = scratch;
static uint32_t nslots = AGENT_SCRATCH_SLOTS;

static void slot_reset(struct agent_sb *a, uint32_t gen)
{
	if (a->set && a->peer_pidfd >= 0)
		close(a->peer_pidfd);
	memset(a, 0, sizeof(*a));
	a->gen = gen;
	a->set = true;
	a->egress_fd = a->peer_pidfd = -1;
}

void agent_init(const struct config *c, struct grpc_server *grpc, struct agent_sb *table,
		uint32_t n)
{
	agent_cfg = c;
	agent_server = grpc;
	agent_nrefused = 0;
	for (uint32_t i = 0; i < nslots; i++)
		if (slots[i].set && slots[i].peer_pidfd >= 0)
			close(slots[i].peer_pidfd);
	slots = table ? table : scratch;
	nslots = table ? n : AGENT_SCRATCH_SLOTS;
	memset(slots, 0, nslots * sizeof(*slots));
}

struct agent_sb *agent_slot(const struct sandbox *sb)
{
	uint32_t i = sandbox_index(sb);
	struct agent_sb *a;

	ASSERT(i < nslots);
	a = &slots[i];
	if (!a->set || a->gen != sb->gen)
		slot_reset(a, sb->gen);
	return a;
}

const struct agent_sb *agent_of(const struct sandbox *sb)
{
	return agent_slot(sb);
}

bool agent_is_ready(void *ctx, const struct sandbox *sb)
{
	(void)ctx;
	return agent_slot(sb)->ready;
}

uint64_t agent_refused(void)
{
	return agent_nrefused;
}

void agent_peer_forget(struct agent_sb *a)
{
	if (a->peer_pidfd >= 0)
		close(a->peer_pidfd);
	a->peer_pidfd = -1;
}

bool agent_vm_busy(const struct sandbox *sb)
{
	return agent_server && grpc_server_reserved_busy(agent_server, sandbox_index(sb));
}

bool agent_shutdown(struct sandbox *sb, int grace_s)
{
	Agentic__Sandbox__V1__ShutdownSignal sig = AGENTIC__SANDBOX__V1__SHUTDOWN_SIGNAL__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	struct agent_sb *a = agent_slot(sb);

	if (!a->call || !a->registered)
		return false;
	sig.reason = "removed";
	sig.grace_period_seconds = grace_s;
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_SHUTDOWN;
	m.shutdown = &sig;
	return grpc_call_send(a->call, &m.base) >= 0;
}

void agent_forget(struct sandbox *sb)
{
	struct agent_sb *a = agent_slot(sb);

	a->call = NULL;
	a->authed = a->registered = a->ready = false;
	agent_peer_forget(a);
	a->conn_verified = false;
	if (agent_server)
		grpc_server_drop_reserved(agent_server, sandbox_index(sb));
}

void agent_drop(struct sandbox *sb, const char *why)
{
	struct agent_sb *a = agent_slot(sb);
	struct grpc_call *call = a->call;

	if (!call)
		return;
	a->call = NULL;
	a->authed = a->registered = a->ready = false;
	grpc_call_set_user(call, NULL);
	grpc_call_finish(call, GRPC_UNAVAILABLE, why, NULL, 0);
}
