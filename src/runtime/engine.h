/* engine.h: the engine call queue: Docker calls stepped by the event loop, each a job with a
 * begin and a done callback. It knows nothing of what the calls are for (sandboxes, the warm
 * pool, the event stream): runtime_docker.c is its user.
 *
 * A job is begun when the client has a free connection, else it waits in a FIFO and is begun
 * when one frees up (first come, first served; an `urgent` job does not queue behind them). A begun
 * job is stepped when its socket is ready (engine_ready, from the loop's epoll tag) or from
 * engine_tick (timeouts, a call that wants a step without I/O). done is called once, never
 * from inside engine_start. */
#ifndef AGENTIC_MGMT_ENGINE_H
#define AGENTIC_MGMT_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "docker/docker.h"

struct engine_job;

/* Begins the call in j->call (a docker_*_begin); DOCKER_ERR_BUSY: no free connection. */
typedef int (*engine_begin_fn)(struct engine_job *j);
/* The call ended with r (0 or an error in j->call.error); engine_end(j) releases it. */
typedef void (*engine_done_fn)(struct engine_job *j, int r);

struct engine_job {
	struct docker_call call;
	engine_begin_fn begin;
	engine_done_fn done;
	void *ctx;
	bool urgent;        /* not queued behind waiting jobs (the event stream) */
	/* the queue's own */
	uint32_t id;        /* its place in the registry (the epoll tag's index) */
	int reg_fd;         /* fd registered with epoll, or -1 */
	bool active;        /* begun and not yet ended */
	bool waiting;       /* asked for a connection while all were busy */
	bool soon;          /* the call wants a step without waiting for I/O */
	int32_t next_wait;  /* FIFO of waiting jobs */
};

struct engine {
	int epfd;
	uint32_t tag;       /* epoll data: tag << 32 | job id */
	struct engine_job **jobs;
	uint32_t njobs, cap;
	int32_t wait_head, wait_tail;
};

/* The registry in caller storage (cap pointers); epfd -1: no epoll, everything is stepped
 * from engine_tick (a test's loop). */
void engine_init(struct engine *e, int epfd, uint32_t tag, struct engine_job **storage,
		 uint32_t cap);
/* Adds a job (begin, done and ctx set); 0 or ERR_LIMIT. */
int engine_add(struct engine *e, struct engine_job *j);
/* Begins the job's call or queues it: 0, ERR_STATE when it is already active or waiting, or
 * the begin error (the job is then not active and done is not called). */
int engine_start(struct engine *e, struct engine_job *j);
/* Ends the call (drops its epoll registration first). */
void engine_end(struct engine *e, struct engine_job *j);
/* The job's socket is ready. */
void engine_ready(struct engine *e, uint32_t id);
/* Steps jobs that are due (timeouts, no I/O to wait for), then gives freed connections to
 * waiting jobs. */
void engine_tick(struct engine *e);
/* The next time engine_tick must run (monotonic ms), or INT64_MAX; now when one is due. */
int64_t engine_next_deadline(const struct engine *e, int64_t now);
bool engine_job_busy(const struct engine_job *j);  /* active or waiting */

#endif
