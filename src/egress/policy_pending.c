/* policy_pending.c: stand-ins, weak, for the policy functions of policy.c while that file is
 * on another branch, so the binary links; every policy is refused, so a worker built with
 * them refuses every connection (worker_failed). policy.c's definitions replace them. */
#include "egress/policy.h"

__attribute__((weak)) const char *egress_reason_word(enum egress_reason r)
{
	return "worker_failed";
}

__attribute__((weak)) int egress_policy_parse(const char *json, size_t len,
					      struct egress_policy *out, char *err, size_t errcap)
{
	return ERR_PARSE;
}

__attribute__((weak)) enum egress_reason egress_match_connect(const struct egress_policy *p,
							      const char *host, uint16_t port)
{
	return ER_HOST_NOT_ALLOWED;
}

__attribute__((weak)) enum egress_reason egress_match_route(const struct egress_policy *p,
							    const char *host, uint16_t port,
							    const char *method, const char *path,
							    uint32_t *route)
{
	return ER_HOST_NOT_ALLOWED;
}

__attribute__((weak)) bool egress_addr_allowed(const struct egress_policy *p,
					       const struct sockaddr *sa,
					       const struct egress_own_addrs *own)
{
	return false;
}
