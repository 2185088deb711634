/* passwd.c: the workload user's name and home directory, from the sandbox's /etc/passwd
 * (the commands' HOME, USER and LOGNAME), and whether that home is in the workspace. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "init/init.h"

/* Finds uid in /etc/passwd, read whole into buf: name and home. 0 or -ENOENT. */
int init_passwd_lookup(uint32_t uid, char *user, size_t ucap, char *home, size_t hcap)
{
	static char text[65536];
	size_t len = 0;
	ssize_t r;
	char *line;
	int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -ENOENT;
	while (len < sizeof(text) - 1 && (r = read(fd, text + len, sizeof(text) - 1 - len)) > 0)
		len += (size_t)r;
	close(fd);
	text[len] = '\0';
	for (line = text; *line; ) {
		char *nl = strchr(line, '\n'), *f[7];
		int n = 0;
		uint64_t v;

		if (nl)
			*nl = '\0';
		f[n++] = line;
		for (char *c = line; *c && n < 7; c++)
			if (*c == ':') {
				*c = '\0';
				f[n++] = c + 1;
			}
		if (n == 7 && parse_u64(f[2], UINT32_MAX, &v) == 0 && v == uid &&
		    strlen(f[0]) < ucap && strlen(f[5]) < hcap && f[5][0] == '/') {
			strcpy(user, f[0]);
			strcpy(home, f[5]);
			return 0;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	return -ENOENT;
}

static bool below_workspace(const char *p)
{
	size_t n = strlen(INIT_WORKSPACE);

	return strncmp(p, INIT_WORKSPACE, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* Is home the workspace or below it, as written or once its links are resolved (the image's
 * own links: the E2B image's /home/user is a link to /workspace)? */
bool init_home_in_workspace(const char *home)
{
	char real[PATH_MAX];

	return below_workspace(home) || (realpath(home, real) && below_workspace(real));
}
