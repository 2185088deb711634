/* link_view.h: part of fleet-link (link.h), the fleet's view as agenticd last got it from its
 * worker: the nodes and the sandboxes, each the JSON array the worker wrote, kept as it came.
 * link.c puts each packet's array here; the questions asked of it (who owns a sandbox, which
 * node comes next in a list) are answered here. Owns: the two arrays and this node's name.
 * Calls: the fleet's wire format (names' checks) only. */
#ifndef AGENTIC_FLEET_LINK_VIEW_H
#define AGENTIC_FLEET_LINK_VIEW_H
#include <stdbool.h>
#include <stddef.h>

/* This node's name, at start (a fleet is configured). */
void link_view_self(const char *node);
/* The worker's arrays, copied: the nodes', and the sandboxes' with its "more". */
void link_view_nodes_put(const char *arr, size_t len);
void link_view_sbs_put(const char *arr, size_t len, bool more);
/* What was put last (len 0 before anything was). */
const char *link_view_nodes(size_t *len);
const char *link_view_sbs(size_t *len, bool *more);
/* A node the view lists, in any state. */
bool link_view_node_known(const char *node);
/* The view's "KEY":"VALUE" right at p (the worker's writer: no string holds a quote), VALUE
 * copied into out: the byte after its closing quote, or NULL. */
const char *link_view_field(const char *p, const char *end, const char *key, char *out,
			    size_t cap);

/* Where the sandbox name lives when another node of the fleet has it, by the views last read:
 * 1 with its node and that node's address (fleet_advertise), 0 when the fleet knows no such
 * sandbox on another node, FLEET_OWNER_LOST when its node is lost, FLEET_OWNER_NO_ADDR when
 * that node advertises no address, FLEET_OWNER_TWICE when two nodes' records claim the name. */
#define FLEET_OWNER_LOST 2
#define FLEET_OWNER_NO_ADDR 3
#define FLEET_OWNER_TWICE 4
int fleet_link_owner(const char *name, char *node, size_t ncap, char *addr, size_t acap);
/* The fleet-wide list's next node (docs/FLEET.md "The E2B listener"): the first node of the
 * view, by name, from from (past: after it), not skip, not lost, with an address (this node
 * needs none). 1 with its name and address ("" for a node without), 0 when no node is left. */
int fleet_link_node_next(const char *from, bool past, const char *skip, char *node,
			 size_t ncap, char *addr, size_t acap);
#endif
