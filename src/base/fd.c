/* fd.c: reading a whole small file (a config, a profile) into caller storage. */
#include <errno.h>
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
