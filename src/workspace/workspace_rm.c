/* workspace_rm.c: the applet agentic-workspace-rm, which deletes a retired sandbox's workspace
 * for agenticd (share.c's share_retire starts it, vfork and exec, so that agenticd's own pages
 * stay its own: a fork would make each one it writes next a copy-on-write fault). fd 3 is the
 * instance directory, opened by agenticd (O_NOFOLLOW); DIR is its path, for the last rmdir.
 * The image file, the mount point's tree (never following a symlink) and the mount point go,
 * then the instance directory when nothing else is left in it. May call base only. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

const char workspace_rm_help[] =
	"usage: agentic workspace-rm DIR   (fd 3: the directory DIR, open)\n"
	"\n"
	"Deletes a retired sandbox's workspace for agenticd: workspace.img and the tree below\n"
	"workspace/ in the directory open as fd 3 (no symlink followed), then workspace/ and DIR\n"
	"itself when it is empty. agenticd starts it; nothing else should.\n";

/* Deletes everything below the directory dfd, never following a symlink. A few passes, since
 * a directory listing that changes under us may skip entries. */
static void rmtree_at(int dfd, int depth)
{
	char buf[4096];
	long n;

	if (depth > LIMIT_RMTREE_DEPTH)
		return;
	for (int pass = 0; pass < 3; pass++) {
		int seen = 0;

		lseek(dfd, 0, SEEK_SET);
		while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
			for (long off = 0; off < n;) {
				struct dirent64_raw *de = (void *)(buf + off);
				int sub;

				off += de->reclen;
				if (!strcmp(de->name, ".") || !strcmp(de->name, ".."))
					continue;
				seen++;
				if (unlinkat(dfd, de->name, 0) == 0 || errno != EISDIR)
					continue;
				sub = openat(dfd, de->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sub >= 0) {
					rmtree_at(sub, depth + 1);
					close(sub);
				}
				unlinkat(dfd, de->name, AT_REMOVEDIR);
			}
		}
		if (!seen)
			return;
	}
}

int workspace_rm_main(int argc, char **argv)
{
	int ws;

	if (argc != 2 || fcntl(3, F_GETFD) < 0) {
		fprintf(stderr, "agentic-workspace-rm: usage: agentic workspace-rm DIR, with fd 3 "
			"the directory DIR open\n");
		return 2;
	}
	ws = openat(3, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	unlinkat(3, "workspace.img", 0);
	if (ws >= 0) {
		rmtree_at(ws, 0);
		close(ws);
	}
	unlinkat(3, "workspace", AT_REMOVEDIR);
	rmdir(argv[1]);
	return 0;
}
