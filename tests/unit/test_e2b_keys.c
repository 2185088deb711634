/* test_e2b_keys.c: the E2B key store (src/e2b/e2b_keys.c): keys shaped e2b_ + 40 lowercase
 * hex, the file holding only their SHA-256 (root's, 0600, no temp file left), keys read back
 * after a reopen, every key of a full table matched by the constant-time compare and a key
 * one digit off by none, removal, and a file with another mode, owner or shape refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <bearssl.h>

#include "base/base.h"
#include "e2b/e2b_keys.h"

static char dir[64], path[128];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/agt-e2bkeys-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/e2b-keys", dir);
	return e2b_keys_open(dir) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	char tmp[160];

	unlink(path);
	snprintf(tmp, sizeof(tmp), "%s/.e2b-keys.tmp", dir);
	unlink(tmp);
	rmdir(dir);
	return 0;
}

static size_t file_read(char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = '\0';
	return n;
}

static void sha256_hex(const char *s, char out[65])
{
	br_sha256_context h;
	uint8_t sum[32];

	br_sha256_init(&h);
	br_sha256_update(&h, s, strlen(s));
	br_sha256_out(&h, sum);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", sum[i]);
}

static void test_e2b_key_shape_and_file_holds_only_its_hash(void **state)
{
	char key[E2B_KEY_BYTES], id[E2B_KEY_ID_BYTES], text[4096], hex[65], line[256];
	struct stat st;

	assert_null(e2b_key_at(0));
	assert_int_equal(e2b_key_create("ci-runner", key, id), 0);
	assert_int_equal(strlen(key), 44);
	assert_memory_equal(key, "e2b_", 4);
	assert_int_equal(strspn(key + 4, "0123456789abcdef"), 40);
	assert_int_equal(strlen(id), 16);
	assert_true(e2b_key_valid(key));
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_uid, geteuid());
	file_read(text, sizeof(text));
	/* neither the key nor its hex part: only its SHA-256, in the documented line */
	assert_null(strstr(text, key));
	assert_null(strstr(text, key + 4));
	sha256_hex(key, hex);
	snprintf(line, sizeof(line), "%s ci-runner %lld %s\n", id,
		 (long long)e2b_key_at(0)->created, hex);
	assert_string_equal(text, line);
	snprintf(line, sizeof(line), "%s/.e2b-keys.tmp", dir);
	assert_int_equal(access(line, F_OK), -1);
	assert_string_equal(e2b_key_at(0)->name, "ci-runner");
	assert_string_equal(e2b_key_at(0)->id, id);
}

static void test_e2b_key_one_digit_off_or_misshapen_is_invalid(void **state)
{
	char key[E2B_KEY_BYTES], id[E2B_KEY_ID_BYTES], other[E2B_KEY_BYTES + 8];

	assert_int_equal(e2b_key_create(NULL, key, id), 0);
	assert_string_equal(e2b_key_at(0)->name, "default");
	for (int i = 4; i < 44; i++) {
		memcpy(other, key, sizeof(key));
		other[i] = other[i] == '0' ? '1' : '0';
		assert_false(e2b_key_valid(other));
	}
	memcpy(other, key, sizeof(key));
	other[10] = (char)(other[10] >= 'a' ? other[10] - 32 : other[10]);
	if (strcmp(other, key) != 0)
		assert_false(e2b_key_valid(other)); /* upper case is another key */
	snprintf(other, sizeof(other), "%sx", key);
	assert_false(e2b_key_valid(other));
	assert_false(e2b_key_valid(key + 4));
	assert_false(e2b_key_valid(""));
	memcpy(other, "e2c_", 4);
	memcpy(other + 4, key + 4, 41);
	assert_false(e2b_key_valid(other));
	assert_true(e2b_key_valid(key));
}

/* The compare runs over every key: each of a full table matches, the first as the last, and
 * a table that is full refuses one more. */
static void test_e2b_key_compare_matches_every_key_of_a_full_table(void **state)
{
	static char keys[LIMIT_E2B_KEYS][E2B_KEY_BYTES];
	char id[E2B_KEY_ID_BYTES], extra[E2B_KEY_BYTES];

	for (int i = 0; i < LIMIT_E2B_KEYS; i++)
		assert_int_equal(e2b_key_create("k", keys[i], id), 0);
	assert_int_equal(e2b_key_create("k", extra, id), ERR_LIMIT);
	for (int i = 0; i < LIMIT_E2B_KEYS; i++)
		assert_true(e2b_key_valid(keys[i]));
	/* read back from the file: the same keys, in the same order */
	assert_int_equal(e2b_keys_open(dir), 0);
	for (int i = 0; i < LIMIT_E2B_KEYS; i++)
		assert_true(e2b_key_valid(keys[i]));
	assert_non_null(e2b_key_at(LIMIT_E2B_KEYS - 1));
	assert_null(e2b_key_at(LIMIT_E2B_KEYS));
}

static void test_e2b_key_remove_and_reopen(void **state)
{
	char a[E2B_KEY_BYTES], b[E2B_KEY_BYTES], ida[E2B_KEY_ID_BYTES], idb[E2B_KEY_ID_BYTES];

	assert_int_equal(e2b_key_create("a", a, ida), 0);
	assert_int_equal(e2b_key_create("b", b, idb), 0);
	assert_int_equal(e2b_key_remove(ida), 0);
	assert_int_equal(e2b_key_remove(ida), -ENOENT);
	assert_int_equal(e2b_key_remove("0123456789abcdef"), -ENOENT);
	assert_false(e2b_key_valid(a));
	assert_true(e2b_key_valid(b));
	assert_int_equal(e2b_keys_open(dir), 0);
	assert_false(e2b_key_valid(a));
	assert_true(e2b_key_valid(b));
	assert_string_equal(e2b_key_at(0)->id, idb);
	assert_null(e2b_key_at(1));
}

static void test_e2b_key_bad_names_refused(void **state)
{
	char key[E2B_KEY_BYTES], id[E2B_KEY_ID_BYTES];
	char longname[80];

	memset(longname, 'a', 65);
	longname[65] = '\0';
	assert_int_equal(e2b_key_create("has space", key, id), -EINVAL);
	assert_int_equal(e2b_key_create("new\nline", key, id), -EINVAL);
	assert_int_equal(e2b_key_create(longname, key, id), -EINVAL);
	assert_int_equal(e2b_key_create("e2b_0123456789abcdef0123456789abcdef01234567", key, id),
			 -EINVAL);
	longname[64] = '\0';
	assert_int_equal(e2b_key_create(longname, key, id), 0);
	assert_null(e2b_key_at(1));
}

/* A keys file others may read (0644, 0640), or a link, is refused at open, saying why; the
 * keys it held are then none. */
static void test_e2b_keys_file_with_loose_mode_refused(void **state)
{
	char key[E2B_KEY_BYTES], id[E2B_KEY_ID_BYTES], link[160];
	static const mode_t modes[] = { 0644, 0640, 0604, 0700, 0400 };

	assert_int_equal(e2b_key_create("x", key, id), 0);
	for (size_t i = 0; i < ARRAY_LEN(modes); i++) {
		assert_int_equal(chmod(path, modes[i]), 0);
		assert_int_equal(e2b_keys_open(dir), -EPERM);
		assert_non_null(strstr(e2b_keys_error(), path));
		assert_non_null(strstr(e2b_keys_error(), "0600"));
		assert_false(e2b_key_valid(key));
	}
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(e2b_keys_open(dir), 0);
	assert_true(e2b_key_valid(key));
	/* another owner (when the test can make one) */
	if (geteuid() == 0) {
		assert_int_equal(chown(path, 1, 1), 0);
		assert_int_equal(e2b_keys_open(dir), -EPERM);
		assert_int_equal(chown(path, 0, 0), 0);
	}
	/* a symbolic link in its place */
	snprintf(link, sizeof(link), "%s/real", dir);
	assert_int_equal(rename(path, link), 0);
	assert_int_equal(symlink(link, path), 0);
	assert_true(e2b_keys_open(dir) < 0);
	assert_false(e2b_key_valid(key));
	unlink(path);
	unlink(link);
}

static void test_e2b_keys_file_misshapen_refused(void **state)
{
	static const char *const bad[] = {
		"0123456789abcdef name 1 abc\n",
		"0123456789abcdef name 1\n",
		"0123456789ABCDEF name 1 "
		"0000000000000000000000000000000000000000000000000000000000000000\n",
		"0123456789abcdef na$me 1 "
		"0000000000000000000000000000000000000000000000000000000000000000\n",
		"0123456789abcdef name 1 "
		"0000000000000000000000000000000000000000000000000000000000000000",
	};

	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		FILE *f = fopen(path, "w");

		assert_non_null(f);
		fputs(bad[i], f);
		fclose(f);
		assert_int_equal(chmod(path, 0600), 0);
		assert_true(e2b_keys_open(dir) < 0);
		assert_non_null(strstr(e2b_keys_error(), "line 1"));
		assert_null(e2b_key_at(0));
	}
	unlink(path);
	assert_int_equal(e2b_keys_open(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_e2b_key_shape_and_file_holds_only_its_hash,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_e2b_key_one_digit_off_or_misshapen_is_invalid,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_e2b_key_compare_matches_every_key_of_a_full_table,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_e2b_key_remove_and_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_e2b_key_bad_names_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_e2b_keys_file_with_loose_mode_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_e2b_keys_file_misshapen_refused, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
