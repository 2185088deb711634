/* engine.c: the engine call queue: Docker calls stepped by the event loop (engine.h). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>

#include "base/base.h"
#include "runtime/engine.h"

void engine_init(struct engine *e, int epfd, uint32_t tag, struct engine_job **storage,
		 uint32_t cap)
{
	*e = (struct engine){ .epfd = epfd, .tag = tag, .jobs = storage, .cap = cap,
			      .wait_head = -1, .wait_tail = -1 };
}

int engine_add(struct engine *e, struct engine_job *j)
{
	if (e->njobs == e->cap)
		return ERR_LIMIT;
	j->id = e->njobs;
	j->reg_fd = -1;
	j->active = j->waiting = j->soon = false;
	j->next_wait = -1;
	e->jobs[e->njobs++] = j;
	return 0;
}

bool engine_job_busy(const struct engine_job *j)
{
	return j->active || j->waiting;
}

static void job_unregister(struct engine *e, struct engine_job *j)
{
	if (j->reg_fd >= 0 && e->epfd >= 0)
		epoll_ctl(e->epfd, EPOLL_CTL_DEL, j->reg_fd, NULL);
	j->reg_fd = -1;
}

/* Registers what the call waits for. The client may have replaced the socket (a reused
 * keep-alive connection the engine had closed): the old fd is then closed, and so already
 * gone from epoll; only a changed number needs a fresh ADD. */
static void job_register(struct engine *e, struct engine_job *j)
{
	int fd = docker_call_fd(&j->call);
	short want = docker_call_events(&j->call);
	struct epoll_event ev = { 0 };

	j->soon = want == 0 || fd < 0 || e->epfd < 0;
	if (j->soon) {
		job_unregister(e, j);
		return;
	}
	ev.events = (want & POLLOUT ? EPOLLOUT : 0) | (want & POLLIN ? EPOLLIN : 0) | EPOLLRDHUP;
	ev.data.u64 = ((uint64_t)e->tag << 32) | j->id;
	if (j->reg_fd == fd) {
		if (epoll_ctl(e->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
			return;
	} else {
		job_unregister(e, j);
	}
	if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
		j->reg_fd = fd;
	else
		j->soon = true; /* cannot watch it: poll it through the timer instead */
}

static void job_step(struct engine *e, struct engine_job *j)
{
	int r = docker_call_step(&j->call);

	if (r == -EAGAIN) {
		job_register(e, j);
		return;
	}
	job_unregister(e, j);
	j->soon = false;
	j->done(j, r);
}

static void wait_push(struct engine *e, struct engine_job *j)
{
	j->waiting = true;
	j->next_wait = -1;
	if (e->wait_tail >= 0)
		e->jobs[e->wait_tail]->next_wait = (int32_t)j->id;
	else
		e->wait_head = (int32_t)j->id;
	e->wait_tail = (int32_t)j->id;
}

/* Begun, not stepped: the first step comes from the loop, so done never runs inside the
 * caller's engine_start. */
static void job_begun(struct engine_job *j)
{
	ASSERT(!j->active);
	j->active = true;
	j->reg_fd = -1;
	j->soon = true;
}

int engine_start(struct engine *e, struct engine_job *j)
{
	int r;

	if (j->active || j->waiting)
		return ERR_STATE;
	if (e->wait_head >= 0 && !j->urgent) {
		wait_push(e, j); /* first come, first served */
		return 0;
	}
	r = j->begin(j);
	if (r == DOCKER_ERR_BUSY) {
		docker_call_end(&j->call);
		wait_push(e, j);
		return 0;
	}
	if (r != 0) {
		docker_call_end(&j->call);
		return r;
	}
	job_begun(j);
	return 0;
}

void engine_end(struct engine *e, struct engine_job *j)
{
	ASSERT(!j->waiting);
	job_unregister(e, j);
	docker_call_end(&j->call);
	j->active = false;
	j->soon = false;
}

/* Gives freed connections to waiting jobs, in order. */
static void jobs_kick(struct engine *e)
{
	while (e->wait_head >= 0) {
		struct engine_job *j = e->jobs[e->wait_head];
		int r;

		ASSERT(j->waiting);
		r = j->begin(j);

		if (r == DOCKER_ERR_BUSY) {
			docker_call_end(&j->call);
			return;
		}
		e->wait_head = j->next_wait;
		if (e->wait_head < 0)
			e->wait_tail = -1;
		j->waiting = false;
		if (r != 0) {
			docker_call_end(&j->call);
			j->done(j, r);
			continue;
		}
		job_begun(j);
	}
}

void engine_ready(struct engine *e, uint32_t id)
{
	struct engine_job *j = id < e->njobs ? e->jobs[id] : NULL;

	if (j && j->active)
		job_step(e, j);
}

void engine_tick(struct engine *e)
{
	for (uint32_t i = 0; i < e->njobs; i++) {
		struct engine_job *j = e->jobs[i];

		if (j->active && (j->soon || docker_call_timeout_ms(&j->call) == 0))
			job_step(e, j);
	}
	jobs_kick(e);
}

int64_t engine_next_deadline(const struct engine *e, int64_t now)
{
	int64_t next = INT64_MAX;

	for (uint32_t i = 0; i < e->njobs; i++) {
		const struct engine_job *j = e->jobs[i];
		int t;

		if (!j->active)
			continue;
		if (j->soon)
			return now;
		t = docker_call_timeout_ms(&j->call);
		if (t >= 0 && now + t < next)
			next = now + t;
	}
	return next;
}
