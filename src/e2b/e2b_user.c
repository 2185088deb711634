/* e2b_user.c: what the E2B services share above the connection layer: the E2B user of a
 * request (contract C2: e2b_user_check), a path as that user names it (e2b_path_resolve), a
 * query's parameters, a unary Connect error's answer. Above e2b_conn.c; the routes and the
 * services call it. */
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

const char *e2b_user_refusal(struct e2b_conn *c, const char **code)
{
	const char *auth = e2b_header(c, "authorization");
	char user[64] = "", dec[96];

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
		return NULL;
	if (strcmp(user, "root") == 0) {
		*code = "permission_denied";
		return "agentic runs no command as root in a sandbox: workload processes are uid "
		       "10001 with no capabilities";
	}
	*code = "unauthenticated";
	return "invalid username: an agentic sandbox has one user, \"user\" (uid 10001)";
}

int e2b_user_check(struct e2b_conn *c)
{
	const char *code, *why = e2b_user_refusal(c, &code);

	if (!why)
		return 0;
	if (e2b_is_connect(c))
		e2b_connect_error(c, code, why);
	else
		e2b_reply_error(c, code[0] == 'p' ? 403 : 401, why);
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

void e2b_connect_error(struct e2b_conn *c, const char *code, const char *message)
{
	static const struct { const char *code; int status; } map[] = {
		{ "invalid_argument", 400 }, { "unauthenticated", 401 },
		{ "permission_denied", 403 }, { "not_found", 404 }, { "already_exists", 409 },
		{ "resource_exhausted", 429 }, { "unimplemented", 501 }, { "unavailable", 503 },
		{ "deadline_exceeded", 504 },
	};
	char text[1024];
	struct buf b;
	struct json_writer w;
	int status = 500;

	for (size_t i = 0; i < ARRAY_LEN(map); i++)
		if (strcmp(map[i].code, code) == 0)
			status = map[i].status;
	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "code");
	json_str_write(&w, code);
	json_key(&w, "message");
	json_str_write(&w, message);
	json_obj_end(&w);
	json_writer_finish(&w);
	e2b_reply(c, status, "application/json", b.data, b.len);
}
