/* runtime_vm_priv.h: the VM runtime's own parts, included by src/runtime/runtime_vm*.c alone:
 * a VM slot (one per sandbox slot: the call it runs, its QEMU, its console ring) and the
 * functions each file of the runtime gives the ones above it. The files, bottom to top (each
 * calls only the ones before it):
 *   runtime_vm_record.c  the VM's directory and record on the host, a process's start time
 *   runtime_vm_uid.c     QEMU's uid: held by no other process, in no subordinate range
 *   runtime_vm_spawn.c   QEMU and the image builder as children: confined, no exit signal
 *   runtime_vm_slot.c    a slot's descriptors on the loop, its console ring, its answer
 *   runtime_vm_control.c the guest's control and console sockets, dialled
 *   runtime_vm_accel.c   the accelerator (the KVM probe) and the TCG guest's clock rate
 *   runtime_vm_create.c  CT_CREATE (the initramfs of the image) and CT_START (QEMU)
 *   runtime_vm_call.c    the asynchronous calls, the tick and the loop's readiness
 *   runtime_vm_ops.c     the runtime: its ops, adoption, recovery's calls, its set-up
 *   runtime_vm_sb.c      the VM state of each sandbox slot (vm_of), below them all */
#ifndef AGENTIC_RUNTIME_VM_PRIV_H
#define AGENTIC_RUNTIME_VM_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "base/base.h"
#include "runtime/runtime_vm.h"
#include "sandbox/sandbox.h"

#define VM_PREFIX "vm-"
#define VM_IMAGE_TIMEOUT_MS 300000   /* an image export and its initramfs */
#define VM_DIAL_MS 1000              /* the control socket is dialled again at most this often */
#define VM_KILL_AFTER_MS 3000        /* SIGTERM to QEMU, then this long to SIGKILL */
#define VM_QEMU "/usr/bin/qemu-system-x86_64"
/* the console's last bytes: a panic's register dump and trace (some 3 KiB) must not push the
 * init's own last lines out */
#define VM_RING_BYTES 16384

/* the descriptors a slot has on the loop: id = slot * 4 + kind */
enum { K_PIDFD = 0, K_IMAGE, K_OUT, K_CON };

enum vm_wait {
	W_NONE = 0,
	W_ANSWER,      /* res is filled: answered on the next tick */
	W_IMAGE,       /* CT_CREATE: the image child runs */
	W_STOP,        /* CT_STOP: the init was asked, then QEMU */
	W_EXIT,        /* CT_REMOVE: QEMU killed, its exit awaited */
};

struct vm_slot {
	struct runtime_vm *v;
	uint32_t index;
	struct rt_call *call;
	enum vm_wait wait;
	int64_t deadline;             /* W_IMAGE, W_STOP, W_EXIT */
	int stop_phase;               /* W_STOP: 0 init asked, 1 SIGTERM sent, 2 SIGKILL sent */
	/* the image child */
	pid_t img_pid;
	int img_pidfd;
	/* QEMU */
	bool live;                    /* a VM of this slot exists (running or not) */
	char id[RT_ID_BYTES];
	char instance[SB_ID_BYTES];
	uint32_t control_uid;
	pid_t pid;
	int pidfd;
	uint64_t start;               /* its start time (/proc/PID/stat, clock ticks) */
	bool exited;
	bool die_owed;
	int64_t exit_code;
	/* what the sandbox's create asked, for the start */
	uint64_t memory;
	uint32_t cpus;
	bool writable_root;
	/* console and QEMU's own output */
	int out_fd;                   /* the image child's stderr, then QEMU's */
	int con_fd;
	int64_t con_at, dial_at;
	bool was_busy;                /* the control connection was up at the last look */
	char ring[VM_RING_BYTES];
	size_t ring_len;
};

static inline int64_t now_ms(void)
{
	return clock_mono_ms();
}

static inline struct vm_slot *slot_of(struct runtime_vm *v, const struct sandbox *sb)
{
	uint32_t i = sandbox_index(sb);

	return i < v->c.slots ? &v->slot[i] : NULL;
}

static inline bool is_vm_id(const char *id)
{
	return id && strncmp(id, VM_PREFIX, strlen(VM_PREFIX)) == 0;
}

static inline uint32_t vm_uid(const struct runtime_vm *v, uint32_t control_uid)
{
	return control_uid + v->c.cfg->vm_uid_offset;
}

/* ---- runtime_vm_record.c ---- */
/* state_dir/vm/<instance>, and a file in it: 0 or -ENAMETOOLONG. */
int vm_dir(const struct runtime_vm *v, const char *instance, char *out, size_t size);
int vm_path(const struct runtime_vm *v, const char *instance, const char *file, char *out,
	    size_t size);
/* A small file's first cap - 1 bytes into buf, NUL-terminated; its length, or -1. */
/* When pid started, in clock ticks since boot (/proc/PID/stat), 0: unknown. */
uint64_t vm_proc_start(pid_t pid);
int vm_write_all(int fd, const char *p, size_t n);
/* vm.rec: QEMU's pid, start time and control uid, written whole then renamed. */
int vm_record_write(const struct runtime_vm *v, const struct vm_slot *s);
int vm_record_read(const struct runtime_vm *v, const char *instance, pid_t *pid,
		   uint64_t *start, uint32_t *uid);
/* A pidfd of pid when it is still the process that started at start, else -1. */
int vm_pid_check(pid_t pid, uint64_t start);
/* Removes the VM's directory and what is in it. */
void vm_dir_remove(const struct runtime_vm *v, const char *instance);

/* ---- runtime_vm_uid.c ---- */
/* Whether a range of /etc/subuid or /etc/subgid meets lo..hi (or holds id). */
bool vm_range_subordinate(uint64_t lo, uint64_t hi);
bool vm_id_subordinate(uint32_t id);
/* The first process but except holding id as a uid or gid, else 0. */
pid_t vm_id_holder(uint32_t id, pid_t except);
/* Kills every process holding id. */
void vm_id_kill_all(uint32_t id);

/* ---- runtime_vm_spawn.c ---- */
/* A child with no exit signal running path argv as uid:gid, fds[i] as 3 + i, out as its
 * stdout and stderr, confined under root when root is not NULL. pid, or -errno. */
pid_t vm_spawn(const char *path, char *const argv[], const int *fds, int nfds, int out,
	       uid_t uid, gid_t gid, gid_t extra, const char *root, int *pidfd);
/* The exit status of the child behind pidfd, once it has exited (-1: not yet). */
int64_t vm_reap(int pidfd);

/* ---- runtime_vm_slot.c ---- */
void vm_watch(struct vm_slot *s, int fd, int kind);
void vm_close_fd(struct vm_slot *s, int *fd);
void vm_ring_add(struct vm_slot *s, const char *data, size_t len);
void vm_drain_fd(struct vm_slot *s, int *fd);
/* The slot's call answered with o (and the text, when not RT_OK): delivered on the next tick. */
void vm_answer(struct vm_slot *s, enum rt_outcome o, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void vm_forget(struct vm_slot *s);
void vm_qemu_exited(struct vm_slot *s, int64_t status);
void vm_qemu_kill(struct vm_slot *s, int sig);

/* ---- runtime_vm_control.c ---- */
/* Dials the console and, when the sandbox's slot holds no connection, the control socket
 * (each at most once a VM_DIAL_MS). */
void vm_try_dial(struct runtime_vm *v, struct vm_slot *s, int64_t now);

/* ---- runtime_vm_accel.c ---- */
void vm_tsc_read(struct runtime_vm *v);
/* v->accel from vm_accel: as set, or auto's probe (cached per boot, else begun). */
void vm_accel_decide(struct runtime_vm *v);
void vm_probe_tick(struct runtime_vm *v, int64_t now);

/* ---- runtime_vm_create.c ---- */
void vm_rootfs_begin(struct runtime_vm *v, struct vm_slot *s, struct rt_call *c);
void vm_rootfs_done(struct vm_slot *s, int64_t status);
void vm_start_begin(struct runtime_vm *v, struct vm_slot *s, struct rt_call *c);

/* ---- runtime_vm_call.c: runtime_ops of the VM runtime ---- */
int vm_call(void *self, struct rt_call *c);
void vm_tick(void *self, int64_t now);
int64_t vm_next_deadline(void *self, int64_t now);
void vm_ready(void *self, uint32_t id);

/* ---- runtime_vm_sb.c ---- */
/* The table of the VM state of nslots sandbox slots (storage runtime_vm_init takes). */
void vm_sb_init(struct vm_sb *slots, uint32_t nslots);

#endif
