/* runtime_vm_sb.c: the VM state of every sandbox slot (struct vm_sb, runtime_vm.h): the table
 * runtime_vm_init hands over, its read-only accessor, its writers, and an entry's reset when its
 * sandbox slot is reused (seen by the slot's gen: the sandbox table never calls up). */
#include <stdio.h>
#include <string.h>

#include "runtime/runtime_vm_priv.h"

static struct {
	struct vm_sb *slots;
	uint32_t n;
	struct vm_sb scratch;         /* no table set up (a unit test, the simulator): the last
				       * sandbox's to use it (another one finds it reset) */
	const struct sandbox *owner;  /* whose entry it is now */
} V;

void vm_sb_init(struct vm_sb *slots, uint32_t nslots)
{
	V.slots = slots;
	V.n = slots ? nslots : 0;
	if (slots)
		memset(slots, 0, (size_t)nslots * sizeof(*slots));
}

static struct vm_sb *vm_sb_slot(const struct sandbox *sb)
{
	struct vm_sb *e = &V.scratch;

	if (V.n) {
		uint32_t i = sandbox_index(sb);

		ASSERT(i < V.n);
		e = &V.slots[i];
	} else if (V.owner != sb) {
		V.owner = sb;
		e->gen = sb->gen + 1;
	}
	if (e->gen != sb->gen) {
		memset(e, 0, sizeof(*e));
		e->gen = sb->gen;
	}
	return e;
}

const struct vm_sb *vm_of(const struct sandbox *sb)
{
	return vm_sb_slot(sb);
}

void runtime_vm_creds_set(struct sandbox *sb, const struct create_req *req)
{
	struct vm_sb *e = vm_sb_slot(sb);

	for (uint32_t i = 0; i < req->ncreds && i < PROFILE_CREDS_MAX; i++) {
		snprintf(e->creds[i].id, sizeof(e->creds[i].id), "%s", req->creds[i].id);
		snprintf(e->creds[i].name, sizeof(e->creds[i].name), "%s", req->creds[i].name);
		e->creds[i].file = req->creds[i].file;
	}
	e->ncreds = (uint8_t)(req->ncreds < PROFILE_CREDS_MAX ? req->ncreds : PROFILE_CREDS_MAX);
}

void runtime_vm_claim_owed(struct sandbox *sb, bool owed)
{
	vm_sb_slot(sb)->claim_owed = owed;
}
