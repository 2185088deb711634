/* head.c: the proxy request head, read strictly (see head.h). A hostile workload writes these
 * bytes, so every field is checked against a small grammar and anything outside it is
 * ERR_PARSE: the worker answers 400 and nothing of it goes upstream. */
#include <arpa/inet.h>
#include <string.h>

#include "egress/head.h"

static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool is_host_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_';
}

/* A decimal port 1..65535, no sign, no leading zero. */
static int parse_port(const char *s, size_t n, uint16_t *out)
{
	unsigned long v = 0;

	if (n == 0 || n > 5 || s[0] == '0')
		return ERR_PARSE;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return ERR_PARSE;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return ERR_PARSE;
	*out = (uint16_t)v;
	return 0;
}

int egress_name_parse(const char *s, size_t n, char *out)
{
	size_t label = 0;

	if (n == 0 || n > EGRESS_HOST_BYTES - 1)
		return ERR_PARSE;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!is_host_char(c))
			return ERR_PARSE;
		if (c == '.') {
			if (label == 0)
				return ERR_PARSE;
			label = 0;
		} else if (++label > 63) {
			return ERR_PARSE;
		}
		out[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	if (label == 0)
		return ERR_PARSE;
	out[n] = '\0';
	return 0;
}

/* host:port, or [v6]:port. With need_port false the port may be left out (def is used). */
static int parse_authority(const char *s, size_t n, bool need_port, uint16_t def,
			   struct egress_head *h)
{
	const char *port = NULL;
	size_t hn, pn = 0;

	if (n > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', n);
		char tmp[INET6_ADDRSTRLEN + 1];
		struct in6_addr a;
		if (!close)
			return ERR_PARSE;
		hn = (size_t)(close - s - 1);
		if (hn == 0 || hn >= sizeof(tmp))
			return ERR_PARSE;
		for (size_t i = 0; i < hn; i++) {
			unsigned char c = (unsigned char)s[1 + i];
			if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
			      (c >= 'A' && c <= 'F') || c == ':' || c == '.'))
				return ERR_PARSE; /* no zone id: an interface is not the workload's */
			tmp[i] = (char)(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
		}
		tmp[hn] = '\0';
		if (inet_pton(AF_INET6, tmp, &a) != 1)
			return ERR_PARSE;
		memcpy(h->host, tmp, hn + 1);
		if ((size_t)(close - s) + 1 < n) {
			if (close[1] != ':')
				return ERR_PARSE;
			port = close + 2;
			pn = n - (size_t)(port - s);
		} else if (need_port) {
			return ERR_PARSE;
		}
	} else {
		const char *colon = memchr(s, ':', n);
		hn = colon ? (size_t)(colon - s) : n;
		if (egress_name_parse(s, hn, h->host) != 0)
			return ERR_PARSE;
		if (colon) {
			port = colon + 1;
			pn = n - hn - 1;
		} else if (need_port) {
			return ERR_PARSE;
		}
	}
	if (port)
		return parse_port(port, pn, &h->port);
	h->port = def;
	return 0;
}

/* http://authority[/path][?query], the scheme in any case. */
static int parse_absolute(const char *s, size_t n, struct egress_head *h)
{
	size_t an = 0, pn;
	const char *path;

	if (n < 7 || strncasecmp(s, "http://", 7) != 0)
		return ERR_PARSE;
	s += 7;
	n -= 7;
	while (an < n && s[an] != '/' && s[an] != '?') {
		if (s[an] == '@' || s[an] == '#')
			return ERR_PARSE; /* userinfo, or a fragment that names no path */
		an++;
	}
	if (parse_authority(s, an, false, 80, h) != 0)
		return ERR_PARSE;
	path = s + an;
	pn = n - an;
	for (size_t i = 0; i < pn; i++)
		if (path[i] == '#')
			return ERR_PARSE; /* a fragment is never sent */
	if (pn == 0) {
		memcpy(h->path, "/", 2);
		return 0;
	}
	if (path[0] == '?') {
		if (pn + 2 > sizeof(h->path))
			return ERR_PARSE;
		h->path[0] = '/';
		memcpy(h->path + 1, path, pn);
		h->path[pn + 1] = '\0';
		return 0;
	}
	if (pn + 1 > sizeof(h->path))
		return ERR_PARSE;
	memcpy(h->path, path, pn);
	h->path[pn] = '\0';
	return 0;
}

/* METHOD SP target SP HTTP/1.d, printable ASCII only (line holds no CR or LF). */
static int parse_request_line(const char *line, size_t n, struct egress_head *h)
{
	const char *sp1, *sp2, *target;
	size_t mn, tn;

	for (size_t i = 0; i < n; i++)
		if ((unsigned char)line[i] <= 0x20 && line[i] != ' ')
			return ERR_PARSE;
		else if ((unsigned char)line[i] >= 0x7f)
			return ERR_PARSE;
	sp1 = memchr(line, ' ', n);
	if (!sp1)
		return ERR_PARSE;
	mn = (size_t)(sp1 - line);
	if (mn == 0 || mn >= sizeof(h->method))
		return ERR_PARSE;
	for (size_t i = 0; i < mn; i++)
		if (!is_tchar((unsigned char)line[i]))
			return ERR_PARSE;
	target = sp1 + 1;
	sp2 = memchr(target, ' ', n - mn - 1);
	if (!sp2)
		return ERR_PARSE;
	tn = (size_t)(sp2 - target);
	if (tn == 0 || n - (size_t)(sp2 + 1 - line) != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    sp2[8] < '0' || sp2[8] > '9')
		return ERR_PARSE;
	memcpy(h->method, line, mn);
	h->method[mn] = '\0';
	h->path[0] = '\0';
	if (strcmp(h->method, "CONNECT") == 0)
		return parse_authority(target, tn, true, 0, h);
	return parse_absolute(target, tn, h);
}

/* name: value. A folded line (leading SP/HT), a name that is no token, a control character
 * in the value (but HT) are refused; bytes >= 0x80 are allowed in values (obs-text). */
static int check_header_line(const char *line, size_t n)
{
	const char *colon = memchr(line, ':', n);

	if (!colon || colon == line)
		return ERR_PARSE;
	for (const char *p = line; p < colon; p++)
		if (!is_tchar((unsigned char)*p))
			return ERR_PARSE;
	for (const char *p = colon + 1; p < line + n; p++)
		if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
			return ERR_PARSE;
	return 0;
}

int egress_head_parse(const char *buf, size_t len, struct egress_head *h)
{
	size_t pos = 0, scan = len < EGRESS_HEAD_MAX ? len : EGRESS_HEAD_MAX;
	bool first = true;

	memset(h, 0, sizeof(*h));
	while (pos < scan) {
		const char *lf = memchr(buf + pos, '\n', scan - pos);
		size_t n, next;
		if (!lf) {
			/* A request line that is already too long or holds a bad byte need not wait. */
			for (size_t i = pos; i < scan; i++)
				if ((unsigned char)buf[i] < 0x20 && buf[i] != '\r' && buf[i] != '\t')
					return ERR_PARSE;
			break;
		}
		next = (size_t)(lf - buf) + 1;
		n = (size_t)(lf - (buf + pos));
		if (n > 0 && buf[pos + n - 1] == '\r')
			n--;
		if (memchr(buf + pos, '\r', n))
			return ERR_PARSE; /* a bare CR inside a line */
		if (first) {
			if (parse_request_line(buf + pos, n, h) != 0)
				return ERR_PARSE;
			first = false;
		} else if (n == 0) {
			h->raw = buf;
			h->raw_len = next;
			h->rest = buf + next;
			h->rest_len = len - next;
			return EGRESS_HEAD_DONE;
		} else if (check_header_line(buf + pos, n) != 0) {
			return ERR_PARSE;
		}
		pos = next;
	}
	if (len >= EGRESS_HEAD_MAX) {
		memset(h, 0, sizeof(*h));
		return ERR_PARSE;
	}
	return EGRESS_HEAD_MORE;
}

bool egress_head_is_connect(const struct egress_head *h)
{
	return strcmp(h->method, "CONNECT") == 0;
}
