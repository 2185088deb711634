/* tests/link/link_test.c: proves the three third_party libraries link into one static musl
 * program and work there. Built and run by `make -C third_party linktest`; prints TAP, exits
 * non-zero on any failure.
 *
 * Each check is a known answer, so a library that links but computes garbage still fails. */
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

#include <bearssl.h>
#include <sys/capability.h>

#include "link.pb-c.h"

static int failures;

static void report(int n, int ok, const char *name)
{
	printf("%sok %d - %s\n", ok ? "" : "not ", n, name);
	if (!ok)
		failures++;
}

/* FIPS 180-2 appendix B.1: SHA-256("abc"). Fed in two pieces so the buffering path runs too. */
static int sha256_kat(void)
{
	static const unsigned char want[32] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
		0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
	};
	unsigned char got[32];
	br_sha256_context ctx;

	br_sha256_init(&ctx);
	br_sha256_update(&ctx, "a", 1);
	br_sha256_update(&ctx, "bc", 2);
	br_sha256_out(&ctx, got);
	return memcmp(got, want, sizeof want) == 0;
}

/* libcap's name table is generated at build time from its uapi header: check both directions. */
static int cap_names(void)
{
	cap_value_t v = -1;
	char *name;
	int ok;

	if (cap_from_name("cap_setuid", &v) != 0 || v != CAP_SETUID)
		return 0;
	name = cap_to_name(CAP_NET_ADMIN);
	ok = name != NULL && strcmp(name, "cap_net_admin") == 0;
	cap_free(name);
	return ok;
}

/* Probe{id=150, name="ab", vals=[-1, 1]} has one correct encoding (proto3 packs repeated
 * scalars; sint64 is zigzag). Pack must produce exactly it, and unpack must give the values back. */
static int protobuf_round_trip(void)
{
	static const uint8_t want[] = { 0x08, 0x96, 0x01, 0x12, 0x02, 'a', 'b', 0x1a, 0x02, 0x01, 0x02 };
	int64_t vals[] = { -1, 1 };
	Linktest__Probe in = LINKTEST__PROBE__INIT, *out;
	uint8_t buf[64];
	size_t len;
	int ok;

	in.id = 150;
	in.name = "ab";
	in.n_vals = 2;
	in.vals = vals;
	len = linktest__probe__get_packed_size(&in);
	if (len != sizeof want || linktest__probe__pack(&in, buf) != len || memcmp(buf, want, len) != 0)
		return 0;
	out = linktest__probe__unpack(NULL, len, buf);
	if (out == NULL)
		return 0;
	ok = out->id == 150 && strcmp(out->name, "ab") == 0 && out->n_vals == 2 &&
	     out->vals[0] == -1 && out->vals[1] == 1;
	linktest__probe__free_unpacked(out, NULL);
	return ok;
}

/* A dynamically linked program has a PT_INTERP segment naming its loader; ours must not. */
static int statically_linked(void)
{
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	unsigned long n = getauxval(AT_PHNUM);

	if (ph == NULL || n == 0)
		return 0;
	for (unsigned long i = 0; i < n; i++)
		if (ph[i].p_type == PT_INTERP)
			return 0;
	return 1;
}

int main(void)
{
	printf("1..4\n");
	report(1, sha256_kat(), "sha256_kat (BearSSL)");
	report(2, cap_names(), "cap_from_name / cap_to_name (libcap)");
	report(3, protobuf_round_trip(), "pack / unpack round trip (protobuf-c)");
	report(4, statically_linked(), "no program interpreter (static)");
	return failures != 0;
}
