/* seccomp.h: the seccomp profile every sandbox runs under: agentic's own (built in, written
 * from a table in seccomp.c), or an operator's file named by the `seccomp_profile` key. It
 * reaches the engine as compact JSON in the container's SecurityOpt ("seccomp=<JSON>"), so
 * no sandbox depends on the engine's own default, which differs between engine versions. */
#ifndef AGENTIC_MGMT_SECCOMP_H
#define AGENTIC_MGMT_SECCOMP_H

#include <stddef.h>

#include "config/config.h"

#define SECCOMP_OPT_PREFIX "seccomp="
/* "seccomp=" + the compact profile + NUL: what agenticd keeps for the create requests. */
#define SECCOMP_OPT_BYTES (sizeof(SECCOMP_OPT_PREFIX) + LIMIT_SECCOMP_PROFILE_BYTES)

/* Writes the built-in profile, compact JSON, NUL-terminated, into out. Returns its length, or
 * ERR_LIMIT when size is too small. */
int seccomp_profile_builtin(char *out, size_t size);

/* Reads the profile file at path (at most LIMIT_SECCOMP_FILE_BYTES), checks that it is JSON
 * whose root is an object with a string "defaultAction" and, when present, an array
 * "syscalls", and writes it compacted (whitespace outside strings removed) into out. Returns
 * its length, or a negative code with "PATH[:LINE:COLUMN]: what is wrong" in err; out is then
 * empty. The engine checks the rest (action names, syscall names) when a sandbox is created. */
int seccomp_profile_load(const char *path, char *out, size_t size, char *err, size_t err_size);

/* The SecurityOpt entry for cfg into out (SECCOMP_OPT_BYTES): "seccomp=" and the profile the
 * `seccomp_profile` key names, else the built-in one. The profile, escaped as a JSON string
 * in the create request, must fit LIMIT_SECCOMP_PROFILE_BYTES. Returns the profile's length
 * (without the prefix), or a negative code with the reason in err. */
int seccomp_opt_for(const struct config *cfg, char *out, size_t size, char *err,
		    size_t err_size);

#endif
