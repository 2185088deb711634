/* fuzz_docker_stream.c: Docker's stream decoders (log de-multiplexer, event splitter) on
 * arbitrary bytes. The first byte picks a split point; the split feed must deliver exactly
 * what the whole feed delivers, and every object the splitter hands out must be balanced. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "docker/docker.h"

struct out {
	uint64_t hash[3]; /* per stream */
	uint64_t len[3];
	uint64_t objects;
	uint64_t obj_hash;
	int err;
};

static int on_log(void *ctx, int stream, const uint8_t *data, size_t len)
{
	struct out *o = ctx;
	if (stream < 0 || stream > 2 || len == 0)
		abort();
	for (size_t i = 0; i < len; i++)
		o->hash[stream] = (o->hash[stream] ^ data[i]) * 1099511628211ull;
	o->len[stream] += len;
	return 0;
}

static int on_obj(void *ctx, const char *obj, size_t len)
{
	struct out *o = ctx;
	if (len < 2 || obj[0] != '{')
		abort();
	for (size_t i = 0; i < len; i++)
		o->obj_hash = (o->obj_hash ^ (uint8_t)obj[i]) * 1099511628211ull;
	o->obj_hash = (o->obj_hash ^ 0x100) * 1099511628211ull;
	o->objects++;
	return 0;
}

static void run(const uint8_t *d, size_t n, size_t cut, struct out *o)
{
	static char buf[4096];
	struct docker_demux dm = { 0 };
	struct docker_splitter sp = { .buf = buf, .cap = sizeof(buf) };
	int r;

	memset(o, 0, sizeof(*o));
	r = docker_demux_feed(&dm, d, cut, on_log, o);
	if (r == 0)
		r = docker_demux_feed(&dm, d + cut, n - cut, on_log, o);
	o->err = r;
	r = docker_splitter_feed(&sp, d, cut, on_obj, o);
	if (r == 0)
		r = docker_splitter_feed(&sp, d + cut, n - cut, on_obj, o);
	o->err = o->err * 8 + r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct out whole, split;

	if (size < 1)
		return 0;
	run(data + 1, size - 1, 0, &whole);
	run(data + 1, size - 1, data[0] % size, &split);
	/* the same bytes per stream, the same objects, the same error */
	if (memcmp(&whole, &split, sizeof(whole)) != 0)
		abort();
	return 0;
}
