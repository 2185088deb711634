/* link_view.c: the fleet's view as agenticd last got it (link_view.h), and what fleet-link
 * answers from it: a sandbox's owner (fleet_link_owner) and the next node of a fleet-wide list
 * (fleet_link_node_next). */
#include "fleet/link_view.h"

#include <stdio.h>
#include <string.h>

#include "fleet/wire.h"

static struct {
	char self[64];
	char nodes[FLEET_SNAPSHOT_BYTES]; /* the "nodes" array as the worker last sent it */
	size_t nodes_len;
	char sbs[FLEET_SB_PACKET_BYTES];  /* the fleet's sandboxes, as the worker last sent them */
	size_t sbs_len;
	bool sbs_more;
} v; /* zero, in .bss */

void link_view_self(const char *node)
{
	snprintf(v.self, sizeof(v.self), "%s", node);
}

void link_view_nodes_put(const char *arr, size_t len)
{
	if (len > sizeof(v.nodes))
		return;
	memcpy(v.nodes, arr, len);
	v.nodes_len = len;
}

void link_view_sbs_put(const char *arr, size_t len, bool more)
{
	if (len > sizeof(v.sbs))
		return;
	memcpy(v.sbs, arr, len);
	v.sbs_len = len;
	v.sbs_more = more;
}

const char *link_view_nodes(size_t *len)
{
	*len = v.nodes_len;
	return v.nodes;
}

const char *link_view_sbs(size_t *len, bool *more)
{
	*len = v.sbs_len;
	*more = v.sbs_more;
	return v.sbs;
}

const char *link_view_field(const char *p, const char *end, const char *key, char *out,
			    size_t cap)
{
	size_t k = strlen(key), n;
	const char *q;

	if ((size_t)(end - p) < k + 6 || p[0] != '"' || memcmp(p + 1, key, k) != 0 ||
	    memcmp(p + 1 + k, "\":\"", 3) != 0)
		return NULL;
	p += k + 4;
	q = memchr(p, '"', (size_t)(end - p));
	if (!q || (n = (size_t)(q - p)) >= cap)
		return NULL;
	memcpy(out, p, n);
	out[n] = '\0';
	return q + 1;
}

/* The entry of a view (nodes or sandboxes) that opens with {"FIRST":"NAME", : what follows
 * that, or NULL. */
static const char *entry_find(const char *view, size_t len, const char *first, const char *name)
{
	char pat[96];
	size_t n = (size_t)snprintf(pat, sizeof(pat), "{\"%s\":\"%s\",", first, name);

	return n < sizeof(pat) ? memmem(view, len, pat, n) : NULL;
}

bool link_view_node_known(const char *node)
{
	return entry_find(v.nodes, v.nodes_len, "node", node) != NULL;
}

/* The node entry's state and address, from just after its name: 0, or -1 when they do not
 * read. */
static int node_fields(const char *q, const char *end, char *state, size_t scap, char *addr,
		       size_t acap)
{
	if (!(q = link_view_field(q, end, "state", state, scap)))
		return -1;
	addr[0] = '\0';
	(void)link_view_field(q + 1, end, "addr", addr, acap);
	return 0;
}

int fleet_link_owner(const char *name, char *node, size_t ncap, char *addr, size_t acap)
{
	const char *end = v.sbs + v.sbs_len, *p = entry_find(v.sbs, v.sbs_len, "name", name), *q;
	char state[16];

	if (!v.self[0] || !p || !fleet_sandbox_name_ok(name, strlen(name)))
		return 0;
	p += strlen(name) + 11;
	/* two nodes' records claim the name (a node's certificate stolen, say): no one is sent
	 * anything for it */
	if (entry_find(p, (size_t)(end - p), "name", name))
		return FLEET_OWNER_TWICE;
	if (!(p = link_view_field(p, end, "node", node, ncap)) || strcmp(node, v.self) == 0)
		return 0;
	if (!(p = link_view_field(p + 1, end, "state", state, sizeof(state))))
		return 0;
	if (strcmp(state, "lost") == 0)
		return FLEET_OWNER_LOST;
	end = v.nodes + v.nodes_len;
	if (!(q = entry_find(v.nodes, v.nodes_len, "node", node)))
		return FLEET_OWNER_LOST;
	q += strlen(node) + 11;
	if (node_fields(q, end, state, sizeof(state), addr, acap) != 0 ||
	    strcmp(state, "lost") == 0)
		return FLEET_OWNER_LOST;
	if (!addr[0])
		return FLEET_OWNER_NO_ADDR;
	return 1;
}

int fleet_link_node_next(const char *from, bool past, const char *skip, char *node,
			 size_t ncap, char *addr, size_t acap)
{
	static const char head[] = "{\"node\":\"";
	const char *p = v.nodes, *end = v.nodes + v.nodes_len, *q;
	char name[64], state[16];

	/* the worker writes the nodes in their keys' order, so by name */
	while (v.self[0] && (p = memmem(p, (size_t)(end - p), head, sizeof(head) - 1))) {
		p += sizeof(head) - 1;
		if (!(q = memchr(p, '"', (size_t)(end - p))) || (size_t)(q - p) >= sizeof(name))
			return 0;
		snprintf(name, sizeof(name), "%.*s", (int)(q - p), p);
		p = q;
		if ((past ? strcmp(name, from) <= 0 : strcmp(name, from) < 0) ||
		    strcmp(name, skip) == 0 ||
		    node_fields(q + 2, end, state, sizeof(state), addr, acap) != 0 ||
		    strcmp(state, "lost") == 0 || (!addr[0] && strcmp(name, v.self) != 0) ||
		    (size_t)snprintf(node, ncap, "%s", name) >= ncap)
			continue;
		return 1;
	}
	return 0;
}
