/* write.c: serializes HTTP/1.1 requests and responses, refusing anything that could split a
 * header; a response's Content-Length is always its body's length. */
#include <errno.h>
#include <string.h>
#include <strings.h>

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

const char *http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 101: return "UPGRADED"; /* Docker's word for its attach stream; clients read the code */
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Content Too Large";
	case 422: return "Unprocessable Content";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 507: return "Insufficient Storage";
	default: return "Error";
	}
}

int http_response_head_write(struct buf *out, int status, const struct http_field *fields,
			     int64_t length, bool close)
{
	size_t start = out->len;
	int r;

	if (status < 100 || status > 599 || length < HTTP_NO_BODY)
		return -EINVAL;
	for (const struct http_field *f = fields; f && f->name; f++)
		if (!*f->name || !safe(f->name) || !safe(f->value) || strchr(f->name, ':'))
			return -EINVAL;
	r = buf_printf(out, "HTTP/1.1 %d %s\r\n", status, http_reason(status));
	for (const struct http_field *f = fields; r == 0 && f && f->name; f++)
		r = buf_printf(out, "%s: %s\r\n", f->name, f->value);
	if (r == 0 && length >= 0)
		r = buf_printf(out, "Content-Length: %lld\r\n", (long long)length);
	if (r == 0 && length == HTTP_CHUNKED)
		r = buf_printf(out, "Transfer-Encoding: chunked\r\n");
	if (r == 0 && close)
		r = buf_printf(out, "Connection: close\r\n");
	if (r == 0)
		r = buf_append(out, "\r\n", 2);
	if (r != 0)
		out->len = start;
	return r;
}

int http_response_write(struct buf *out, int status, const struct http_field *fields, bool close,
			const void *body, size_t body_len)
{
	size_t start = out->len;
	int r = http_response_head_write(out, status, fields, (int64_t)body_len, close);

	if (r == 0 && body_len)
		r = buf_append(out, body, body_len);
	if (r != 0)
		out->len = start;
	return r;
}

int http_chunk_write(struct buf *out, const void *data, size_t len)
{
	size_t start = out->len;
	int r;

	if (len == 0)
		return -EINVAL; /* an empty chunk is the end: http_chunk_end */
	r = buf_printf(out, "%zx\r\n", len);
	if (r == 0)
		r = buf_append(out, data, len);
	if (r == 0)
		r = buf_append(out, "\r\n", 2);
	if (r != 0)
		out->len = start;
	return r;
}

int http_chunk_end(struct buf *out)
{
	return buf_append(out, "0\r\n\r\n", 5);
}

int http_head_rewrite(struct buf *out, const struct http_parser *p, const char *target,
		      const char *query, const char *const *drop)
{
	int r = buf_printf(out, "%s %s%s%s HTTP/1.%d\r\n", http_parser_str(p, p->method), target,
			   query && query[0] ? "?" : "", query ? query : "", p->minor_version);

	for (uint32_t i = 0; i < p->nhdr; i++) {
		const char *name = http_parser_str(p, p->hdr[i].name);
		size_t d = 0;

		while (drop[d] && strcasecmp(drop[d], name) != 0)
			d++;
		if (!drop[d])
			r |= buf_printf(out, "%s: %s\r\n", name, http_parser_str(p, p->hdr[i].value));
	}
	return r < 0 ? ERR_LIMIT : 0;
}
