/* creds.c: a VM guest's credential files (a claim's files): written as the workload user on
 * the guest's credential tmpfs, never anywhere else. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/init.h"
#include "init/priv.h"

#define TMPFS_MAGIC_ 0x01021994

/* The files, copied out of the claim: the child's copy of the init's storage is wiped at the
 * fork (MADV_WIPEONFORK), static memory is not. */
static struct {
	char path[LIMIT_PATH_BYTES];
	uint8_t data[LIMIT_VM_SECRET_BYTES];
	size_t len;
} files[INIT_CLAIM_FILES_MAX];
static size_t nfiles;

/* path is INIT_CREDENTIAL_DIR/..., with no empty, "." or ".." component. */
static bool path_ok(const char *path)
{
	size_t d = strlen(INIT_CREDENTIAL_DIR);
	const char *c;

	if (strncmp(path, INIT_CREDENTIAL_DIR "/", d + 1) != 0 || strlen(path) >= LIMIT_PATH_BYTES)
		return false;
	for (c = path + d + 1;;) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);

		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!e)
			return true;
		c = e + 1;
	}
}

/* In the child, as the workload: the directories below the credential tmpfs made 0700 (an
 * existing one must be a real directory), then the file replaced whole, 0600. */
static int write_one(const char *path, const uint8_t *data, size_t len)
{
	char dir[LIMIT_PATH_BYTES];
	struct stat st;
	struct statfs fs;
	size_t d = strlen(INIT_CREDENTIAL_DIR);
	int fd;

	memcpy(dir, path, strlen(path) + 1);
	for (char *s = dir + d + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (mkdir(dir, 0700) != 0 && errno != EEXIST)
			return 1;
		if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
			return 2;
		*s = '/';
	}
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return 3;
	/* on the tmpfs, not on a disk a mount put over part of it */
	if (fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC_) {
		close(fd);
		unlink(path);
		return 4;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, data + off, len - off);

		if (n <= 0) {
			close(fd);
			unlink(path);
			return 5;
		}
		off += (size_t)n;
	}
	return close(fd) == 0 ? 0 : 5;
}

int init_claim_files(const Agentic__Sandbox__V1__SandboxClaim *m, uint32_t uid, uint32_t gid,
		     const char **why)
{
	static bool taken;
	struct statfs fs;
	int status;
	pid_t pid;

	/* written once, at the first claim, before any workload runs: a claim sent again after a
	 * reconnect carries the same files, and a writer of the workload's uid could then be
	 * stopped by a workload (SIGSTOP), leaving the init waiting for it */
	if (m->n_files == 0 || taken)
		return 0;
	*why = "the claim has more files than a VM may take";
	if (m->n_files > INIT_CLAIM_FILES_MAX)
		return ERR_LIMIT;
	*why = "credential files are for a VM guest's credential tmpfs (" INIT_CREDENTIAL_DIR ")";
	if (statfs(INIT_CREDENTIAL_DIR, &fs) != 0 || fs.f_type != TMPFS_MAGIC_)
		return -ENOENT;
	nfiles = 0;
	for (size_t i = 0; i < m->n_files; i++) {
		const char *path = m->files[i]->key;
		const ProtobufCBinaryData *v = &m->files[i]->value;

		*why = "a credential file's path is not below " INIT_CREDENTIAL_DIR "/";
		if (!path_ok(path))
			return ERR_PARSE;
		*why = "a credential file is larger than a secret may be";
		if (v->len > LIMIT_VM_SECRET_BYTES)
			return ERR_LIMIT;
		memcpy(files[nfiles].path, path, strlen(path) + 1);
		memcpy(files[nfiles].data, v->data, v->len);
		files[nfiles++].len = v->len;
	}
	*why = "cannot fork the credential writer";
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (priv_drop_to_workload(uid, gid) != 0)
			_exit(10);
		for (size_t i = 0; i < nfiles; i++) {
			int r = write_one(files[i].path, files[i].data, files[i].len);

			if (r)
				_exit(r);
		}
		_exit(0);
	}
	memset(files, 0, sizeof(files));
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	*why = "a credential file could not be written as the workload user";
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -EIO;
	taken = true;
	return 0;
}
