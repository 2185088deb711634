/* admin_conn.c: the admin API's connection slots and what goes out on them: a slot taken and
 * closed, its descriptor on the loop, the answers (a whole JSON one, an error, a streamed list,
 * a file), an exec's output beyond `out` in a bounded spill file, and the flush that sends it
 * all as the socket drains. The bottom of admin/: it calls no other file of the module; what it
 * must reach above it (the gRPC pump, the next request) it was handed at admin_init. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "json/json.h"
#include "admin/admin_conn.h"
#include "agent/fileop.h"

static char item[16384]; /* one sandbox rendered, for a streamed list */

/* The fields of every response that carries JSON; the writer adds its framing. */
const struct http_field admin_json_fields[] = {
	{ "Content-Type", "application/json" },
	{ NULL, NULL },
};

/* What agenticd.c hands over at start (admin_init), the listener (admin_listen), and the
 * counts the admin API keeps itself. */
struct admin_state admin_state; /* listen_fd -1 from admin_init on */

/* ---- the slots ---- */

void admin_conn_start(const struct admin_config *ac, const struct admin_hooks *h)
{
	admin_state.ac = *ac;
	admin_state.hooks = *h;
	admin_state.listen_fd = -1;
	admin_state.stopping = false;
	admin_state.refused = 0;
	for (uint32_t i = 0; i < ac->nconns; i++)
		ac->conns[i].fd = -1;
}

void admin_fd_watch(int fd, uint32_t events, uint32_t kind, uint32_t index)
{
	struct epoll_event ev = { .events = events };

	ev.data.u64 = ((uint64_t)kind << 32) | index;
	if (epoll_ctl(admin_state.ac.epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
		log_error("cannot watch a descriptor", "fd=%d error=%s", fd, log_q(strerror(errno)));
}

void admin_fd_unwatch(int fd)
{
	epoll_ctl(admin_state.ac.epfd, EPOLL_CTL_DEL, fd, NULL);
}

const struct config *admin_cfg(void)
{
	return admin_state.ac.cfg;
}

uint32_t admin_conn_index(const struct admin_conn *c)
{
	uint32_t i = (uint32_t)(c - admin_state.ac.conns);

	ASSERT(i < admin_state.ac.nconns);
	return i;
}

static struct admin_conn *conn_at(int32_t i, uint32_t gen)
{
	struct admin_conn *c;

	if (i < 0 || (uint32_t)i >= admin_state.ac.nconns)
		return NULL;
	c = &admin_state.ac.conns[i];
	return c->phase != AC_FREE && c->gen == gen ? c : NULL;
}

struct admin_conn *admin_conn_take(void)
{
	struct admin_conn *c = NULL;

	for (uint32_t i = 0; i < admin_state.ac.nconns && !c; i++)
		if (admin_state.ac.conns[i].phase == AC_FREE)
			c = &admin_state.ac.conns[i];
	if (!c)
		return NULL;
	c->gen++;
	c->fd = -1;
	c->rlen = c->roff = c->body_len = c->out_len = c->out_off = 0;
	c->body_too_big = false;
	c->exec = -1;
	c->fileop = -1;
	c->upgraded = false;
	c->sniffed = false;
	c->relay_from[0] = '\0';
	c->call = NULL;
	c->spill_fd = c->file_fd = -1;
	c->dropped = false;
	c->exit_code = -1;
	c->error[0] = '\0';
	frame_reader_init(&c->fr);
	return c;
}

void admin_conn_close(struct admin_conn *c)
{
	if (c->fd >= 0) {
		admin_fd_unwatch(c->fd);
		close(c->fd);
		c->fd = -1;
	}
	if (c->phase == AC_EXEC && c->exec >= 0)
		exec_detach(c->exec);
	c->exec = -1;
	if (c->fileop >= 0)
		fileop_cancel(c->fileop);
	c->fileop = -1;
	if (c->spill_fd >= 0)
		close(c->spill_fd);
	if (c->file_fd >= 0)
		close(c->file_fd);
	c->spill_fd = c->file_fd = -1;
	/* a create still reads its request from here: the slot waits for it */
	c->phase = c->phase == AC_WAIT ? AC_ZOMBIE : AC_FREE;
}

void admin_watch(struct admin_conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events | EPOLLRDHUP };

	ev.data.u64 = ((uint64_t)TAG_ADMIN_CONN << 32) | admin_conn_index(c);
	epoll_ctl(admin_state.ac.epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* ---- responses: every one is written by src/http's writer, which sets the framing ---- */

/* {"error":{"code":..,"message":..}} and a newline, into b. */
int admin_error_json(struct buf *b, const char *code, const char *msg)
{
	struct json_writer w;

	json_writer_init(&w, b);
	json_error_write(&w, code, msg);
	if (json_writer_finish(&w) != 0)
		return ERR_LIMIT;
	return buf_append(b, "\n", 1);
}

/* Starts the output with a whole response (fields NULL: JSON); on failure, a bodiless 500. */
void admin_respond_raw(struct admin_conn *c, int status, const struct http_field *fields,
			const void *body, size_t body_len)
{
	struct buf b;

	buf_init(&b, c->out, sizeof(c->out));
	if (http_response_write(&b, status, fields ? fields : admin_json_fields, !c->keep_alive, body,
				body_len) != 0) {
		c->keep_alive = false;
		http_response_write(&b, 500, admin_json_fields, true, NULL, 0);
	}
	c->out_len = (uint32_t)b.len;
	c->out_off = 0;
	c->phase = AC_WRITE;
}

/* A response sent at once, beside the connection's output: 100 Continue, or the refusal of a
 * connection there is no slot for (it closes then). */
ssize_t admin_send_now(int fd, int status, const struct http_field *fields, const void *body,
			size_t len)
{
	char out[512];
	struct buf b;

	buf_init(&b, out, sizeof(out));
	if ((status < 200 ? http_response_head_write(&b, status, NULL, HTTP_NO_BODY, false)
			  : http_response_write(&b, status, fields, true, body, len)) != 0)
		return -1;
	return send(fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Sends a whole JSON body built into `body`, with a newline after it. */
void admin_respond(struct admin_conn *c, int status, struct buf *body)
{
	if (buf_append(body, "\n", 1) != 0) {
		c->keep_alive = false;
		admin_respond_raw(c, 500, NULL, NULL, 0);
		return;
	}
	admin_respond_raw(c, status, NULL, body->data, body->len);
}

/* An error answer; fields NULL: JSON's alone (a 405 adds Allow). */
void admin_respond_error_fields(struct admin_conn *c, int status, const char *code,
				 const char *msg, const struct http_field *fields)
{
	static char text[8192];
	struct buf b;

	buf_init(&b, text, sizeof(text));
	if (admin_error_json(&b, code, msg) != 0) {
		c->keep_alive = false;
		admin_respond_raw(c, 500, NULL, NULL, 0);
		return;
	}
	admin_respond_raw(c, status, fields, b.data, b.len);
}

void admin_respond_error(struct admin_conn *c, int status, const char *code, const char *msg)
{
	admin_respond_error_fields(c, status, code, msg, NULL);
}

void admin_respond_sandbox(struct admin_conn *c, int status, const struct sandbox *sb)
{
	struct buf b;
	struct json_writer w;

	buf_init(&b, item, sizeof(item));
	json_writer_init(&w, &b);
	admin_sandbox_json(&w, sb);
	if (json_writer_finish(&w) != 0) {
		admin_respond_error(c, 500, "internal", "the sandbox does not fit the response buffer");
		return;
	}
	admin_respond(c, status, &b);
}

/* The connection waiting at (i, gen) for a create or remove to end, or NULL: gone, or a
 * zombie (its client left), whose slot is freed now that nothing will answer it. */
struct admin_conn *admin_waiter(int32_t i, uint32_t gen)
{
	struct admin_conn *c = conn_at(i, gen);

	if (c && c->phase == AC_ZOMBIE) {
		c->phase = AC_FREE;
		return NULL;
	}
	return c;
}

/* ---- lists, streamed one item per chunk ---- */

/* Fills the output with as many items as fit; ends the list after the last. */
static void list_fill(struct admin_conn *c)
{
	struct buf out;

	buf_init(&out, c->out, sizeof(c->out));
	out.len = c->out_len;
	while (c->list_cursor < c->list_n) {
		struct buf b;
		struct json_writer w;

		buf_init(&b, item, sizeof(item));
		if (!c->list_first)
			buf_append(&b, ",", 1);
		json_writer_init(&w, &b);
		if (!c->list_item(&w, c->list_cursor)) {
			c->list_cursor++;
			continue;
		}
		if (json_writer_finish(&w) != 0 || http_chunk_write(&out, b.data, b.len) != 0)
			break; /* room comes back as the socket drains */
		c->list_first = false;
		c->list_cursor++;
	}
	if (c->list_cursor == c->list_n) {
		size_t at = out.len;

		if (http_chunk_write(&out, "]}\n", 3) == 0 && http_chunk_end(&out) == 0)
			c->phase = AC_WRITE;
		else
			out.len = at; /* the end goes out whole, once there is room */
	}
	c->out_len = (uint32_t)out.len;
}

void admin_list_start(struct admin_conn *c, const char *head, size_t head_len,
		      bool (*item_fn)(struct json_writer *w, uint32_t i), uint32_t n)
{
	struct buf b;

	buf_init(&b, c->out, sizeof(c->out));
	http_response_head_write(&b, 200, admin_json_fields, HTTP_CHUNKED, !c->keep_alive);
	http_chunk_write(&b, head, head_len);
	c->out_len = (uint32_t)b.len;
	c->out_off = 0;
	c->list_cursor = 0;
	c->list_first = true;
	c->list_item = item_fn;
	c->list_n = n;
	c->phase = AC_LIST;
	list_fill(c);
}

bool admin_sandbox_item(struct json_writer *w, uint32_t i)
{
	const struct sandbox *sb = sandbox_slot(i);

	if (sb->state == SB_FREE || sb->pool)
		return false;
	admin_sandbox_json(w, sb);
	return true;
}

/* ---- a query's parameters ---- */

void admin_query_value(const char *query, const char *name, char *out, size_t size)
{
	size_t n = strlen(name);

	out[0] = '\0';
	for (const char *p = query; p && *p;) {
		if (strncmp(p, name, n) == 0 && p[n] == '=') {
			size_t l = strcspn(p + n + 1, "&");

			snprintf(out, size, "%.*s", (int)(l < size ? l : size - 1), p + n + 1);
			return;
		}
		p = strchr(p, '&');
		if (p)
			p++;
	}
}

bool admin_query_flag(const char *query, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = query; p && *p;) {
		if (strncmp(p, name, n) == 0 && (p[n] == '=' || p[n] == '&' || !p[n]))
			return p[n] != '=' || (p[n + 1] == '1' || strncmp(p + n + 1, "true", 4) == 0);
		p = strchr(p, '&');
		if (p)
			p++;
	}
	return false;
}

/* ---- a file as the answer (a run's transcript, a verify result) ---- */

/* Refills an empty `out` from the transcript file of a logs answer. */
static void file_refill(struct admin_conn *c)
{
	ssize_t n;

	c->out_off = c->out_len = 0;
	if (c->file_fd < 0 || !c->file_left)
		return;
	n = read(c->file_fd, c->out, c->file_left < sizeof(c->out) ? c->file_left : sizeof(c->out));
	if (n <= 0) {
		c->file_left = 0; /* the size was promised: the connection closes short */
		c->keep_alive = false;
		return;
	}
	c->out_len = (uint32_t)n;
	c->file_left -= (uint64_t)n;
}

/* The followed sandbox is going or gone: what its file holds now is the last of it. */
static bool follow_over(const struct admin_conn *c)
{
	const struct sandbox *sb = sandbox_slot(c->follow_slot);

	return !sb || sb->gen != c->follow_gen || sb->state == SB_FREE ||
	       sb->state == SB_REMOVING;
}

/* Refills an empty `out` with what the followed file holds past what was sent, as one chunk;
 * at its end, once the sandbox is going, the last chunk. Nothing when there is nothing new. */
static void follow_refill(struct admin_conn *c)
{
	static uint8_t data[LIMIT_ADMIN_OUT_BYTES - 32];
	bool over = follow_over(c); /* before the read: no byte written before it is missed */
	struct buf b;
	ssize_t n;

	c->out_off = c->out_len = 0;
	if (c->follow_end)
		return;
	buf_init(&b, c->out, sizeof(c->out));
	n = read(c->file_fd, data, sizeof(data));
	if (n > 0)
		http_chunk_write(&b, data, (size_t)n);
	else if (n < 0 || over)
		c->follow_end = http_chunk_end(&b) == 0;
	c->out_len = (uint32_t)b.len;
}

void admin_respond_follow(struct admin_conn *c, int fd, const struct sandbox *sb,
			  const struct http_field *fields)
{
	struct buf b;

	c->file_fd = fd;
	c->follow_slot = sandbox_index(sb);
	c->follow_gen = sb->gen;
	c->follow_end = false;
	buf_init(&b, c->out, sizeof(c->out));
	http_response_head_write(&b, 200, fields, HTTP_CHUNKED, !c->keep_alive);
	c->out_off = 0;
	c->out_len = (uint32_t)b.len;
	c->phase = AC_FOLLOW;
}

/* Sends the whole file fd (taken) as the answer, from the loop as the socket drains. */
void admin_respond_file(struct admin_conn *c, int fd, const struct http_field *fields)
{
	struct stat st;
	struct buf b;

	if (fstat(fd, &st) != 0) {
		close(fd);
		admin_respond_error(c, 500, "internal", "cannot read the file");
		return;
	}
	c->file_fd = fd;
	c->file_left = (uint64_t)st.st_size;
	buf_init(&b, c->out, sizeof(c->out));
	http_response_head_write(&b, 200, fields, st.st_size, !c->keep_alive);
	c->out_off = 0;
	c->out_len = (uint32_t)b.len;
	c->phase = AC_FILE;
}

/* ---- exec output: queued in `out`, then in a spill file ---- */

/* Output beyond `out` goes to an unlinked file next to the transcripts, read back as the
 * client drains: a slow client costs disk, never memory, and never blocks the sandbox. The
 * disk is bounded too, so that a client that stops reading never takes the transcripts' room:
 * -EFBIG once the client would be more than exec_spill_max_bytes behind, -EDQUOT once the
 * spill would leave less than 1/LIMIT_EXEC_SPILL_FREE_DIV of the filesystem available. */
static int spill_room(const struct admin_conn *c, size_t len)
{
	struct statvfs st;

	if (c->spill_w - c->spill_r + len > admin_cfg()->exec_spill_max_bytes)
		return -EFBIG;
	if ((c->spill_w == 0 || c->spill_w / LIMIT_EXEC_SPILL_CHECK_BYTES !=
				(c->spill_w + len) / LIMIT_EXEC_SPILL_CHECK_BYTES) &&
	    fstatvfs(c->spill_fd, &st) == 0 && st.f_bavail < st.f_blocks / LIMIT_EXEC_SPILL_FREE_DIV)
		return -EDQUOT;
	return 0;
}

int admin_exec_queue(struct admin_conn *c, const void *data, size_t len)
{
	int r;

	ASSERT(c->spill_r <= c->spill_w);
	if (c->spill_fd < 0) {
		if (c->out_off && c->out_off == c->out_len)
			c->out_off = c->out_len = 0;
		if (len > sizeof(c->out) - c->out_len && c->out_off) {
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		if (len <= sizeof(c->out) - c->out_len) {
			memcpy(c->out + c->out_len, data, len);
			c->out_len += (uint32_t)len;
			return 0;
		}
		c->spill_fd = open(admin_cfg()->agentshare_root, O_TMPFILE | O_RDWR | O_CLOEXEC,
				   0600);
		if (c->spill_fd < 0)
			return -errno;
		c->spill_w = c->spill_r = 0;
	}
	r = spill_room(c, len);
	if (r != 0)
		return r;
	for (const uint8_t *p = data; len;) {
		ssize_t n = pwrite(c->spill_fd, p, len, (off_t)c->spill_w);

		if (n <= 0)
			return n < 0 ? -errno : -ENOSPC;
		p += n;
		len -= (size_t)n;
		c->spill_w += (uint64_t)n;
	}
	return 0;
}

/* The session stops feeding c (why: admin_exec_queue's error): the command runs on into its
 * transcript, and the client gets what is queued, then the end of its answer without the final
 * frame (HTTP) or the call's end with RESOURCE_EXHAUSTED and c->error (gRPC): never a short
 * answer that looks whole. */
void admin_exec_drop(struct admin_conn *c, int why)
{
	unsigned long long behind = c->out_len - c->out_off + c->spill_w - c->spill_r;

	if (why == -EFBIG || why == -EDQUOT) {
		log_warn("exec client dropped", "reason=%s behind_bytes=%llu",
			 why == -EFBIG ? "spill_limit" : "disk_reserve", behind);
		snprintf(c->error, sizeof(c->error), "output delivery stopped: %s; the command "
			 "runs on and its transcript keeps every byte", why == -EFBIG
			 ? "this client fell further behind than exec_spill_max_bytes"
			 : "holding more for this client would take the disk room kept for "
			   "transcripts");
	} else {
		log_warn("exec client dropped", "reason=spill_error behind_bytes=%llu error=%s",
			 behind, log_q(strerror(-why)));
		snprintf(c->error, sizeof(c->error), "output delivery stopped: the spill file "
			 "failed (%s); the command runs on and its transcript keeps every byte",
			 strerror(-why));
	}
	if (c->exec >= 0)
		exec_detach(c->exec);
	c->exec = -1;
	c->dropped = true;
	c->keep_alive = false;
}

void admin_exec_refill(struct admin_conn *c)
{
	ssize_t n;

	c->out_off = c->out_len = 0;
	if (c->spill_fd < 0 || c->spill_r == c->spill_w)
		return;
	n = pread(c->spill_fd, c->out, sizeof(c->out), (off_t)c->spill_r);
	if (n <= 0) {
		admin_exec_drop(c, n < 0 ? -errno : -EIO);
		close(c->spill_fd);
		c->spill_fd = -1;
		c->spill_r = c->spill_w;
		return;
	}
	c->out_len = (uint32_t)n;
	c->spill_r += (uint64_t)n;
	if (c->spill_r == c->spill_w) {
		close(c->spill_fd);
		c->spill_fd = -1;
	} else if (c->spill_r / LIMIT_EXEC_SPILL_CHECK_BYTES !=
		   (c->spill_r - (uint64_t)n) / LIMIT_EXEC_SPILL_CHECK_BYTES) {
		/* gives back the disk of what the client has taken; a filesystem without holes
		 * keeps it until the file closes, and spill_room still guards the transcripts */
		(void)fallocate(c->spill_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
				(off_t)(c->spill_r - c->spill_r % LIMIT_EXEC_SPILL_CHECK_BYTES));
	}
}

/* ---- I/O ---- */

void admin_flush(struct admin_conn *c)
{
	ASSERT(c->out_off <= c->out_len);
	if (c->call) {
		admin_state.hooks.pump(c);
		return;
	}
	for (;;) {
		ssize_t n;

		if (c->phase == AC_LIST && c->out_off == c->out_len) {
			c->out_off = c->out_len = 0;
			list_fill(c);
		}
		if ((c->phase == AC_EXEC || c->phase == AC_FILEOP) && c->out_off == c->out_len)
			admin_exec_refill(c);
		if (c->phase == AC_FILE && c->out_off == c->out_len)
			file_refill(c);
		if (c->phase == AC_FOLLOW && c->out_off == c->out_len)
			follow_refill(c);
		if (c->out_off == c->out_len)
			break;
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			/* an exec reads stdin on while its output waits: a client blocked writing
			 * stdin reads no output, and both would wait for each other forever */
			admin_watch(c, EPOLLOUT | (c->phase == AC_EXEC && c->exec >= 0 && c->roff == c->rlen
						     ? EPOLLIN : 0));
			return;
		}
		if (n <= 0) {
			admin_conn_close(c);
			return;
		}
		c->out_off += (uint32_t)n;
	}
	if (c->phase == AC_EXEC && c->exec >= 0) {
		/* all sent: read stdin (or notice a hang-up) while the command runs */
		if (c->roff == c->rlen)
			admin_watch(c, EPOLLIN);
		return;
	}
	if (c->phase == AC_FILEOP && c->fileop >= 0) {
		/* a GET waits for a hang-up only; a PUT's reads are admin_files.c's to watch */
		if (!c->file_is_put)
			admin_watch(c, 0);
		return;
	}
	if (c->phase == AC_FOLLOW && !c->follow_end) {
		admin_watch(c, 0); /* the client's hang-up; new bytes come with the loop's turns */
		return;
	}
	if (c->phase == AC_EXEC || c->phase == AC_FILEOP || (c->phase == AC_FILE && !c->file_left) ||
	    c->phase == AC_FOLLOW) {
		if (c->file_fd >= 0)
			close(c->file_fd);
		c->file_fd = -1;
		c->phase = AC_WRITE;
	}
	if (c->phase != AC_WRITE)
		return;
	if (!c->keep_alive) {
		admin_conn_close(c);
		return;
	}
	/* next request on the same connection */
	http_parser_reset(&c->parser);
	c->body_len = 0;
	c->body_too_big = false;
	c->out_off = c->out_len = 0;
	c->phase = AC_READ;
	c->upgraded = false;
	c->idle_since = clock_mono_ms();
	admin_watch(c, EPOLLIN);
	admin_state.hooks.next_request(admin_conn_index(c), 0);
}
