/* e2b_keys.h: the E2B API keys (docs/E2B.md "Keys"): "e2b_" + 40 lowercase hex, minted here
 * from random_bytes and shown once, to whoever made it; only their SHA-256 is kept, in
 * state_dir/e2b-keys (root's, 0600, rewritten whole: a temp file and a rename), one line
 * per key: "ID NAME CREATED SHA256HEX" (ID 16 hex, NAME [A-Za-z0-9._-]{1,64}, CREATED
 * seconds since the epoch). At most LIMIT_E2B_KEYS keys, held in static storage. */
#ifndef AGENTIC_E2B_KEYS_H
#define AGENTIC_E2B_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#define E2B_KEY_PREFIX "e2b_"
#define E2B_KEY_HEX 40
#define E2B_KEY_BYTES (sizeof(E2B_KEY_PREFIX) - 1 + E2B_KEY_HEX + 1) /* with its NUL */
#define E2B_KEY_ID_BYTES 17       /* 16 hex and the NUL */
#define E2B_KEY_NAME_BYTES 65     /* 64 and the NUL */
#define LIMIT_E2B_KEYS 64

/* What is shown of a key: never the key nor its hash. */
struct e2b_key_info {
	char id[E2B_KEY_ID_BYTES];
	char name[E2B_KEY_NAME_BYTES];
	int64_t created;              /* seconds since the epoch */
};

/* Reads state_dir/e2b-keys (none there: no key yet). Refused (a negative code, and
 * e2b_keys_error says why, naming the file and the rule) when it is not a regular file of
 * agenticd's own user (root) with mode 0600, or a line is not a key's. */
int e2b_keys_open(const char *state_dir);
const char *e2b_keys_error(void);
/* Whether key is one of the keys: its hash compared with every key's, in constant time
 * (every byte of every key, whichever matched). */
bool e2b_key_valid(const char *key);
/* A new key named name (NULL or "": "default"): key_out (E2B_KEY_BYTES) and id_out
 * (E2B_KEY_ID_BYTES) filled and the file rewritten. 0; -EINVAL a bad name, ERR_LIMIT
 * LIMIT_E2B_KEYS exist, or the write's error (then no key was made). */
int e2b_key_create(const char *name, char *key_out, char *id_out);
/* The keys, in the order they were made: the i-th, or NULL past the last. */
const struct e2b_key_info *e2b_key_at(uint32_t i);
/* Removes the key with that id and rewrites the file: 0, -ENOENT, or the write's error
 * (then the key stays). */
int e2b_key_remove(const char *id);
/* A name a key may have: [A-Za-z0-9._-]{1,64}, not starting "e2b_" (a key pasted there). */
bool e2b_key_name_valid(const char *name);

#endif
