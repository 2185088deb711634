/* main.c: finds the applet by name and runs it; installs the applet links. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "cli/cli.h"
#include "version.h"

#define APPLET(name, fn, help) int fn(int argc, char **argv); extern const char help[];
#define APPLET_INTERNAL APPLET
#include "applets.h"
#undef APPLET
#undef APPLET_INTERNAL

struct applet {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *help;
	bool internal;  /* started by agenticd: not listed, never linked */
};

static const struct applet applets[] = {
#define APPLET(name, fn, help) { name, fn, help, false },
#define APPLET_INTERNAL(name, fn, help) { name, fn, help, true },
#include "applets.h"
#undef APPLET
#undef APPLET_INTERNAL
	{ NULL, NULL, NULL, false }
};

static const size_t APPLET_COUNT = ARRAY_LEN(applets) - 1;

static const char usage[] =
	"usage: agentic APPLET [ARGS...]\n"
	"       agentic --list | --install DIR [--force] | --help | --version\n"
	"\n"
	"One binary, many applets: called through a link named after an applet, or with the\n"
	"applet's name (or its short name without \"agentic-\") as the first argument.\n"
	"`agentic --list` names them; `agentic APPLET --help` explains each.\n"
	"\n"
	"usage: agentic VERB [ARGS...]   (the admin CLI; verbs are never applet links)\n";

static const char *short_name(const char *name)
{
	return strncmp(name, "agentic-", 8) == 0 ? name + 8 : name;
}

static const struct applet *find_applet(const char *name)
{
	for (size_t i = 0; i < APPLET_COUNT; i++)
		if (strcmp(name, applets[i].name) == 0 || strcmp(name, short_name(applets[i].name)) == 0)
			return &applets[i];
	return NULL;
}

static int run_applet(const struct applet *a, int argc, char **argv)
{
	log_set_prog(a->name);
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(a->help, stdout);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		printf("%s %s\n", a->name, AGENTIC_VERSION);
		return 0;
	}
	return a->main(argc, argv);
}

static int is_applet_name(const char *name)
{
	for (size_t i = 0; i < APPLET_COUNT; i++)
		if (!applets[i].internal && strcmp(name, applets[i].name) == 0)
			return 1;
	return 0;
}

/* What a link in DIR points at: the binary's own name when the binary lives in DIR (a tree
 * staged under make install's DESTDIR keeps working once moved), else its absolute path. */
static const char *link_target(const char *dir, const char *self)
{
	const char *slash = strrchr(self, '/');
	char real[PATH_MAX];
	size_t len;

	if (!slash || !realpath(dir, real))
		return self;
	len = (size_t)(slash - self);
	return strlen(real) == len && strncmp(real, self, len) == 0 ? slash + 1 : self;
}

/* With --force: a link in DIR named agentic* that resolves to this very binary but names no
 * applet of it (left by an older version, e.g. the test program agentic-grpctest once an
 * applet) is removed, since it can only fail. Nothing else is touched. */
static int remove_stale_links(const char *dir, const struct stat *self_st)
{
	char path[PATH_MAX];
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	int failed = 0;

	if (!d) {
		fprintf(stderr, "agentic: --install: cannot read %s: %s\n", dir, strerror(errno));
		return 1;
	}
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "agentic", 7) != 0 || strcmp(e->d_name, "agentic") == 0 ||
		    is_applet_name(e->d_name))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || stat(path, &st) != 0 ||
		    st.st_dev != self_st->st_dev || st.st_ino != self_st->st_ino)
			continue;
		if (unlink(path) != 0) {
			fprintf(stderr, "agentic: --install: cannot remove the stale link %s: %s\n",
				path, strerror(errno));
			failed = 1;
			continue;
		}
		printf("%s removed: no applet of this binary\n", path);
	}
	closedir(d);
	return failed;
}

/* Creates DIR/NAME -> the running binary for every applet. An existing symlink is replaced
 * only with --force; anything that is not a symlink is never replaced. */
static int install_links(const char *dir, int force)
{
	char self[PATH_MAX], link_path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct stat st, self_st;
	const char *target;
	int failed = 0;

	if (n < 0) {
		fprintf(stderr, "agentic: cannot find own path (/proc/self/exe): %s\n", strerror(errno));
		return 1;
	}
	self[n] = '\0';
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "agentic: --install: %s is not a directory\n", dir);
		return 2;
	}
	if (stat(self, &self_st) != 0) {
		fprintf(stderr, "agentic: cannot stat own binary %s: %s\n", self, strerror(errno));
		return 1;
	}
	target = link_target(dir, self);
	for (size_t i = 0; i < APPLET_COUNT; i++) {
		if (applets[i].internal)
			continue;
		snprintf(link_path, sizeof(link_path), "%s/%s", dir, applets[i].name);
		if (lstat(link_path, &st) == 0) {
			if (!S_ISLNK(st.st_mode)) {
				fprintf(stderr, "agentic: --install: %s exists and is not a symlink; "
					"left alone\n", link_path);
				failed = 1;
				continue;
			}
			if (!force) {
				fprintf(stderr, "agentic: --install: %s exists; use --force to replace it\n",
					link_path);
				failed = 1;
				continue;
			}
			if (unlink(link_path) != 0) {
				fprintf(stderr, "agentic: --install: cannot replace %s: %s\n", link_path,
					strerror(errno));
				failed = 1;
				continue;
			}
		}
		if (symlink(target, link_path) != 0) {
			fprintf(stderr, "agentic: --install: cannot create %s: %s\n", link_path,
				strerror(errno));
			failed = 1;
			continue;
		}
		printf("%s -> %s\n", link_path, target);
	}
	if (force && remove_stale_links(dir, &self_st) != 0)
		failed = 1;
	return failed;
}

int main(int argc, char **argv)
{
	const char *base = strrchr(argv[0], '/');
	const struct applet *a;

	base = base ? base + 1 : argv[0];
	/* Inside a sandbox the only copy of this build is the init's bind, /sbin/agentic-init,
	 * which takes no argument: `agentic-init probe ...` is the probe, as the verifier runs it,
	 * and `agentic-init file ...` the file applet, as agenticd's file operations run it (the
	 * exec path makes the program argv[0], so the applet is named by the first argument).
	 * In a VM guest the copy is /init: `/init probe ...` there (never PID 1, the init). */
	if ((strcmp(base, "agentic-init") == 0 || (strcmp(argv[0], "/init") == 0 && getpid() != 1)) &&
	    argc > 1 && (strcmp(argv[1], "probe") == 0 || strcmp(argv[1], "file") == 0))
		return run_applet(find_applet(argv[1][0] == 'p' ? "agentic-probe" : "agentic-file"),
				  argc - 1, argv + 1);
	/* A VM guest's initramfs holds this binary as /init, which the kernel runs as PID 1:
	 * that is the init (runtime "vm"). */
	if (strcmp(argv[0], "/init") == 0 && getpid() == 1)
		return run_applet(find_applet("agentic-init"), argc, argv);
	if (strcmp(base, "agentic") != 0) {
		a = find_applet(base);
		if (a && !a->internal && strcmp(base, a->name) == 0)
			return run_applet(a, argc, argv);
		fprintf(stderr, "agentic: no applet is called '%s' (see agentic --list)\n", base);
		return 2;
	}
	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	if (argc > 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
			 strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "--list") == 0)) {
		fprintf(stderr, "agentic: %s takes no argument, got '%s' (see agentic --help)\n",
			argv[1], argv[2]);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage, stdout);
		fputs(cli_usage, stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("agentic %s\n", AGENTIC_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "--list") == 0) {
		for (size_t i = 0; i < APPLET_COUNT; i++)
			if (!applets[i].internal)
				puts(applets[i].name);
		return 0;
	}
	if (strcmp(argv[1], "--install") == 0) {
		int force = argc > 3 && strcmp(argv[3], "--force") == 0;
		if (argc < 3 || argc > 4 || (argc == 4 && !force)) {
			fputs("usage: agentic --install DIR [--force]\n", stderr);
			return 2;
		}
		return install_links(argv[2], force);
	}
	a = find_applet(argv[1]);
	if (!a && cli_is_verb(argv[1])) {
		log_set_prog("agentic");
		return cli_main(argc - 1, argv + 1);
	}
	if (!a) {
		fprintf(stderr, "agentic: unknown applet or verb '%s' (see agentic --help)\n",
			argv[1]);
		return 2;
	}
	return run_applet(a, argc - 1, argv + 1);
}
