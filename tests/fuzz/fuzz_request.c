/* fuzz_request.c: any bytes as a create's and an exec's body: the validator never crashes,
 * every refusal carries a status, a code and a message, and what it accepts holds the rules
 * (a program, an absolute working_dir or none, env entries KEY=VALUE, no AGENT_ key); an
 * admin-v2 create is always refused here, since no profile exists. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/request.h"

static void refusal_ok(const struct request_error *e)
{
	if ((e->status != 400 && e->status != 422) || !e->code || !e->message[0] ||
	    !memchr(e->message, '\0', sizeof(e->message)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct create_req req;
	static struct config cfg;
	static char text[32768];
	struct request_text t = { text, 0, sizeof(text) };
	struct request_error e = { 0 };
	struct exec_req er;

	config_defaults(&cfg);
	if (request_create_parse(&req, &cfg, NULL, REQUEST_API_V1, data, size, &e) != 0)
		refusal_ok(&e);
	memset(&e, 0, sizeof(e));
	if (request_create_parse(&req, &cfg, NULL, REQUEST_API_V2, data, size, &e) == 0)
		abort(); /* a v2 create names a profile, and none exists here */
	refusal_ok(&e);
	memset(&e, 0, sizeof(e));
	if (request_exec_parse(&er, &t, data, size, &e) != 0) {
		refusal_ok(&e);
		return 0;
	}
	if (er.argc == 0 || !er.argv[0][0] || er.argc > LIMIT_SANDBOX_CMD_ARGS ||
	    er.nenv > LIMIT_SANDBOX_ENV || t.len > t.cap ||
	    (er.working_dir && er.working_dir[0] && er.working_dir[0] != '/'))
		abort();
	for (uint32_t i = 0; i < er.nenv; i++)
		if (!strchr(er.env[i], '=') || er.env[i][0] == '=' ||
		    strncmp(er.env[i], "AGENT_", 6) == 0)
			abort();
	return 0;
}
