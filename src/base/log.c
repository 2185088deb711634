/* log.c: logfmt lines on stderr, one write(2) per event. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

static enum log_level log_threshold = LOG_INFO;
static const char *log_prog = "agentic";

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void log_set_level(enum log_level level)
{
	log_threshold = level;
}

int log_level_parse(const char *name, enum log_level *out)
{
	for (size_t i = 0; i < ARRAY_LEN(level_names); i++) {
		if (strcmp(name, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *log_level_name(enum log_level level)
{
	return level_names[level];
}

void log_set_prog(const char *prog)
{
	log_prog = prog;
}

static int needs_quotes(const char *s)
{
	if (*s == '\0')
		return 1;
	for (; *s; s++)
		if (*s <= ' ' || *s == '"' || *s == '=' || *s == '\\' || *s == 0x7f)
			return 1;
	return 0;
}

const char *log_quote(char *out, size_t out_size, const char *s)
{
	size_t n = 0;

	if (out_size < 3) {
		if (out_size)
			out[0] = '\0';
		return out;
	}
	if (!s)
		s = "";
	out[n++] = '"';
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		size_t k = c == '"' || c == '\\' ? 2 : c < ' ' || c == 0x7f ? 4 : 1;

		if (n + k + 2 > out_size)
			break; /* room for the closing quote and the NUL */
		if (c == '"' || c == '\\') {
			out[n++] = '\\';
			out[n++] = (char)c;
		} else if (c < ' ' || c == 0x7f) {
			n += (size_t)snprintf(out + n, out_size - n, "\\x%02x", c);
		} else {
			out[n++] = (char)c;
		}
	}
	out[n++] = '"';
	out[n] = '\0';
	return out;
}

const char *logfmt_value(char *out, size_t out_size, const char *s)
{
	if (s && !needs_quotes(s) && out_size) {
		snprintf(out, out_size, "%s", s);
		return out;
	}
	return log_quote(out, out_size, s);
}

void log_emit(enum log_level level, const char *msg, const char *fmt, ...)
{
	char line[LIMIT_LOG_LINE_BYTES];
	char qmsg[256];
	struct timespec ts;
	struct tm tm;
	size_t n;
	int r;
	va_list ap;

	if (level > log_threshold)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	r = snprintf(line, sizeof(line),
		     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ prog=%s level=%s msg=%s",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		     tm.tm_sec, ts.tv_nsec / 1000000L, log_prog, level_names[level],
		     needs_quotes(msg) ? log_quote(qmsg, sizeof(qmsg), msg) : msg);
	n = r < 0 ? 0 : (size_t)r;
	if (fmt && *fmt && n + 1 < sizeof(line)) {
		line[n++] = ' ';
		va_start(ap, fmt);
		r = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		va_end(ap);
		if (r > 0)
			n += (size_t)r;
	}
	if (n >= sizeof(line) - 1) {
		static const char cut[] = " truncated=true";
		n = sizeof(line) - sizeof(cut) - 1;
		memcpy(line + n, cut, sizeof(cut) - 1);
		n += sizeof(cut) - 1;
	}
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return; /* nowhere left to report it */
}
