/* guest.h: the init as PID 1 of a VM sandbox (AGENT_RUNTIME=vm on the kernel command line):
 * the duties a container runtime does for a container's init, done by the init itself before
 * its usual start. */
#ifndef AGENTIC_INIT_GUEST_H
#define AGENTIC_INIT_GUEST_H

/* True when this process is PID 1 and AGENT_RUNTIME is "vm". */
int init_guest_is_vm(void);

/* As PID 1 of the VM, while still root with every capability: mounts /proc, /sys (read-only),
 * /dev (devtmpfs) and /dev/shm; loads the modules listed in /lib/modules/agentic/load-order and
 * then forbids loading more; hardens sysctls; mounts /dev/vda (ext4) at /workspace unless
 * AGENT_VM_WORKSPACE=none, /tmp and the control tmpfs (the parent of AGENT_SETUP_SENTINEL,
 * owned by AGENT_CONTROL_UID/GID); remounts / read-only unless AGENT_VM_WRITABLE_ROOT=1;
 * brings lo up; sets PATH (if unset) and HOME; finds the virtio port named agentic.control,
 * gives it to the control uid and sets AGENT_GRPC_UDS_PATH to it; forks the power-off helper;
 * then leaves exactly what agenticd gives a container's init (uid 0, bounding, permitted and
 * effective sets {SETUID, SETGID}, no inheritable or ambient, no-new-privileges), so that
 * init_start_check passes. 0, or 1 after one line on stderr saying what failed. */
int init_guest_prelude(void);

/* The end of the init as PID 1 of the VM, with the init's exit status: 0 syncs and asks the
 * helper to power the VM off (QEMU exits), waiting for it; anything else says so on stderr and
 * returns, and the kernel's panic on PID 1's exit ends the VM. Returns status. */
int init_guest_exit(int status);

#endif
