/* applets.h: the only list of applets. One line each: APPLET(name, main function, help text).
 * The help text and main function live at the top of the applet's own file. Reached by
 * argv[0] basename, by `agentic NAME`, or by `agentic SHORT` (NAME without "agentic-").
 * APPLET_INTERNAL(...) is a program agenticd starts itself: reached by `agentic NAME` or
 * `agentic SHORT` only, never listed by --list, never given a link by --install. */

APPLET("agentic-probe", probe_main, probe_help)
APPLET("agenticd", agenticd_main, agenticd_help)
APPLET("agentic-init", init_main, init_help)
APPLET("agentic-prune", prune_main, prune_help)
APPLET("agentic-seccomp-profile", seccomp_profile_main, seccomp_profile_help)
APPLET("agentic-verify", verify_main, verify_help)
APPLET_INTERNAL("agentic-egress-worker", egress_worker_main, egress_worker_help)
APPLET_INTERNAL("agentic-file", file_main, file_help)
APPLET_INTERNAL("agentic-fleet-relay", fleet_relay_main, fleet_relay_help)
APPLET_INTERNAL("agentic-fleet-relay-out", fleet_relay_out_main, fleet_relay_out_help)
APPLET_INTERNAL("agentic-fleet-worker", fleet_worker_main, fleet_worker_help)
APPLET_INTERNAL("agentic-vm-image", vm_image_main, vm_image_help)
APPLET_INTERNAL("agentic-workspace-rm", workspace_rm_main, workspace_rm_help)
