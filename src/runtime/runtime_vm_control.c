/* runtime_vm_control.c: the guest's sockets, dialled: the console (read into the ring) and the
 * control port (the init's virtio-serial port), handed to the agent channel as the sandbox's
 * connection when its slot holds none. */
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "runtime/runtime_vm_priv.h"

static int dial(const struct runtime_vm *v, const struct vm_slot *s, const char *file)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[LIMIT_PATH_BYTES];
	int fd;

	if (vm_path(v, s->instance, file, path, sizeof(path)) != 0 ||
	    strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

void vm_try_dial(struct runtime_vm *v, struct vm_slot *s, int64_t now)
{
	struct sandbox *sb = sandbox_slot(s->index);
	int fd;

	if (s->con_fd < 0 && now >= s->con_at) {
		s->con_at = now + VM_DIAL_MS;
		if ((s->con_fd = dial(v, s, "console.sock")) >= 0)
			vm_watch(s, s->con_fd, K_CON);
	}
	if (!sb || !sb->vm || sb->state == SB_FREE || sb->state == SB_REMOVING || !v->c.channel)
		return;
	if (v->c.channel_busy(v->c.ctx, sb)) {
		s->was_busy = true;
		return;
	}
	/* a connection just lost: the guest must see the hangup before the next one comes,
	 * or it goes on writing its old HTTP/2 connection into the new */
	if (s->was_busy) {
		s->was_busy = false;
		s->dial_at = now + VM_DIAL_MS;
	}
	if (now < s->dial_at)
		return;
	s->dial_at = now + VM_DIAL_MS;
	fd = dial(v, s, "control.sock");
	if (fd >= 0)
		v->c.channel(v->c.ctx, sb, fd);
}
