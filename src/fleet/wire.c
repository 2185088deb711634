/* wire.c: the packets between agenticd and its fleet worker (wire.h). */
#include "fleet/wire.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "json/json.h"

#define TOKENS 64
/* a node's record: its images are many tokens (a 1 KiB record, FLEET_RECORD_BYTES, has fewer) */
#define NODE_TOKENS 384
#define RUNTIMES_MAX 4

bool fleet_node_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > FLEET_NODE_NAME_MAX || s[0] == '-' || s[len - 1] == '-')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

long fleet_settings_write(const struct fleet_settings *s, char *out, size_t cap)
{
	struct json_writer j;
	struct buf b;

	buf_init(&b, out, cap);
	json_writer_init(&j, &b);
	json_obj_begin(&j);
	json_key(&j, "endpoints");
	json_str_write(&j, s->endpoints);
	json_key(&j, "server_name");
	json_str_write(&j, s->server_name);
	json_key(&j, "ca_file");
	json_str_write(&j, s->ca_file);
	json_key(&j, "cert_file");
	json_str_write(&j, s->cert_file);
	json_key(&j, "key_file");
	json_str_write(&j, s->key_file);
	json_key(&j, "node");
	json_str_write(&j, s->node);
	json_key(&j, "lease_s");
	json_int_write(&j, s->lease_s);
	json_key(&j, "uid");
	json_int_write(&j, s->uid);
	json_obj_end(&j);
	return json_writer_finish(&j) < 0 ? ERR_LIMIT : (long)b.len;
}

static int str_field(const struct json_doc *d, const char *key, char *out, size_t cap)
{
	int i = json_obj_get(d, 0, key);

	return i < 0 || json_str(d, i, out, cap) <= 0 ? ERR_PARSE : 0;
}

int fleet_settings_parse(const char *pkt, size_t len, struct fleet_settings *s)
{
	struct json_token tok[TOKENS];
	struct json_doc d;
	int i;

	memset(s, 0, sizeof(*s));
	if (json_parse(&d, pkt, len, tok, TOKENS) != 0 || tok[0].type != JSON_OBJECT ||
	    str_field(&d, "endpoints", s->endpoints, sizeof(s->endpoints)) < 0 ||
	    str_field(&d, "server_name", s->server_name, sizeof(s->server_name)) < 0 ||
	    str_field(&d, "ca_file", s->ca_file, sizeof(s->ca_file)) < 0 ||
	    str_field(&d, "cert_file", s->cert_file, sizeof(s->cert_file)) < 0 ||
	    str_field(&d, "key_file", s->key_file, sizeof(s->key_file)) < 0 ||
	    str_field(&d, "node", s->node, sizeof(s->node)) < 0 ||
	    !fleet_node_name_ok(s->node, strlen(s->node)) ||
	    (i = json_obj_get(&d, 0, "lease_s")) < 0 || json_int(&d, i, &s->lease_s) != 0 ||
	    s->lease_s < 2 || s->lease_s > 600 ||
	    (i = json_obj_get(&d, 0, "uid")) < 0 || json_int(&d, i, &s->uid) != 0 ||
	    s->uid < 1 || s->uid > 0x7fffffff)
		return ERR_PARSE;
	return 0;
}

const char *fleet_key_node(const struct etcd_kv *kv, const char *prefix)
{
	size_t n = strlen(prefix);

	if (kv->key_len <= n || memcmp(kv->key, prefix, n) != 0 ||
	    !fleet_node_name_ok(kv->key + n, kv->key_len - n))
		return NULL;
	return kv->key + n;
}

bool fleet_node_alive(const char *node, const struct etcd_kv *alive, size_t na)
{
	for (size_t i = 0; i < na; i++) {
		const char *a = fleet_key_node(&alive[i], FLEET_ALIVE_PREFIX);

		/* under a lease only: an alive key put without one (a stolen certificate can)
		 * would keep its node up for ever */
		if (a && strcmp(a, node) == 0 && alive[i].lease != 0)
			return true;
	}
	return false;
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if (*s < '!' || *s > '~')
			return false;
	return true;
}

/* A string member of at most cap - 1 bytes of printable ASCII, copied; anything else is left
 * out: `agentic fleet ls` prints it on an operator's terminal, where another node's escape
 * sequences would be commands. */
static void copy_str(struct json_writer *j, const struct json_doc *d, const char *key, size_t cap)
{
	char v[128];
	int i = json_obj_get(d, 0, key);

	if (i >= 0 && cap <= sizeof(v) && json_str(d, i, v, cap) >= 0 && printable(v)) {
		json_key(j, key);
		json_str_write(j, v);
	}
}

static void copy_count(struct json_writer *j, const struct json_doc *d, const char *key)
{
	int i = json_obj_get(d, 0, key);
	int64_t v;

	if (i >= 0 && json_int(d, i, &v) == 0 && v >= 0 && v <= 1000000) {
		json_key(j, key);
		json_int_write(j, v);
	}
}

static void copy_runtimes(struct json_writer *j, const struct json_doc *d)
{
	int arr = json_obj_get(d, 0, "runtimes"), n = 0;
	char v[16];

	if (arr < 0 || d->tok[arr].type != JSON_ARRAY)
		return;
	json_key(j, "runtimes");
	json_arr_begin(j);
	for (int i = json_first(d, arr); i >= 0 && n < RUNTIMES_MAX; i = json_next(d, arr, i))
		if (json_str(d, i, v, sizeof(v)) > 0 && printable(v)) {
			json_str_write(j, v);
			n++;
		}
	json_arr_end(j);
}

static void node_write(struct json_writer *j, const char *node, const struct etcd_kv *kv,
		       bool alive)
{
	struct json_token tok[NODE_TOKENS];
	struct json_doc d;
	bool draining = false;
	int i;

	if (json_parse(&d, kv->value, kv->value_len, tok, NODE_TOKENS) != 0 ||
	    tok[0].type != JSON_OBJECT)
		return;
	i = json_obj_get(&d, 0, "draining");
	if (i >= 0 && json_bool(&d, i, &draining) != 0)
		draining = false;
	json_obj_begin(j);
	json_key(j, "node");
	json_str_write(j, node);
	json_key(j, "state");
	json_str_write(j, !alive ? "lost" : draining ? "draining" : "up");
	copy_str(j, &d, "addr", 64);
	copy_str(j, &d, "version", 32);
	json_key(j, "draining");
	json_bool_write(j, draining);
	copy_count(j, &d, "slots");
	copy_count(j, &d, "slots_free");
	copy_count(j, &d, "placed");
	copy_count(j, &d, "memory_mib");
	copy_runtimes(j, &d);
	copy_str(j, &d, "accel", 8);
	json_obj_end(j);
}

long fleet_snapshot_write(const struct etcd_kv *nodes, size_t nn, const struct etcd_kv *alive,
			  size_t na, char *out, size_t cap)
{
	struct json_writer j;
	struct buf b;

	buf_init(&b, out, cap);
	json_writer_init(&j, &b);
	json_obj_begin(&j);
	json_key(&j, "nodes");
	json_arr_begin(&j);
	for (size_t i = 0; i < nn && i < FLEET_NODES_MAX; i++) {
		const char *node = fleet_key_node(&nodes[i], FLEET_NODES_PREFIX);

		if (node)
			node_write(&j, node, &nodes[i], fleet_node_alive(node, alive, na));
	}
	json_arr_end(&j);
	json_obj_end(&j);
	return json_writer_finish(&j) < 0 ? ERR_LIMIT : (long)b.len;
}

bool fleet_sandbox_name_ok(const char *s, size_t len)
{
	if (len < 2 || len > 63 || s[0] < 'a' || s[0] > 'z')
		return false;
	for (size_t i = 1; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* NODE and NAME of agentic/sandboxes/NODE/NAME into node and name: false when either is not
 * valid. */
static bool sandbox_key(const struct etcd_kv *kv, char *node, char *name)
{
	size_t n = strlen(FLEET_SANDBOXES_PREFIX);
	const char *rest = kv->key + n, *slash;
	size_t rlen;

	if (kv->key_len <= n || memcmp(kv->key, FLEET_SANDBOXES_PREFIX, n) != 0)
		return false;
	rlen = kv->key_len - n;
	slash = memchr(rest, '/', rlen);
	if (!slash || !fleet_node_name_ok(rest, (size_t)(slash - rest)) ||
	    !fleet_sandbox_name_ok(slash + 1, rlen - (size_t)(slash - rest) - 1))
		return false;
	memcpy(node, rest, (size_t)(slash - rest));
	node[slash - rest] = '\0';
	memcpy(name, slash + 1, rlen - (size_t)(slash - rest) - 1);
	name[rlen - (size_t)(slash - rest) - 1] = '\0';
	return true;
}

static void sandbox_write(struct json_writer *j, const struct etcd_kv *kv,
			  const struct etcd_kv *alive, size_t na)
{
	static const char *const states[] = { "creating", "ready", "removing" };
	char node[FLEET_NODE_NAME_MAX + 1], name[64], state[16] = "", tier[4] = "";
	struct json_token tok[16];
	struct json_doc d;
	int i;
	bool known = false;

	if (!sandbox_key(kv, node, name) ||
	    json_parse(&d, kv->value, kv->value_len, tok, ARRAY_LEN(tok)) != 0 ||
	    tok[0].type != JSON_OBJECT || (i = json_obj_get(&d, 0, "state")) < 0 ||
	    json_str(&d, i, state, sizeof(state)) < 0 || (i = json_obj_get(&d, 0, "tier")) < 0 ||
	    json_str(&d, i, tier, sizeof(tier)) < 0 ||
	    (strcmp(tier, "T0") != 0 && strcmp(tier, "T1") != 0))
		return;
	for (size_t k = 0; k < ARRAY_LEN(states); k++)
		known |= strcmp(state, states[k]) == 0;
	if (!known)
		return;
	json_obj_begin(j);
	json_key(j, "name");
	json_str_write(j, name);
	json_key(j, "node");
	json_str_write(j, node);
	json_key(j, "state");
	json_str_write(j, fleet_node_alive(node, alive, na) ? state : "lost");
	json_key(j, "tier");
	json_str_write(j, tier);
	json_obj_end(j);
}

long fleet_sandboxes_write(const struct etcd_kv *const *sbs, size_t ns, bool more,
			   const struct etcd_kv *alive, size_t na, char *out, size_t cap)
{
	struct json_writer j;
	struct buf b;

	buf_init(&b, out, cap);
	json_writer_init(&j, &b);
	json_obj_begin(&j);
	json_key(&j, "fleet_sandboxes");
	json_arr_begin(&j);
	for (size_t i = 0; i < ns && i < FLEET_SANDBOXES_MAX; i++)
		sandbox_write(&j, sbs[i], alive, na);
	json_arr_end(&j);
	json_key(&j, "more");
	json_bool_write(&j, more);
	json_obj_end(&j);
	return json_writer_finish(&j) < 0 ? ERR_LIMIT : (long)b.len;
}

int fleet_settings_recv(int fd, struct fleet_settings *s)
{
	char pkt[FLEET_SETTINGS_BYTES + 1];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	long n;

	if (poll(&p, 1, 5000) != 1)
		return ERR_STATE;
	n = recv(fd, pkt, sizeof(pkt), 0);
	if (n <= 0 || (size_t)n > FLEET_SETTINGS_BYTES)
		return ERR_PARSE;
	return fleet_settings_parse(pkt, (size_t)n, s);
}

int fleet_drop_root(uid_t uid)
{
	if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
	    setresuid(uid, uid, uid) != 0)
		return -errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return -errno;
	return 0;
}

ssize_t fleet_send_fd(int sock, const void *msg, size_t len, int fd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&cm.h), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL);
}

ssize_t fleet_recv_fd(int sock, void *buf, size_t cap, int *fd, int flags)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	struct cmsghdr *h;
	ssize_t n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);

	*fd = -1;
	h = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
	    h->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(h), sizeof(int));
	return n;
}
