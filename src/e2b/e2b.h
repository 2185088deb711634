/* e2b.h: the E2B-compatible API's interface for daemon/ and admin/ (the module is e2b, between
 * verify and admin). This minimal one declares what the daemon's hooks call at the end of a
 * create or remove an E2B client waits for (sandbox.waiter_kind SB_WAITER_E2B). */
#ifndef AGENTIC_E2B_H
#define AGENTIC_E2B_H

#include <stdint.h>

#include "sandbox/sandbox.h"

/* A create or remove the E2B connection (conn, gen) waits for ended: sb with status 201 or
 * 200; or it failed (status, code and message as the admin API's). Nothing when that
 * connection is gone. */
void e2b_finish_sandbox(int32_t conn, uint32_t gen, const struct sandbox *sb, int status);
void e2b_finish_error(int32_t conn, uint32_t gen, int status, const char *code,
		      const char *message);

#endif
