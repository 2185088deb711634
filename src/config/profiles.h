/* profiles.h: the startup profiles agenticd holds (profile.h reads them). Two sets: the
 * current one, and the one a reload (SIGHUP) reads profiles_dir into before it becomes
 * current, so what a caller holds from profiles_current() is never rewritten by the next
 * reload, only by the one after it (agenticd is one thread: a caller copies what it needs
 * before it returns to the loop). Each invalid file is logged with its reason. */
#ifndef AGENTIC_MGMT_PROFILES_H
#define AGENTIC_MGMT_PROFILES_H

#include "config/config.h"
#include "profile/profile.h"

/* Reads cfg->profiles_dir (cfg must outlive the daemon). A missing directory is an empty set;
 * nothing here stops the daemon. */
void profiles_init(const struct config *cfg);
/* Reads profiles_dir again and makes the result current (SIGHUP). */
void profiles_reload(void);
/* The static storage of both sets, for the memory budget (not yet touched at start). */
size_t profiles_storage_bytes(void);
/* The set in use: empty before profiles_init. */
const struct profile_set *profiles_current(void);

#endif
