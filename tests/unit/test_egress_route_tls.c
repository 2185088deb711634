/* test_egress_route_tls.c: the route's TLS client (src/egress/tls.c) under ASan, without a
 * network: the trust anchors read from PEM bundles (the system's, one with objects that are not
 * certificates or do not decode, a missing file), and a handshake against a peer that is no TLS
 * server or says nothing, which must fail with a word and within its timeout. Handshakes with a
 * real server are tests/integration/test_egress_route_tls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "tls/tls.h"

#define SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

static char path[64];

static void write_file(const char *text, size_t len)
{
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/agt-tls-unit-%d.pem", (int)getpid());
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
}

/* The first certificate of the system bundle, PEM, into buf. */
static size_t first_cert(char *buf, size_t cap)
{
	FILE *f = fopen(SYSTEM_BUNDLE, "rb");
	char line[256];
	size_t n = 0;
	int in = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "-----BEGIN CERTIFICATE-----", 27) == 0)
			in = 1;
		if (in) {
			size_t l = strlen(line);

			assert_true(n + l < cap);
			memcpy(buf + n, line, l);
			n += l;
		}
		if (in && strncmp(line, "-----END CERTIFICATE-----", 25) == 0)
			break;
	}
	fclose(f);
	buf[n] = 0;
	return n;
}

static void test_the_system_bundle_loads_whole(void **state)
{
	FILE *f = fopen(SYSTEM_BUNDLE, "rb");
	char line[256];
	int certs = 0, n;

	if (!f)
		skip();
	while (fgets(line, sizeof(line), f))
		certs += strncmp(line, "-----BEGIN CERTIFICATE-----", 27) == 0;
	fclose(f);
	n = tls_load_anchors(SYSTEM_BUNDLE);
	/* Every root of a stock bundle is RSA or EC, which BearSSL reads: all of them fit. */
	assert_true(certs > 0 && certs <= TLS_ANCHORS_MAX);
	assert_int_equal(n, certs);
}

static void test_objects_that_are_no_certificate_are_skipped(void **state)
{
	static char cert[16384], text[40000];
	size_t c = first_cert(cert, sizeof(cert));
	int n;

	if (c == 0)
		skip();
	/* A key, garbage, a certificate whose base64 decodes to no X.509, the same good one twice,
	 * and the last without its final newline. */
	n = snprintf(text, sizeof(text),
		     "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIAAAAAAAAAAAAAAAAAAAAAAAAAAA"
		     "AAAAAAAAAAAAAAAA\n-----END PRIVATE KEY-----\n"
		     "junk between objects\n"
		     "-----BEGIN CERTIFICATE-----\nAAECAwQFBgcICQ==\n-----END CERTIFICATE-----\n"
		     "%s%s", cert, cert);
	assert_true(n > 0 && (size_t)n < sizeof(text));
	write_file(text, (size_t)n - 1);
	assert_int_equal(tls_load_anchors(path), 2);
	/* nothing usable: ERR_PARSE, and the table is empty (a handshake refuses to start) */
	{
		static const char bad[] =
			"-----BEGIN CERTIFICATE-----\nAAECAwQFBgcICQ==\n-----END CERTIFICATE-----\n";

		write_file(bad, sizeof(bad) - 1);
	}
	assert_int_equal(tls_load_anchors(path), ERR_PARSE);
	assert_string_equal(tls_error_word(), "no_trust_anchors");
	assert_int_equal(tls_handshake(-1, "localhost", 100), -1);
	assert_string_equal(tls_error_word(), "no_trust_anchors");
	unlink(path);
	assert_int_equal(tls_load_anchors(path), -ENOENT);
	assert_string_equal(tls_error_word(), "ca_file_unreadable");
}

static void test_a_peer_that_is_no_tls_server_fails_the_handshake(void **state)
{
	static char cert[16384];
	size_t c = first_cert(cert, sizeof(cert));
	int sv[2];
	int64_t t0;

	if (c == 0)
		skip();
	write_file(cert, c);
	assert_int_equal(tls_load_anchors(path), 1);
	unlink(path);

	/* No name: refused before a byte is sent (BearSSL would check none) */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(tls_handshake(sv[0], "", 2000), -1);
	assert_string_equal(tls_error_word(), "no_server_name");
	assert_int_equal(recv(sv[1], cert, sizeof(cert), MSG_DONTWAIT), -1);
	close(sv[0]);
	close(sv[1]);

	/* An HTTP answer where a ServerHello should be */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[1], "HTTP/1.1 400 Bad Request\r\n\r\n", 28), 28);
	assert_int_equal(tls_handshake(sv[0], "localhost", 2000), -1);
	assert_true(tls_error_code() != 0);
	assert_string_not_equal(tls_error_word(), "none");
	close(sv[0]);
	close(sv[1]);

	/* A peer that closes at once */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(tls_handshake(sv[0], "localhost", 2000), -1);
	close(sv[0]);

	/* A peer that says nothing: the timeout, not a hang */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	t0 = clock_mono_ms();
	assert_int_equal(tls_handshake(sv[0], "localhost", 300), -1);
	assert_string_equal(tls_error_word(), "timeout");
	assert_true(clock_mono_ms() - t0 >= 290 && clock_mono_ms() - t0 < 3000);
	/* the ClientHello went out, naming the server */
	{
		static char hello[4096];
		ssize_t n = read(sv[1], hello, sizeof(hello));

		assert_true(n > 5);
		assert_int_equal(hello[0], 22); /* a handshake record */
		assert_non_null(memmem(hello, (size_t)n, "localhost", 9));
	}
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_the_system_bundle_loads_whole),
		cmocka_unit_test(test_objects_that_are_no_certificate_are_skipped),
		cmocka_unit_test(test_a_peer_that_is_no_tls_server_fails_the_handshake),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
