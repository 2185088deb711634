/* test_vm_cpio.c: vm-image's tar reader and newc writer (src/vm): archives built here byte by
 * byte (ustar, GNU long names, pax records, base-256 sizes), read at any piece size, written as
 * newc and read back by this file's own newc reader; and the refusals (a bad checksum, a ".."
 * component, names over the limit, a truncated stream). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmimage/vmimage.h"

/* ---- building a tar ---- */
struct tarb {
	uint8_t data[256 * 1024];
	size_t len;
};

static void put_octal(uint8_t *f, size_t len, uint64_t v)
{
	char tmp[32];
	snprintf(tmp, sizeof(tmp), "%0*llo", (int)(len - 1), (unsigned long long)v);
	memcpy(f, tmp, len - 1);
	f[len - 1] = '\0';
}

static void seal(uint8_t *h)
{
	unsigned sum = 0;

	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

/* A ustar header (POSIX magic) at the end of b; returns it, sealed. */
static uint8_t *header(struct tarb *b, const char *name, char type, uint32_t mode, uint64_t size,
		       const char *link)
{
	uint8_t *h = b->data + b->len;

	memset(h, 0, 512);
	memcpy(h, name, strlen(name) < 100 ? strlen(name) : 100);
	put_octal(h + 100, 8, mode);
	put_octal(h + 108, 8, 1000);
	put_octal(h + 116, 8, 1001);
	put_octal(h + 124, 12, size);
	put_octal(h + 136, 12, 1700000000);
	h[156] = (uint8_t)type;
	if (link)
		memcpy(h + 157, link, strlen(link));
	memcpy(h + 257, "ustar\0" "00", 8);
	seal(h);
	b->len += 512;
	return h;
}

static void data(struct tarb *b, const void *d, size_t n)
{
	memcpy(b->data + b->len, d, n);
	b->len += n;
	while (b->len % 512)
		b->data[b->len++] = 0;
}

static void file(struct tarb *b, const char *name, uint32_t mode, const char *text)
{
	header(b, name, '0', mode, strlen(text), NULL);
	data(b, text, strlen(text));
}

static void end(struct tarb *b)
{
	memset(b->data + b->len, 0, 1024);
	b->len += 1024;
}

/* A pax 'x' header with one record KEY=VALUE. */
static void pax(struct tarb *b, const char *key, const char *value)
{
	char rec[8192];
	size_t body = strlen(key) + strlen(value) + 3, len = body + 1;
	int n;

	while ((n = snprintf(NULL, 0, "%zu", len)) && body + (size_t)n != len)
		len = body + (size_t)n;
	n = snprintf(rec, sizeof(rec), "%zu %s=%s\n", len, key, value);
	assert_int_equal((size_t)n, len);
	header(b, "PaxHeaders/x", 'x', 0644, len, NULL);
	data(b, rec, len);
}

/* ---- the reader into a writer ---- */
struct sink {
	uint8_t out[512 * 1024];
	size_t len;
	struct vm_cpio cpio;
	int entries, hardlinks;
	char hardlink[2 * VM_PATH_MAX + 2];
};

static int sink_write(void *ctx, const void *d, size_t n)
{
	struct sink *s = ctx;

	assert_true(s->len + n <= sizeof(s->out));
	memcpy(s->out + s->len, d, n);
	s->len += n;
	return 0;
}

static int on_entry(void *ctx, const struct vm_entry *e)
{
	struct sink *s = ctx;

	s->entries++;
	if (e->type == VM_HARDLINK) {
		s->hardlinks++;
		snprintf(s->hardlink, sizeof(s->hardlink), "%s>%s", e->path, e->link);
		return 0;
	}
	if (e->type == VM_CHR || e->type == VM_BLK)
		return VM_TAR_SKIP;
	return vm_cpio_entry(&s->cpio, e);
}

static int on_data(void *ctx, const uint8_t *d, size_t n)
{
	struct sink *s = ctx;
	return vm_cpio_data(&s->cpio, d, n);
}

/* Feeds the archive in pieces of `piece` bytes; returns the reader's result, the trailer
 * written on success. */
static int convert(const struct tarb *b, size_t piece, struct sink *s, struct vm_tar *t)
{
	int r = 0;

	memset(s, 0, sizeof(*s));
	vm_cpio_init(&s->cpio, sink_write, s);
	vm_tar_init(t, on_entry, on_data, s);
	for (size_t at = 0; at < b->len && r == 0; at += piece)
		r = vm_tar_feed(t, b->data + at, b->len - at < piece ? b->len - at : piece);
	if (r == 0)
		r = vm_tar_finish(t);
	if (r == 0)
		r = vm_cpio_finish(&s->cpio);
	return r;
}

/* ---- reading newc back ---- */
struct cent {
	char name[VM_PATH_MAX];
	uint32_t mode, uid, gid, nlink;
	uint32_t size;
	const uint8_t *data;
};

static uint32_t hex8(const uint8_t *p)
{
	char tmp[9];
	memcpy(tmp, p, 8);
	tmp[8] = '\0';
	return (uint32_t)strtoul(tmp, NULL, 16);
}

/* Parses the whole archive; returns the entry count (the trailer included, last). */
static int newc_read(const uint8_t *p, size_t len, struct cent *out, int cap)
{
	size_t at = 0;
	int n = 0;

	while (at < len) {
		struct cent *c = &out[n];
		uint32_t namesize;

		assert_true(n < cap);
		assert_true(at + 110 <= len);
		assert_memory_equal(p + at, "070701", 6);
		c->mode = hex8(p + at + 14);
		c->uid = hex8(p + at + 22);
		c->gid = hex8(p + at + 30);
		c->nlink = hex8(p + at + 38);
		c->size = hex8(p + at + 54);
		namesize = hex8(p + at + 94);
		assert_true(namesize >= 2 && namesize <= VM_PATH_MAX);
		assert_int_equal(p[at + 110 + namesize - 1], 0);
		memcpy(c->name, p + at + 110, namesize);
		at += (110 + namesize + 3) & ~3u;
		c->data = p + at;
		at += (c->size + 3) & ~3u;
		assert_true(at <= len);
		n++;
		if (strcmp(c->name, "TRAILER!!!") == 0)
			break;
	}
	assert_int_equal(at, len);
	return n;
}

static const struct cent *find(const struct cent *c, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(c[i].name, name) == 0)
			return &c[i];
	return NULL;
}

static struct tarb tb;
static struct sink sk, sk2;
static struct vm_tar tr;
static struct cent ce[64];

static void sample(struct tarb *b)
{
	char longname[300];

	b->len = 0;
	header(b, "./", '5', 0755, 0, NULL);
	header(b, "./etc/", '5', 0755, 0, NULL);
	file(b, "./etc/hello", 0644, "hi\n");
	file(b, "./bin/su", 04755, "setuid");
	file(b, "./bin/wall", 02755, "setgid");
	header(b, "./tmp/", '5', 01777, 0, NULL);
	header(b, "./bin/sh", '2', 0777, 0, "busybox");
	header(b, "./etc/hello2", '1', 0644, 0, "./etc/hello");
	header(b, "./dev/null", '3', 0666, 0, NULL);
	header(b, "./run/fifo", '6', 0600, 0, NULL);
	/* GNU long name */
	memset(longname, 'n', sizeof(longname));
	memcpy(longname, "usr/share/", 10);
	longname[299] = '\0';
	header(b, "././@LongLink", 'L', 0644, 300, NULL);
	data(b, longname, 300);
	file(b, "truncated-name", 0644, "long");
	/* pax path and linkpath */
	pax(b, "path", "opt/from-pax/name with spaces");
	file(b, "ignored", 0600, "pax");
	pax(b, "linkpath", "target/of/pax");
	header(b, "opt/link", '2', 0777, 0, "ignored");
	end(b);
}

static void test_vm_tar_ustar_gnu_pax_become_newc_entries(void **state)
{
	int n;
	const struct cent *c;

	sample(&tb);
	assert_int_equal(convert(&tb, tb.len, &sk, &tr), 0);
	n = newc_read(sk.out, sk.len, ce, 64);
	assert_string_equal(ce[n - 1].name, "TRAILER!!!");
	/* the root entry is no entry; the device is skipped; the hardlink is the caller's */
	assert_int_equal(sk.entries, 12);
	assert_int_equal(n, 10 + 1);
	assert_int_equal(sk.hardlinks, 1);
	assert_string_equal(sk.hardlink, "etc/hello2>etc/hello");
	assert_null(find(ce, n, "dev/null"));

	c = find(ce, n, "etc");
	assert_non_null(c);
	assert_int_equal(c->mode, S_IFDIR | 0755);
	assert_int_equal(c->nlink, 2);
	c = find(ce, n, "etc/hello");
	assert_non_null(c);
	assert_int_equal(c->mode, S_IFREG | 0644);
	assert_int_equal(c->uid, 1000);
	assert_int_equal(c->gid, 1001);
	assert_int_equal(c->size, 3);
	assert_memory_equal(c->data, "hi\n", 3);
	c = find(ce, n, "bin/sh");
	assert_non_null(c);
	assert_int_equal(c->mode, S_IFLNK | 0777);
	assert_int_equal(c->size, 7);
	assert_memory_equal(c->data, "busybox", 7);
	c = find(ce, n, "tmp");
	assert_non_null(c);
	assert_int_equal(c->mode, S_IFDIR | 01777);
	c = find(ce, n, "run/fifo");
	assert_non_null(c);
	assert_int_equal(c->mode, S_IFIFO | 0600);
	c = find(ce, n, "opt/from-pax/name with spaces");
	assert_non_null(c);
	assert_memory_equal(c->data, "pax", 3);
	assert_null(find(ce, n, "ignored"));
	c = find(ce, n, "opt/link");
	assert_non_null(c);
	assert_int_equal(c->size, 13);
	assert_memory_equal(c->data, "target/of/pax", 13);
}

static void test_vm_tar_gnu_long_name_is_the_entry_path(void **state)
{
	char want[300];
	const struct cent *c;
	int n;

	sample(&tb);
	assert_int_equal(convert(&tb, tb.len, &sk, &tr), 0);
	n = newc_read(sk.out, sk.len, ce, 64);
	memset(want, 'n', sizeof(want));
	memcpy(want, "usr/share/", 10);
	want[299] = '\0';
	c = find(ce, n, want);
	assert_non_null(c);
	assert_int_equal(c->size, 4);
	assert_memory_equal(c->data, "long", 4);
	assert_null(find(ce, n, "truncated-name"));
}

static void test_vm_tar_setuid_and_setgid_are_stripped(void **state)
{
	int n;

	sample(&tb);
	assert_int_equal(convert(&tb, tb.len, &sk, &tr), 0);
	n = newc_read(sk.out, sk.len, ce, 64);
	assert_int_equal(find(ce, n, "bin/su")->mode, S_IFREG | 0755);
	assert_int_equal(find(ce, n, "bin/wall")->mode, S_IFREG | 0755);
}

static void test_vm_tar_one_byte_at_a_time_gives_the_same_cpio(void **state)
{
	static const size_t pieces[] = { 1, 7, 511, 512, 513, 4096 };

	sample(&tb);
	assert_int_equal(convert(&tb, tb.len, &sk2, &tr), 0);
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		assert_int_equal(convert(&tb, pieces[i], &sk, &tr), 0);
		assert_int_equal(sk.len, sk2.len);
		assert_memory_equal(sk.out, sk2.out, sk.len);
	}
}

static void test_vm_tar_base256_size_is_read(void **state)
{
	uint8_t *h;
	const struct cent *c;
	int n;

	tb.len = 0;
	h = header(&tb, "big", '0', 0644, 0, NULL);
	memset(h + 124, 0, 12);
	h[124] = 0x80;
	h[135] = 5;
	seal(h);
	data(&tb, "abcde", 5);
	end(&tb);
	assert_int_equal(convert(&tb, 3, &sk, &tr), 0);
	n = newc_read(sk.out, sk.len, ce, 64);
	c = find(ce, n, "big");
	assert_non_null(c);
	assert_int_equal(c->size, 5);
	assert_memory_equal(c->data, "abcde", 5);
}

static void test_vm_tar_ustar_prefix_joins_the_name(void **state)
{
	uint8_t *h;
	int n;

	tb.len = 0;
	h = header(&tb, "name", '0', 0644, 1, NULL);
	memcpy(h + 345, "some/prefix", 11);
	seal(h);
	data(&tb, "x", 1);
	end(&tb);
	assert_int_equal(convert(&tb, 100, &sk, &tr), 0);
	n = newc_read(sk.out, sk.len, ce, 64);
	assert_non_null(find(ce, n, "some/prefix/name"));
}

static void test_vm_tar_bad_checksum_is_refused(void **state)
{
	uint8_t *h;

	tb.len = 0;
	file(&tb, "ok", 0644, "fine");
	h = header(&tb, "bad", '0', 0644, 0, NULL);
	h[0] = 'B'; /* after sealing */
	end(&tb);
	assert_int_equal(convert(&tb, tb.len, &sk, &tr), ERR_PARSE);
	assert_non_null(strstr(tr.why, "checksum"));
	assert_int_equal(sk.entries, 1);
	/* the error is final */
	assert_int_equal(vm_tar_feed(&tr, (const uint8_t *)"", 1), ERR_PARSE);
}

static void test_vm_tar_dotdot_component_is_refused(void **state)
{
	static const char *const bad[] = { "../etc/passwd", "a/../../b", "./x/..", "/..", "a/.." };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tb.len = 0;
		file(&tb, bad[i], 0644, "x");
		end(&tb);
		assert_int_equal(convert(&tb, tb.len, &sk, &tr), ERR_PARSE);
		assert_non_null(strstr(tr.why, ".."));
		assert_string_equal(tr.entry.path, bad[i]);
		assert_int_equal(sk.entries, 0);
	}
	/* through pax, and as a hard link's target */
	tb.len = 0;
	pax(&tb, "path", "ok/../../escape");
	file(&tb, "fine", 0644, "x");
	end(&tb);
	assert_int_equal(convert(&tb, 1, &sk, &tr), ERR_PARSE);
	tb.len = 0;
	header(&tb, "link", '1', 0644, 0, "../../etc/shadow");
	end(&tb);
	assert_int_equal(convert(&tb, tb.len, &sk, &tr), ERR_PARSE);
	assert_int_equal(sk.entries, 0);
}

static void test_vm_path_normalize_drops_slashes_and_dots(void **state)
{
	char out[VM_PATH_MAX];

	assert_int_equal(vm_path_normalize("/etc//./passwd", out), 0);
	assert_string_equal(out, "etc/passwd");
	assert_int_equal(vm_path_normalize("./", out), 0);
	assert_string_equal(out, "");
	assert_int_equal(vm_path_normalize("a/..b/c..", out), 0);
	assert_string_equal(out, "a/..b/c..");
	assert_int_equal(vm_path_normalize("/../x", out), ERR_PARSE);
}

static void test_vm_tar_names_over_the_limit_are_refused(void **state)
{
	static char big[VM_PATH_MAX + 10];

	tb.len = 0;
	header(&tb, "././@LongLink", 'L', 0644, VM_PATH_MAX + 1, NULL);
	end(&tb);
	assert_int_equal(convert(&tb, tb.len, &sk, &tr), ERR_LIMIT);
	assert_non_null(strstr(tr.why, "4096"));

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tb.len = 0;
	pax(&tb, "path", big);
	file(&tb, "x", 0644, "x");
	end(&tb);
	assert_int_equal(convert(&tb, 64, &sk, &tr), ERR_LIMIT);
	assert_non_null(strstr(tr.why, "4096"));
}

static void test_vm_tar_truncated_stream_and_bad_pax_are_errors(void **state)
{
	uint8_t *h;

	tb.len = 0;
	file(&tb, "a", 0644, "data");
	assert_int_equal(convert(&tb, tb.len, &sk, &tr), ERR_PARSE);
	assert_non_null(strstr(tr.why, "end-of-archive"));

	tb.len = 0;
	h = header(&tb, "PaxHeaders/x", 'x', 0644, 12, NULL);
	(void)h;
	data(&tb, "99 path=abc\n", 12);
	file(&tb, "a", 0644, "data");
	end(&tb);
	assert_int_equal(convert(&tb, tb.len, &sk, &tr), ERR_PARSE);
	assert_non_null(strstr(tr.why, "pax"));

	tb.len = 0;
	header(&tb, "odd", 'S', 0644, 0, NULL);
	end(&tb);
	assert_int_equal(convert(&tb, tb.len, &sk, &tr), ERR_PARSE);
}

static void test_vm_tar_unknown_pax_keys_and_global_headers_are_read_past(void **state)
{
	char xattr[3000];
	int n;

	memset(xattr, 'v', sizeof(xattr) - 1);
	xattr[sizeof(xattr) - 1] = '\0';
	tb.len = 0;
	pax(&tb, "SCHILY.xattr.security.a-very-long-attribute-name-over-the-key-limit-of-sixty-four",
	    xattr);
	header(&tb, "g", 'g', 0644, 0, NULL);
	pax(&tb, "size", "2");
	file(&tb, "sized", 0644, "xyz"); /* header says 3, pax says 2 */
	end(&tb);
	/* the 3-byte body is padded to 512 either way; the entry has the pax size */
	assert_int_equal(convert(&tb, 5, &sk, &tr), 0);
	n = newc_read(sk.out, sk.len, ce, 64);
	assert_int_equal(find(ce, n, "sized")->size, 2);
	assert_memory_equal(find(ce, n, "sized")->data, "xy", 2);
}

static void test_vm_cpio_refuses_misuse(void **state)
{
	struct vm_entry e;

	memset(&sk, 0, sizeof(sk));
	vm_cpio_init(&sk.cpio, sink_write, &sk);
	memset(&e, 0, sizeof(e));
	e.type = VM_REG;
	strcpy(e.path, "f");
	e.size = 4;
	assert_int_equal(vm_cpio_entry(&sk.cpio, &e), 0);
	assert_int_equal(vm_cpio_data(&sk.cpio, "abcde", 5), ERR_STATE);
	assert_int_equal(vm_cpio_finish(&sk.cpio), ERR_STATE);
	assert_int_equal(vm_cpio_data(&sk.cpio, "abcd", 4), 0);
	e.type = VM_HARDLINK;
	assert_int_equal(vm_cpio_entry(&sk.cpio, &e), -EINVAL);
	e.type = VM_REG;
	e.size = VM_CPIO_FILE_MAX + 1;
	assert_int_equal(vm_cpio_entry(&sk.cpio, &e), ERR_LIMIT);
	assert_int_equal(vm_cpio_finish(&sk.cpio), 0);
	assert_int_equal(sk.len % 4, 0);
}

/* The written archive is one a real cpio lists (busybox cpio or GNU cpio, when installed). */
static void test_vm_cpio_is_listed_by_the_real_cpio(void **state)
{
	char path[] = "/tmp/agt-vm-cpio-XXXXXX", cmd[256], line[512];
	const char *tool = access("/usr/bin/cpio", X_OK) == 0 ? "cpio" :
			   access("/usr/bin/busybox", X_OK) == 0 ? "busybox cpio" : NULL;
	int fd, found = 0;
	FILE *p;

	if (!tool)
		skip();
	sample(&tb);
	assert_int_equal(convert(&tb, tb.len, &sk, &tr), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, sk.out, sk.len), (ssize_t)sk.len);
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s -t <%s 2>/dev/null", tool, path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p))
		found += strcmp(line, "etc/hello\n") == 0 || strcmp(line, "bin/sh\n") == 0 ||
			 strcmp(line, "opt/from-pax/name with spaces\n") == 0;
	assert_int_equal(pclose(p), 0);
	unlink(path);
	assert_int_equal(found, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vm_tar_ustar_gnu_pax_become_newc_entries),
		cmocka_unit_test(test_vm_tar_gnu_long_name_is_the_entry_path),
		cmocka_unit_test(test_vm_tar_setuid_and_setgid_are_stripped),
		cmocka_unit_test(test_vm_tar_one_byte_at_a_time_gives_the_same_cpio),
		cmocka_unit_test(test_vm_tar_base256_size_is_read),
		cmocka_unit_test(test_vm_tar_ustar_prefix_joins_the_name),
		cmocka_unit_test(test_vm_tar_bad_checksum_is_refused),
		cmocka_unit_test(test_vm_tar_dotdot_component_is_refused),
		cmocka_unit_test(test_vm_path_normalize_drops_slashes_and_dots),
		cmocka_unit_test(test_vm_tar_names_over_the_limit_are_refused),
		cmocka_unit_test(test_vm_tar_truncated_stream_and_bad_pax_are_errors),
		cmocka_unit_test(test_vm_tar_unknown_pax_keys_and_global_headers_are_read_past),
		cmocka_unit_test(test_vm_cpio_refuses_misuse),
		cmocka_unit_test(test_vm_cpio_is_listed_by_the_real_cpio),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
