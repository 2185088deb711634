/* test_mgmt.c: agenticd's pure parts: the subnet map, the sandbox table's uid handling, string
 * runs, and the agentshare record (atomic write, read back, crash leftovers swept). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/exec.h"
#include "daemon/daemon.h"
#include "workspace/host.h"
#include "workspace/share.h"

#define NSB 4

static struct daemon d;
static struct sandbox table[NSB];
static uint64_t uid_bits[(600000 + 63) / 64], subnet_bits[(4096 + 63) / 64];
static uint64_t foreign_bits[(4096 + 63) / 64];

static int setup(void **state)
{
	memset(&d, 0, sizeof(d));
	memset(table, 0, sizeof(table));
	config_defaults(&d.cfg);
	sandbox_table_init(&d.cfg, table, NSB, uid_bits);
	subnet_init(&d.cfg, subnet_bits, foreign_bits);
	return 0;
}

static void test_subnet_index_and_text_agree(void **state)
{
	char s[20];

	subnet_text(0, s, sizeof(s));
	assert_string_equal(s, "10.213.0.0/28");
	subnet_text(5, s, sizeof(s));
	assert_string_equal(s, "10.213.0.80/28");
	subnet_text(4095, s, sizeof(s));
	assert_string_equal(s, "10.213.255.240/28");
	assert_int_equal(subnet_index("10.213.0.80/28"), 5);
	assert_int_equal(subnet_index("10.213.255.240/28"), 4095);
}

static void test_subnet_index_refuses_what_is_not_a_pool_slot(void **state)
{
	assert_int_equal(subnet_index("10.214.0.0/28"), -1);  /* outside the pool */
	assert_int_equal(subnet_index("10.213.0.0/24"), -1);  /* not a /28 */
	assert_int_equal(subnet_index("10.213.0.8/28"), -1);  /* not aligned */
	assert_int_equal(subnet_index("10.213.0.0/28x"), -1);
	assert_int_equal(subnet_index(NULL), -1);
	assert_int_equal(subnet_index(""), -1);
}

/* What another network covers, clipped to the pool (10.213.0.0/16): any prefix, IPv6 ignored. */
static void test_subnet_span_clips_any_prefix_to_the_pool(void **state)
{
	uint32_t first, count;

	assert_int_equal(subnet_span("10.213.0.16/28", &first, &count), 0);
	assert_int_equal(first * 100 + count, 101);
	assert_int_equal(subnet_span("10.213.1.0/24", &first, &count), 0);
	assert_int_equal(first * 100 + count, 1616);
	assert_int_equal(subnet_span("10.213.0.36/30", &first, &count), 0); /* inside slot 2 */
	assert_int_equal(first * 100 + count, 201);
	assert_int_equal(subnet_span("10.0.0.0/8", &first, &count), 0);    /* the whole pool */
	assert_int_equal(first, 0);
	assert_int_equal(count, 4096);
	assert_int_equal(subnet_span("10.214.0.0/24", &first, &count), -ENOENT);
	assert_int_equal(subnet_span("fd00::/64", &first, &count), -ENOENT);
	assert_int_equal(subnet_span("10.213.0.0/33", &first, &count), -EINVAL);
	assert_int_equal(subnet_span("bogus", &first, &count), -EINVAL);
}

/* Foreign /28s are taken, never ours; a new reading gives back what is gone; a /28 the engine
 * refused stays taken as foreign. */
static void test_foreign_subnets_are_skipped_and_given_back(void **state)
{
	struct sandbox *sb = sandbox_new();
	uint32_t idx;

	assert_non_null(sb);
	assert_int_equal(sandbox_take_subnet(sb), 0);           /* ours: slot 0 */
	assert_int_equal(subnet_foreign_add(NULL, "10.213.0.0/27", false), 0);
	assert_int_equal(subnet_foreign_add(NULL, "10.213.0.64/28", true), 0); /* ours: skipped */
	assert_int_equal(subnet_foreign_count(), 1);                        /* slot 1; slot 0 is ours */
	assert_int_equal(idalloc_take(subnet_map(), &idx), 0);
	assert_int_equal(idx, 2);
	subnet_refused(idx);
	assert_int_equal(subnet_foreign_count(), 2);
	subnet_foreign_clear();
	assert_int_equal(subnet_foreign_count(), 0);
	assert_int_equal(subnet_map()->used, 1);                    /* only the sandbox's */
	assert_int_equal(idalloc_taken(subnet_map(), 1), 0);
	assert_int_equal(idalloc_taken(subnet_map(), 0), 1);
}

/* Only the form agenticd writes names a session: strtoul's leading space, sign and zeros,
 * and anything around the numbers, do not. */
static void test_exec_id_parse_takes_exactly_what_agenticd_writes(void **state)
{
	static const char *const bad[] = {
		"x 1.2", "x+1.2", "x-1.2", "x1. 2", "x1.+2", "x1.-2", "x01.2", "x1.02", "x1.2 ",
		"x1.2x", "x.2", "x1.", "x1", "1.2", "X1.2", "", "x1..2", "x1.2.3", "x\t1.2",
		"x4294967296.1", "x1.4294967296", "x18446744073709551617.1", "x1.0x10",
	};
	uint32_t slot = 7, gen = 7;

	assert_int_equal(exec_id_parse("x0.0", &slot, &gen), 0);
	assert_int_equal(slot, 0);
	assert_int_equal(gen, 0);
	assert_int_equal(exec_id_parse("x12.4294967295", &slot, &gen), 0);
	assert_int_equal(slot, 12);
	assert_int_equal(gen, 4294967295u);
	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		if (exec_id_parse(bad[i], &slot, &gen) != -EINVAL)
			fail_msg("'%s' was taken as slot %u gen %u", bad[i], slot, gen);
	assert_int_equal(exec_id_parse(NULL, &slot, &gen), -EINVAL);
}

static void test_sandbox_table_full_returns_null(void **state)
{
	for (int i = 0; i < NSB; i++)
		assert_non_null(sandbox_new());
	assert_null(sandbox_new());
	assert_int_equal(sandbox_live(), NSB);
	sandbox_free(&table[2]);
	assert_ptr_equal(sandbox_new(), &table[2]);
}

static void test_uids_are_next_fit_and_freed_with_the_sandbox(void **state)
{
	struct sandbox *a = sandbox_new(), *b = sandbox_new(), *c;

	assert_int_equal(sandbox_take_uid(a), 0);
	assert_int_equal(sandbox_take_uid(b), 0);
	assert_int_equal(a->uid, 200000);
	assert_int_equal(b->uid, 200001);
	assert_ptr_equal(sandbox_by_uid(200001), b);
	sandbox_free(a);
	assert_null(sandbox_by_uid(200000));
	c = sandbox_new();
	assert_int_equal(sandbox_take_uid(c), 0);
	assert_int_equal(c->uid, 200002); /* a freed uid comes back as late as possible */
	assert_int_equal(sandbox_uid_map()->used, 2);
}

static void test_conflicting_twin_keeps_the_uid_reserved(void **state)
{
	struct sandbox *a = sandbox_new(), *b = sandbox_new(), *c;

	a->uid = b->uid = 200000;
	a->uid_taken = idalloc_mark(sandbox_uid_map(), 200000) == 0;
	b->uid_taken = idalloc_mark(sandbox_uid_map(), 200000) == 0;
	assert_true(a->uid_taken);
	assert_false(b->uid_taken);
	a->state = b->state = SB_CONFLICT;
	assert_non_null(sandbox_by_uid(200000));
	sandbox_free(a);
	assert_true(idalloc_taken(sandbox_uid_map(), 200000)); /* b still claims it */
	assert_ptr_equal(sandbox_by_uid(200000), b);
	c = sandbox_new();
	assert_int_equal(sandbox_take_uid(c), 0);
	assert_int_not_equal(c->uid, 200000);
}

static void test_strrun_keeps_order_and_refuses_overflow(void **state)
{
	char run[16];
	uint32_t len = 0;
	const char *p;

	assert_int_equal(strrun_add(run, &len, sizeof(run), "abc"), 0);
	assert_int_equal(strrun_add(run, &len, sizeof(run), ""), 0);
	assert_int_equal(strrun_add(run, &len, sizeof(run), "defgh"), 0);
	assert_int_equal(strrun_add(run, &len, sizeof(run), "too long"), ERR_LIMIT);
	assert_int_equal(len, 11);
	p = strrun_next(run, len, NULL);
	assert_string_equal(p, "abc");
	p = strrun_next(run, len, p);
	assert_string_equal(p, "");
	p = strrun_next(run, len, p);
	assert_string_equal(p, "defgh");
	assert_null(strrun_next(run, len, p));
}

static void test_record_round_trip_is_0600_and_atomic(void **state)
{
	char root[] = "/tmp/agt-unit-XXXXXX", path[512];
	struct sandbox *sb = sandbox_new(), back;
	char st[16];
	struct stat s;

	assert_non_null(mkdtemp(root));
	snprintf(d.cfg.agentshare_root, sizeof(d.cfg.agentshare_root), "%s", root);
	snprintf(sb->name, sizeof(sb->name), "sbx-one");
	snprintf(sb->instance_id, sizeof(sb->instance_id), "01a227e0-b973-7609-8013-cee30e0c3b3b");
	sb->uid = 200123;
	snprintf(sb->subnet_text, sizeof(sb->subnet_text), "10.213.0.16/28");
	snprintf(sb->network, sizeof(sb->network), "agentic-net-0123456789ab");
	sb->net_managed = true;
	strrun_add(sb->cmd, &sb->cmd_len, sizeof(sb->cmd), "echo");
	strrun_add(sb->cmd, &sb->cmd_len, sizeof(sb->cmd), "hi \"there\"");
	strrun_add(sb->labels, &sb->labels_len, sizeof(sb->labels), "team");
	strrun_add(sb->labels, &sb->labels_len, sizeof(sb->labels), "blue");
	sb->state = SB_READY;
	assert_int_equal(share_make(&d.cfg, sb->instance_id, path, sizeof(path)), 0);
	assert_int_equal(sandbox_record_write(&d.cfg, sb), 0);
	snprintf(path, sizeof(path), "%s/instances/%s/sandbox.json", root, sb->instance_id);
	assert_int_equal(stat(path, &s), 0);
	assert_int_equal(s.st_mode & 0777, 0600);
	snprintf(path, sizeof(path), "%s/instances/%s/.sandbox.json.tmp", root, sb->instance_id);
	assert_int_not_equal(access(path, F_OK), 0);
	memset(&back, 0, sizeof(back));
	assert_int_equal(sandbox_record_read(&d.cfg, sb->instance_id, &back, st, sizeof(st)), 0);
	assert_string_equal(st, "ready");
	assert_string_equal(back.name, "sbx-one");
	assert_int_equal(back.uid, 200123);
	assert_string_equal(back.network, "agentic-net-0123456789ab");
	assert_true(back.net_managed);
	assert_int_equal(back.ncmd, 2);
	assert_int_equal(back.nlabels, 1);
	assert_memory_equal(back.cmd, sb->cmd, sb->cmd_len);
	/* unsynced (a claim with no cmd): the same record, which a restarted agenticd reads */
	snprintf(sb->name, sizeof(sb->name), "sbx-two");
	assert_int_equal(sandbox_record_write_unsynced(&d.cfg, sb), 0);
	memset(&back, 0, sizeof(back));
	assert_int_equal(sandbox_record_read(&d.cfg, sb->instance_id, &back, st, sizeof(st)), 0);
	assert_string_equal(back.name, "sbx-two");
	assert_int_equal(back.uid, 200123);
	snprintf(path, sizeof(path), "%s/instances/%s/.sandbox.json.tmp", root, sb->instance_id);
	assert_int_not_equal(access(path, F_OK), 0);

	/* a crash between mkdir and the record leaves at most a temp record: swept */
	snprintf(path, sizeof(path), "%s/instances/01a227e0-0000-7000-8000-000000000000", root);
	assert_int_equal(mkdir(path, 0700), 0);
	strcat(path, "/.sandbox.json.tmp");
	close(open(path, O_CREAT | O_WRONLY, 0600));
	share_sweep_empty(&d.cfg);
	snprintf(path, sizeof(path), "%s/instances/01a227e0-0000-7000-8000-000000000000", root);
	assert_int_not_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/instances/%s", root, sb->instance_id);
	assert_int_equal(access(path, F_OK), 0); /* a dir with a record stays */

	share_retire(&d.cfg, "/nonexistent", sb->instance_id, false);
	assert_int_not_equal(access(path, F_OK), 0); /* record gone, and nothing else was in it */
	snprintf(path, sizeof(path), "%s/instances", root);
	rmdir(path);
	rmdir(root);
}

static void test_corrupt_record_is_a_parse_error(void **state)
{
	char root[] = "/tmp/agt-unit-XXXXXX", path[512], st[16];
	struct sandbox back;
	int fd;

	assert_non_null(mkdtemp(root));
	snprintf(d.cfg.agentshare_root, sizeof(d.cfg.agentshare_root), "%s", root);
	snprintf(path, sizeof(path), "%s/instances", root);
	mkdir(path, 0700);
	strcat(path, "/x");
	mkdir(path, 0700);
	strcat(path, "/sandbox.json");
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(write(fd, "{\"name\": 1}", 11) == 11);
	close(fd);
	assert_int_equal(sandbox_record_read(&d.cfg, "x", &back, st, sizeof(st)), ERR_PARSE);
	assert_int_equal(sandbox_record_read(&d.cfg, "missing", &back, st, sizeof(st)), -ENOENT);
	unlink(path);
	snprintf(path, sizeof(path), "%s/instances/x", root);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/instances", root);
	rmdir(path);
	rmdir(root);
}

static void test_subuid_overlap_counts_only_overlapping_ranges(void **state)
{
	char path[] = "/tmp/agentic-subuid-XXXXXX";
	const char *text = "alice:100000:65536\n"    /* below the range */
			   "bob:165536:65536\n"      /* 165536..231071 overlaps 200000 */
			   "carol:799999:1\n"        /* the range's last uid */
			   "dave:800000:65536\n"     /* above */
			   "malformed line\n";
	struct config cfg;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	config_defaults(&cfg);
	assert_int_equal(host_warn_subuid(&cfg, path), 2);
	cfg.control_uid_min = 700000;
	assert_int_equal(host_warn_subuid(&cfg, path), 1);
	unlink(path);
	assert_int_equal(host_warn_subuid(&cfg, path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_subnet_index_and_text_agree, setup),
		cmocka_unit_test_setup(test_subnet_index_refuses_what_is_not_a_pool_slot, setup),
		cmocka_unit_test_setup(test_subnet_span_clips_any_prefix_to_the_pool, setup),
		cmocka_unit_test_setup(test_foreign_subnets_are_skipped_and_given_back, setup),
		cmocka_unit_test(test_exec_id_parse_takes_exactly_what_agenticd_writes),
		cmocka_unit_test_setup(test_sandbox_table_full_returns_null, setup),
		cmocka_unit_test_setup(test_uids_are_next_fit_and_freed_with_the_sandbox, setup),
		cmocka_unit_test_setup(test_conflicting_twin_keeps_the_uid_reserved, setup),
		cmocka_unit_test_setup(test_strrun_keeps_order_and_refuses_overflow, setup),
		cmocka_unit_test_setup(test_record_round_trip_is_0600_and_atomic, setup),
		cmocka_unit_test_setup(test_corrupt_record_is_a_parse_error, setup),
		cmocka_unit_test(test_subuid_overlap_counts_only_overlapping_ranges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
