/* e2b_user.c: what the E2B services share above the connection layer: the E2B user of a
 * request (contract C2: e2b_user_check), a path as that user names it (e2b_path_resolve), a
 * query's parameters. Above e2b_conn.c; the routes and the services call it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "e2b/e2b_internal.h"
#include "grpc/grpc.h"

/* A query parameter, percent-decoded (cut to size; "" when absent). */
void e2b_query_value(const char *query, const char *name, char *out, size_t size)
{
	size_t n = strlen(name), o = 0;

	out[0] = '\0';
	for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		if (strncmp(p, name, n) != 0 || p[n] != '=')
			continue;
		for (p += n + 1; *p && *p != '&' && o + 1 < size; p++) {
			unsigned v;

			if (*p == '%' && sscanf(p + 1, "%2x", &v) == 1 && v) {
				out[o++] = (char)v;
				p += 2;
			} else {
				out[o++] = *p == '+' ? ' ' : *p;
			}
		}
		out[o] = '\0';
		return;
	}
}

bool e2b_is_connect(const struct e2b_conn *c)
{
	return strncmp(e2b_path(c), "/process.", 9) == 0 || strncmp(e2b_path(c), "/filesystem.", 12) == 0;
}

int e2b_user_check(struct e2b_conn *c)
{
	static const char root[] = "agentic runs no command as root in a sandbox: workload "
				   "processes are uid 10001 with no capabilities";
	const char *auth = e2b_header(c, "authorization");
	char user[64] = "", dec[96];
	bool connect = e2b_is_connect(c);

	if (auth && strncasecmp(auth, "Basic ", 6) == 0) {
		long n = grpc_base64_decode(auth + 6, strlen(auth + 6), dec, sizeof(dec) - 1);

		if (n < 0)
			n = 0;
		dec[n] = '\0';
		snprintf(user, sizeof(user), "%.*s", (int)strcspn(dec, ":"), dec);
	} else {
		e2b_query_value(e2b_query(c), "username", user, sizeof(user));
	}
	if (!user[0] || strcmp(user, "user") == 0)
		return 0;
	if (strcmp(user, "root") == 0) {
		if (connect)
			e2b_connect_error(c, "permission_denied", root);
		else
			e2b_reply_error(c, 403, root);
		return -1;
	}
	if (connect)
		e2b_connect_error(c, "unauthenticated", "invalid username: an agentic sandbox has "
				  "one user, \"user\" (uid 10001)");
	else
		e2b_reply_error(c, 401, "invalid username: an agentic sandbox has one user, "
				"\"user\" (uid 10001)");
	return -1;
}

int e2b_path_resolve(const char *in, char *out, size_t cap)
{
	int n;

	if (!in || !in[0])
		return -EINVAL;
	if (in[0] == '/')
		n = snprintf(out, cap, "%s", in);
	else if (in[0] == '~' && (in[1] == '\0' || in[1] == '/'))
		n = snprintf(out, cap, "/home/user%s", in + 1);
	else
		n = snprintf(out, cap, "/home/user/%s", in);
	return n < 0 || (size_t)n >= cap ? -EINVAL : 0;
}
