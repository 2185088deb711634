/* profiles.c: the startup profiles agenticd holds, read at start and on SIGHUP (profiles.h). */
#include <stdbool.h>

#include "config/profiles.h"

static struct profile_set sets[2];
static unsigned current;
static const struct config *config;

static void load(bool sighup)
{
	struct profile_set *next = &sets[current ^ 1];
	uint32_t valid = 0;
	int invalid = profile_set_load(next, config->profiles_dir);

	if (next->dir_error[0])
		log_warn("profiles_dir not read", "error=%s", log_q(next->dir_error));
	for (uint32_t i = 0; i < next->n; i++) {
		const struct profile_entry *e = &next->e[i];

		if (e->valid)
			valid++;
		else
			log_warn("profile invalid", "file=%s error=%s", log_q(e->file),
				 log_q(e->error));
	}
	if (next->skipped)
		log_warn("profiles not read", "skipped=%u max=%d", next->skipped, PROFILE_MAX);
	current ^= 1;
	log_info("profiles loaded", "on=%s dir=%s valid=%u invalid=%d skipped=%u",
		 sighup ? "sighup" : "start",
		 log_q(config->profiles_dir), valid, invalid, next->skipped);
}

void profiles_init(const struct config *cfg)
{
	config = cfg;
	load(false);
}

void profiles_reload(void)
{
	if (config)
		load(true);
}

size_t profiles_storage_bytes(void)
{
	return sizeof(sets);
}

const struct profile_set *profiles_current(void)
{
	return &sets[current];
}
