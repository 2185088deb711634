/* runtime_docker_events.c: the Docker runtime's event stream: the engine's container and
 * network events as runtime notices (runtime.h), and the last event's time, kept on disk for
 * the next start; and the engine's tagged images, read again at each image event. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime_docker.h"
#include "sandbox/sandbox.h"

/* ---- the event stream ---- */

/* The engine's actions the stream delivers, as the engine spells them (an exec's action
 * goes on with its command line after a colon: the docker client keeps the word only). */
static const struct {
	const char *action;
	enum rt_event ev;
} actions[] = {
	{ "start", RT_EV_START },
	{ "die", RT_EV_DIE },
	{ "destroy", RT_EV_DESTROY },
	{ "exec_create", RT_EV_EXEC },
	{ "exec_start", RT_EV_EXEC },
	{ "update", RT_EV_CHANGED },         /* `docker update`: its limits */
	{ "extract-to-dir", RT_EV_CHANGED }, /* `docker cp` into it */
	{ "commit", RT_EV_CHANGED },         /* an image made of it */
	{ "rename", RT_EV_CHANGED },
	{ "connect", RT_EV_NET_CONNECT },    /* a network event, about the network */
};

/* An image's actions: each reads the list of images again. */
static const char *const image_actions[] = { "tag", "untag", "delete", "load", "pull", "import" };

/* A container's life from before the setup is what recovery read already: only what was
 * done to it comes from that window. */
static void on_container_event(struct runtime_docker *d, const struct docker_event *ev,
			       enum rt_event kind, const char *word)
{
	char owner[64], old_name[SB_NAME_BYTES + 2], new_name[SB_NAME_BYTES + 2];
	struct rt_notice n = { .ev = kind, .container_id = ev->id, .source = word };

	if (kind <= RT_EV_DESTROY && ev->time_nano < d->live_from_ns)
		return;
	/* the label filter, here: the stream has none, or it would drop the network events */
	if (docker_event_attr(ev, "agentic-daemon", owner, sizeof(owner)) != 0 ||
	    strcmp(owner, d->c.owner) != 0)
		return;
	/* a rename's names, without the engine's leading '/': a claim's own rename is no taint */
	if (strcmp(word, "rename") == 0 &&
	    docker_event_attr(ev, "oldName", old_name, sizeof(old_name)) == 0 &&
	    docker_event_attr(ev, "name", new_name, sizeof(new_name)) == 0) {
		n.old_name = old_name + (old_name[0] == '/');
		n.new_name = new_name + (new_name[0] == '/');
	}
	d->rt.sink.event(d->rt.sink.ctx, &n);
}

static void on_network_event(struct runtime_docker *d, const struct docker_event *ev,
			     const char *word)
{
	char ct[RT_ID_BYTES], name[SB_NET_BYTES];
	struct rt_notice n = { .ev = RT_EV_NET_CONNECT, .container_id = ct, .source = word,
			       .net_name = name, .net_id = ev->id };

	if (docker_event_attr(ev, "container", ct, sizeof(ct)) != 0)
		return;
	if (docker_event_attr(ev, "name", name, sizeof(name)) != 0)
		name[0] = '\0';
	d->rt.sink.event(d->rt.sink.ctx, &n);
}

static int on_event(void *ctx, const struct docker_event *ev)
{
	struct runtime_docker *d = ctx;
	bool network;

	if (ev->oversized) {
		log_warn("an engine event too large to read was skipped",
			 "limit_bytes=%u", LIMIT_DOCKER_EVENT_BYTES);
		return 0;
	}
	if (ev->time_nano)
		d->events_since = ev->time_nano / 1000000000;
	if (strcmp(ev->type, "image") == 0) {
		rd_images_read(d);
		return 0;
	}
	network = strcmp(ev->type, "network") == 0;
	if (!d->rt.sink.event || (!network && strcmp(ev->type, "container") != 0))
		return 0;
	for (size_t i = 0; i < ARRAY_LEN(actions); i++) {
		if (strcmp(ev->action, actions[i].action) != 0 ||
		    network != (actions[i].ev == RT_EV_NET_CONNECT))
			continue;
		if (network)
			on_network_event(d, ev, actions[i].action);
		else
			on_container_event(d, ev, actions[i].ev, actions[i].action);
		break;
	}
	return 0;
}

int rd_events_begin(struct engine_job *j)
{
	struct runtime_docker *d = j->ctx;
	char filters[512];
	size_t n;

	n = (size_t)snprintf(filters, sizeof(filters), "{\"type\":[\"container\",\"network\","
			     "\"image\"],\"event\":[");
	for (size_t i = 0; i < ARRAY_LEN(actions) && n < sizeof(filters); i++)
		n += (size_t)snprintf(filters + n, sizeof(filters) - n, "%s\"%s\"", i ? "," : "",
				      actions[i].action);
	for (size_t i = 0; i < ARRAY_LEN(image_actions) && n < sizeof(filters); i++)
		n += (size_t)snprintf(filters + n, sizeof(filters) - n, ",\"%s\"", image_actions[i]);
	if (n >= sizeof(filters) - 3)
		return ERR_LIMIT;
	snprintf(filters + n, sizeof(filters) - n, "]}");
	return docker_events_begin(&j->call, d->c.dc, filters, d->events_since, on_event, d);
}

/* ---- the last event's time, kept for the next start ---- */

int64_t rd_since_read(const char *path)
{
	char buf[32];
	uint64_t v = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (parse_u64(buf, INT64_MAX, &v) != 0)
		return 0;
	return (int64_t)v;
}

/* Written whole then renamed: a crash leaves the old time or the new one. */
void rd_since_write(struct runtime_docker *d)
{
	char tmp[LIMIT_PATH_BYTES + 8], buf[32];
	int fd, n;
	bool ok;

	if (!d->c.since_path || d->since_saved == d->events_since)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", d->c.since_path);
	n = snprintf(buf, sizeof(buf), "%lld\n", (long long)d->events_since);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == ENOENT)
		return; /* the agentshare is made with the first sandbox: tried again then */
	ok = fd >= 0 && write(fd, buf, (size_t)n) == n;
	if (fd >= 0 && close(fd) != 0)
		ok = false;
	if (ok && rename(tmp, d->c.since_path) != 0)
		ok = false;
	if (!ok) {
		log_warn("cannot keep the engine events' time", "path=%s error=%s",
			 log_q(d->c.since_path), log_q(strerror(errno)));
		unlink(tmp);
	}
	d->since_saved = d->events_since;
}

void rd_events_done(struct engine_job *j, int r)
{
	struct runtime_docker *d = j->ctx;
	char text[512];

	docker_error_text(&j->call.error, text, sizeof(text));
	engine_end(&d->eng, j);
	if (d->stopping)
		return;
	log_warn("event stream ended; reopening", "error=%s", log_q(r ? text : "end of stream"));
	d->events_retry = clock_mono_ms() + EVENTS_RETRY_MS;
}

/* ---- the engine's tagged images ---- */

static int tag_add(void *ctx, const char *tag)
{
	struct runtime_docker *d = ctx;
	size_t len = strlen(d->images), n = strlen(tag);

	if (strcmp(tag, "<none>:<none>") == 0 || strchr(tag, '\n'))
		return 0;
	if (len + n + 2 > sizeof(d->images)) {
		d->images_whole = false; /* the record lists the first that fit, and says so */
		return 0;
	}
	memcpy(d->images + len, tag, n);
	memcpy(d->images + len + n, "\n", 2);
	return 0;
}

int rd_images_begin(struct engine_job *j)
{
	struct runtime_docker *d = j->ctx;

	return docker_image_list_begin(&j->call, d->c.dc);
}

void rd_images_done(struct engine_job *j, int r)
{
	struct runtime_docker *d = j->ctx;
	char text[512];
	const char *why = r ? docker_error_text(&j->call.error, text, sizeof(text)) : NULL;

	if (r == 0) {
		d->images[0] = '\0';
		d->images_whole = true;
		if ((r = docker_result_each_tag(&j->call, tag_add, d)) != 0)
			why = err_str(r);
	}
	if (why) {
		/* said not to be whole: placement then counts on no image here */
		d->images_whole = false;
		d->images_retry = clock_mono_ms() + EVENTS_RETRY_MS;
		if (!d->images_failed)
			log_warn("cannot read the engine's images; reading them again each second",
				 "error=%s", log_q(why));
	} else if (d->images_failed) {
		log_info("the engine's images read again", "whole=%d", d->images_whole);
	}
	d->images_failed = why != NULL;
	engine_end(&d->eng, j);
	if (d->images_again && !d->stopping) {
		d->images_again = false;
		rd_images_read(d);
	}
}

void rd_images_read(struct runtime_docker *d)
{
	int r;

	d->images_retry = 0;
	if (d->stopping)
		return;
	if (engine_job_busy(&d->images_job)) {
		d->images_again = true;
		return;
	}
	if ((r = engine_start(&d->eng, &d->images_job)) != 0) {
		d->images_whole = false;
		d->images_retry = clock_mono_ms() + EVENTS_RETRY_MS;
	}
}
