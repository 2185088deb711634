/* fleet_kv.h: the fleet's unit tests' records as etcd would hold them: a key and a value into
 * the next entry of a table (test_fleet_place.c, test_link_view.c). */
#ifndef AGENTIC_TEST_FLEET_KV_H
#define AGENTIC_TEST_FLEET_KV_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fleet/etcd.h"

static inline void kv_add(struct etcd_kv *t, size_t *n, const char *key, const char *value,
			  int64_t lease, int64_t rev)
{
	struct etcd_kv *kv = &t[(*n)++];

	memset(kv, 0, sizeof(*kv));
	snprintf(kv->key, sizeof(kv->key), "%s", key);
	kv->key_len = strlen(kv->key);
	kv->value_len = strlen(value);
	memcpy(kv->value, value, kv->value_len);
	kv->lease = lease;
	kv->mod_revision = rev;
}
#endif
