/* runtime_vm_accel.c: the accelerator VMs start with: vm_accel as set, or auto's KVM probe (a
 * QEMU child of its own, its reading kept per host boot), and the host's clock rate a TCG guest
 * is handed. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/runtime_vm_priv.h"

/* Under TCG the guest kernel calibrates its TSC against emulated timers, which on a loaded
 * host fails now and then and leaves the boot hung before the init: the host's clock rate
 * (cpu MHz of /proc/cpuinfo, read once) is handed over as tsc_early_khz instead. */
void vm_tsc_read(struct runtime_vm *v)
{
	char buf[4096], *p;
	double mhz = 0;

	v->tsc_arg[0] = '\0';
	if (file_read_small("/proc/cpuinfo", buf, sizeof(buf)) <= 0)
		return;
	if ((p = strstr(buf, "\ncpu MHz")) && (p = strchr(p, ':')) && sscanf(p + 1, "%lf", &mhz) == 1 &&
	    mhz >= 100 && mhz < 100000)
		snprintf(v->tsc_arg, sizeof(v->tsc_arg), " tsc_early_khz=%u", (unsigned)(mhz * 1000));
}

/* ---- the accelerator: vm_accel auto probes KVM once per host boot ---- */

#define PROBE_TIMEOUT_MS 10000

static void probe_cache(const struct runtime_vm *v, bool write, char *accel, size_t size)
{
	char path[LIMIT_PATH_BYTES], boot[64] = "", text[128];
	ssize_t n;
	int fd;

	file_read_small("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
	snprintf(path, sizeof(path), "%s/vm/accel", v->c.cfg->state_dir);
	if (write) {
		n = snprintf(text, sizeof(text), "%s %s\n", accel, boot);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0) {
			if (vm_write_all(fd, text, (size_t)n) != 0)
				unlink(path);
			close(fd);
		}
		return;
	}
	accel[0] = '\0';
	if (file_read_small(path, text, sizeof(text)) <= 0)
		return;
	/* "kvm BOOT" or "tcg BOOT": this boot's reading */
	if (boot[0] && (strncmp(text, "kvm ", 4) == 0 || strncmp(text, "tcg ", 4) == 0) &&
	    strcmp(text + 4, boot) == 0)
		snprintf(accel, size, "%.3s", text);
}

static void probe_done(struct runtime_vm *v, bool works, const char *why)
{
	snprintf(v->accel, sizeof(v->accel), "%s", works ? "kvm" : "tcg");
	log_info("vm accelerator", "accel=%s probe=%s", log_q(v->accel), log_q(why));
	probe_cache(v, true, v->accel, sizeof(v->accel));
	if (v->probe_pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, v->probe_pidfd, SIGKILL, NULL, 0);
		vm_reap(v->probe_pidfd);
		close(v->probe_pidfd);
	}
	if (v->probe_out >= 0)
		close(v->probe_out);
	v->probe_pidfd = v->probe_out = -1;
	v->probing = false;
}

/* Boots the guest kernel under KVM with no initramfs: it gets as far as "Kernel panic" (no
 * root) and QEMU ends (-no-reboot) in about a second where KVM works; where it hangs or QEMU
 * aborts, TCG it is. A child on its own clock: the daemon never waits for it. */
static void probe_start(struct runtime_vm *v)
{
	char kernel[LIMIT_PATH_BYTES + 16];
	char *argv[] = { VM_QEMU, "-M", "microvm", "-accel", "kvm", "-cpu", "host", "-m", "128",
			 "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
			 "-nic", "none", "-sandbox", "on,obsolete=deny,elevateprivileges=deny,"
			 "spawn=deny,resourcecontrol=deny", "-serial", "stdio", "-kernel", kernel,
			 "-append", "console=ttyS0 panic=-1", NULL };
	uint32_t uid = v->c.cfg->control_uid_max + v->c.cfg->vm_uid_offset + 1;
	int pipefd[2];
	pid_t pid;

	snprintf(kernel, sizeof(kernel), "%s/vmlinux", v->c.kernel_dir);
	if (access(kernel, R_OK) != 0)
		snprintf(kernel, sizeof(kernel), "%s/vmlinuz", v->c.kernel_dir);
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
		probe_done(v, false, "cannot make a pipe for the probe");
		return;
	}
	v->probe_len = 0;
	pid = vm_spawn(VM_QEMU, argv, NULL, 0, pipefd[1], uid, uid, v->kvm_gid, NULL, &v->probe_pidfd);
	close(pipefd[1]);
	v->probe_out = pipefd[0];
	if (pid < 0) {
		v->probe_pidfd = -1;
		probe_done(v, false, "QEMU could not be started for the probe");
		return;
	}
	v->probing = true;
	v->probe_deadline = now_ms() + PROBE_TIMEOUT_MS;
	log_info("vm accelerator probe started", "accel=kvm timeout_ms=%d", PROBE_TIMEOUT_MS);
}

void vm_probe_tick(struct runtime_vm *v, int64_t now)
{
	char buf[4096];
	ssize_t n;

	while (v->probe_out >= 0 && (n = read(v->probe_out, buf, sizeof(buf))) > 0) {
		/* the last bytes are enough to find the words in */
		if (memmem(buf, (size_t)n, "Kernel panic", 12)) {
			probe_done(v, true, "the guest kernel ran under kvm");
			return;
		}
		v->probe_len += (size_t)n;
	}
	if (vm_reap(v->probe_pidfd) >= 0)
		probe_done(v, false, "QEMU ended under kvm before the guest kernel ran");
	else if (now >= v->probe_deadline)
		probe_done(v, false, "the guest kernel did not run under kvm within the probe's time");
}

void vm_accel_decide(struct runtime_vm *v)
{
	char cached[8];
	struct stat st;

	v->probe_pidfd = v->probe_out = -1;
	v->kvm_gid = 0;
	/* QEMU runs unprivileged: it opens /dev/kvm through a group that may */
	if (stat("/dev/kvm", &st) == 0 && S_ISCHR(st.st_mode) && (st.st_mode & 060) == 060 &&
	    st.st_gid != 0)
		v->kvm_gid = st.st_gid;
	if (strcmp(v->c.accel, "auto") != 0) {
		snprintf(v->accel, sizeof(v->accel), "%s", v->c.accel);
		return;
	}
	snprintf(v->accel, sizeof(v->accel), "tcg");
	if (!v->available)
		return;
	if (stat("/dev/kvm", &st) != 0) {
		log_info("vm accelerator", "accel=tcg probe=%s", log_q("no /dev/kvm"));
		return;
	}
	if (!v->kvm_gid) {
		log_info("vm accelerator", "accel=tcg probe=%s",
			 log_q("/dev/kvm is root's alone (QEMU runs unprivileged: give it a group, "
			       "mode 0660)"));
		return;
	}
	probe_cache(v, false, cached, sizeof(cached));
	if (cached[0]) {
		snprintf(v->accel, sizeof(v->accel), "%s", cached);
		log_info("vm accelerator", "accel=%s probe=%s", log_q(v->accel),
			 log_q("this boot's probe, kept"));
		return;
	}
	probe_start(v);
}
