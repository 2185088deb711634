/* fuzz_http.c: the HTTP/1.1 parser on arbitrary bytes, as a response and as a request. The
 * first byte picks a split point; what the split feed reports must equal what the whole feed
 * reports, so resumability is checked on every input, not only on the unit tests' messages. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

/* Everything but how the body was sliced. */
struct result {
	int events[8];   /* non-body events, in order */
	int nev;
	uint64_t body_hash;
	uint64_t body_len;
	int status;
	uint32_t nhdr;
};

static void note(struct result *r, int ev)
{
	if (r->nev == 8)
		abort(); /* a message has at most HEAD, DONE/error and finish */
	r->events[r->nev++] = ev;
}

static void feed_all(struct http_parser *p, const uint8_t *in, size_t len, struct result *r,
		     bool *stop)
{
	while (!*stop) {
		size_t used;
		struct http_slice s;
		int ev = http_parser_feed(p, in, len, &used, &s);
		if (used > len)
			abort();
		in += used;
		len -= used;
		if (ev == HTTP_EV_NEED_MORE) {
			if (len != 0)
				abort();
			return;
		}
		if (ev == HTTP_EV_BODY) {
			if (s.len == 0 || s.data < in - used || s.data + s.len > in)
				abort();
			for (size_t i = 0; i < s.len; i++)
				r->body_hash = (r->body_hash ^ s.data[i]) * 1099511628211ull;
			r->body_len += s.len;
			continue;
		}
		note(r, ev);
		if (ev == HTTP_EV_HEAD || ev == HTTP_EV_UPGRADE) {
			r->status = p->status;
			r->nhdr = p->nhdr;
			for (uint32_t i = 0; i < p->nhdr; i++)
				if (http_parser_str(p, p->hdr[i].name)[0] == '\0')
					abort();
		}
		if (ev < 0 || ev == HTTP_EV_DONE || ev == HTTP_EV_UPGRADE)
			*stop = true;
	}
}

static void run(enum http_parser_kind kind, const uint8_t *data, size_t size, size_t cut,
		struct result *r)
{
	static char head[LIMIT_HTTP_HEAD_BYTES];
	struct http_parser p;
	bool stop = false;

	memset(r, 0, sizeof(*r));
	http_parser_init(&p, kind, head, sizeof(head));
	p.body_limit = 1u << 20;
	feed_all(&p, data, cut, r, &stop);
	feed_all(&p, data + cut, size - cut, r, &stop);
	if (!stop)
		note(r, http_parser_finish(&p));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result whole, split;

	if (size < 1)
		return 0;
	for (int kind = 0; kind < 2; kind++) {
		run((enum http_parser_kind)kind, data + 1, size - 1, 0, &whole);
		run((enum http_parser_kind)kind, data + 1, size - 1, data[0] % size, &split);
		if (memcmp(&whole, &split, sizeof(whole)) != 0)
			abort();
	}
	return 0;
}
