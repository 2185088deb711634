/* probe.c: agentic-probe: what the kernel enforces on a process, as key=value evidence. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "init/priv.h"

const char probe_help[] =
	"usage: agentic-probe [--pid PID]\n"
	"\n"
	"Prints what the kernel enforces on this process (or on PID), read from\n"
	"/proc/<pid>/status, one key=value per line: uids, gids, supplementary group count,\n"
	"the five capability sets in hex, NoNewPrivs and the seccomp mode. Runs inside a\n"
	"sandbox as a workload; the verifier reads its output. Prints no environment, no\n"
	"arguments and no file contents.\n"
	"Exit status: 0 printed, 1 the status could not be read, 2 usage.\n";

int probe_main(int argc, char **argv)
{
	struct priv_status st;
	uint64_t pid = 0;
	int r;

	if (argc == 3 && strcmp(argv[1], "--pid") == 0) {
		if (parse_u64(argv[2], 4194304, &pid) != 0 || pid == 0) {
			fprintf(stderr, "agentic-probe: --pid takes a process id, got '%s'\n", argv[2]);
			return 2;
		}
	} else if (argc != 1) {
		fputs(probe_help, stderr);
		return 2;
	}
	r = priv_status_read((pid_t)pid, &st);
	if (r) {
		fprintf(stderr, "agentic-probe: cannot read the status of %s: %s\n",
			pid ? argv[2] : "this process", err_str(r));
		return 1;
	}
	printf("uid=%u,%u,%u,%u\ngid=%u,%u,%u,%u\ngroups=%u\n", st.uid[0], st.uid[1], st.uid[2],
	       st.uid[3], st.gid[0], st.gid[1], st.gid[2], st.gid[3], st.ngroups);
	printf("cap_inh=%016llx\ncap_prm=%016llx\ncap_eff=%016llx\ncap_bnd=%016llx\n"
	       "cap_amb=%016llx\n", (unsigned long long)st.cap_inh, (unsigned long long)st.cap_prm,
	       (unsigned long long)st.cap_eff, (unsigned long long)st.cap_bnd,
	       (unsigned long long)st.cap_amb);
	printf("no_new_privs=%d\nseccomp=%d\n", st.no_new_privs, st.seccomp);
	return 0;
}
