/* e2b_fop.h: what e2b_fs.c lends e2b_files.c (private to those two files): the download of
 * GET /files on e2b_fs.c's table of file operations, that table's end when a sandbox goes,
 * and how a fileop's errno is answered on the REST plane. */
#ifndef AGENTIC_E2B_FOP_H
#define AGENTIC_E2B_FOP_H

#include "e2b/e2b_conn.h"

struct sandbox;

/* Streams the file at path (resolved) of c's sandbox to c: 200 with the bytes (a whole
 * answer with Content-Length when the file fits LIMIT_E2B_FILE_OUT_BYTES, else chunked), or
 * the JSON error of §6.3 (404 missing, 400 a directory or not a regular file, 403, 503 busy). */
void e2b_fop_read(struct e2b_conn *c, const char *path);
/* Every call and download on sb ends now (the client gets 503 unavailable or a cut stream). */
void e2b_fop_sandbox_gone(struct sandbox *sb);
/* The REST status for a fileop's positive errno (ENOENT 404, EACCES 403, ENOSPC 507...). */
int e2b_fop_http_status(int err);
/* A fileop_begin error as a REST status and message (too many: 503; agent away: 503). */
int e2b_fop_begin_status(int r, const char **message);

#endif
