/* e2b_internal.h: e2b/'s own header (nothing outside src/e2b includes it): what the module's
 * files share beyond contract C2 (e2b_conn.h). e2b_conn.h lists which file may call which. */
#ifndef AGENTIC_E2B_INTERNAL_H
#define AGENTIC_E2B_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "e2b/e2b.h"
#include "e2b/e2b_conn.h"
#include "e2b/e2b_keys.h"
#include "e2b/e2b_net.h"
#include "e2b/e2b_state.h"
#include "lifecycle/lifecycle.h"
#include "sandbox/sandbox.h"

struct config;


/* ---- e2b_user.c ---- */
/* A query's parameter, percent-decoded, cut to size; "" when absent. */
void e2b_query_value(const char *query, const char *name, char *out, size_t size);
/* The request is a Connect call (process.Process, filesystem.Filesystem). */
bool e2b_is_connect(const struct e2b_conn *c);

/* ---- e2b_api.c: the control plane's handlers (arg: the path's sandbox id, or "") ---- */
void e2b_api_create(struct e2b_conn *c, const char *arg);
void e2b_api_connect(struct e2b_conn *c, const char *id);
void e2b_api_get(struct e2b_conn *c, const char *id);
void e2b_api_delete(struct e2b_conn *c, const char *id);
void e2b_api_timeout(struct e2b_conn *c, const char *id);
void e2b_api_list(struct e2b_conn *c, const char *arg);
/* The create slots (ncreates of storage): creates in flight at once. */
#define E2B_CREATES 16
size_t e2b_api_bytes(uint32_t ncreates);
void e2b_api_start(const struct config *cfg, void *storage, uint32_t ncreates);
/* The sandbox an id names for the API: made through it, and not going; NULL: 404 for it. */
struct sandbox *e2b_api_sandbox(const char *id);
/* The API is stopping (agenticd's SIGTERM): creates are refused. */
void e2b_api_stop(void);
/* A create this node relayed to another a moment ago (placement chose it) named id: true with
 * that node and its address (its record may not be in this node's view yet). */
bool e2b_api_placed_on(const char *id, char *node, size_t ncap, char *addr, size_t acap);

#endif
