/* posture.h: what agentic guarantees for one sandbox, as a tier and the reasons for it.
 *
 * T1 holds only while every condition does: the sandbox's network is the managed internal one
 * (read back from the engine, not assumed), its identity is the separated UDS peer-credential
 * one, its request carried no raw credential, no credential reaches it except through the
 * credential proxy, and nothing has tainted it since. Anything else is T0, with the reasons
 * (fixed words, docs/POSTURE.md). Reasons known at create are kept as they were; taints
 * seen later (an out-of-band `docker exec`, a network connected to it, its container
 * changed, an operator's declaration) are sticky for the rest of the container's life and
 * are kept in sandbox.json, so a restarted agenticd reports the same.
 *
 * Pure: names, the tier, the JSON, the record. A change on a live sandbox goes through
 * taint.h, which logs, traces and persists it. */
#ifndef AGENTIC_MGMT_POSTURE_H
#define AGENTIC_MGMT_POSTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json/json.h"

struct create_req;

enum posture_reason {
	POSTURE_ENV_CREDENTIAL = 0,     /* a raw credential in the create's env */
	POSTURE_OPERATOR_NETWORK,       /* the operator named the network */
	POSTURE_PLATFORM_COMPATIBILITY, /* a normal bridge made for a platform's sake */
	POSTURE_DIRECT_DOCKER_EXEC,     /* `docker exec` into it, behind agenticd's back */
	POSTURE_NETWORK_ATTACHED,       /* another network connected to it */
	POSTURE_CONTAINER_CHANGED,      /* `docker update`, `docker cp` into it, `docker commit` */
	POSTURE_OPERATOR_DECLARED,      /* an admin said so (a manual provider login, ...) */
	POSTURE_NETWORK_UNVERIFIED,     /* the engine does not show its network as the managed
					 * internal one (not Internal, no inhibit_ipv4, or not
					 * read yet) */
	POSTURE_EGRESS_REPORT_ONLY,     /* its egress policy was in report mode: what enforce
					 * would deny went out */
	POSTURE_REASONS
};

enum posture_egress {
	POSTURE_EGRESS_DEFAULT_DENY = 0,
	POSTURE_EGRESS_PROXY_ALLOWLIST,
	POSTURE_EGRESS_OPERATOR_SUPPLIED,
	POSTURE_EGRESS_UNRESTRICTED_COMPAT,
	POSTURE_EGRESS_NONE,            /* a VM: no network interface at all, no policy */
};

enum posture_isolation {
	POSTURE_SHARED_KERNEL = 0,
	POSTURE_VM_EMULATED,            /* a VM under TCG: its own kernel, QEMU's emulation */
	POSTURE_VM_HARDWARE,            /* a VM under KVM */
};

struct posture {
	uint16_t at_create;       /* reason bits known at create, fixed from then on */
	uint16_t taints;          /* reason bits seen since, sticky */
	uint8_t egress;           /* enum posture_egress */
	uint8_t isolation;        /* enum posture_isolation */
	bool net_checked;         /* the engine's view of the network was read */
	bool net_ok;              /* ... and it is the managed internal one, alone */
	int64_t taint_ms[POSTURE_REASONS]; /* wall ms a taint was first seen, 0: never */
};

#define POSTURE_BIT(r) ((uint16_t)(1u << (r)))

/* The fixed words: "env_credential", ... NULL past the end. */
const char *posture_reason_name(enum posture_reason r);
/* A word back to its reason: 0 and *r, or -1 when it is not one of the words. */
int posture_reason_parse(const char *word, enum posture_reason *r);
const char *posture_egress_name(enum posture_egress e);     /* "default-deny", ... */
/* "shared-kernel", "emulated", "hardware-virtualized" */
const char *posture_isolation_name(enum posture_isolation i);

/* Every reason bit in force now (at_create | taints | unverified network). */
uint16_t posture_reasons(const struct posture *p);
/* "T1" when no reason is in force, else "T0". */
bool posture_is_t1(const struct posture *p);
const char *posture_tier(const struct posture *p);

/* What a create request would start as, before any engine call: env scanned for raw
 * credentials, an operator network, its egress policy (egress "proxy-allowlist"). The network
 * is not verified yet (net_checked false). A policy in report mode is a taint, not a reason
 * at create: the caller records it with posture_taint (taint.h). */
void posture_from_request(struct posture *p, const struct create_req *req);
/* A policy set (or not) on a sandbox: egress "proxy-allowlist", or "default-deny" without
 * one; an operator's network stays "operator-supplied". */
void posture_egress_policy(struct posture *p, bool has_policy);
/* The reasons a request would be T0 for (as posture_reasons would say once its managed
 * network is verified, egress_report_only included): 0 when it would be T1. */
uint16_t posture_request_reasons(const struct create_req *req);

/* The API's object: {"tier", "isolation", "egress", "identity", "reasons": [...],
 * "taints": [{"reason", "at"}]}. */
void posture_json(struct json_writer *w, const struct posture *p);
/* "T0 (env_credential, direct_docker_exec)" or "T1", for a human; 0 or ERR_LIMIT. */
int posture_text(const struct posture *p, char *out, size_t size);

/* sandbox.json's "posture" value, and reading it back (0, or ERR_PARSE and p unchanged). */
void posture_record_write(struct json_writer *w, const struct posture *p);
int posture_record_read(const struct json_doc *doc, int tok, struct posture *p);

#endif
