/* err.c: text for the negative error codes of every module, in one table. Base includes no
 * module above it, so an entry names its code by range and offset, and the comment gives the
 * name its module's header defines; test_base checks the two agree. */
#include <string.h>

#include "base.h"

static const struct {
	int code;
	const char *text;
} texts[] = {
	/* base.h: ERR_LIMIT, ERR_PARSE, ERR_STATE */
	{ ERR_RANGE_BASE - 1, "a fixed limit was reached" },
	{ ERR_RANGE_BASE - 2, "malformed input" },
	{ ERR_RANGE_BASE - 3, "not valid in the current state" },
	/* http.h: HTTP_ERR_HEAD_TOO_BIG, _BODY_TOO_BIG, _TRUNCATED, _CONNECT */
	{ ERR_RANGE_HTTP - 1, "HTTP head over its size limit" },
	{ ERR_RANGE_HTTP - 2, "HTTP body over its size limit" },
	{ ERR_RANGE_HTTP - 3, "connection closed before the HTTP message was complete" },
	{ ERR_RANGE_HTTP - 4, "cannot connect to the socket" },
	/* hpack.h: HPACK_ERR_COMPRESSION, _TOO_BIG */
	{ ERR_RANGE_HPACK - 1, "malformed HPACK header block" },
	{ ERR_RANGE_HPACK - 2, "HPACK header field over its size limit" },
	/* h2.h: H2_ERR_CONN, _PREFACE */
	{ ERR_RANGE_H2 - 1, "HTTP/2 connection error" },
	{ ERR_RANGE_H2 - 2, "the peer did not open with the HTTP/2 preface" },
	/* docker.h: DOCKER_ERR_API, _VERSION, _BUSY, _REPLY, _TOO_BIG */
	{ ERR_RANGE_DOCKER - 1, "the Docker engine refused the request" },
	{ ERR_RANGE_DOCKER - 2, "no Docker API version both sides accept" },
	{ ERR_RANGE_DOCKER - 3, "all connections to the Docker engine are in use" },
	{ ERR_RANGE_DOCKER - 4, "the Docker engine's answer is malformed" },
	{ ERR_RANGE_DOCKER - 5, "the Docker engine's answer is over the response limit" },
	/* prune.h: PRUNE_OUTSIDE, PRUNE_MOUNT, PRUNE_MOVED */
	{ ERR_RANGE_PRUNE - 1, "outside the agentshare root" },
	{ ERR_RANGE_PRUNE - 2, "mount point or other filesystem inside the run" },
	{ ERR_RANGE_PRUNE - 3, "directory moved or replaced during the walk" },
	/* cli.c: ANSWER_OUT_FAILED */
	{ ERR_RANGE_CLI - 1, "cannot write the answer out" },
};

const char *err_str(int code)
{
	if (code == 0)
		return "success";
	if (code < 0 && code > ERR_BASE)
		return strerror(-code);
	for (size_t i = 0; i < ARRAY_LEN(texts); i++)
		if (texts[i].code == code)
			return texts[i].text;
	return "unknown error";
}
