/* strrun.h: a string run: NUL-terminated strings one after another in a fixed buffer (a
 * sandbox's cmd, labels and mounts). */
#ifndef AGENTIC_MGMT_STRRUN_H
#define AGENTIC_MGMT_STRRUN_H

#include <stdint.h>

/* Appends s (and its NUL) to a string run; ERR_LIMIT when it does not fit. */
int strrun_add(char *run, uint32_t *len, uint32_t cap, const char *s);
/* The string after p in a run (p == NULL: the first). */
const char *strrun_next(const char *run, uint32_t len, const char *p);

#endif
