/* runtime_docker.h: the Docker Engine runtime (runtime.h's first implementation): each call
 * slot is an engine job (engine.h) on one Docker client, the event stream another. */
#ifndef AGENTIC_MGMT_RUNTIME_DOCKER_H
#define AGENTIC_MGMT_RUNTIME_DOCKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "docker/docker.h"
#include "config/config.h"
#include "runtime/engine.h"
#include "runtime/runtime.h"

struct rd_slot;

#define RD_IMAGES_BYTES 640 /* the tags a node's record lists (fleet/wire.h's record is 1 KiB) */

struct runtime_docker_config {
	const struct config *cfg;
	struct docker_client *dc;
	const char *owner;            /* the agentic-daemon label's value */
	const char *owner_label;      /* "agentic-daemon=<owner>", a label filter */
	const char *self_exe;         /* bound into every container as its init */
	const char *seccomp_opt;      /* SecurityOpt "seccomp=<profile>" */
	int epfd;                     /* the loop's epoll, or -1 (stepped from tick only) */
	uint32_t tag;                 /* epoll tag kind for the engine's jobs */
	uint32_t slots;               /* call slots: RT_SLOTS(max_sandboxes) */
	int64_t events_since;         /* unix seconds: now, the stream's start when since_path
				       * holds no time */
	const char *since_path;       /* the last event's time is kept there, NULL: nowhere */
};

struct runtime_docker {
	struct runtime_docker_config c;
	struct engine eng;
	struct rd_slot *slot;         /* c.slots of them */
	struct engine_job events;
	int64_t events_since;         /* unix seconds of the last event seen */
	int64_t live_from_ns;         /* wall ns of the setup: a container's life from then on */
	int64_t since_saved;          /* the events_since since_path holds */
	int64_t since_save_at;        /* monotonic ms of its last write */
	int64_t events_retry;         /* monotonic ms when to reopen the event stream, or 0 */
	/* the engine's tagged images (runtime_docker_events.c): read at the start and at each
	 * image event, for the fleet's node record */
	struct engine_job images_job;
	bool images_again;            /* an image event came while they were read: read again */
	int64_t images_retry;         /* monotonic ms when to read them after a failure, or 0 */
	char images[RD_IMAGES_BYTES]; /* their tags, each ended by '\n'; "" until read */
	bool images_whole;            /* every tag is in images (read, and none left out) */
	bool images_failed;           /* the last read failed (said once, not at each retry) */
	bool stopping;
	struct runtime rt;
};

/* What runtime_docker_init takes from the caller's storage for `slots` call slots. */
size_t runtime_docker_storage_bytes(uint32_t slots);
/* Sets up the runtime in storage (runtime_docker_storage_bytes); its struct runtime is
 * &d->rt. The event stream opens from the time since_path holds (what was done to the
 * containers while no runtime ran: only taints, runtime.h), else from events_since; the
 * time is written back there at most once a second (no fsync: an older time only replays
 * more) and when the stream stops. */
int runtime_docker_init(struct runtime_docker *d, const struct runtime_docker_config *c,
			void *storage, size_t size);
/* The event stream's job (runtime_docker_events.c), for runtime_docker.c: its begin and done,
 * and the last event's time read from since_path (0: none) and written there when it moved. */
int rd_events_begin(struct engine_job *j);
void rd_events_done(struct engine_job *j, int r);
int64_t rd_since_read(const char *path);
/* The images' job: its begin and done, and a read asked for (at most one at a time; one
 * asked while another runs follows it). */
int rd_images_begin(struct engine_job *j);
void rd_images_done(struct engine_job *j, int r);
void rd_images_read(struct runtime_docker *d);
void rd_since_write(struct runtime_docker *d);

/* Test-only failpoint: true when agenticd runs with AGENTIC_FAULT=init-env, which hands every
 * new init a control gid that differs from its uid. The init must refuse that environment, and
 * the fault tests prove such a create is rolled back completely. Logged loudly at start. */
bool runtime_docker_fault_init_env(void);

#endif
