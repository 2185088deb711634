/* fd.c: reading a whole small file (a config, a profile) into caller storage; Unix sockets
 * that take no descriptors. */
#include <errno.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include "base.h"

int fd_read_all(int fd, void *buf, size_t cap, size_t *len)
{
	ssize_t r;

	*len = 0;
	while (*len < cap && (r = read(fd, (char *)buf + *len, cap - *len)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		*len += (size_t)r;
	}
	return *len == cap ? ERR_LIMIT : 0;
}

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83 /* Linux 6.16's, not in these headers yet */
#endif

int fd_refuse_rights(int fd)
{
	return setsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &(int){ 0 }, sizeof(int)) == 0 ? 0 : -errno;
}

ssize_t file_read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;
	size_t n = 0;

	buf[0] = '\0';
	if (fd < 0)
		return -1;
	r = fd_read_all(fd, buf, cap - 1, &n);
	close(fd);
	buf[n] = '\0';
	return r < 0 ? -1 : (ssize_t)n;
}
