/* meta.c: a call's metadata records (response headers, trailers, the status message), kept
 * in one META buffer of the call until they go out, and the HEADERS and trailers built from
 * them. */
#include <stdio.h>
#include <string.h>

#include "base/be.h"
#include "grpc/grpc_internal.h"

int grpc_meta_add(struct grpc_call *call, int kind, const char *key, size_t klen,
		    const char *val, size_t vlen)
{
	uint8_t *p;

	if (!call->meta && !(call->meta = grpc_buf_take(call->bufs, GRPC_BUF_META)))
		return ERR_LIMIT;
	if (klen > 0xffff || vlen > 0xffff || 5 + klen + vlen > call->meta->cap - call->meta_len)
		return ERR_LIMIT;
	p = call->meta->data + call->meta_len;
	p[0] = (uint8_t)kind;
	be16_put(p + 1, (uint16_t)klen);
	be16_put(p + 3, (uint16_t)vlen);
	memcpy(p + 5, key, klen);
	memcpy(p + 5 + klen, val, vlen);
	call->meta_len += (uint32_t)(5 + klen + vlen);
	return 0;
}

/* Removes the meta records of kind (a status message being replaced). */
void grpc_meta_drop(struct grpc_call *call, int kind)
{
	uint32_t off = 0, keep = 0;

	while (call->meta && off < call->meta_len) {
		uint8_t *p = call->meta->data + off;
		uint32_t n = 5 + (uint32_t)be16_get(p + 1) + be16_get(p + 3);

		if (p[0] != kind) {
			memmove(call->meta->data + keep, p, n);
			keep += n;
		}
		off += n;
	}
	call->meta_len = keep;
}

int grpc_meta_add_md(struct grpc_call *call, int kind, const struct grpc_md *md, size_t n)
{
	char enc[GRPC_MD_BYTES];

	for (size_t i = 0; i < n; i++) {
		size_t klen = strlen(md[i].key);
		int r;

		if (klen > 4 && strcmp(md[i].key + klen - 4, "-bin") == 0) {
			long e = grpc_base64_encode(md[i].value, md[i].len, enc, sizeof(enc));

			if (e < 0)
				return (int)e;
			r = grpc_meta_add(call, kind, md[i].key, klen, enc, (size_t)e);
		} else {
			r = grpc_meta_add(call, kind, md[i].key, klen, md[i].value, md[i].len);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* Appends the meta records of kind to f (at most max entries); returns the new count. */
static size_t grpc_meta_fields(const struct grpc_call *call, int kind, struct h2_field *f,
				size_t n, size_t max)
{
	uint32_t off = 0;

	while (call->meta && off < call->meta_len && n < max) {
		const uint8_t *p = call->meta->data + off;
		uint32_t klen = be16_get(p + 1), vlen = be16_get(p + 3);

		if (p[0] == kind) {
			f[n].name = (const char *)p + 5;
			f[n].name_len = klen;
			f[n].value = (const char *)p + 5 + klen;
			f[n].value_len = vlen;
			n++;
		}
		off += 5 + klen + vlen;
	}
	return n;
}

/* The raw status message kept in the meta buffer, NUL-terminated into out, or NULL. */
const char *grpc_meta_message(const struct grpc_call *call, char *out, size_t cap)
{
	struct h2_field f;

	if (grpc_meta_fields(call, META_MESSAGE, &f, 0, 1) == 0)
		return NULL;
	if (f.value_len >= cap)
		f.value_len = (uint32_t)cap - 1;
	memcpy(out, f.value, f.value_len);
	out[f.value_len] = '\0';
	return out;
}

/* ---- headers and trailers ---- */

/* grpc-status, grpc-message (percent-encoded) and the trailing metadata, appended to f. */
static size_t grpc_status_fields(const struct grpc_call *call, struct h2_field *f, size_t n,
				 size_t max, char *status, char *msg, size_t msg_cap)
{
	char raw[GRPC_MD_BYTES];

	snprintf(status, 12, "%d", call->status);
	grpc_field_set(&f[n++], "grpc-status", status);
	if (grpc_meta_message(call, raw, sizeof(raw)) && grpc_percent_encode(raw, msg, msg_cap) == 0)
		grpc_field_set(&f[n++], "grpc-message", msg);
	return grpc_meta_fields(call, META_TRAILER, f, n, max);
}

int grpc_send_response_headers(struct grpc_call *call, int trailers_only)
{
	struct h2_field f[GRPC_MAX_MD * 2 + 4];
	char status[12], msg[3 * 1024];
	size_t n = 0;

	grpc_field_set(&f[n++], ":status", "200");
	grpc_field_set(&f[n++], "content-type", "application/grpc");
	n = grpc_meta_fields(call, META_HEADER, f, n, ARRAY_LEN(f));
	if (trailers_only)
		n = grpc_status_fields(call, f, n, ARRAY_LEN(f), status, msg, sizeof(msg));
	return h2_stream_send_headers(&call->conn->h2, call->stream, f, n, trailers_only);
}

int grpc_send_trailers(struct grpc_call *call)
{
	struct h2_field f[GRPC_MAX_MD + 2];
	char status[12], msg[3 * 1024];

	return h2_stream_send_headers(&call->conn->h2, call->stream, f,
				      grpc_status_fields(call, f, 0, ARRAY_LEN(f), status, msg,
						    sizeof(msg)), 1);
}
