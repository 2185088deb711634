/* test_verify.c: the verifier's pure half (src/verify/verify.c): the readers of the engine's
 * inspect answers (never keeping an env value), a mountinfo, a /proc status and the probe's
 * key=value output; the verdicts: a sandbox as agentic makes it passes every check, and each
 * control weakened alone fails exactly its own check (and a T1 claim with it); a container
 * that is not a sandbox skips the inside checks; the result's JSON; and the exec engine's
 * internal sink, which keeps a bounded stdout and drops stderr. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/exec.h"
#include "verify/verify.h"

#define CANARY "canary-7d1e0c3f9ab24e55"

static const char inspect_json[] =
	"{\"Id\":\"4f00aa\",\"State\":{\"Running\":true,\"Pid\":4242},"
	"\"AppArmorProfile\":\"\",\"ProcessLabel\":\"\","
	"\"Config\":{\"Env\":[\"AGENT_ID=sb1\",\"MY_TOKEN=" CANARY "\"],"
	"\"Labels\":{\"agentic-control-uid\":\"200007\",\"agentic-instance-id\":\"inst-1\","
	"\"agentic-managed-network\":\"agentic-net-1\",\"agentic-sandbox\":\"true\"}},"
	"\"HostConfig\":{\"CapDrop\":[\"ALL\"],\"CapAdd\":[\"SETUID\",\"SETGID\"],"
	"\"SecurityOpt\":[\"no-new-privileges\",\"seccomp={\\\"defaultAction\\\":\\\"SCMP_ACT_ERRNO\\\"}\"],"
	"\"Privileged\":false,\"PidMode\":\"\",\"IpcMode\":\"private\",\"UTSMode\":\"\","
	"\"UsernsMode\":\"\",\"NetworkMode\":\"agentic-net-1\",\"Devices\":[],"
	"\"Tmpfs\":{\"/run/agentic\":\"rw,noexec,nosuid,nodev,mode=0700,uid=200007,gid=200007,size=64k\","
	"\"/tmp\":\"rw,exec,nosuid,nodev,mode=1777,size=67108864\"},"
	"\"DeviceCgroupRules\":null,\"ReadonlyRootfs\":true,\"PidsLimit\":512,"
	"\"Memory\":1073741824},"
	"\"Mounts\":[{\"Type\":\"bind\",\"Source\":\"/run/agentic/agent\","
	"\"Destination\":\"/run/agentic-sandbox\",\"RW\":false,\"Propagation\":\"rprivate\"},"
	"{\"Type\":\"bind\",\"Source\":\"/usr/local/bin/agentic\",\"Destination\":\"/sbin/agentic-init\","
	"\"RW\":false,\"Propagation\":\"rprivate\"},"
	"{\"Type\":\"bind\",\"Source\":\"/srv/share/instances/inst-1/workspace\","
	"\"Destination\":\"/workspace\",\"RW\":true,\"Propagation\":\"rprivate\"}],"
	"\"NetworkSettings\":{\"Networks\":{\"agentic-net-1\":{\"NetworkID\":\"n1\"}}}}";

static const char network_json[] =
	"{\"Name\":\"agentic-net-1\",\"Id\":\"n1\",\"Internal\":true,\"EnableIPv6\":false,"
	"\"IPAM\":{\"Config\":[{\"Subnet\":\"10.9.0.16/28\"}]},"
	"\"Options\":{\"com.docker.network.bridge.inhibit_ipv4\":\"true\"},"
	"\"Labels\":{\"agentic-egress-policy\":\"default-deny\",\"agentic-sandbox\":\"true\"}}";

static const char mountinfo[] =
	"600 500 0:50 / / ro,relatime - overlay overlay rw,lowerdir=/x\n"
	"610 600 0:51 / /run/agentic rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs "
	"rw,size=64k,mode=700,uid=200007,gid=200007\n"
	"611 600 0:52 / /tmp rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=65536k,mode=1777\n";

static const char init_status[] =
	"Name:\tagentic-init\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n"
	"Uid:\t200007\t200007\t200007\t200007\nGid:\t200007\t200007\t200007\t200007\n"
	"FDSize:\t64\nGroups:\t\nCapInh:\t0000000000000000\nCapPrm:\t00000000000000c0\n"
	"CapEff:\t00000000000000c0\nCapBnd:\t00000000000000c0\nCapAmb:\t0000000000000000\n"
	"NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";

/* what the probe prints in a sandbox as agentic makes it */
static const char probe_good[] =
	"self.uid=10001,10001,10001,10001\nself.gid=10001,10001,10001,10001\nself.groups=0\n"
	"self.cap_inh=0000000000000000\nself.cap_prm=0000000000000000\n"
	"self.cap_eff=0000000000000000\nself.cap_bnd=00000000000000c0\n"
	"self.cap_amb=0000000000000000\nself.no_new_privs=1\nself.seccomp=2\n"
	"pid1.uid=200007,200007,200007,200007\npid1.gid=200007,200007,200007,200007\n"
	"pid1.groups=0\npid1.cap_inh=0000000000000000\npid1.cap_prm=00000000000000c0\n"
	"pid1.cap_eff=00000000000000c0\npid1.cap_bnd=00000000000000c0\n"
	"pid1.cap_amb=0000000000000000\npid1.no_new_privs=1\npid1.seccomp=2\n"
	"kill.1=EPERM\nptrace.1=EPERM\nwrite.0=EACCES\ncreate.0=EACCES\n"
	"agent_socket=refused\nagent_socket.status=UNAUTHENTICATED\n"
	"ipv6.disable_ipv6=1\nipv6.addrs=0\n"
	"tool.curl=absent\ntool.wget=absent\ntool.grpcurl=absent\ntool.python=absent\n"
	"connect.0=timeout\nconnect.1=ENETUNREACH\nconnect.2=timeout\nend=ok\n";

static char probe_buf[4096];

#define VM_CHECKS 6 /* AGV-046..051 */

/* The facts of a sandbox as agentic makes it, read through the readers. */
static void good_facts(struct verify_facts *f)
{
	memset(f, 0, sizeof(*f));
	assert_int_equal(verify_ct_parse(inspect_json, strlen(inspect_json), &f->ct), 0);
	assert_int_equal(verify_net_parse(network_json, strlen(network_json), &f->net[0]), 0);
	verify_mountinfo_find(mountinfo, "/run/agentic", &f->tmpfs);
	f->tmpfs_dir_read = true;
	f->tmpfs_dir_mode = 0700;
	f->tmpfs_dir_uid = f->tmpfs_dir_gid = f->tmpfs.uid;
	assert_int_equal(verify_status_parse(init_status, &f->init_host), 0);
	assert_int_equal(verify_status_parse(init_status, &f->init_self), 0); /* its own report */
	snprintf(probe_buf, sizeof(probe_buf), "%s", probe_good);
	f->probe = probe_buf;
	f->is_sandbox = true;
	f->uid_min = 200000;
	f->uid_max = 799999;
	f->workload_uid = f->workload_gid = 10001;
	f->agent_socket_dir = "/run/agentic/agent";
	f->docker_socket = "/var/run/docker.sock";
	f->docker_socket_real = "/run/docker.sock";
	f->agentshare_root = "/srv/share";
	f->self_exe = "/usr/local/bin/agentic";
	f->workspace = "/srv/share/instances/inst-1/workspace";
	for (int t = 0; t < VERIFY_TARGETS; t++)
		f->target_connect[t] = t;
	f->disk_bytes = 64u << 20;
	f->workspace_img_bytes = 64 << 20;
	f->runs_checked = 7;
	f->share_dev_known = true;
	f->share_same_dev = true;
	f->t1 = false;
	snprintf(f->posture_text, sizeof(f->posture_text), "T0 (network_unverified)");
}

static unsigned failures(const struct verify_result *r, unsigned *first)
{
	unsigned n = 0;

	*first = VERIFY_CHECKS;
	for (unsigned i = 0; i < VERIFY_CHECKS; i++)
		if (r->check[i].status == VERIFY_FAIL && n++ == 0)
			*first = i;
	return n;
}

static void test_inspect_reader_takes_what_the_checks_need_and_no_env(void **state)
{
	struct verify_ct ct;

	assert_int_equal(verify_ct_parse(inspect_json, strlen(inspect_json), &ct), 0);
	assert_string_equal(ct.id, "4f00aa");
	assert_true(ct.running);
	assert_int_equal(ct.pid, 4242);
	assert_true(ct.has_uid_label);
	assert_int_equal(ct.control_uid, 200007);
	assert_string_equal(ct.managed_network, "agentic-net-1");
	assert_true(ct.cap_drop_all);
	assert_int_equal(ct.ncap_add, 2);
	assert_true(ct.cap_add_setuid && ct.cap_add_setgid);
	assert_true(ct.nnp && ct.seccomp_profile && !ct.seccomp_unconfined);
	assert_false(ct.privileged || ct.host_pid || ct.host_ipc || ct.host_uts || ct.host_net);
	assert_int_equal(ct.nmounts, 3);
	assert_string_equal(ct.mount[0].dest, "/run/agentic-sandbox");
	assert_false(ct.mount[0].rw);
	assert_true(ct.mount[2].rw);
	assert_true(ct.readonly_rootfs);
	assert_int_equal(ct.pids_limit, 512);
	assert_int_equal(ct.nnets, 1);
	assert_string_equal(ct.net_id[0], "n1");
	/* the env is never read: the canary is nowhere in what was kept */
	assert_null(memmem(&ct, sizeof(ct), CANARY, strlen(CANARY)));
	assert_int_equal(verify_ct_parse("[]", 2, &ct), ERR_PARSE);
	assert_int_equal(verify_ct_parse("{\"Id\":\"x\"}", 10, &ct), ERR_PARSE);
}

static void test_inspect_reader_sees_each_weakening(void **state)
{
	static const char weak[] =
		"{\"Id\":\"x\",\"State\":{\"Pid\":1},\"AppArmorProfile\":\"unconfined\","
		"\"HostConfig\":{\"CapDrop\":null,\"CapAdd\":[\"CAP_SYS_ADMIN\"],"
		"\"SecurityOpt\":[\"seccomp:unconfined\",\"label=type:x\"],\"Privileged\":true,"
		"\"PidMode\":\"host\",\"IpcMode\":\"host\",\"UTSMode\":\"host\",\"UsernsMode\":\"host\","
		"\"NetworkMode\":\"host\",\"Devices\":[{\"PathOnHost\":\"/dev/kvm\"}],"
		"\"StorageOpt\":{\"size\":\"1G\"},\"PidsLimit\":null,\"Memory\":0},"
		"\"Mounts\":[{\"Type\":\"bind\",\"Source\":\"/var/run/docker.sock\","
		"\"Destination\":\"/d.sock\",\"RW\":true,\"Propagation\":\"rshared\"}],"
		"\"NetworkSettings\":{\"Networks\":{\"a\":{\"NetworkID\":\"1\"},\"b\":{\"NetworkID\":\"2\"}}}}";
	struct verify_ct ct;

	assert_int_equal(verify_ct_parse(weak, strlen(weak), &ct), 0);
	assert_false(ct.has_uid_label);
	assert_false(ct.cap_drop_all);
	assert_int_equal(ct.ncap_add, 1);
	assert_false(ct.cap_add_setuid);
	assert_false(ct.nnp);
	assert_true(ct.seccomp_unconfined && ct.apparmor_unconfined && ct.selinux_label);
	assert_true(ct.privileged && ct.host_pid && ct.host_ipc && ct.host_uts && ct.host_userns &&
		    ct.host_net);
	assert_int_equal(ct.ndevices, 1);
	assert_true(ct.storage_size);
	assert_int_equal(ct.pids_limit, 0);
	assert_string_equal(ct.mount[0].propagation, "rshared");
	assert_int_equal(ct.nnets, 2);
	assert_string_equal(ct.net_name[1], "b");
	assert_string_equal(ct.net_id[1], "2");
}

static void test_network_reader(void **state)
{
	struct verify_net n;
	static const char bridge[] = "{\"Internal\":false,\"EnableIPv6\":true,\"IPAM\":{\"Config\":"
				     "[{\"Subnet\":\"172.17.0.0/16\",\"Gateway\":\"172.17.0.1\"}]},"
				     "\"Options\":{},\"Labels\":{}}";

	assert_int_equal(verify_net_parse(network_json, strlen(network_json), &n), 0);
	assert_true(n.read && n.internal && n.inhibit_ipv4 && n.default_deny && !n.ipv6);
	assert_string_equal(n.subnet, "10.9.0.16/28");
	assert_string_equal(n.gateway, "");
	assert_int_equal(verify_net_parse(bridge, strlen(bridge), &n), 0);
	assert_false(n.internal || n.inhibit_ipv4 || n.default_deny);
	assert_true(n.ipv6);
	assert_string_equal(n.gateway, "172.17.0.1");
}

static void test_mountinfo_reader_takes_the_last_mount_at_the_point(void **state)
{
	struct verify_tmpfs t;
	char over[1024];

	verify_mountinfo_find(mountinfo, "/run/agentic", &t);
	assert_true(t.found);
	assert_string_equal(t.fstype, "tmpfs");
	assert_true(t.noexec && t.nosuid && t.nodev);
	assert_true(t.has_mode && t.has_uid && t.has_gid);
	assert_int_equal(t.mode, 0700);
	assert_int_equal(t.uid, 200007);
	verify_mountinfo_find(mountinfo, "/run", &t);
	assert_false(t.found);
	/* something mounted over it later is what is in force (optional fields before "-") */
	snprintf(over, sizeof(over), "%s700 610 0:60 / /run/agentic rw,relatime shared:5 - tmpfs t "
		 "rw,mode=755\n", mountinfo);
	verify_mountinfo_find(over, "/run/agentic", &t);
	assert_true(t.found);
	assert_false(t.noexec);
	assert_int_equal(t.mode, 0755);
	assert_false(t.has_uid);
}

static void test_status_reader(void **state)
{
	struct verify_proc p;

	assert_int_equal(verify_status_parse(init_status, &p), 0);
	assert_int_equal(p.uid[3], 200007);
	assert_int_equal(p.ngroups, 0);
	assert_int_equal(p.cap_eff, 0xc0);
	assert_int_equal(p.no_new_privs, 1);
	assert_int_equal(p.seccomp, 2);
	assert_int_equal(verify_status_parse("Uid:\t1\t1\n", &p), ERR_PARSE);
}

static void test_probe_reader_matches_whole_keys(void **state)
{
	char v[32];
	struct verify_proc p;
	static const char out[] = "kill.10=allowed\nkill.1=EPERM\nself.uid=1,2,3\nend=ok";

	assert_int_equal(verify_probe_get(out, "kill.1", v, sizeof(v)), 0);
	assert_string_equal(v, "EPERM");
	assert_int_equal(verify_probe_get(out, "kill", v, sizeof(v)), -ENOENT);
	assert_int_equal(verify_probe_get(out, "end", v, sizeof(v)), 0);
	assert_string_equal(v, "ok");
	assert_int_equal(verify_probe_status(out, "self.", &p), -ENOENT);
	assert_int_equal(verify_probe_status(probe_good, "pid1.", &p), 0);
	assert_int_equal(p.uid[0], 200007);
	assert_int_equal(p.cap_prm, 0xc0);
	assert_int_equal(p.no_new_privs, 1);
}

static void test_a_sandbox_as_agentic_makes_it_passes_every_check(void **state)
{
	struct verify_facts f;
	struct verify_result r;
	unsigned first;

	good_facts(&f);
	verify_evaluate(&f, &r);
	if (failures(&r, &first))
		fail_msg("AGV-%03u fails: %s", first + 1, r.check[first].reason);
	assert_int_equal(r.skipped, VM_CHECKS); /* AGV-046..051: not a VM */
	assert_int_equal(r.not_run, 0);
	assert_int_equal(r.passed + r.info, VERIFY_CHECKS - VM_CHECKS);
	assert_int_equal(r.check[6].status, VERIFY_INFO);  /* AGV-007 */
	assert_int_equal(r.check[40].status, VERIFY_INFO); /* AGV-041 */
	assert_int_equal(r.check[41].status, VERIFY_INFO); /* AGV-042 */
	assert_int_equal(r.check[42].status, VERIFY_INFO); /* AGV-043 */
	assert_string_equal(r.check[42].reason, "T0 (network_unverified)");
	/* T1 claimed: still all pass */
	f.t1 = true;
	verify_evaluate(&f, &r);
	assert_int_equal(failures(&r, &first), 0);
}

/* One control weakened at a time: exactly its check fails. */
static void replace(char *text, const char *from, const char *to)
{
	char *at = strstr(text, from), tail[4096];

	assert_non_null(at);
	snprintf(tail, sizeof(tail), "%s", at + strlen(from));
	sprintf(at, "%s%s", to, tail);
}

static void weaken(struct verify_facts *f, int which)
{
	switch (which) {
	case 1: f->uid_taken_by_other = true; break;
	case 2: f->ct.cap_drop_all = false; break;
	case 3: f->ct.ncap_add = 3; break;
	case 4: f->ct.nnp = false; break;
	case 5: f->ct.privileged = true; break;
	case 6: f->ct.seccomp_unconfined = true; break;
	case 8: f->ct.host_pid = true; break;
	case 9: f->ct.host_ipc = true; break;
	case 10: f->ct.host_uts = true; break;
	case 11: f->ct.host_userns = true; break;
	case 12: replace(probe_buf, "self.cap_eff=0000000000000000", "self.cap_eff=0000000000000400"); break;
	case 13: replace(probe_buf, "self.groups=0", "self.groups=2"); break;
	case 14: replace(probe_buf, "self.no_new_privs=1", "self.no_new_privs=0"); break;
	case 15: replace(probe_buf, "self.seccomp=2", "self.seccomp=0"); break;
	case 16: replace(probe_buf, "pid1.uid=200007,", "pid1.uid=0,"); break;
	case 17: f->init_host.cap_eff = 0x1fffffffffULL; break;
	case 18: replace(probe_buf, "kill.1=EPERM", "kill.1=allowed"); break;
	case 19: replace(probe_buf, "ptrace.1=EPERM", "ptrace.1=allowed"); break;
	case 20: replace(probe_buf, "write.0=EACCES", "write.0=allowed"); break;
	case 21: replace(probe_buf, "create.0=EACCES", "create.0=allowed"); break;
	case 22: replace(probe_buf, "agent_socket=refused", "agent_socket=accepted"); break;
	case 23: f->ct.ndevices = 1; break;
	case 24: snprintf(f->ct.mount[2].propagation, sizeof(f->ct.mount[2].propagation), "rshared"); break;
	case 25:
		snprintf(f->ct.mount[3].type, sizeof(f->ct.mount[3].type), "bind");
		snprintf(f->ct.mount[3].source, sizeof(f->ct.mount[3].source), "/run/docker.sock");
		f->ct.nmounts = 4;
		break;
	case 26:
		snprintf(f->ct.mount[3].type, sizeof(f->ct.mount[3].type), "bind");
		snprintf(f->ct.mount[3].source, sizeof(f->ct.mount[3].source), "/etc");
		f->ct.nmounts = 4;
		break;
	case 27: f->ct.mount[0].rw = true; break;
	case 28: f->tmpfs.noexec = false; break;
	case 29: f->ct.readonly_rootfs = false; break;
	case 30: f->net[0].inhibit_ipv4 = false; break;
	case 31: f->ct.nnets = 2; break;
	case 32: f->ct.host_net = true; break;
	case 33: replace(probe_buf, "connect.0=timeout", "connect.0=connected"); break;
	case 34: replace(probe_buf, "connect.1=ENETUNREACH", "connect.1=refused"); break;
	case 35: replace(probe_buf, "connect.2=timeout", "connect.2=connected"); break;
	case 36: replace(probe_buf, "ipv6.disable_ipv6=1\nipv6.addrs=0", "ipv6.disable_ipv6=0\nipv6.addrs=2"); break;
	case 37: f->ct.pids_limit = 0; break;
	case 38: f->ct.memory = 0; break;
	case 39: f->workspace_img_bytes = 4096; break;
	case 40: f->runs_bad = 1; break;
	case 41: f->require_dedicated = true; break;
	case 45: f->init_self.cap_eff = 0x1fffffffffULL; break;
	default: fail();
	}
}

static void test_each_weakened_control_fails_exactly_its_check(void **state)
{
	static const int ids[] = { 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
				   20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,
				   36, 37, 38, 39, 40, 41, 45 };
	struct verify_facts f;
	struct verify_result r;
	unsigned first;

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		good_facts(&f);
		weaken(&f, ids[i]);
		verify_evaluate(&f, &r);
		if (failures(&r, &first) != 1 || first != (unsigned)ids[i] - 1)
			fail_msg("weakening AGV-%03d: %u failures, the first AGV-%03u", ids[i],
				 failures(&r, &first), first + 1);
		assert_true(r.check[first].reason[0] != '\0');
		/* a T1 claim with it is a failure of its own */
		f.t1 = true;
		verify_evaluate(&f, &r);
		assert_int_equal(failures(&r, &first), 2);
		assert_int_equal(r.check[43].status, VERIFY_FAIL);
	}
}

/* agenticd's listener took a connection from the sandbox: the check fails on the host's own
 * reading even when the probe says the connect timed out (a probe held stopped past its wait,
 * a probe whose SYN a flooded accept queue dropped) */
static void test_the_hosts_listener_fails_a_reachability_check_the_probe_passes(void **state)
{
	struct verify_facts f;
	struct verify_result r;
	unsigned first;

	good_facts(&f);
	verify_evaluate(&f, &r);
	assert_int_equal(r.check[34].status, VERIFY_PASS);
	f.host_reached[VERIFY_TO_PRIMARY] = true;
	verify_evaluate(&f, &r);
	assert_int_equal(failures(&r, &first), 1);
	assert_int_equal(first, 34); /* AGV-035 */
	assert_non_null(strstr(r.check[34].reason, "agenticd's listener"));
	/* a connection it cannot place (a local user posing with the container's address): the
	 * queue may have been full when the probe's SYN came, so no target passes */
	good_facts(&f);
	f.listener_foreign = true;
	verify_evaluate(&f, &r);
	assert_int_equal(failures(&r, &first), 3);
	assert_int_equal(first, 32); /* AGV-033 */
}

/* a chmod of /run/agentic after the mount changes its inode, not the mount's mode= option */
static void test_a_control_tmpfs_chmodded_after_its_mount_fails(void **state)
{
	struct verify_facts f;
	struct verify_result r;
	unsigned first;

	good_facts(&f);
	f.tmpfs_dir_mode = 0755;
	verify_evaluate(&f, &r);
	assert_int_equal(failures(&r, &first), 1);
	assert_int_equal(first, 27); /* AGV-028 */
	good_facts(&f);
	f.tmpfs_dir_uid = 10001;
	verify_evaluate(&f, &r);
	assert_int_equal(failures(&r, &first), 1);
	assert_int_equal(first, 27);
}

static void test_a_container_skips_the_inside_checks_and_the_posture(void **state)
{
	struct verify_facts f;
	struct verify_result r;
	unsigned first;

	good_facts(&f);
	f.is_sandbox = false;
	f.probe = NULL;
	verify_evaluate(&f, &r);
	assert_int_equal(failures(&r, &first), 0);
	for (int id = 12; id <= 22; id++)
		if (id != 17)
			assert_int_equal(r.check[id - 1].status, VERIFY_SKIP);
	assert_int_equal(r.check[16].status, VERIFY_PASS); /* AGV-017: the host's view */
	assert_int_equal(r.check[42].status, VERIFY_SKIP);
	assert_int_equal(r.check[43].status, VERIFY_SKIP);
	/* a sandbox whose probe did not run fails the inside checks, it does not skip them */
	good_facts(&f);
	f.probe = NULL;
	f.probe_error = "the agent is not connected";
	verify_evaluate(&f, &r);
	assert_int_equal(r.check[11].status, VERIFY_FAIL);
	assert_non_null(strstr(r.check[11].reason, "the agent is not connected"));
}

static void test_a_stopped_container_is_judged_by_the_engines_tmpfs_options(void **state)
{
	struct verify_facts f;
	struct verify_result r;
	unsigned first;

	good_facts(&f);
	assert_true(f.ct.tmpfs_cfg.found && f.ct.tmpfs_cfg.noexec);
	assert_int_equal(f.ct.tmpfs_cfg.mode, 0700);
	assert_int_equal(f.ct.tmpfs_cfg.uid, 200007);
	f.ct.running = false;
	f.tmpfs.found = false; /* no process: no mountinfo */
	f.init_host.read = false;
	verify_evaluate(&f, &r);
	assert_int_equal(failures(&r, &first), 0);
	assert_int_equal(r.check[16].status, VERIFY_SKIP); /* AGV-017 */
	assert_int_equal(r.check[27].status, VERIFY_PASS); /* AGV-028 */
	f.ct.tmpfs_cfg.noexec = false;
	verify_evaluate(&f, &r);
	assert_int_equal(failures(&r, &first), 1);
	assert_int_equal(first, 27);
	/* running: the kernel's mount decides, not the engine's options */
	good_facts(&f);
	f.ct.tmpfs_cfg.noexec = false;
	verify_evaluate(&f, &r);
	assert_int_equal(failures(&r, &first), 0);
}

/* A check that could not run is no evidence: a T1 claim resting on it is not proven (AGV-044
 * SKIP, naming them), the result is "incomplete"; a SKIP that cannot apply to the target (a
 * container's inside checks) is not counted. */
static void test_a_check_that_could_not_run_leaves_t1_unproven(void **state)
{
	struct verify_facts f;
	struct verify_result r;
	unsigned first;

	good_facts(&f);
	f.t1 = true;
	f.listener_errno = 1; /* EPERM: the listener's socket filter refused */
	for (int t = 0; t < VERIFY_TARGETS; t++)
		f.target_connect[t] = -1;
	verify_evaluate(&f, &r);
	assert_int_equal(failures(&r, &first), 0);
	for (int id = 33; id <= 35; id++)
		assert_int_equal(r.check[id - 1].status, VERIFY_SKIP);
	assert_int_equal(r.check[43].status, VERIFY_SKIP); /* AGV-044 */
	assert_string_equal(r.check[43].reason,
			    "T1 claimed, not proven: 3 checks did not run: AGV-033 AGV-034 AGV-035");
	assert_int_equal(r.not_run, 3);
	assert_int_equal(r.skipped, 4 + VM_CHECKS);
	assert_string_equal(verify_result_word(&r), "incomplete");
	/* T0 claims less, but the run is still incomplete */
	f.t1 = false;
	verify_evaluate(&f, &r);
	assert_int_equal(r.check[43].status, VERIFY_PASS);
	assert_string_equal(verify_result_word(&r), "incomplete");
	/* a failing check decides over one that did not run */
	f.t1 = true;
	f.ct.nnp = false;
	verify_evaluate(&f, &r);
	assert_int_equal(r.check[43].status, VERIFY_FAIL);
	assert_string_equal(verify_result_word(&r), "fail");
	/* docker0 alone missing: only AGV-034 */
	good_facts(&f);
	f.t1 = true;
	f.target_connect[VERIFY_TO_DOCKER0] = -1;
	verify_evaluate(&f, &r);
	assert_int_equal(r.not_run, 1);
	assert_string_equal(r.check[33].reason, "the host has no docker0");
	assert_non_null(strstr(r.check[43].reason, ": AGV-034"));
	/* a container's inside checks cannot apply: skipped, not unrun */
	good_facts(&f);
	f.is_sandbox = false;
	f.probe = NULL;
	verify_evaluate(&f, &r);
	assert_true(r.skipped > 10);
	assert_int_equal(r.not_run, 0);
	assert_string_equal(verify_result_word(&r), "pass");
	/* a stopped container's AGV-017 could not run */
	f.ct.running = false;
	verify_evaluate(&f, &r);
	assert_int_equal(r.not_run, 1);
	assert_string_equal(verify_result_word(&r), "incomplete");
}

/* A VM as agentic makes it: its QEMU's host side, the probe in its guest. */
static void good_vm_facts(struct verify_facts *f)
{
	good_facts(f);
	memset(&f->ct, 0, sizeof(f->ct));
	f->ct.has_uid_label = true;
	f->ct.control_uid = 200007;
	f->is_vm = true;
	f->t1 = true;
	memset(&f->init_host, 0, sizeof(f->init_host));
	f->init_self.seccomp = 0; /* the guest's init: no seccomp filter */
	snprintf(probe_buf, sizeof(probe_buf), "%snics=0\nend=ok\n", probe_good);
	f->vm.running = true;
	f->vm.qemu.read = true;
	for (int i = 0; i < 4; i++)
		f->vm.qemu.uid[i] = f->vm.qemu.gid[i] = 1200007;
	f->vm.qemu.no_new_privs = 1;
	f->vm.qemu.seccomp = 2;
	f->vm.uid = 1200007;
	f->vm.ns_read = f->vm.own_net = f->vm.own_ipc = f->vm.own_mnt = f->vm.own_root = true;
	f->vm.sandbox_on = true;
	f->vm.dir_read = true;
	f->vm.dir_mode = 0700;
}

static void test_a_vm_passes_its_checks_and_each_weakening_fails_exactly_one(void **state)
{
	struct verify_facts f;
	struct verify_result r;
	unsigned first;

	good_vm_facts(&f);
	verify_evaluate(&f, &r);
	if (failures(&r, &first))
		fail_msg("AGV-%03u fails: %s", first + 1, r.check[first].reason);
	assert_string_equal(verify_result_word(&r), "pass");
	assert_int_equal(r.check[43].status, VERIFY_PASS); /* T1 supported */
	for (int id = 46; id <= 51; id++)
		assert_int_equal(r.check[id - 1].status, VERIFY_PASS);
	assert_int_equal(r.check[1].status, VERIFY_SKIP);  /* AGV-002: no engine container */
	assert_true(r.check[1].inapplicable);
	for (int id = 46; id <= 51; id++) {
		good_vm_facts(&f);
		switch (id) {
		case 46: f.vm.uid_other = 4242; break;
		case 47: f.vm.ifaces = 1; break;
		case 48: f.vm.sandbox_on = false; break;
		case 49: f.vm.own_mnt = false; break;
		case 50: f.vm.dir_mode = 0755; break;
		case 51: replace(probe_buf, "nics=0", "nics=1"); break;
		}
		verify_evaluate(&f, &r);
		assert_int_equal(failures(&r, &first), 2); /* and AGV-044 */
		assert_int_equal(first, 43);
		assert_int_equal(r.check[id - 1].status, VERIFY_FAIL);
	}
	good_vm_facts(&f);
	f.vm.running = false;
	verify_evaluate(&f, &r);
	assert_int_equal(r.check[45].status, VERIFY_FAIL);
	assert_string_equal(r.check[45].reason, "QEMU is not running");
}

static void test_result_json_has_every_check_in_order(void **state)
{
	static char out[VERIFY_JSON_BYTES];
	static struct json_token tok[2048];
	struct verify_facts f;
	struct verify_result r;
	struct verify_meta m = { .is_sandbox = false, .container_id = "4f00aa", .started_ms = 1000,
				 .duration_ms = 12 };
	struct json_writer w;
	struct json_doc d;
	struct buf b;
	int checks, n = 0;
	char id[16];

	good_facts(&f);
	verify_evaluate(&f, &r);
	buf_init(&b, out, sizeof(out));
	json_writer_init(&w, &b);
	verify_result_json(&w, &r, &m);
	assert_int_equal(json_writer_finish(&w), 0);
	assert_int_equal(json_parse(&d, (const char *)b.data, b.len, tok, 2048), 0);
	assert_true(json_str_eq(&d, json_obj_get(&d, 0, "result"), "pass"));
	assert_int_equal(d.tok[json_obj_get(&d, 0, "not_run")].type, JSON_ARRAY);
	assert_int_equal(d.tok[json_obj_get(&d, 0, "not_run")].children, 0);
	assert_int_equal(d.tok[json_obj_get(&d, 0, "sandbox")].type, JSON_NULL);
	checks = json_obj_get(&d, 0, "checks");
	for (int c = json_first(&d, checks); c >= 0; c = json_next(&d, checks, c)) {
		char want[16];

		json_str(&d, json_obj_get(&d, c, "id"), id, sizeof(id));
		snprintf(want, sizeof(want), "AGV-%03d", ++n);
		assert_string_equal(id, want);
	}
	assert_int_equal(n, VERIFY_CHECKS);
	assert_null(memmem(b.data, b.len, CANARY, strlen(CANARY)));
}

static int collected;

static void on_collected(struct exec_collect *c)
{
	collected++;
}

static void test_the_internal_sink_keeps_a_bounded_stdout_and_drops_stderr(void **state)
{
	static struct exec_collect c;
	static char big[EXEC_COLLECT_BYTES + 100];
	struct exec_sink s;

	memset(big, 'a', sizeof(big));
	c.on_done = on_collected;
	exec_collect_sink(&c, &s);
	assert_null(s.ops->stdin_taken); /* the command sees the end of stdin at once */
	assert_int_equal(s.ops->output(s.ctx, 0, "k=v\n", 4), 0);
	assert_int_equal(s.ops->output(s.ctx, 1, "secret", 6), 0);
	assert_string_equal(c.out, "k=v\n");
	assert_int_equal(s.ops->output(s.ctx, 0, big, sizeof(big)), 0);
	assert_int_equal(c.len, EXEC_COLLECT_BYTES);
	assert_int_equal(c.dropped, 6 + 104);
	assert_int_equal(c.out[EXEC_COLLECT_BYTES], '\0');
	s.ops->done(s.ctx, 0, 5, "", NULL);
	assert_true(c.done);
	assert_false(c.failed);
	assert_int_equal(collected, 1);
	exec_collect_sink(&c, &s);
	s.ops->done(s.ctx, -1, 5, "the sandbox stopped", NULL);
	assert_true(c.failed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inspect_reader_takes_what_the_checks_need_and_no_env),
		cmocka_unit_test(test_inspect_reader_sees_each_weakening),
		cmocka_unit_test(test_network_reader),
		cmocka_unit_test(test_mountinfo_reader_takes_the_last_mount_at_the_point),
		cmocka_unit_test(test_status_reader),
		cmocka_unit_test(test_probe_reader_matches_whole_keys),
		cmocka_unit_test(test_a_sandbox_as_agentic_makes_it_passes_every_check),
		cmocka_unit_test(test_each_weakened_control_fails_exactly_its_check),
		cmocka_unit_test(test_the_hosts_listener_fails_a_reachability_check_the_probe_passes),
		cmocka_unit_test(test_a_control_tmpfs_chmodded_after_its_mount_fails),
		cmocka_unit_test(test_a_container_skips_the_inside_checks_and_the_posture),
		cmocka_unit_test(test_a_stopped_container_is_judged_by_the_engines_tmpfs_options),
		cmocka_unit_test(test_a_check_that_could_not_run_leaves_t1_unproven),
		cmocka_unit_test(test_a_vm_passes_its_checks_and_each_weakening_fails_exactly_one),
		cmocka_unit_test(test_result_json_has_every_check_in_order),
		cmocka_unit_test(test_the_internal_sink_keeps_a_bounded_stdout_and_drops_stderr),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
