/* fuzz_fileop_line.c: the file applet's answer line as agenticd reads it (a hostile sandbox
 * writes it): never a crash or a read past the line; a parsed entry's strings lie within the
 * line, end there, and carry no NUL; its numbers are in range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fileop.h"
#include "base/limits.h"

static void inside(const char *s, const char *line, size_t len)
{
	if (s && (s < line || s + strlen(s) >= line + len + 1))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char line[LIMIT_FILEOP_LINE_BYTES + 1];
	char ids[24];
	struct file_entry e;

	if (size > LIMIT_FILEOP_LINE_BYTES)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	if (fileop_line_parse(line, size, &e, ids) != 0)
		return 0;
	inside(e.path, line, size);
	inside(e.name, line, size);
	inside(e.symlink_target, line, size);
	if (!e.path[0] || e.mode > 07777 || e.mtime_ns < 0 || e.mtime_ns > 999999999 ||
	    e.type < 0 || e.type > FILE_TYPE_SYMLINK || !e.owner || !e.group ||
	    (e.symlink_target && e.type != FILE_TYPE_SYMLINK))
		abort();
	return 0;
}
