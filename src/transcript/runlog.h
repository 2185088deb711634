/* runlog.h: the transcript module's interface: a sandbox's run transcripts, written by runlog.c
 * (docs/TRANSCRIPTS.md), and the transcript state of every sandbox slot (struct transcript_sb,
 * transcript.c), written only in src/transcript/. It may call the libraries, config, workspace
 * (host.h) and the sandbox table; the modules above call it. */
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
	uint64_t quiet[2];            /* bytes of quiet commands (exec_req.quiet): counted only */
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

/* ---- a sandbox's transcript state: one per sandbox slot, in a table this module owns ---- */
struct transcript_sb {
	uint32_t gen;                 /* the slot's gen it belongs to: another gen, and it is reset */
	struct run run;
	uint64_t used;                /* what its runs' files hold: read at each run's start or
				       * adoption, then counted at each write (its budget is
				       * sandbox_transcript_budget) */
	/* the output-ack stream (agent_outack.c, OutputAck in agent.proto): what the transcript has of
	 * the init's numbered output decides what is written */
	bool out_stalled;             /* a transcript write failed: resume at out_retry_ms */
	bool out_ack_owed;            /* an ack (or resume) did not fit the send queue */
	bool out_resume_owed;
	bool out_gap_logged;          /* a gap in the init's offsets was logged on this stream */
	uint32_t out_epoch;           /* the current resume epoch */
	uint64_t out_next[2];         /* the init offset of the next stdout, stderr byte wanted */
	uint64_t out_unacked;         /* ring bytes (data and record overhead) since the last ack */
	uint64_t out_results;         /* the seq of the last result written */
	int64_t out_retry_ms;         /* monotonic */
};

/* sb's transcript state, read-only (reset first when the slot was reused since: the same
 * answer however often it is asked, so the compiler may ask once). Its writers are in
 * src/transcript/ alone. */
const struct transcript_sb *transcript_of(const struct sandbox *sb) __attribute__((pure));
/* Whether any sandbox's output stream is stalled (out_stalled): the loop's per-turn walks for
 * a stalled one skip when none is. */
bool transcript_any_stalled(void);
/* What the sandboxes other than except may still write to their transcripts (budget less
 * use): a create counts it against the agentshare's room with its own budget. */
uint64_t transcript_owed(const struct sandbox *except);
/* The writes other modules ask for, on t = transcript_of(sb): one entry (one function in the
 * binary), with a named call for each below. a, b: the op's values. */
enum transcript_op {
	TR_CHARGE,       /* a bytes another module wrote to the run's directory (the egress
			   * audit) count in the sandbox's transcript budget */
	TR_OUT_CONNECT,  /* the output-ack stream, as agent_outack.c drives it: a new connection,
			   * nothing stalled, owed or logged */
	TR_OUT_ACK_OWED, /* an ack (or resume) is owed (a: 1) or not (a: 0) */
	TR_OUT_ACKED,    /* an ack went out: no resume owed, nothing unacked */
	TR_OUT_RESUME,   /* a new epoch (unless a resume is owed already: chunks sent before
			   * the init hears of it must never match), not stalled, a resume owed */
	TR_OUT_STALL,    /* a transcript write failed: stalled until a (monotonic ms) */
	TR_OUT_GAP,      /* a gap in the init's offsets was logged */
	TR_OUT_TOOK,     /* stream a's next wanted offset is b; ring bytes: see below */
	TR_OUT_RESULT,   /* the result with seq a is written */
};
void transcript_op(const struct transcript_sb *t, enum transcript_op op, uint64_t a, uint64_t b);

static inline void transcript_charge(struct sandbox *sb, uint64_t len)
{
	transcript_op(transcript_of(sb), TR_CHARGE, len, 0);
}

static inline void transcript_out_connect(struct sandbox *sb)
{
	transcript_op(transcript_of(sb), TR_OUT_CONNECT, 0, 0);
}

static inline void transcript_out_ack_owed(struct sandbox *sb, bool owed)
{
	transcript_op(transcript_of(sb), TR_OUT_ACK_OWED, owed, 0);
}

static inline void transcript_out_acked(struct sandbox *sb)
{
	transcript_op(transcript_of(sb), TR_OUT_ACKED, 0, 0);
}

static inline void transcript_out_resume(struct sandbox *sb)
{
	transcript_op(transcript_of(sb), TR_OUT_RESUME, 0, 0);
}

static inline void transcript_out_stall(struct sandbox *sb, int64_t retry_ms)
{
	transcript_op(transcript_of(sb), TR_OUT_STALL, (uint64_t)retry_ms, 0);
}

static inline void transcript_out_gap_logged(struct sandbox *sb)
{
	transcript_op(transcript_of(sb), TR_OUT_GAP, 0, 0);
}

/* Stream s has next as its next wanted offset, after ring bytes more taken (unacked). */
static inline void transcript_out_took(struct sandbox *sb, int s, uint64_t next, uint64_t ring)
{
	transcript_op(transcript_of(sb), TR_OUT_TOOK, (uint64_t)s | ring << 1, next);
}

static inline void transcript_out_result(struct sandbox *sb, uint64_t seq)
{
	transcript_op(transcript_of(sb), TR_OUT_RESULT, seq, 0);
}

/* runs/run-<UTC>-<n>/ with stdout.log, stderr.log, commands.log, metrics.json and
 * trace/events.jsonl, 0700/0600 from creation; `current` points at the open run. Every run of
 * a sandbox counts in its transcript budget (transcript_sb.used, read from the files at
 * each run's start or adoption, every file under runs/ included, the egress audit's too, then
 * counted per write); a line past it is not written (run.lines_dropped) but counts as
 * written, a run's first line (its key) alone is always written. Every write
 * is a plain write(2) to a local file; a failure (ENOSPC) is logged once, kept in run.error
 * until a write succeeds again, and the daemon goes on. A new run sets the sandbox's out_next
 * and out_results to 0, an adopted one to its file sizes and last result seq. */
/* The table of nslots (max_sandboxes) entries, storage taken at start (transcript.c): every
 * entry empty. A unit test that never sets one up has one scratch entry for every sandbox. The
 * runs are under the sandbox table's config's agentshare_root. */
void transcript_init(struct transcript_sb *slots, uint32_t nslots);
/* The agent is READY: continues the open run when its pid namespace is the run's (a
 * reconnect, or agenticd restarted), else starts a new one. Returns true when a run began. */
bool runlog_ready(struct sandbox *sb);
/* The container stopped or the sandbox is going: a stop event, final metrics, files closed. */
void runlog_stop(struct sandbox *sb, const char *why);
/* The run's files closed with nothing written and the slot's state forgotten, as the death of
 * agenticd leaves them (a simulated restart); the run is adopted again at the next READY. */
void runlog_abandon(struct sandbox *sb);
/* One line in trace/events.jsonl: {"ts":..,"event":event} plus the sandbox's ids, and more
 * string fields: kv is key, value, ..., NULL (fixed words only); NULL: none. */
void runlog_event_fields(struct sandbox *sb, const char *event, const char *const *kv);
static inline void runlog_event(struct sandbox *sb, const char *event)
{
	runlog_event_fields(sb, event, NULL);
}
/* Appends to stdout.log (stream 0) or stderr.log; returns how much was taken: what was
 * written, and what the budget dropped (all of it when no run is open: there is nowhere to
 * write). Output past the budget is cut: a mark in the file, a transcript_cut event, then
 * counted only (run.dropped, metrics.json). Less than len only for a write that failed. */
size_t runlog_output(struct sandbox *sb, int stream, const void *data, size_t len);
/* Output of a quiet command (a file transfer): counted in the run's stream offsets
 * (metrics.json stdout_quiet, stderr_quiet), never written. Returns len. */
size_t runlog_quiet(struct sandbox *sb, int stream, size_t len);
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
