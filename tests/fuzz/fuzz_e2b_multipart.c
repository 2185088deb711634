/* fuzz_e2b_multipart.c: the multipart/form-data parser (src/e2b/multipart.c) on arbitrary
 * bytes. Input: one byte choosing a split point, a Content-Type line (to the first '\n'), then
 * the body. What the body split in two reports must equal what the whole reports, every body
 * slice must lie in the input or the parser's delimiter copy, and part names and filenames
 * must be NUL-terminated inside the header storage. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/multipart.h"

struct result {
	int events[64]; /* non-body events, in order (the first 64) */
	int nev;
	uint64_t body_hash, body_len, names_hash;
	int last;       /* the last event, or multipart_finish's answer */
};

static char hdr[1024];

static uint64_t hash(uint64_t h, const void *data, size_t len)
{
	const uint8_t *b = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static void check_str(const char *s)
{
	if (!s)
		return;
	if (s < hdr || s >= hdr + sizeof(hdr) || !memchr(s, '\0', (size_t)(hdr + sizeof(hdr) - s)))
		abort();
}

static void on_event(const struct multipart *p, int ev, struct result *r)
{
	if (r->nev < 64)
		r->events[r->nev] = ev;
	r->nev++;
	r->last = ev;
	if (ev == MULTIPART_EV_PART) {
		const char *n = multipart_name(p), *f = multipart_filename(p);
		check_str(n);
		check_str(f);
		r->names_hash = hash(r->names_hash, n ? n : "-", n ? strlen(n) + 1 : 1);
		r->names_hash = hash(r->names_hash, f ? f : "-", f ? strlen(f) + 1 : 1);
	}
}

static bool feed(struct multipart *p, const uint8_t *in, size_t len, struct result *r)
{
	for (;;) {
		size_t used;
		struct http_slice s;
		int ev = multipart_feed(p, in, len, &used, &s);
		if (used > len)
			abort();
		in += used;
		len -= used;
		if (ev == MULTIPART_EV_NEED_MORE) {
			if (len != 0)
				abort();
			return true;
		}
		if (ev == MULTIPART_EV_BODY) {
			bool in_input = s.data >= in - used && s.data + s.len <= in;
			bool in_delim = s.data >= (const uint8_t *)p->delim &&
					s.data + s.len <= (const uint8_t *)p->delim + p->dlen;
			if (s.len == 0 || (!in_input && !in_delim))
				abort();
			r->body_hash = hash(r->body_hash, s.data, s.len);
			r->body_len += s.len;
			continue;
		}
		on_event(p, ev, r);
		if (ev < 0)
			return false;
	}
}

static void run(const char *ct, const uint8_t *body, size_t len, size_t cut, struct result *r)
{
	struct multipart p;

	memset(r, 0, sizeof(*r));
	if (multipart_init(&p, ct, hdr, sizeof(hdr)) != 0) {
		r->last = 1;
		return;
	}
	if (feed(&p, body, cut, r) && feed(&p, body + cut, len - cut, r))
		r->last = multipart_finish(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result whole, split;
	char ct[300];
	const uint8_t *nl;
	size_t ctlen;

	if (size < 2)
		return 0;
	nl = memchr(data + 1, '\n', size - 1);
	ctlen = nl ? (size_t)(nl - data - 1) : 0;
	if (!nl || ctlen >= sizeof(ct))
		return 0;
	memcpy(ct, data + 1, ctlen);
	ct[ctlen] = '\0';
	size -= ctlen + 2;
	run(ct, nl + 1, size, 0, &whole);
	run(ct, nl + 1, size, size ? data[0] % (size + 1) : 0, &split);
	if (memcmp(&whole, &split, sizeof(whole)) != 0)
		abort();
	return 0;
}
