/* admin_grpc.c: gRPC on the admin socket: agentic.sandbox.v1.AgentService/Exec, for
 * connections admin_http.c found opening with the HTTP/2 preface. A call is an exec session whose
 * sink frames output in an admin connection slot's out/spill as the upgraded stream does;
 * admin_grpc_pump sends it on as ExecOutput messages, one at a time as the call's send buffer
 * frees, then the final one with complete set. The request passes the same checks, in the same
 * words, as the HTTP API's (request.c). */
#include <stdio.h>
#include <string.h>

#include "agent.pb-c.h"
#include "admin/admin.h"
#include "admin/admin_conn.h"
#include "profile/credscan.h"

/* The gRPC status for a refusal the HTTP API gives with status. */
static int grpc_status_of(int status)
{
	switch (status) {
	case 400: return GRPC_INVALID_ARGUMENT;
	case 404: return GRPC_NOT_FOUND;
	case 409: return GRPC_FAILED_PRECONDITION;
	case 422: return GRPC_PERMISSION_DENIED;
	case 507: return GRPC_UNAVAILABLE;
	default: return GRPC_RESOURCE_EXHAUSTED;
	}
}

/* Ends the call (its slot is freed first: on_done may run inside grpc_call_finish). */
static void call_end(struct admin_conn *c, int status, const char *message)
{
	struct grpc_call *call = c->call;

	c->call = NULL;
	grpc_call_set_user(call, NULL);
	admin_conn_close(c);
	grpc_call_finish(call, status, message, NULL, 0);
}

/* The last message: complete, with the exit code and error; or the call's end with
 * RESOURCE_EXHAUSTED when the client was dropped. False while the send buffer is full. */
static bool pump_end(struct admin_conn *c)
{
	Agentic__Sandbox__V1__ExecOutput o = AGENTIC__SANDBOX__V1__EXEC_OUTPUT__INIT;
	int r;

	if (c->dropped) {
		call_end(c, GRPC_RESOURCE_EXHAUSTED, c->error);
		return true;
	}
	o.complete = 1;
	o.exit_code = c->exit_code;
	o.error = c->error;
	r = grpc_call_send(c->call, &o.base);
	if (r == -EAGAIN)
		return false;
	call_end(c, r == 0 ? GRPC_OK : GRPC_RESOURCE_EXHAUSTED, r == 0 ? NULL : "no message buffer free");
	return true;
}

void admin_grpc_pump(struct admin_conn *c)
{
	while (c->call) {
		Agentic__Sandbox__V1__ExecOutput o = AGENTIC__SANDBOX__V1__EXEC_OUTPUT__INIT;
		uint32_t avail, n;
		int r;

		if (c->out_off == c->out_len)
			admin_exec_refill(c);
		avail = c->out_len - c->out_off;
		if (!avail) {
			if (c->exec < 0)
				pump_end(c);
			return;
		}
		if (!frame_reader_open(&c->fr)) {
			c->out_off += (uint32_t)frame_reader_head(&c->fr, c->out + c->out_off, avail);
			if (frame_reader_open(&c->fr) && c->fr.left == 0)
				frame_reader_take(&c->fr, 0);
			continue;
		}
		/* a piece fits one small message buffer, with room for the fields around it */
		n = c->fr.left < avail ? c->fr.left : avail;
		if (n > GRPC_SMALL_MESSAGE - 64)
			n = GRPC_SMALL_MESSAGE - 64;
		o.stream = frame_reader_type(&c->fr) == FRAME_STDERR
				   ? AGENTIC__SANDBOX__V1__EXEC_OUTPUT__STREAM__STDERR
				   : AGENTIC__SANDBOX__V1__EXEC_OUTPUT__STREAM__STDOUT;
		o.data.data = c->out + c->out_off;
		o.data.len = n;
		r = grpc_call_send(c->call, &o.base);
		if (r == -EAGAIN)
			return;
		if (r != 0) {
			call_end(c, GRPC_RESOURCE_EXHAUSTED, "no message buffer free");
			return;
		}
		c->out_off += n;
		frame_reader_take(&c->fr, n);
	}
}

static void sink_done(void *ctx, int32_t exit_code, int64_t duration_ms, const char *error,
		      const char *transcript_error)
{
	struct admin_conn *c = ctx;

	if (!c || c->phase != AC_EXEC)
		return;
	c->exit_code = exit_code;
	if (error && *error)
		snprintf(c->error, sizeof(c->error), "%s", error);
	else if (transcript_error)
		snprintf(c->error, sizeof(c->error), "transcript incomplete: %s", transcript_error);
	c->exec = -1;
	admin_flush(c);
}

const struct exec_sink_ops admin_grpc_sink_ops = {
	.client = "grpc",
	.output = admin_exec_frame_output,
	.done = sink_done,
	.stdin_taken = NULL,
};

/* The request's parts into er, through the checks every exec passes. */
static int exec_request(struct exec_req *er, const Agentic__Sandbox__V1__ExecRequest *rq,
			struct request_error *e)
{
	static char text[LIMIT_ADMIN_BODY_BYTES];
	struct request_text t = { text, 0, sizeof(text) };

	memset(er, 0, sizeof(*er));
	if (request_exec_arg(er, rq->command, e) != 0)
		return -1;
	for (size_t i = 0; i < rq->n_args; i++)
		if (request_exec_arg(er, rq->args[i], e) != 0)
			return -1;
	for (size_t i = 0; i < rq->n_env; i++)
		if (request_exec_env(er, &t, rq->env[i]->key, rq->env[i]->value, e) != 0)
			return -1;
	er->working_dir = rq->working_dir;
	er->timeout_seconds = rq->timeout_seconds;
	return request_exec_check(er, e);
}

static void exec_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	static struct exec_req er;
	const Agentic__Sandbox__V1__ExecRequest *rq = (const void *)msg;
	struct request_error e = { 0 };
	struct exec_sink sink = { &admin_grpc_sink_ops, NULL };
	struct admin_conn *c;
	struct sandbox *sb;
	int x;

	sb = sandbox_by_name(rq->agent_id);
	if (!sb) {
		snprintf(e.message, sizeof(e.message), "no sandbox is named %.64s",
			 credscan_value(rq->agent_id) ? "that (a name shaped like a credential)"
			 : rq->agent_id);
		grpc_call_finish(call, GRPC_NOT_FOUND, e.message, NULL, 0);
		return;
	}
	if (exec_request(&er, rq, &e) != 0 || admin_exec_refused(sb, 0, &e) != 0) {
		grpc_call_finish(call, grpc_status_of(e.status), e.message, NULL, 0);
		return;
	}
	c = admin_conn_take();
	if (!c) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "too many admin connections and "
				 "exec calls (max_admin_connections)", NULL, 0);
		return;
	}
	sink.ctx = c;
	x = exec_begin(sb, &er, &sink);
	if (x < 0) {
		admin_exec_refused(sb, x, &e);
		grpc_call_finish(call, grpc_status_of(e.status), e.message, NULL, 0);
		return;
	}
	c->phase = AC_EXEC;
	c->exec = x;
	c->call = call;
	c->keep_alive = false;
	c->uid = grpc_call_peer(call)->uid;
	c->pid = grpc_call_peer(call)->pid;
	c->allowed = true;
	grpc_call_set_user(call, c);
}

static void exec_writable(struct grpc_call *call)
{
	struct admin_conn *c = grpc_call_user(call);

	if (c)
		admin_grpc_pump(c);
}

/* The client cancelled or went away: as with an HTTP client that leaves, the command runs
 * on and its transcript stays complete. */
static void exec_call_done(struct grpc_call *call, int status, const char *message)
{
	struct admin_conn *c = grpc_call_user(call);

	(void)status;
	(void)message;
	if (!c)
		return;
	c->call = NULL;
	grpc_call_set_user(call, NULL);
	admin_conn_close(c);
}

const struct grpc_method admin_grpc_methods[] = {
	{
		.path = "/agentic.sandbox.v1.AgentService/Exec",
		.request = &agentic__sandbox__v1__exec_request__descriptor,
		.response = &agentic__sandbox__v1__exec_output__descriptor,
		.flags = GRPC_SERVER_STREAMING,
		.handler = {
			.on_message = exec_message,
			.on_writable = exec_writable,
			.on_done = exec_call_done,
		},
	},
};
const size_t admin_grpc_nmethods = ARRAY_LEN(admin_grpc_methods);
