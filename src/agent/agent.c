/* agent.c: the agent socket's resolver (docs/AGENTICD.md: the agent socket) and the Connect stream up to READY.
 * Identity is the kernel's word only, settled when the connection is accepted: SO_PEERCRED's
 * uid must be a sandbox's control uid and the peer must be that sandbox's init itself (the
 * process that called connect(), as a pidfd, is the container's State.Pid, pinned as a pidfd);
 * metadata must then name that sandbox. Any other peer is a guest of the gRPC server: it gets
 * Health/Check and is refused anything else. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "agent/agent.h"
#include "daemon/daemon.h"
#include "lifecycle/lifecycle.h"
#include "runtime/runtime_vm.h"

/* stdio's stdout and stderr macros hide AgentMessage's fields of those names; nothing below
 * writes to a stdio stream. */
#undef stdout
#undef stderr

/* Output acks: one at least every OUT_ACK_BYTES of the init's replay ring, and one per
 * result. A chunk takes its data plus at most OUT_RECORD_BYTES there (replay.c: a 32-byte
 * header, a command id of up to 128 bytes, 32-byte alignment), so even a stream of 1-byte
 * writes is acked long before the ring (LIMIT_INIT_REPLAY_BYTES) fills. */
_Static_assert(OUT_ACK_BYTES * 4 <= LIMIT_INIT_REPLAY_BYTES,
	       "acks come well before the ring fills");
/* After a failed transcript write, the init is asked to send again this much later. */

/* Linux 6.5: a pidfd of the process that called connect(), taken then by the kernel. */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

enum refusal {
	RF_WORKLOAD_UID, RF_UNKNOWN_UID, RF_CONFLICT, RF_REMOVING, RF_NOT_INIT, RF_AGENT_ID,
	RF_INSTANCE_ID, RF_DUPLICATE, RF_REGISTRATION,
};

static const char *const refusal_names[AGENT_REFUSAL_REASONS] = {
	"workload_uid", "unknown_uid", "uid_conflict", "removing", "not_init",
	"agent_id", "instance_id", "duplicate_stream", "registration",
};

const char *agent_refusal_name(int reason)
{
	return reason >= 0 && reason < AGENT_REFUSAL_REASONS ? refusal_names[reason] : "other";
}

/* ---- refusal lines: one per uid per LIMIT_AGENT_REFUSAL_LOG_MS ----
 * A flood of refused calls must not bury other lines: a uid's refusals after its line are
 * counted, and the count goes out with its next line (not_logged=N); at most
 * LIMIT_AGENT_REFUSAL_LOG_UIDS uids get a line per interval, the rest are counted together
 * (others_not_logged=N on the next line that goes out). Metrics count every refusal. */
struct refusal_note {
	uint32_t uid;
	int64_t at;     /* monotonic ms of its last line; 0: free */
	uint32_t held;
};

static struct refusal_note notes[LIMIT_AGENT_REFUSAL_LOG_UIDS];
static uint32_t others_held;

/* What agenticd.c hands over at start (agent_init), and the refusals counted. */
static const struct config *cfg;
static struct grpc_server *server;
static uint64_t refused;

void agent_init(const struct config *c, struct grpc_server *grpc)
{
	cfg = c;
	server = grpc;
	refused = 0;
}

uint64_t agent_refused(void)
{
	return refused;
}

/* 1 when a refusal of uid is to be logged now, with *held of its own not logged before. */
static int refusal_due(uint32_t uid, uint32_t *held)
{
	int64_t now = clock_mono_ms();
	struct refusal_note *n = NULL, *spare = NULL;

	for (uint32_t i = 0; i < LIMIT_AGENT_REFUSAL_LOG_UIDS && !n; i++) {
		struct refusal_note *e = &notes[i];

		if (e->at && e->uid == uid)
			n = e;
		else if (!spare && (!e->at || now - e->at >= LIMIT_AGENT_REFUSAL_LOG_MS))
			spare = e;
	}
	if (n && now - n->at < LIMIT_AGENT_REFUSAL_LOG_MS) {
		n->held++;
		return 0;
	}
	if (!n) {
		if (!spare) {
			others_held++;
			return 0;
		}
		/* an expired uid's count would wait for its next refusal: it joins the others' */
		others_held += spare->held;
		n = spare;
		n->uid = uid;
		n->held = 0;
	}
	n->at = now;
	*held = n->held;
	n->held = 0;
	return 1;
}

static void refusal_log(const struct grpc_peer *p, const char *reason)
{
	uint32_t held;
	char q[160];

	if (!refusal_due(p->uid, &held))
		return;
	log_warn("agent refused", "uid=%u pid=%d reason=%s not_logged=%u others_not_logged=%u",
		 (unsigned)p->uid, (int)p->pid, log_quote(q, sizeof(q), reason), held, others_held);
	others_held = 0;
}

static void refuse_why(struct grpc_call *call, int why, const char *reason)
{
	metrics_refusal(why);
	refused++;
	refusal_log(grpc_call_peer(call), reason);
	grpc_call_set_user(call, NULL);
	grpc_call_finish(call, GRPC_UNAUTHENTICATED, reason, NULL, 0);
}

/* Metadata value equal to want (exactly). */
static bool md_is(const struct grpc_call *call, const char *key, const char *want)
{
	size_t len;
	const char *v = grpc_call_md(call, key, &len);

	return v && len == strlen(want) && memcmp(v, want, len) == 0;
}

/* ---- admission: is the peer the sandbox's init itself? ---- */

/* A pidfd of the process that called connect() on fd. Without SO_PEERPIDFD (before Linux
 * 6.5) the pid SO_PEERCRED reported is opened instead, which a pid reused between that
 * connect() and now would pass: the kernel's own pidfd leaves no such gap. */
static int peer_pidfd(int fd, pid_t pid)
{
	int pfd = -1;
	socklen_t len = sizeof(pfd);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pfd, &len) == 0 && pfd >= 0)
		return pfd;
	if (errno != ENOPROTOOPT)
		return -1;
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* The peer behind pfd is the sandbox's init: both pidfds name the same live process (a pidfd
 * of a process that exited shows no pid, whatever took its number since). */
static bool peer_is_init(const struct sandbox *sb, int pfd)
{
	pid_t a, b;

	if (sb->init_pidfd < 0 || sb->pid <= 0)
		return false;
	a = sandbox_pidfd_pid(pfd);
	b = sandbox_pidfd_pid(sb->init_pidfd);
	return a > 0 && a == b && a == sb->pid;
}

static void peer_forget(struct sandbox *sb)
{
	if (sb->peer_pidfd >= 0)
		close(sb->peer_pidfd);
	sb->peer_pidfd = -1;
}

int agent_admit(void *ctx, int fd, struct grpc_peer *p)
{
	struct sandbox *sb;
	int pfd;

	(void)ctx;
	if (p->uid == cfg->workload_uid)
		return -1;
	sb = sandbox_by_uid(p->uid);
	/* a VM's init is reached through its own socket alone (agent_vm_channel): a host
	 * process with its control uid is nobody */
	if (!sb || sb->state == SB_CONFLICT || lifecycle_going(sb) || sb->vm)
		return -1;
	pfd = peer_pidfd(fd, p->pid);
	if (pfd < 0)
		return -1;
	if (sb->init_pidfd >= 0 && sb->pid > 0 && sandbox_pidfd_pid(sb->init_pidfd) > 0) {
		bool init = peer_is_init(sb, pfd);

		close(pfd);
		if (!init)
			return -1;
		peer_forget(sb);
		sb->conn_verified = true;
	} else {
		/* The container's pid is not known yet, or its init is gone (a restart whose
		 * inspect is on its way): the connection waits in the sandbox's slot, its peer
		 * pinned, for agent_pid_known. A newer one takes the slot: the init redials when
		 * it loses it. */
		peer_forget(sb);
		sb->peer_pidfd = pfd;
		sb->conn_verified = false;
	}
	p->tag = sb->gen;
	return (int)sandbox_index(sb);
}

int agent_vm_channel(struct sandbox *sb, int fd)
{
	struct grpc_peer p = { .pid = 0, .uid = sb->uid, .gid = sb->uid, .tag = sb->gen };
	int r;

	if (!server || !sb->vm) {
		close(fd);
		return ERR_STATE;
	}
	peer_forget(sb);
	/* the socket is the VM's own, in agenticd's 0700 directory: it is the init's */
	sb->conn_verified = true;
	r = grpc_server_add_reserved(server, fd, agent_methods, agent_nmethods, sandbox_index(sb),
				     &p);
	if (r == 0)
		agent_pid_known(sb);
	return r;
}

bool agent_vm_busy(const struct sandbox *sb)
{
	return server && grpc_server_reserved_busy(server, sandbox_index(sb));
}

bool agent_shutdown(struct sandbox *sb, int grace_s)
{
	Agentic__Sandbox__V1__ShutdownSignal sig = AGENTIC__SANDBOX__V1__SHUTDOWN_SIGNAL__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;

	if (!sb->agent || !sb->agent_registered)
		return false;
	sig.reason = "removed";
	sig.grace_period_seconds = grace_s;
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_SHUTDOWN;
	m.shutdown = &sig;
	return grpc_call_send(sb->agent, &m.base) >= 0;
}

void agent_forget(struct sandbox *sb)
{
	sb->agent = NULL;
	sb->agent_authed = sb->agent_registered = sb->agent_ready = false;
	peer_forget(sb);
	sb->conn_verified = false;
	if (server)
		grpc_server_drop_reserved(server, sandbox_index(sb));
}

/* The init's report of itself, kept as sent when it fits and holds only printable text and
 * newlines (it is parsed by the verifier, never logged); else none is kept. */
static void self_report(struct sandbox *sb, const char *v)
{
	size_t n = strlen(v);

	if (n >= sizeof(sb->agent_self))
		return;
	for (size_t i = 0; i < n; i++)
		if ((v[i] < 0x20 && v[i] != '\n' && v[i] != '\t') || v[i] == 0x7f)
			return;
	memcpy(sb->agent_self, v, n + 1);
}

/* A descriptor number as the init said it: 3..1023 in decimal, -1 otherwise. */
static int label_fd(const char *v)
{
	int n = 0;

	if (!*v || strlen(v) > 4)
		return -1;
	for (; *v; v++) {
		if (*v < '0' || *v > '9')
			return -1;
		n = n * 10 + (*v - '0');
	}
	return n >= 3 && n < 1024 ? n : -1;
}

static void ack(struct grpc_call *call, struct sandbox *sb)
{
	Agentic__Sandbox__V1__RegistrationAck a = AGENTIC__SANDBOX__V1__REGISTRATION_ACK__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	Agentic__Sandbox__V1__RegistrationAck__ConfigEntry out_ack =
		AGENTIC__SANDBOX__V1__REGISTRATION_ACK__CONFIG_ENTRY__INIT;
	Agentic__Sandbox__V1__RegistrationAck__ConfigEntry egress =
		AGENTIC__SANDBOX__V1__REGISTRATION_ACK__CONFIG_ENTRY__INIT;
	Agentic__Sandbox__V1__RegistrationAck__ConfigEntry *config[2];

	a.accepted = 1;
	a.message = "registered";
	a.heartbeat_interval_seconds = HEARTBEAT_INTERVAL_S;
	a.config = config;
	if (sb->agent_output_ack) {
		out_ack.key = "output-ack";
		out_ack.value = "1";
		config[a.n_config++] = &out_ack;
	}
	/* egress is served to every init that asks; whether a connection goes anywhere is the
	 * policy's (none: each call is refused FAILED_PRECONDITION and the init answers 503) */
	if (sb->agent_egress) {
		egress.key = "egress";
		/* direct: agenticd accepts on the init's listener (egress.c) */
		egress.value = egress_listener_take(sb) ? "direct" : "1";
		config[a.n_config++] = &egress;
	}
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_REGISTRATION_ACK;
	m.registration_ack = &a;
	if (grpc_call_send(call, &m.base) < 0) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "no buffer for the registration ack",
				 NULL, 0);
		return;
	}
	sb->agent_registered = true;
	log_info("agent registered", "name=%s instance=%s uid=%u", log_q(sb->name),
		 log_q(sb->instance_id), sb->uid);
	/* a claimed warm sandbox's init learns its claim again after every registration (it
	 * may have restarted with its container, whose env is the pool's), before any command */
	if (sb->lc == LC_CLAIM_INIT || ((sb->claimed || sb->vm) && (sb->nclaim_env || vm_of(sb)->ncreds)))
		agent_claim_send(sb);
}

/* The secrets of a VM's credentials while a claim is built (wiped after). */
static uint8_t secrets[PROFILE_CREDS_MAX][EGRESS_SECRET_BYTES + 1];
static Agentic__Sandbox__V1__SandboxClaim__FilesEntry file_entries[PROFILE_CREDS_MAX];
static Agentic__Sandbox__V1__SandboxClaim__FilesEntry *file_list[PROFILE_CREDS_MAX];

/* The credentials into c: an env target after the claim's env (it wins: the init takes the
 * last of a name), a file target as a file. 0, or -1 when a secret cannot be read. */
static int vm_creds_add(struct sandbox *sb, Agentic__Sandbox__V1__SandboxClaim *c,
			Agentic__Sandbox__V1__SandboxClaim__EnvEntry *entries,
			Agentic__Sandbox__V1__SandboxClaim__EnvEntry **env, size_t *n)
{
	char path[LIMIT_PATH_BYTES];

	c->files = file_list;
	c->n_files = 0;
	for (uint32_t i = 0; i < vm_of(sb)->ncreds && i < PROFILE_CREDS_MAX; i++) {
		long len;

		snprintf(path, sizeof(path), "%s/%s", cfg->vm_credentials_dir, vm_of(sb)->creds[i].id);
		len = egress_secret_read(path, secrets[i]);
		if (len < 0) {
			log_warn("credential not sent: its secret file cannot be read", "name=%s "
				 "credential=%s", log_q(sb->name), log_q(vm_of(sb)->creds[i].id));
			return -1;
		}
		secrets[i][len] = '\0';
		if (vm_of(sb)->creds[i].file) {
			file_entries[c->n_files] = (Agentic__Sandbox__V1__SandboxClaim__FilesEntry)
				AGENTIC__SANDBOX__V1__SANDBOX_CLAIM__FILES_ENTRY__INIT;
			file_entries[c->n_files].key = (char *)vm_of(sb)->creds[i].name;
			file_entries[c->n_files].value.data = secrets[i];
			file_entries[c->n_files].value.len = (size_t)len;
			file_list[c->n_files] = &file_entries[c->n_files];
			c->n_files++;
		} else if (*n < LIMIT_SANDBOX_ENV) {
			entries[*n] = (Agentic__Sandbox__V1__SandboxClaim__EnvEntry)
				AGENTIC__SANDBOX__V1__SANDBOX_CLAIM__ENV_ENTRY__INIT;
			entries[*n].key = (char *)vm_of(sb)->creds[i].name;
			entries[*n].value = (char *)secrets[i];
			env[*n] = &entries[*n];
			(*n)++;
		}
	}
	return 0;
}

void agent_claim_send(struct sandbox *sb)
{
	static Agentic__Sandbox__V1__SandboxClaim__EnvEntry entries[LIMIT_SANDBOX_ENV];
	static Agentic__Sandbox__V1__SandboxClaim__EnvEntry *env[LIMIT_SANDBOX_ENV];
	static char kv[LIMIT_SANDBOX_CLAIM_ENV_BYTES];
	Agentic__Sandbox__V1__SandboxClaim c = AGENTIC__SANDBOX__V1__SANDBOX_CLAIM__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	const char *e = NULL;
	size_t n = 0;
	int r;

	if (!sb->agent || !sb->agent_registered)
		return; /* sent when it registers */
	memcpy(kv, sb->claim_env, sb->claim_env_len);
	while (n < LIMIT_SANDBOX_ENV && (e = strrun_next(sb->claim_env, sb->claim_env_len, e))) {
		char *p = kv + (e - sb->claim_env), *eq = strchr(p, '=');

		if (!eq)
			continue;
		*eq = '\0';
		entries[n] = (Agentic__Sandbox__V1__SandboxClaim__EnvEntry)
			AGENTIC__SANDBOX__V1__SANDBOX_CLAIM__ENV_ENTRY__INIT;
		entries[n].key = p;
		entries[n].value = eq + 1;
		env[n] = &entries[n];
		n++;
	}
	c.name = sb->name;
	c.env = env;
	c.n_env = n;
	/* a VM's credentials, read now from their files (admin.c checked them at the create):
	 * in this message alone, wiped once it is queued */
	if (vm_of(sb)->ncreds && vm_creds_add(sb, &c, entries, env, &n) != 0) {
		memset(secrets, 0, sizeof(secrets));
		agent_drop(sb, "a credential's secret file cannot be read");
		return;
	}
	c.n_env = n;
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_CLAIM;
	m.claim = &c;
	r = grpc_call_send(sb->agent, &m.base);
	memset(secrets, 0, sizeof(secrets));
	if (r < 0) {
		agent_drop(sb, "cannot send the claim");
		return;
	}
	if (sb->vm && sb->lc == LC_WAIT_READY)
		runtime_vm_claim_owed(sb, true);
	log_info("claim sent", "name=%s pool_name=%s env=%u files=%u", log_q(sb->name),
		 log_q(sb->agent_id), (unsigned)n, (unsigned)c.n_files);
}

/* ---- output acks ---- */

/* Sends the ack (a resume when one is owed), or notes it owed while the queue is full. */
static void out_ack_send(struct sandbox *sb)
{
	Agentic__Sandbox__V1__OutputAck oa = AGENTIC__SANDBOX__V1__OUTPUT_ACK__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	int r;

	if (!sb->agent || !sb->agent_output_ack)
		return;
	oa.stdout = sb->out_next[0];
	oa.stderr = sb->out_next[1];
	oa.results = sb->out_results;
	oa.resume = sb->out_resume_owed;
	oa.epoch = sb->out_epoch;
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_OUTPUT_ACK;
	m.output_ack = &oa;
	r = grpc_call_send(sb->agent, &m.base);
	if (r == -EAGAIN) {
		sb->out_ack_owed = true;
		return;
	}
	sb->out_ack_owed = false;
	if (r < 0) {
		agent_drop(sb, "cannot send an output ack");
		return;
	}
	sb->out_resume_owed = false;
	sb->out_unacked = 0;
}

/* The init is to send again all it holds, in a new epoch: what arrives stamped with an older
 * one is dropped unread, since the resend brings it again in order. */
static void out_resume(struct sandbox *sb)
{
	if (!sb->agent_output_ack)
		return;
	/* a new epoch for each resume, even one that must wait for queue room: chunks sent
	 * before the init hears of it must never match */
	if (!sb->out_resume_owed)
		sb->out_epoch++;
	sb->out_stalled = false;
	sb->out_resume_owed = true;
	out_ack_send(sb);
}

/* A transcript write failed (its error is logged and shown by the API): nothing more is
 * written until the init sends again, from what the transcript has, OUT_RETRY_MS later. The
 * workload blocks meanwhile, once the init's buffers are full: no byte is lost. */
static void out_stall(struct sandbox *sb)
{
	sb->out_stalled = true;
	sb->out_retry_ms = clock_mono_ms() + OUT_RETRY_MS;
}

void agent_tick(int64_t now)
{
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		struct sandbox *sb = sandbox_slot(i);

		if (sb->state == SB_FREE || !sb->agent || !sb->agent_ready || !sb->out_stalled ||
		    now < sb->out_retry_ms)
			continue;
		/* a run that could not be opened (a full disk at a container restart) is tried
		 * again first: until it is open nothing can be written */
		if (!sb->run.open)
			runlog_ready(sb);
		if (sb->run.open)
			out_resume(sb);
		else
			out_stall(sb);
	}
}

int64_t agent_next_deadline(void)
{
	int64_t next = INT64_MAX;

	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		const struct sandbox *sb = sandbox_slot(i);

		if (sb->state != SB_FREE && sb->agent && sb->out_stalled && sb->out_retry_ms < next)
			next = sb->out_retry_ms;
	}
	return next;
}

static void out_chunk(struct sandbox *sb, const Agentic__Sandbox__V1__OutputChunk *o, int s)
{
	uint64_t next = sb->out_next[s], end = o->offset + o->data.len, skip;
	size_t n;

	if (o->epoch != sb->out_epoch || sb->out_stalled || sb->out_resume_owed ||
	    !o->data.len || end <= next)
		return;
	if (!sb->run.open) {
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
		if (!sb->out_gap_logged)
			log_warn("transcript gap", "name=%s stream=%s bytes=%llu accepted=%d", log_q(sb->name),
				 s ? "stderr" : "stdout", (unsigned long long)(o->offset - next),
				 next == 0);
		sb->out_gap_logged = true;
		if (next != 0 && !runlog_skip(sb, s, o->offset - next)) {
			out_resume(sb);
			return;
		}
		next = o->offset;
	}
	skip = next - o->offset;
	n = exec_output(sb, o->stream_id, s, o->data.data + skip, o->data.len - skip, true);
	sb->out_next[s] = next + n;
	sb->out_unacked += n + OUT_RECORD_BYTES;
	if (n < o->data.len - skip)
		out_stall(sb);
	else if (sb->out_unacked >= OUT_ACK_BYTES)
		out_ack_send(sb);
}

static void out_result(struct sandbox *sb, const Agentic__Sandbox__V1__CommandResult *r)
{
	if (r->epoch != sb->out_epoch || sb->out_stalled || sb->out_resume_owed ||
	    r->seq <= sb->out_results)
		return;
	if (!sb->run.open ||
	    !exec_result(sb, r->command_id, r->exit_code, r->duration_ms, r->duration_us, r->error,
			 r->seq)) {
		out_stall(sb);
		return;
	}
	sb->out_results = r->seq;
	out_ack_send(sb);
}

/* The run goes on or begins (a new one runs the create's cmd). */
static void run_begin(struct sandbox *sb)
{
	bool begun = runlog_ready(sb);

	/* the init sends nothing until it learns what the run's transcript already has */
	out_resume(sb);
	if (begun && sb->ncmd) {
		struct exec_req er = { 0 };
		const char *a = NULL;
		int x;

		while ((a = strrun_next(sb->cmd, sb->cmd_len, a)) && er.argc < LIMIT_SANDBOX_CMD_ARGS)
			er.argv[er.argc++] = a;
		x = exec_begin(sb, &er, NULL); /* detached: the transcript only */
		if (x < 0)
			log_warn("the sandbox's cmd did not start", "name=%s error=%s", log_q(sb->name),
				 log_q(err_str(x)));
	}
}

/* READY: the run goes on or begins, then the create ends. A warm sandbox has no run until it
 * is claimed (its transcript starts at the claim, with the claim's env in place). */
static void agent_now_ready(struct sandbox *sb)
{
	sb->agent_ready = true;
	if (!sb->pool && sb->lc != LC_CLAIM_INIT && sb->lc != LC_CLAIM_RENAME)
		run_begin(sb);
	lifecycle_signal(sb, LC_EV_AGENT_READY);
	exec_agent_writable(sb);
}

/* The stream is known to be the sandbox's: act on what arrived while that was checked. */
static void authed(struct sandbox *sb, bool reg_seen, bool ready_seen)
{
	struct grpc_call *call = sb->agent;

	sb->agent_authed = true;
	log_info("agent connected", "name=%s instance=%s uid=%u", log_q(sb->name),
		 log_q(sb->instance_id), sb->uid);
	if (reg_seen)
		ack(call, sb);
	if (ready_seen && sb->agent_registered)
		agent_now_ready(sb);
}

/* Flags of what arrived before the pid namespace could be checked (grpc_call_app bytes). */
struct pending {
	bool reg;
	bool ready;
};

/* A guest's Connect: why its peer was not admitted (as things stand now). */
static void refuse_guest(struct grpc_call *call, const struct grpc_peer *p)
{
	struct sandbox *sb = sandbox_by_uid(p->uid);

	if (p->uid == cfg->workload_uid)
		refuse_why(call, RF_WORKLOAD_UID, "the workload uid never maps to a sandbox");
	else if (!sb)
		refuse_why(call, RF_UNKNOWN_UID, "unknown uid: no sandbox has it as its control uid");
	else if (sb->state == SB_CONFLICT)
		refuse_why(call, RF_CONFLICT, "two containers claim this uid: neither is trusted");
	else if (lifecycle_going(sb))
		refuse_why(call, RF_REMOVING, "the sandbox is being removed");
	else
		refuse_why(call, RF_NOT_INIT, "the peer is not the sandbox's init");
}

static void connect_start(struct grpc_call *call)
{
	const struct grpc_peer *p = grpc_call_peer(call);
	struct sandbox *sb;

	grpc_call_set_user(call, NULL);
	sb = p->slot < 0 ? NULL : sandbox_slot((uint32_t)p->slot);
	if (!sb) {
		refuse_guest(call, p);
		return;
	}
	if (sb->state == SB_FREE || sb->gen != p->tag || sb->uid != p->uid) {
		refuse_why(call, RF_REMOVING, "the sandbox is being removed");
		return;
	}
	if (sb->state == SB_CONFLICT) {
		refuse_why(call, RF_CONFLICT, "two containers claim this uid: neither is trusted");
		return;
	}
	if (lifecycle_going(sb)) {
		refuse_why(call, RF_REMOVING, "the sandbox is being removed");
		return;
	}
	if (!md_is(call, "x-agent-id", sb->agent_id)) {
		refuse_why(call, RF_AGENT_ID, "x-agent-id does not name the sandbox of this uid");
		return;
	}
	if (!md_is(call, "x-agent-instance-id", sb->instance_id)) {
		refuse_why(call, RF_INSTANCE_ID, "x-agent-instance-id does not match the sandbox of this uid");
		return;
	}
	if (sb->agent) {
		refuse_why(call, RF_DUPLICATE, "the sandbox already has a live Connect stream");
		return;
	}
	sb->agent = call;
	sb->t_auth = clock_mono_ms();
	sb->agent_authed = false;
	sb->agent_registered = false;
	sb->agent_ready = false;
	sb->agent_output_ack = sb->out_stalled = sb->out_ack_owed = sb->out_resume_owed = false;
	sb->out_gap_logged = false;
	sb->agent_seen_ms = clock_wall_ms();
	grpc_call_set_user(call, sb);
	/* Right after start the container's pid may not be known yet: the check then waits
	 * for the inspect (agent_pid_known). */
	if (sb->conn_verified)
		authed(sb, false, false);
}

void agent_pid_known(struct sandbox *sb)
{
	struct grpc_call *call;
	struct pending *pend;

	if (sb->peer_pidfd >= 0) {
		bool init = peer_is_init(sb, sb->peer_pidfd);

		peer_forget(sb);
		if (!init) {
			struct grpc_peer p = sb->agent ? *grpc_call_peer(sb->agent)
						       : (struct grpc_peer){ .uid = sb->uid };

			metrics_refusal(RF_NOT_INIT);
			refused++;
			refusal_log(&p, "the peer is not the sandbox's init");
			agent_forget(sb);
			return;
		}
		sb->conn_verified = true;
	}
	call = sb->agent;
	if (!call || sb->agent_authed || !sb->conn_verified)
		return;
	pend = grpc_call_app(call);
	authed(sb, pend->reg, pend->ready);
}

static bool registration_ok(const struct sandbox *sb,
			    const Agentic__Sandbox__V1__AgentRegistration *reg)
{
	return strcmp(reg->instance_id, sb->instance_id) == 0 &&
	       (!reg->agent_id[0] || strcmp(reg->agent_id, sb->agent_id) == 0);
}

static const Agentic__Sandbox__V1__OutputChunk *
output_of(const Agentic__Sandbox__V1__AgentMessage *m)
{
	return m->payload_case == AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDOUT ? m->stdout
										       : m->stderr;
}

static void connect_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Sandbox__V1__AgentMessage *m = (const void *)msg;
	struct sandbox *sb = grpc_call_user(call);
	struct pending *pend = grpc_call_app(call);

	if (!sb || sb->agent != call)
		return;
	sb->agent_seen_ms = clock_wall_ms();
	switch (m->payload_case) {
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_REGISTRATION:
		if (!registration_ok(sb, m->registration)) {
			sb->agent = NULL;
			refuse_why(call, RF_REGISTRATION, "the registration names another sandbox or instance");
			return;
		}
		sb->agent_stdin_ack = sb->agent_output_ack = sb->agent_egress = false;
		sb->agent_egress_fd = -1;
		sb->agent_self[0] = '\0';
		for (size_t i = 0; i < m->registration->n_labels; i++) {
			const char *k = m->registration->labels[i]->key;

			if (strcmp(k, "agentic-self-status") == 0) {
				self_report(sb, m->registration->labels[i]->value);
				continue;
			}
			if (strcmp(k, "agentic-egress-listener") == 0) {
				sb->agent_egress_fd = label_fd(m->registration->labels[i]->value);
				continue;
			}
			if (strcmp(m->registration->labels[i]->value, "1") != 0)
				continue;
			if (strcmp(k, "agentic-stdin-ack") == 0)
				sb->agent_stdin_ack = true;
			else if (strcmp(k, "agentic-output-ack") == 0)
				sb->agent_output_ack = true;
			else if (strcmp(k, "agentic-egress") == 0)
				sb->agent_egress = true;
		}
		if (!sb->agent_authed)
			pend->reg = true;
		else if (!sb->agent_registered)
			ack(call, sb);
		return;
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_HEARTBEAT: {
		const Agentic__Sandbox__V1__Heartbeat *hb = m->heartbeat;
		bool ready = hb->status == AGENTIC__SANDBOX__V1__AGENT_STATUS__AGENT_STATUS_READY &&
			     strcmp(hb->setup_status, "ready") == 0;

		sb->agent_status = hb->status;
		if (!sb->agent_authed) {
			pend->ready = ready;
			return;
		}
		if (ready && sb->agent_registered && !sb->agent_ready) {
			agent_now_ready(sb);
		} else if (!ready && sb->agent_ready) {
			sb->agent_ready = false;
			log_info("agent not ready", "name=%s status=%d", log_q(sb->name), hb->status);
		}
		return;
	}
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDOUT:
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDERR: {
		const Agentic__Sandbox__V1__OutputChunk *o = output_of(m);
		int s = m->payload_case == AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDERR;

		if (!sb->agent_authed)
			return;
		if (sb->agent_output_ack)
			out_chunk(sb, o, s);
		else
			exec_output(sb, o->stream_id, s, o->data.data, o->data.len, false);
		return;
	}
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_CLAIM_ACK: {
		const Agentic__Sandbox__V1__ClaimAck *ca = m->claim_ack;
		struct lc_event ev = { .kind = LC_EV_CLAIM_REFUSED };
		char why[128];

		if (sb->agent_authed && sb->vm && sb->lc == LC_WAIT_READY && vm_of(sb)->claim_owed) {
			/* a VM's env and credentials: taken, or the create fails */
			snprintf(why, sizeof(why), "%s", ca->error);
			ev.kind = why[0] ? LC_EV_CLAIM_REFUSED : LC_EV_CLAIMED;
			ev.why = why;
			if (why[0])
				log_warn("claim refused by the init", "name=%s reason=%s",
					 log_q(sb->name), log_q(why));
			lifecycle_on(sb, &ev);
			return;
		}
		if (!sb->agent_authed || sb->lc != LC_CLAIM_INIT)
			return; /* an answer to a claim sent again after a registration */
		if (ca->error[0]) {
			/* the init's words, cut short and never taken as more than text */
			snprintf(why, sizeof(why), "%s", ca->error);
			ev.why = why;
			log_warn("claim refused by the init", "name=%s reason=%s", log_q(sb->name),
				 log_q(why));
			lifecycle_on(sb, &ev);
			return;
		}
		run_begin(sb);
		lifecycle_signal(sb, LC_EV_CLAIMED);
		return;
	}
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDIN_ACK:
		if (sb->agent_authed)
			exec_stdin_ack(sb, m->stdin_ack->command_id, m->stdin_ack->consumed);
		return;
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_COMMAND_RESULT:
		if (!sb->agent_authed)
			return;
		if (sb->agent_output_ack)
			out_result(sb, m->command_result);
		else
			exec_result(sb, m->command_result->command_id, m->command_result->exit_code,
				    m->command_result->duration_ms, m->command_result->duration_us,
				    m->command_result->error, 0);
		return;
	default:
		return;
	}
}

static void connect_writable(struct grpc_call *call)
{
	struct sandbox *sb = grpc_call_user(call);

	if (!sb || sb->agent != call)
		return;
	if (sb->out_ack_owed)
		out_ack_send(sb);
	exec_agent_writable(sb);
}

static void connect_half_close(struct grpc_call *call)
{
	grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);
}

static void connect_done(struct grpc_call *call, int status, const char *message)
{
	struct sandbox *sb = grpc_call_user(call);

	if (!sb || sb->agent != call)
		return;
	sb->agent = NULL;
	sb->agent_authed = sb->agent_registered = sb->agent_ready = false;
	runlog_event(sb, "disconnect");
	log_info("agent disconnected", "name=%s instance=%s uid=%u status=%s", log_q(sb->name),
		 log_q(sb->instance_id), sb->uid, grpc_status_name(status));
	lifecycle_signal(sb, LC_EV_AGENT_LOST);
}

void agent_drop(struct sandbox *sb, const char *why)
{
	struct grpc_call *call = sb->agent;

	if (!call)
		return;
	sb->agent = NULL;
	sb->agent_authed = sb->agent_registered = sb->agent_ready = false;
	grpc_call_set_user(call, NULL);
	grpc_call_finish(call, GRPC_UNAVAILABLE, why, NULL, 0);
}

const struct grpc_method agent_methods[] = {
	{
		.path = "/agentic.sandbox.v1.AgentService/Connect",
		.request = &agentic__sandbox__v1__agent_message__descriptor,
		.response = &agentic__sandbox__v1__management_message__descriptor,
		.flags = GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
		.handler = {
			.on_start = connect_start,
			.on_message = connect_message,
			.on_half_close = connect_half_close,
			.on_writable = connect_writable,
			.on_done = connect_done,
		},
	},
	{
		/* docs/EGRESS.md: buffers and streams of their own, so that no flood of egress
		 * calls starves an init's Connect */
		.path = "/agentic.sandbox.v1.AgentService/Egress",
		.request = &agentic__sandbox__v1__egress_chunk__descriptor,
		.response = &agentic__sandbox__v1__egress_chunk__descriptor,
		.flags = GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING | GRPC_OWN_POOL,
		.handler = {
			.on_start = egress_call_start,
			.on_message = egress_call_message,
			.on_half_close = egress_call_half_close,
			.on_writable = egress_call_writable,
			.on_done = egress_call_done,
		},
	},
};
const size_t agent_nmethods = ARRAY_LEN(agent_methods);
