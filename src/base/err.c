/* err.c: text for the negative error codes of every module. */
#include <string.h>

#include "base.h"

const char *err_str(int code)
{
	switch (code) {
	case 0:
		return "success";
	case ERR_LIMIT:
		return "a fixed limit was reached";
	case ERR_PARSE:
		return "malformed input";
	case ERR_STATE:
		return "not valid in the current state";
	}
	if (code < 0 && code > ERR_BASE)
		return strerror(-code);
	return "unknown error";
}
