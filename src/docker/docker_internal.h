/* docker_internal.h: what the files of src/docker share; not for other modules. */
#ifndef AGENTIC_DOCKER_INTERNAL_H
#define AGENTIC_DOCKER_INTERNAL_H

#include "docker.h"

/* One pooled connection with the buffers of the call that holds it. The request body is
 * written into `body` first and copied into `req`, so `body` is free again for the answer. */
struct docker_slot {
	struct http_conn conn;
	bool busy;
	uint8_t req[LIMIT_DOCKER_REQUEST_BYTES];
	uint8_t *body; /* response_limit bytes */
};

void call_prepare(struct docker_call *c, struct docker_client *dc, enum docker_op op,
		  const char *object);
/* Takes a connection from the pool for the call (DOCKER_ERR_BUSY when none is free). */
int call_acquire(struct docker_call *c);
/* Takes a connection (unless call_acquire did) and starts the exchange; json may be NULL. stream: the body goes to a
 * decoder as it comes instead of being buffered. read_timeout_ms -1: no limit. */
int call_start(struct docker_call *c, const char *method, const char *target, const char *json,
	       size_t json_len, bool stream, int read_timeout_ms);
/* Marks the call failed before it started, with our own words; gives back its connection. */
int call_fail_begin(struct docker_call *c, int code, const char *why);

#endif
