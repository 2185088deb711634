/* netpool.c: the warm network pool (netpool.h). */
#include <stdio.h>
#include <string.h>

#include "lifecycle/netpool.h"
#include "sandbox/sandbox.h"

void netpool_init(struct netpool *p, struct runtime *rt, uint32_t slot, struct idalloc *subnets)
{
	memset(p, 0, sizeof(*p));
	p->rt = rt;
	p->subnets = subnets;
	p->call.slot = slot;
	p->pending.subnet = -1;
}

void netpool_fill(struct netpool *p, int64_t now, bool hold)
{
	uint32_t idx;
	char hex[16];
	int r;

	if (hold || p->active || now < p->retry_at)
		return;
	if (p->orphan) {
		p->call = (struct rt_call){ .op = RT_NET_REMOVE, .slot = p->call.slot,
					    .id = p->pending.name };
		if (runtime_call(p->rt, &p->call) != 0)
			p->retry_at = now + POOL_RETRY_MS;
		else
			p->active = true;
		return;
	}
	if (p->n >= LIMIT_WARM_NETWORKS)
		return;
	if (idalloc_take(p->subnets, &idx) != 0)
		return;
	p->pending.subnet = (int32_t)idx;
	p->pending.id[0] = '\0';
	random_hex(hex, 12);
	snprintf(p->pending.name, sizeof(p->pending.name), "agentic-net-%s", hex);
	subnet_text(p->pending.subnet, p->subnet_text, sizeof(p->subnet_text));
	p->call = (struct rt_call){ .op = RT_NET_CREATE, .slot = p->call.slot,
				    .name = p->pending.name, .subnet = p->subnet_text };
	if ((r = runtime_call(p->rt, &p->call)) != 0) {
		idalloc_free(p->subnets, idx);
		p->retry_at = now + POOL_RETRY_MS;
		return;
	}
	p->active = true;
}

void netpool_done(struct netpool *p, int64_t now)
{
	struct rt_result *res = &p->call.res;

	p->active = false;
	if (p->call.op == RT_NET_REMOVE) {
		if (res->outcome != RT_OK && res->outcome != RT_GONE) {
			p->retry_at = now + POOL_RETRY_MS;
			return;
		}
		p->orphan = false;
		idalloc_free(p->subnets, (uint32_t)p->pending.subnet);
		p->pending.subnet = -1;
		return;
	}
	if (res->outcome == RT_ENGINE || res->outcome == RT_UNREADABLE) {
		/* no word that nothing was made: removed by its name (its own) before the next */
		log_warn("warm network not created; removing it in case it was", "name=%s error=%s",
			 log_q(p->pending.name), log_q(res->text));
		p->orphan = true;
		p->retry_at = now + POOL_RETRY_MS;
		return;
	}
	if (res->outcome != RT_OK) {
		log_warn("warm network not created", "name=%s error=%s", p->pending.name,
			 log_q(res->text));
		if (res->outcome == RT_OVERLAPS) {
			subnet_refused((uint32_t)p->pending.subnet); /* the next fill takes the next /28 */
		} else {
			idalloc_free(p->subnets, (uint32_t)p->pending.subnet);
			p->retry_at = now + POOL_RETRY_MS;
		}
		return;
	}
	memcpy(p->pending.id, res->id, sizeof(p->pending.id));
	p->warm[p->n++] = p->pending;
}

bool netpool_take(struct netpool *p, struct warm_net *out)
{
	if (!p->n)
		return false;
	*out = p->warm[--p->n];
	return true;
}

bool netpool_keep(struct netpool *p, const char *name, const char *id, int32_t subnet)
{
	struct warm_net *w;

	if (p->n >= LIMIT_WARM_NETWORKS)
		return false;
	w = &p->warm[p->n++];
	snprintf(w->name, sizeof(w->name), "%.63s", name);
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->subnet = subnet;
	return true;
}

int64_t netpool_next_deadline(const struct netpool *p, int64_t now)
{
	return p->retry_at > now ? p->retry_at : INT64_MAX;
}
