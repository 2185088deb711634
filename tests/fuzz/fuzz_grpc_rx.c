/* fuzz_grpc_rx.c: gRPC message reassembly and unpacking. Arbitrary DATA bytes are cut into
 * chunks (sizes from a generator seeded by the input) and fed to grpc_rx_feed, which must
 * report exactly what a plain parse of the whole stream finds: each message, an oversize
 * prefix, or a compressed one. Each message is then unpacked as an AgentMessage and a
 * ManagementMessage with protobuf-c on a small bump arena, as the server does.
 *
 * Input: octet 0: the limit is 1 << (octet & 15) bytes; octet 1: the chunk generator's seed;
 * the rest is the stream. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.pb-c.h"
#include "grpc/grpc.h"

static _Alignas(16) uint8_t arena_mem[32768];
static struct arena arena;
static uint8_t gather[1 << 16];

static void *a_alloc(void *d, size_t n)
{
	(void)d;
	return arena_alloc(&arena, n, 16);
}

static void a_free(void *d, void *p)
{
	(void)d;
	(void)p;
}

static ProtobufCAllocator alloc = { a_alloc, a_free, NULL };

static void unpack(const uint8_t *p, uint32_t len)
{
	static uint8_t repack[1 << 16];
	const ProtobufCMessageDescriptor *d[2] = {
		&agentic__sandbox__v1__agent_message__descriptor,
		&agentic__sandbox__v1__management_message__descriptor,
	};

	for (int i = 0; i < 2; i++) {
		ProtobufCMessage *m;

		arena_init(&arena, arena_mem, sizeof(arena_mem));
		m = protobuf_c_message_unpack(d[i], &alloc, len, p);
		if (m && protobuf_c_message_get_packed_size(m) <= sizeof(repack))
			protobuf_c_message_pack(m, repack);
	}
}

/* The reference: one pass over the whole stream. Returns the event at *off and the message. */
static enum grpc_rx_event reference(const uint8_t *s, size_t n, size_t *off, uint32_t max,
				    const uint8_t **msg, uint32_t *len)
{
	if (n - *off < 5)
		return GRPC_RX_MORE;
	*len = (uint32_t)s[*off + 1] << 24 | (uint32_t)s[*off + 2] << 16 |
	       (uint32_t)s[*off + 3] << 8 | s[*off + 4];
	if (s[*off] & 1)
		return GRPC_RX_COMPRESSED;
	if (*len > max)
		return GRPC_RX_TOO_BIG;
	if (n - *off - 5 < *len)
		return GRPC_RX_MORE;
	*msg = s + *off + 5;
	*off += 5 + *len;
	return GRPC_RX_MESSAGE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct grpc_rx rx = { 0 };
	uint32_t max, seed;
	const uint8_t *s, *p;
	size_t n, ref_off = 0, fed = 0;

	if (size < 2)
		return 0;
	max = 1u << (data[0] & 15);
	seed = data[1] | 1u;
	s = data + 2;
	n = size - 2;
	while (fed < n) {
		size_t chunk;
		size_t left;

		seed = seed * 1103515245u + 12345u;
		chunk = 1 + (seed >> 16) % 64;
		if (chunk > n - fed)
			chunk = n - fed;
		p = s + fed;
		left = chunk;
		fed += chunk;
		while (left) {
			const uint8_t *msg, *want;
			uint32_t len, want_len;
			enum grpc_rx_event ev = grpc_rx_feed(&rx, &p, &left, max, &msg, &len);

			if (ev == GRPC_RX_NEED_BUF) {
				if (len > sizeof(gather))
					abort(); /* a length over max was let through */
				rx.buf = gather;
				continue;
			}
			if (ev == GRPC_RX_MORE)
				break;
			if (reference(s, n, &ref_off, max, &want, &want_len) != ev ||
			    want_len != len)
				abort();
			if (ev != GRPC_RX_MESSAGE)
				return 0;
			if (memcmp(msg, want, len) != 0)
				abort();
			unpack(msg, len);
			rx.buf = NULL;
		}
	}
	/* whatever is left must be an incomplete message for the reference too */
	{
		const uint8_t *want;
		uint32_t want_len;

		if (reference(s, n, &ref_off, max, &want, &want_len) == GRPC_RX_MESSAGE)
			abort();
	}
	return 0;
}
