/* test_runlog.c: a sandbox's transcript budget (runlog.c). Output fills the budget up to its
 * last 1/16, then is cut: the rest is taken (acked) but not written, a mark ends the file and
 * the dropped bytes are counted; later commands' lines are written in the room kept for them,
 * and past the whole budget are counted as written (the command goes on). An adopted run
 * (agenticd restarted) takes the init's offsets back as written + dropped, and the sandbox's
 * use back from the files; the unspent budgets of the others are what a create counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "config/config.h"
#include "transcript/runlog.h"
#include "sandbox/sandbox.h"

#define MIB (1ull << 20)

static struct config cfg;
static struct sandbox table[3];
static struct transcript_sb transcripts[3];
static uint64_t uid_bits[(600000 + 63) / 64];
static char share[64];
static char chunk[64 * 1024];

static struct sandbox *make(const char *id, uint64_t budget)
{
	char dir[256];
	struct sandbox *sb = sandbox_new();

	assert_non_null(sb);
	snprintf(sb->name, sizeof(sb->name), "sb-%s", id);
	snprintf(sb->instance_id, sizeof(sb->instance_id), "%s", id);
	snprintf(sb->pid_ns, sizeof(sb->pid_ns), "pid:[4026531836]");
	sb->transcript_bytes = budget;
	snprintf(dir, sizeof(dir), "%s/instances", share);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/instances/%s", share, id);
	assert_int_equal(mkdir(dir, 0700), 0);
	assert_true(runlog_ready(sb));
	return sb;
}

static uint64_t file_size(const struct sandbox *sb, const char *name)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/instances/%s/current/%s", share, sb->instance_id, name);
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int setup(void **state)
{
	memset(table, 0, sizeof(table));
	config_defaults(&cfg);
	snprintf(share, sizeof(share), "/tmp/test_runlog.%d", (int)getpid());
	mkdir(share, 0700);
	snprintf(cfg.agentshare_root, sizeof(cfg.agentshare_root), "%s", share);
	sandbox_table_init(&cfg, table, 3, uid_bits);
	transcript_init(transcripts, 3);
	memset(chunk, 'x', sizeof(chunk));
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	for (int i = 0; i < 3; i++)
		runlog_abandon(&table[i]);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", share);
	return system(cmd);
}

/* Writes total bytes of stream s in chunks; every chunk is taken whole. */
static void print(struct sandbox *sb, int s, uint64_t total)
{
	for (uint64_t done = 0; done < total;) {
		size_t n = total - done < sizeof(chunk) ? (size_t)(total - done) : sizeof(chunk);

		assert_int_equal(runlog_output(sb, s, chunk, n), n);
		done += n;
	}
}

static void test_output_is_cut_at_the_budget(void **state)
{
	struct sandbox *sb = make("a", 2 * MIB);
	uint64_t cap = 2 * MIB - 2 * MIB / LIMIT_TRANSCRIPT_LINES_DIV;
	char *argv[] = { "echo", "hi" };

	print(sb, 0, 10 * MIB);
	assert_true(transcript_of(sb)->run.cut[0]);
	assert_false(transcript_of(sb)->run.cut[1]);
	assert_int_equal(transcript_of(sb)->run.bytes[0] + transcript_of(sb)->run.dropped[0], 10 * MIB);
	assert_true(transcript_of(sb)->used <= 2 * MIB);
	assert_true(transcript_of(sb)->run.mark[0] > 0);
	/* the file: output up to the cap (less the run's first lines), then the mark */
	assert_int_equal(file_size(sb, "stdout.log"), transcript_of(sb)->run.bytes[0] + transcript_of(sb)->run.mark[0]);
	assert_true(transcript_of(sb)->run.bytes[0] <= cap && transcript_of(sb)->run.bytes[0] > cap - 4096);
	assert_int_equal(transcript_of(sb)->used, file_size(sb, "stdout.log") +
			 file_size(sb, "stderr.log") + file_size(sb, "commands.log") +
			 file_size(sb, "trace/events.jsonl"));
	/* a later command: its lines in the room kept, its output counted */
	assert_true(runlog_command_start(sb, "c1", argv, 2));
	assert_true(file_size(sb, "commands.log") > 0);
	print(sb, 0, 3);
	print(sb, 1, 5);
	assert_true(transcript_of(sb)->run.cut[1]);
	assert_int_equal(transcript_of(sb)->run.dropped[1], 5);
	assert_int_equal(transcript_of(sb)->run.bytes[0] + transcript_of(sb)->run.dropped[0], 10 * MIB + 3);
	assert_true(runlog_command_end(sb, "c1", 0, 1, 1));
	/* the whole budget spent by lines: they are counted as written, the command goes on */
	while (!transcript_of(sb)->run.lines_dropped)
		assert_true(runlog_command_start(sb, "c2", argv, 2));
	assert_true(runlog_command_end(sb, "c2", 0, 1, 2));
	assert_true(transcript_of(sb)->used <= 2 * MIB);
	assert_int_equal(transcript_of(sb)->run.error, 0);
}

static void test_adopted_run_resumes_from_written_plus_dropped(void **state)
{
	struct sandbox *sb = make("b", 1 * MIB);
	uint64_t used, bytes, dropped;

	print(sb, 0, 3 * MIB);
	runlog_tick(INT64_MAX); /* metrics.json as the loop writes it */
	used = transcript_of(sb)->used;
	bytes = transcript_of(sb)->run.bytes[0];
	dropped = transcript_of(sb)->run.dropped[0];
	runlog_abandon(sb); /* agenticd dies */
	assert_false(runlog_ready(sb)); /* adopted, not begun */
	assert_true(transcript_of(sb)->run.cut[0]);
	assert_int_equal(transcript_of(sb)->run.bytes[0], bytes);
	assert_int_equal(transcript_of(sb)->run.dropped[0], dropped);
	assert_int_equal(transcript_of(sb)->out_next[0], 3 * MIB);
	assert_true(transcript_of(sb)->used >= used); /* metrics.json and the reconnected line */
	/* bytes dropped after the last metrics.json: a gap on a cut stream counts as dropped */
	assert_true(runlog_skip(sb, 0, 100));
	assert_int_equal(transcript_of(sb)->run.dropped[0], dropped + 100);
	assert_false(runlog_skip(sb, 1, 100));
}

static void test_owed_counts_unspent_budgets(void **state)
{
	struct sandbox *a = make("c", 4 * MIB), *b = make("d", 0);

	assert_int_equal(sandbox_transcript_budget(b), cfg.transcript_budget_bytes);
	assert_int_equal(transcript_owed(a),
			 cfg.transcript_budget_bytes - transcript_of(b)->used);
	assert_int_equal(transcript_owed(b), 4 * MIB - transcript_of(a)->used);
	print(a, 0, 8 * MIB);
	assert_int_equal(transcript_owed(b), 4 * MIB - transcript_of(a)->used);
	assert_true(transcript_owed(b) <= 4 * MIB / LIMIT_TRANSCRIPT_LINES_DIV);
	assert_int_equal(transcript_owed(NULL), transcript_owed(a) +
			 transcript_owed(b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_output_is_cut_at_the_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_adopted_run_resumes_from_written_plus_dropped,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_owed_counts_unspent_budgets, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
