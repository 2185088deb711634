/* runlog.h: a sandbox's transcript, written by runlog.c (docs/TRANSCRIPTS.md). */
#ifndef AGENTIC_MGMT_RUNLOG_H
#define AGENTIC_MGMT_RUNLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"

struct config;
struct sandbox;

/* ---- a run: the open transcript of one life of the sandbox's init ---- */
enum run_file { RUN_STDOUT, RUN_STDERR, RUN_COMMANDS, RUN_EVENTS, RUN_FILES };

struct run {
	bool open;
	int dirfd;                    /* runs/<name>/ */
	int fd[RUN_FILES];
	char name[RUN_NAME_BYTES];    /* run-<UTC timestamp>-<n> */
	char key[96];                 /* pid namespace/host pid/start time of the init: same
				       * key, same run */
	int64_t started_ms;           /* wall clock */
	uint64_t bytes[2];            /* stdout, stderr: the workload's bytes in the files */
	/* the sandbox's transcript budget spent (limits.h, LIMIT_TRANSCRIPT_*): a stream is cut
	 * once, with a mark in its file; what comes after is acked to the init, not written */
	bool cut[2];
	uint64_t dropped[2];          /* bytes of the stream not written */
	uint64_t mark[2];             /* bytes of the cut's mark in the stream's file */
	uint64_t lines_dropped;       /* commands.log and events lines not written */
	uint32_t commands, running;
	int32_t codes[RUN_CODES];     /* exit codes seen, with their counts */
	uint32_t code_count[RUN_CODES];
	uint32_t ncodes;
	int error;                    /* the first write error (-errno), or 0 until that file is
				       * written again */
	int error_file;               /* the file it happened to (enum run_file) */
	int64_t metrics_due;          /* monotonic ms: metrics.json is stale and is written
				       * then (runlog_tick); 0 when it is up to date */
};

/* runs/run-<UTC>-<n>/ with stdout.log, stderr.log, commands.log, metrics.json and
 * trace/events.jsonl, 0700/0600 from creation; `current` points at the open run. Every run of
 * a sandbox counts in its transcript budget (sb->transcript_used, read from the files at
 * each run's start or adoption, every file under runs/ included, the egress audit's too, then
 * counted per write); a line past it is not written (run.lines_dropped) but counts as
 * written, a run's first line (its key) alone is always written. Every write
 * is a plain write(2) to a local file; a failure (ENOSPC) is logged once, kept in run.error
 * until a write succeeds again, and the daemon goes on. A new run sets the sandbox's out_next
 * and out_results to 0, an adopted one to its file sizes and last result seq. */
/* The config (agentshare_root: where the runs are), handed over at start. */
void runlog_init(const struct config *cfg);
/* The agent is READY: continues the open run when its pid namespace is the run's (a
 * reconnect, or agenticd restarted), else starts a new one. Returns true when a run began. */
bool runlog_ready(struct sandbox *sb);
/* The container stopped or the sandbox is going: a stop event, final metrics, files closed. */
void runlog_stop(struct sandbox *sb, const char *why);
/* The run's files closed with nothing written, as the death of agenticd leaves them (a
 * simulated restart, sandbox_table_reset); the run is adopted again at the next READY. */
void runlog_abandon(struct sandbox *sb);
/* One line in trace/events.jsonl: {"ts":..,"event":event} plus the sandbox's ids. */
void runlog_event(struct sandbox *sb, const char *event);
/* The same with more string fields: kv is key, value, ..., NULL (fixed words only). */
void runlog_event_fields(struct sandbox *sb, const char *event, const char *const *kv);
/* Appends to stdout.log (stream 0) or stderr.log; returns how much was taken: what was
 * written, and what the budget dropped (all of it when no run is open: there is nowhere to
 * write). Output past the budget is cut: a mark in the file, a transcript_cut event, then
 * counted only (run.dropped, metrics.json). Less than len only for a write that failed. */
size_t runlog_output(struct sandbox *sb, int stream, const void *data, size_t len);
/* Bytes of a cut stream the run has not seen (an adopted run whose metrics.json was older
 * than the cut's last count): counted as dropped; false, and nothing counted, when the
 * stream is not cut (a gap to be sent again). */
bool runlog_skip(struct sandbox *sb, int stream, uint64_t len);
/* The command's start line (and event); false, and nothing counted, when the line could not
 * be written: the command is then not to be started. */
bool runlog_command_start(struct sandbox *sb, const char *id, char *const *argv, size_t n);
/* The command's end line in commands.log (with "seq" when seq > 0: the init's numbering,
 * which an adopted run reads back), then its event and the metrics; false when the line
 * could not be written, and then, for an init's result (seq > 0, sent again later), nothing
 * is counted. */
bool runlog_command_end(struct sandbox *sb, const char *id, int32_t code, int64_t duration_ms,
			uint64_t seq);
/* Opens the transcript file of a run (NULL: current) for reading: 0, -ENOENT, -EINVAL. */
int runlog_open(const struct sandbox *sb, const char *run, int stream, int *fd);
/* metrics.json is rewritten from the loop, not inline: a command's start within
 * RUN_METRICS_DELAY_MS, its end at the end of the loop's turn (after the exit status went to
 * the client), a run's stop at once. runlog_tick writes those due at now;
 * runlog_next_deadline says when the next one is due (monotonic ms), or INT64_MAX. */
void runlog_tick(int64_t now);
int64_t runlog_next_deadline(void);

#endif
