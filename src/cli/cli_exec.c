/* cli_exec.c: `agentic exec` (the upgraded exec stream: stdin up, stdout/stderr down, the
 * exit frame) and `agentic logs` (a run's transcript streamed to stdout). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_internal.h"

/* ---- exec: the upgraded stream (docs/API.md: "The exec stream") ---- */

const char cli_exec_help[] =
	"usage: agentic exec [-i] [-t] NAME [--env K=V]... [--workdir D] [--timeout S] -- CMD [ARGS...]\n"
	"Runs CMD in the sandbox as the workload user (10001, no capabilities). stdin is\n"
	"forwarded, the command's stdout and stderr come out on this process's; the exit status\n"
	"is the command's (128+N when killed by signal N), or 125 when agentic itself failed.\n"
	"  -t   run CMD on a pseudo-terminal of its own (its controlling terminal; one output\n"
	"       stream): this terminal goes into raw mode until the command ends, its size is\n"
	"       passed at start and on every change; stdin must be a terminal\n"
	"  -i   forward stdin (always done; accepted as docker's -i is: -it works)\n";

struct exec_opts {
	const char *name, *workdir, *env[MAX_ENV];
	char **cmd;
	int nenv, ncmd;
	uint64_t timeout;
	bool tty;
};

static int send_frame(int fd, int type, const void *data, size_t len)
{
	uint8_t h[FRAME_HEAD_BYTES];

	frame_head_put(h, type, (uint32_t)len);
	return cli_write_all(fd, h, sizeof(h)) == 0 && cli_write_all(fd, data, len) == 0 ? 0 : -1;
}

/* The terminal's size as a resize frame (a tty exec); 0 or -1 (the connection is gone). */
static int send_size(int fd)
{
	uint16_t rows, cols;
	uint8_t p[4];

	if (cli_tty_size(&rows, &cols) != 0)
		return 0;
	p[0] = (uint8_t)(rows >> 8);
	p[1] = (uint8_t)rows;
	p[2] = (uint8_t)(cols >> 8);
	p[3] = (uint8_t)cols;
	return send_frame(fd, FRAME_RESIZE, p, sizeof(p));
}

/* The exit frame's JSON: prints its error, returns the exit status. */
static int exec_exit(const uint8_t *data, size_t len)
{
	struct json_doc doc;
	int64_t code = -1;
	char err[1024] = "";

	/* the terminal first: the messages below are lines, not raw output */
	cli_tty_restore();
	if (json_parse(&doc, (const char *)data, len, cli_tok, ARRAY_LEN(cli_tok)) != 0 ||
	    json_int(&doc, json_obj_get(&doc, 0, "exit_code"), &code) != 0) {
		fprintf(stderr, "agentic exec: malformed exit frame\n");
		return 125;
	}
	json_str(&doc, json_obj_get(&doc, 0, "error"), err, sizeof(err));
	if (err[0])
		fprintf(stderr, "agentic exec: %s\n", err);
	err[0] = '\0';
	json_str(&doc, json_obj_get(&doc, 0, "transcript_error"), err, sizeof(err));
	if (err[0])
		fprintf(stderr, "agentic exec: the transcript is incomplete: %s\n", err);
	return code < 0 || code > 255 ? 125 : (int)code;
}

/* Every complete frame at the start of fr[0..*have) handled and removed: output written,
 * the exit frame's status returned; -1 while none came. */
static int frames_out(uint8_t *fr, size_t cap, size_t *have)
{
	while (*have >= FRAME_HEAD_BYTES) {
		uint32_t len = frame_head_len(fr);
		int type = frame_head_type(fr);
		size_t whole = FRAME_HEAD_BYTES + (size_t)len;

		if (len > cap - FRAME_HEAD_BYTES) {
			cli_tty_restore();
			fprintf(stderr, "agentic exec: frame too large\n");
			return 125;
		}
		if (*have < whole)
			break;
		if (type == FRAME_EXIT)
			return exec_exit(fr + FRAME_HEAD_BYTES, len);
		/* stdout frames to fd 1, stderr frames to fd 2 */
		if ((type == FRAME_STDOUT || type == FRAME_STDERR) &&
		    cli_write_all(type == FRAME_STDOUT ? 1 : 2, fr + FRAME_HEAD_BYTES, len) != 0 &&
		    errno != EPIPE) {
			cli_tty_restore();
			fprintf(stderr, "agentic exec: cannot write output: %s\n", strerror(errno));
			return 125;
		}
		memmove(fr, fr + whole, *have - whole);
		*have -= whole;
	}
	return -1;
}

static int exec_stream(int fd, const uint8_t *pre, size_t pre_len, bool tty)
{
	static uint8_t in[65536], fr[256 * 1024];
	size_t have = 0;
	bool stdin_open = true;
	int st;

	if (pre_len > sizeof(fr))
		return 125;
	memcpy(fr, pre, pre_len);
	have = pre_len;
	signal(SIGPIPE, SIG_IGN);
	/* the exchange ran non-blocking; frames are written whole, so block from here */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	if (tty)
		(void)send_size(fd); /* the body's size may be stale by now */
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = 0, .events = POLLIN } };
		int n;

		if ((st = frames_out(fr, sizeof(fr), &have)) >= 0)
			return st;
		/* the window changed: its size goes up (lost with the connection: the exit
		 * frame is read all the same) */
		if (tty && cli_tty_winched())
			(void)send_size(fd);
		n = poll(p, stdin_open ? 2 : 1, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return 125;
		if (p[0].revents) {
			ssize_t r = read(fd, fr + have, sizeof(fr) - have);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				cli_tty_restore();
				fprintf(stderr, "agentic exec: the connection to agenticd ended before "
					"the command's exit status\n");
				return 125;
			}
			have += (size_t)r;
		}
		if (stdin_open && p[1].revents) {
			ssize_t r = read(0, in, sizeof(in));

			if (r < 0 && errno == EINTR)
				continue;
			/* a frame that cannot go out means the command has ended and agenticd
			 * closed its side: its status is read (or already was) all the same */
			if (r <= 0) {
				stdin_open = false;
				(void)send_frame(fd, FRAME_STDIN, "", 0);
			} else if (send_frame(fd, FRAME_STDIN, in, (size_t)r) != 0) {
				stdin_open = false;
			}
		}
	}
}

/* POST target with the exec request b, upgraded: the stream's exit status, or 125. A tty
 * exec puts the terminal into raw mode once the stream is up (an error answer before it is
 * printed on the terminal as it was). */
static int exec_request(const struct opts *o, const char *target, const struct buf *b, bool tty)
{
	static const struct http_field up[] = {
		{ "Content-Type", "application/json" }, { "Connection", "Upgrade" },
		{ "Upgrade", "tcp" }, { NULL, NULL }
	};
	static uint8_t reqbuf[300 * 1024];
	struct http_exchange_opts xo = { .body_limit = BODY_MAX, .read_timeout_ms = -1 };
	struct buf req;
	int r;

	buf_init(&req, reqbuf, sizeof(reqbuf));
	if (http_conn_init(&cli_conn, o->socket) != 0 ||
	    http_request_write(&req, "POST", target, "agenticd", up, b->data, b->len) != 0) {
		fprintf(stderr, "agentic exec: request too large or socket path too long\n");
		return 125;
	}
	if (http_conn_begin(&cli_conn, req.data, req.len, &xo) != 0)
		return 125;
	r = cli_read_answer(-1);
	if (r == HTTP_EV_UPGRADE) {
		struct http_slice left = http_conn_leftover(&cli_conn);

		if (tty && (r = cli_tty_raw(0)) != 0) {
			fprintf(stderr, "agentic exec: cannot put the terminal into raw mode: %s\n",
				strerror(-r));
			return 125;
		}
		r = exec_stream(cli_conn.fd, left.data, left.len, tty);
		cli_tty_restore();
		return r;
	}
	if (r != HTTP_EV_DONE) {
		fprintf(stderr, "agentic exec: cannot reach agenticd at %s: %s\n", o->socket,
			r == HTTP_ERR_CONNECT ? strerror(cli_conn.sys_errno) : err_str(r));
		return 125;
	}
	cli_api_error(cli_conn.parser.status);
	return 125;
}

/* -i, -t, -it, -ti: 1 when arg is one of them (tty set by -t), else 0. */
static int exec_flags(const char *arg, bool *tty)
{
	size_t n = strlen(arg);

	if (n < 2 || arg[0] != '-' || strspn(arg + 1, "it") != n - 1)
		return 0;
	if (strchr(arg, 't'))
		*tty = true;
	return 1;
}

/* One option of argv at *i into x: 0, or an exit status (usage or a bad value). */
static int exec_opt(int argc, char **argv, int *i, struct opts *o, struct exec_opts *x)
{
	const char *a = argv[*i];
	int c;

	if ((c = cli_common_opt(o, argc, argv, i)) != 0)
		return c < 0 ? (cli_usage_error(cli_exec_help), 125) : 0;
	if (exec_flags(a, &x->tty))
		return 0;
	if (*i + 1 < argc && strcmp(a, "--env") == 0 && x->nenv < MAX_ENV) {
		const char *kv = x->env[x->nenv++] = argv[++*i];

		if (!strchr(kv, '=') || kv[0] == '=') {
			fprintf(stderr, "agentic exec: --env takes KEY=VALUE\n");
			return 125;
		}
	} else if (*i + 1 < argc && strcmp(a, "--workdir") == 0) {
		x->workdir = argv[++*i];
	} else if (*i + 1 < argc && strcmp(a, "--timeout") == 0) {
		if (parse_u64(argv[++*i], 86400u * 365u, &x->timeout) != 0) {
			fprintf(stderr, "agentic exec: --timeout takes whole seconds\n");
			return 125;
		}
	} else if (!x->name && a[0] != '-') {
		x->name = a;
	} else {
		fprintf(stderr, "agentic exec: unexpected %s\n", a);
		return cli_usage_error(cli_exec_help), 125;
	}
	return 0;
}

/* The request's JSON into b: 0, or -1 (too long). */
static int exec_body(const struct exec_opts *x, struct buf *b)
{
	struct json_writer w;
	uint16_t rows = 0, cols = 0;

	json_writer_init(&w, b);
	json_obj_begin(&w);
	cli_json_strs(&w, "cmd", (const char *const *)x->cmd, x->ncmd);
	cli_json_strs(&w, "env", x->env, x->nenv);
	if (x->workdir) {
		json_key(&w, "working_dir");
		json_str_write(&w, x->workdir);
	}
	json_key(&w, "timeout_seconds");
	json_int_write(&w, (int64_t)x->timeout);
	if (x->tty) {
		struct winsize ws;

		if (ioctl(0, TIOCGWINSZ, &ws) == 0) {
			rows = ws.ws_row;
			cols = ws.ws_col;
		}
		json_key(&w, "tty");
		json_bool_write(&w, true);
		json_key(&w, "rows");
		json_int_write(&w, rows);
		json_key(&w, "cols");
		json_int_write(&w, cols);
	}
	json_obj_end(&w);
	return json_writer_finish(&w) == 0 ? 0 : -1;
}

int cli_verb_exec(int argc, char **argv, struct opts *o)
{
	static char out[256 * 1024];
	static struct exec_opts x;
	char target[160];
	struct buf b;
	int r;

	memset(&x, 0, sizeof(x));
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			x.cmd = argv + i + 1;
			x.ncmd = argc - i - 1;
			break;
		}
		if ((r = exec_opt(argc, argv, &i, o, &x)) != 0)
			return r;
	}
	if (!x.name || !x.cmd || x.ncmd == 0 || cli_name_target(x.name, target, 128) != 0)
		return cli_usage_error(cli_exec_help), 125;
	if (x.ncmd > MAX_CMD) {
		fprintf(stderr, "agentic exec: at most %d command arguments\n", MAX_CMD);
		return 125;
	}
	if (x.tty && !isatty(0)) {
		fprintf(stderr, "agentic exec: -t needs a terminal on stdin, and stdin is not one "
			"(run it from a terminal, or drop -t)\n");
		return 125;
	}
	strcat(target, "/exec");
	buf_init(&b, out, sizeof(out));
	if (exec_body(&x, &b) != 0) {
		fprintf(stderr, "agentic exec: arguments too long or not UTF-8\n");
		return 125;
	}
	return exec_request(o, target, &b, x.tty);
}

/* ---- logs ---- */

const char cli_logs_help[] =
	"usage: agentic logs NAME [--run RUN | -f] [--stderr]\n"
	"Prints a run's transcript: stdout.log (or stderr.log) of the current run, or of RUN\n"
	"(a directory name under runs/, run-<UTC timestamp>-<n>). Every byte as the workload\n"
	"wrote it, up to the sandbox's transcript budget; past it, a line\n"
	"\"[agentic: transcript cut: ...]\" and nothing more (metrics.json counts the rest).\n"
	"-f, --follow: the current run's, then what is written to it as it is written, until\n"
	"the sandbox is removed (exit 0) or ^C.\n";

int cli_verb_logs(int argc, char **argv, struct opts *o)
{
	static uint8_t reqbuf[1024];
	struct http_exchange_opts xo = { .body_limit = 0, .read_timeout_ms = -1 };
	const char *name = NULL, *run = NULL;
	bool err = false, follow = false;
	char target[256];
	struct buf req;
	int c, r;

	for (int i = 1; i < argc; i++) {
		if ((c = cli_common_opt(o, argc, argv, &i)) < 0)
			return cli_usage_error(cli_logs_help);
		if (c)
			continue;
		if (strcmp(argv[i], "--stderr") == 0)
			err = true;
		else if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--follow") == 0)
			follow = true;
		else if (i + 1 < argc && strcmp(argv[i], "--run") == 0)
			run = argv[++i];
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			return cli_usage_error(cli_logs_help);
	}
	if (!name || (run && follow) || cli_name_target(name, target, 128) != 0)
		return cli_usage_error(cli_logs_help);
	if (run && (strlen(run) > 64 || strspn(run, "abcdefghijklmnopqrstuvwxyz"
					       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != strlen(run))) {
		fprintf(stderr, "agentic logs: '%s' is not a run name\n", run);
		return 2;
	}
	snprintf(target + strlen(target), sizeof(target) - strlen(target), "/logs?stream=%s%s%s%s",
		 err ? "stderr" : "stdout", run ? "&run=" : "", run ? run : "",
		 follow ? "&follow=1" : "");
	buf_init(&req, reqbuf, sizeof(reqbuf));
	if (http_conn_init(&cli_conn, o->socket) != 0 ||
	    http_request_write(&req, "GET", target, "agenticd", NULL, NULL, 0) != 0 ||
	    http_conn_begin(&cli_conn, req.data, req.len, &xo) != 0)
		return 1;
	r = cli_read_answer(1);
	if (r == ANSWER_OUT_FAILED)
		return 1; /* stdout went away */
	if (r != HTTP_EV_DONE) {
		fprintf(stderr, "agentic logs: cannot read from agenticd at %s: %s\n", o->socket,
			r == HTTP_ERR_CONNECT ? strerror(cli_conn.sys_errno) : err_str(r));
		return 1;
	}
	return cli_conn.parser.status == 200 ? 0 : cli_api_error(cli_conn.parser.status);
}
