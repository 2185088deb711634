/* e2b_state.h: e2b/'s own header for E2B's fields of a sandbox (e2b_state.c): set at a
 * create, kept in the sandbox's record, read back at start; the envd access token, derived
 * from a secret of agenticd's (state_dir/e2b-secret) so it is never stored in clear. */
#ifndef AGENTIC_E2B_STATE_H
#define AGENTIC_E2B_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "e2b/e2b.h"

/* an access token: 40 lowercase hex characters */
#define E2B_TOKEN_CHARS 40

/* The per-slot table (nsb slots, zeroed; 0: the listener is off). */
void e2b_state_init(struct e2b_sb *tab, uint32_t nsb);
/* The secret, state_dir/e2b-secret: opened, or made 0600 at the first start. 0, or -1 with
 * why in err. */
int e2b_state_secret(const struct config *cfg, char *err, size_t err_size);
/* A sandbox made through the E2B API: its template, metadata (a JSON object's text) and
 * start, kept in its slot and its record's blob (written with the next record write). 0, or
 * -E2BIG when they do not fit the record. */
int e2b_state_set(struct sandbox *sb, const char *template_id, const char *metadata,
		  int64_t started_ms);
/* The record's blob read back into the slot (a sandbox recovered at start); nothing when it
 * has none or it does not read. */
void e2b_state_load(struct sandbox *sb);
/* sb's access token (E2B_TOKEN_CHARS + NUL), derived again: only for create's and connect's
 * answers and a signed URL's check. */
void e2b_token(const struct sandbox *sb, char *out);
/* SHA-256 of data into out (32 bytes). */
void e2b_sha256(const void *data, size_t len, uint8_t *out);
/* token is sb's (constant time over the hashes). */
bool e2b_token_ok(const struct sandbox *sb, const char *token);

#endif
