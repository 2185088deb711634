/* write.c: serializes HTTP/1.1 requests, refusing anything that could split a header. */
#include <errno.h>
#include <string.h>

#include "http.h"

static bool safe(const char *s)
{
	return strpbrk(s, "\r\n") == NULL;
}

int http_request_write(struct buf *out, const char *method, const char *target, const char *host,
		       const struct http_field *fields, const void *body, size_t body_len)
{
	size_t start = out->len;
	bool sized = body != NULL || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
		     strcmp(method, "PATCH") == 0;
	int r;

	if (!*method || !*target || !*host || !safe(method) || !safe(target) || !safe(host) ||
	    strchr(method, ' ') || strchr(target, ' '))
		return -EINVAL;
	for (const struct http_field *f = fields; f && f->name; f++)
		if (!*f->name || !safe(f->name) || !safe(f->value) || strchr(f->name, ':'))
			return -EINVAL;

	r = buf_printf(out, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, host);
	for (const struct http_field *f = fields; r == 0 && f && f->name; f++)
		r = buf_printf(out, "%s: %s\r\n", f->name, f->value);
	if (r == 0 && sized)
		r = buf_printf(out, "Content-Length: %zu\r\n", body ? body_len : 0);
	if (r == 0)
		r = buf_append(out, "\r\n", 2);
	if (r == 0 && body)
		r = buf_append(out, body, body_len);
	if (r != 0)
		out->len = start;
	return r;
}
