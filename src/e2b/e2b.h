/* e2b.h: the E2B-compatible API (issue 32; docs/E2B.md), the e2b module's interface for the
 * daemon (and admin): a TCP listener (config e2b_listen, off by default) serving E2B's control
 * plane (REST + JSON, X-API-KEY) and its envd plane (Connect + HTTP, routed by E2b-Sandbox-Id,
 * X-Access-Token) on one origin. The module sits above verify and below admin: it calls the
 * lifecycle, the sandbox table, exec and the other modules below it, and hears of a create's or
 * remove's end through e2b_finish_* (daemon_hooks.c). Its connection layer for the services
 * is e2b_conn.h. */
#ifndef AGENTIC_E2B_H
#define AGENTIC_E2B_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

struct config;
struct sandbox;

/* ---- E2B's fields of a sandbox (e2b_state.c): per slot, read through e2b_of ---- */
struct e2b_sb {
	uint32_t gen;                 /* the sandbox's gen these belong to */
	bool used;                    /* made through the E2B API */
	char template_id[64];
	int64_t started_ms;           /* wall ms: the E2B start (also the token's input) */
	uint8_t token_hash[32];       /* SHA-256 of the envd access token */
	char metadata[LIMIT_E2B_METADATA_BYTES]; /* a JSON object of strings, "{}" for none */
};
/* E2B's fields of sb, or NULL when sb was not made through the E2B API. */
const struct e2b_sb *e2b_of(const struct sandbox *sb);

/* ---- start-up (agenticd.c) ---- */
/* Storage the module needs for nconns connections and nsb sandbox slots (from the region);
 * 0 when nconns is 0 (the listener is off: no E2B sandbox is served). */
size_t e2b_storage_bytes(uint32_t nconns, uint32_t nsb);
/* The services' static tables (processes and their stdin waits, file operations, uploads, the
 * network options' scratch): in the memory budget beside the region's storage. */
size_t e2b_static_bytes(void);
struct e2b_config {
	const struct config *cfg;
	void *storage;                /* e2b_storage_bytes(nconns, nsb), zeroed */
	uint32_t nconns, nsb;
	int epfd;
	uint32_t tag_listen, tag_conn; /* the loop's tags of the listener and the connections */
};
/* Takes its tables (no I/O). */
void e2b_init(const struct e2b_config *ec);
/* The sandboxes recovered at start get their E2B fields back from their records. */
void e2b_recover(void);
/* With e2b_listen set (else nothing): opens (or makes, 0600) state_dir/e2b-secret and the API
 * keys, binds and watches the listener. 0, or -1 with why in err. */
int e2b_listen(char *err, size_t err_size);

/* ---- what the loop calls ---- */
void e2b_accept(void);
/* A connection another node of the fleet relayed (its certificate checked, its name node):
 * one request of the sandbox routes, on a sandbox of this node; closed when this node has no
 * E2B listener or relayed connections hold half of them already. */
void e2b_adopt_relayed(int fd, const char *node);
void e2b_event(uint32_t index, uint32_t events);
/* Cuts connections past their limits (head, body, idle) and runs the services' timers. */
void e2b_tick(int64_t now);
int64_t e2b_next_deadline(void); /* monotonic ms, INT64_MAX: none */
/* Stops accepting; answers in flight go out. */
void e2b_shutdown(void);
bool e2b_answering(void);

/* A create's placement answered (fleet/link.c; id has FLEET_PLACE_E2B): made here, relayed to
 * the node chosen, or refused. */
struct fleet_link_placed;
void e2b_placed(uint64_t id, const struct fleet_link_placed *p);

/* ---- a sandbox's life (daemon_hooks.c) ---- */
/* The create or remove connection (conn, gen) waited for ended: the sandbox with status (201
 * created, 200 removed), or the error. A connection gone since is forgotten. */
void e2b_finish_sandbox(int32_t conn, uint32_t gen, const struct sandbox *sb, int status);
void e2b_finish_error(int32_t conn, uint32_t gen, int status, const char *code,
		      const char *message);
/* sb's init is gone (a stop, a removal) or its slot released: its streams end. Its fields
 * are forgotten with the slot (e2b_of is NULL once the slot holds another sandbox). */
void e2b_sandbox_gone(struct sandbox *sb);

#endif
