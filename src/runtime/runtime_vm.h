/* runtime_vm.h: the VM runtime (runtime.h's second implementation), in front of the Docker
 * one. A sandbox made with runtime "vm" is a QEMU microvm booting the pinned guest kernel
 * (make vm-kernel) with an initramfs made from its image (agentic vm-image, a child of
 * agenticd, cached per image id) whose /init is this binary. Every other call, and every
 * network, goes to the Docker runtime behind it: the lifecycle sees one runtime.
 *
 * Per VM, under state_dir/vm/<instance>/ (root, 0700): rootfs.cpio (a link to the cached
 * image), vm.json (QEMU's pid and start time, for the next agenticd), control.sock and
 * console.sock. agenticd binds both sockets itself and hands QEMU the listening
 * descriptors: QEMU serves them, agenticd connects. The control socket is the guest init's
 * virtio-serial port (named agentic.control); which socket a connection came in on is the
 * VM's identity, so the grpc connection is adopted into the sandbox's reserved slot by the
 * channel hook, not by SO_PEERCRED. The console is read into a bounded ring (the init's last
 * lines at a failed create); never written to disk.
 *
 * QEMU runs as a uid of its own per VM (its control uid + vm_uid_offset), in a
 * session of its own, with -sandbox on, -nodefaults, -no-user-config, -nic none: it outlives
 * an agenticd restart and is adopted again from vm.json (pid checked against its start
 * time). It is a clone child with no exit signal, so agenticd's SIGCHLD reaping never takes
 * it; its pidfd says when it exits (a guest panic ends QEMU too: panic=-1, -no-reboot).
 *
 * Its files (src/runtime/runtime_vm_*.c) and what each holds: runtime_vm_priv.h. */
#ifndef AGENTIC_MGMT_RUNTIME_VM_H
#define AGENTIC_MGMT_RUNTIME_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/limits.h"
#include "config/config.h"
#include "profile/profile.h"
#include "runtime/runtime.h"
#include "sandbox/request.h"

struct sandbox;
struct vm_slot;

struct runtime_vm_config {
	const struct config *cfg;
	struct runtime *docker;       /* networks, and every sandbox not of runtime "vm" */
	const char *self_exe;         /* the binary: vm-image's program and the guest's /init */
	const char *kernel_dir;       /* vmlinuz, modules/ (make vm-kernel); "": no VM runtime */
	const char *accel;            /* vm_accel: "auto", "tcg" or "kvm" */
	int epfd;
	uint32_t tag;                 /* epoll tag kind for the VMs' descriptors */
	uint32_t slots;               /* max_sandboxes */
	/* the VM's control connection, connected: adopted as the sandbox's agent connection
	 * (owned by the callee from here, also on failure); busy says whether the sandbox's
	 * slot holds one now (no dial while it does) */
	int (*channel)(void *ctx, struct sandbox *sb, int fd);
	bool (*channel_busy)(void *ctx, struct sandbox *sb);
	/* asks the sandbox's init to shut down (a ShutdownSignal): false when it has no
	 * connection to ask on */
	bool (*shutdown)(void *ctx, struct sandbox *sb, int grace_s);
	void *ctx;
};

struct runtime_vm {
	struct runtime_vm_config c;
	struct vm_slot *slot;         /* c.slots of them */
	bool available;               /* kernel_dir holds a kernel and its modules */
	char why[256];                /* when not available: why (for a refused create) */
	char tsc_arg[40];             /* " tsc_early_khz=N" for a TCG guest, "" when unknown */
	char accel[8];                /* what VMs start with now: "tcg" or "kvm" */
	gid_t kvm_gid;                /* /dev/kvm's group, given to QEMU under kvm (0: none) */
	/* vm_accel auto: the KVM probe, a QEMU child of its own */
	bool probing;
	int probe_pidfd, probe_out;
	int64_t probe_deadline;
	size_t probe_len;
	struct runtime rt;
};

/* A sandbox's VM state: one per sandbox slot, in the table runtime_vm_init takes with its
 * slots (runtime_vm_sb.c), written only by the functions below. Reset when the sandbox slot
 * is reused (seen by its gen). */
struct vm_sb {
	uint32_t gen;                 /* the sandbox slot's gen it belongs to */
	/* a VM's credentials (its profile's credential_refs), sent with its claim: the secrets
	 * are read from vm_credentials_dir when sent, never kept; not recorded (a restarted
	 * agenticd sends no claim: the guest's init keeps what it took) */
	struct vm_cred {
		char id[PROFILE_ID_BYTES];
		char name[REQUEST_CRED_NAME_BYTES];
		bool file;
	} creds[PROFILE_CREDS_MAX];
	uint8_t ncreds;
	bool claim_owed;              /* a VM's claim sent at create, its ack not in yet */
};

/* sb's VM state, read-only (all zero for a sandbox not of runtime "vm", and before any
 * table is set up: a unit test's or the simulator's). */
const struct vm_sb *vm_of(const struct sandbox *sb);
/* The credentials' ids and targets of req (a VM's create), kept for its claims. */
void runtime_vm_creds_set(struct sandbox *sb, const struct create_req *req);
/* Whether sb's claim, sent at its create, waits for the init's ack. */
void runtime_vm_claim_owed(struct sandbox *sb, bool owed);

/* The heap runtime_vm_init takes for `slots` VM slots (agenticd's budget counts it). */
size_t runtime_vm_storage_bytes(uint32_t slots);
/* Sets the runtime up (allocates its slots: before the loop starts). 0 or -errno. */
int runtime_vm_init(struct runtime_vm *v, const struct runtime_vm_config *c);
/* The loop's readiness for tag kind c.tag. */
void runtime_vm_ready(struct runtime_vm *v, uint32_t id);
/* Whether VM sandboxes can be made here: NULL when they can, else why not. */
const char *runtime_vm_unavailable(const struct runtime_vm *v);
/* The accelerator VMs start with: "tcg" or "kvm". */
const char *runtime_vm_accel(const struct runtime_vm *v);

/* QEMU's -sandbox value: its seccomp filter, with these denials */
#define RUNTIME_VM_SANDBOX "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"

/* A VM's QEMU as the verifier reads it. */
struct runtime_vm_qemu {
	pid_t pid;                    /* QEMU, still the process that started then; 0: none */
	uint32_t uid;                 /* the uid it must run as: the control uid + vm_uid_offset */
	pid_t uid_other;              /* a process other than QEMU holding that uid or gid, or 0 */
	bool uid_subordinate;         /* a range of /etc/subuid or /etc/subgid holds it */
	bool kvm;                     /* VMs start under KVM (QEMU then has /dev/kvm's group) */
	char dir[LIMIT_PATH_BYTES];   /* the VM's directory, which holds its control socket */
};
/* Reads sb's QEMU (sb a VM of this runtime); 0, or -ENOENT. */
int runtime_vm_qemu_read(struct runtime_vm *v, const struct sandbox *sb, struct runtime_vm_qemu *q);

#endif
