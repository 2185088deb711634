# verify_lib.sh: helpers for the verifier's tests (sourced after lib.sh and agenticd_lib.sh).
#
# vl_clone makes a container directly through the engine's API with the spec agenticd gave a
# real sandbox (read back from the engine: entrypoint, user, env, labels, every HostConfig
# field, its network), under another name, a control uid and instance id of its own (env,
# labels and the control tmpfs's owner) and a workspace of its own (a directory the workload
# owns, so it binds nothing of agentic's but the agent socket dir and the init, as a sandbox
# does), with at most one control weakened. It carries the source's labels, the test's
# (test-run=$RUN_ID) among them, so ad_cleanup removes it with the test's other containers.
# agenticd holds no record of it: to `agentic verify --container` it is a container, not a
# sandbox (host-side checks; the inside ones are SKIP).

# vl_clone SRC NAME UID WEAKENING [ARG]: creates NAME and starts it (a start the engine refuses
# is left at that: the container stays created); prints its container id. The workspace is
# $T/ws-NAME.
# WEAKENING: none, privileged, cap_add (ARG: the capability), no_nnp, network (ARG: a network
# to use instead), docker_sock, exec_tmpfs, no_pids_limit, host_pid, agent_dir_rw.
vl_clone() {
	mkdir -p "$T/ws-$2" && chown 10001:10001 "$T/ws-$2" && chmod 0755 "$T/ws-$2" || return 1
	/usr/bin/python3 - "$DOCKER_SOCK" "$T/ws-$2" "$@" <<-'EOF'
	import http.client, json, socket, sys
	import os, uuid
	sock, ws, src, name, uid, weak = sys.argv[1:7]
	arg = sys.argv[7] if len(sys.argv) > 7 else ""
	inst = str(uuid.uuid4())

	class Conn(http.client.HTTPConnection):
	    def __init__(self):
	        super().__init__("docker", timeout=60)
	    def connect(self):
	        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	        self.sock.settimeout(60)
	        self.sock.connect(sock)

	def call(method, path, body=None, may_fail=False):
	    c = Conn()
	    c.request(method, path, body=json.dumps(body) if body is not None else None,
	              headers={"Content-Type": "application/json"})
	    r = c.getresponse()
	    data = r.read()
	    c.close()
	    if r.status >= 300 and may_fail:
	        print(f"vl_clone: {method} {path}: {r.status} {data[:300]!r}", file=sys.stderr)
	        return None
	    if r.status >= 300:
	        sys.exit(f"vl_clone: {method} {path}: {r.status} {data[:300]!r}")
	    return json.loads(data) if data else None

	d = call("GET", f"/containers/{src}/json")
	cfg, hc = d["Config"], d["HostConfig"]
	old = cfg["Labels"]["agentic-control-uid"]
	env = []
	for e in cfg["Env"]:
	    k = e.split("=", 1)[0]
	    if k in ("AGENT_CONTROL_UID", "AGENT_CONTROL_GID"):
	        e = f"{k}={uid}"
	    elif k == "AGENT_ID":
	        e = f"AGENT_ID={name}"
	    elif k == "AGENT_INSTANCE_ID":
	        e = f"AGENT_INSTANCE_ID={inst}"
	    env.append(e)
	labels = dict(cfg["Labels"], **{"agentic-control-uid": uid, "agentic-instance-id": inst})
	for m in hc["Mounts"]:
	    if m["Target"] == "/workspace":
	        m["Source"] = ws
	hc["Tmpfs"]["/run/agentic"] = hc["Tmpfs"]["/run/agentic"].replace(
	    f"uid={old},gid={old}", f"uid={uid},gid={uid}")
	if weak == "none":
	    pass
	elif weak == "privileged":
	    hc["Privileged"] = True
	elif weak == "cap_add":
	    hc["CapAdd"] = hc["CapAdd"] + [arg]
	elif weak == "no_nnp":
	    hc["SecurityOpt"] = [s for s in hc["SecurityOpt"] if s != "no-new-privileges"]
	elif weak == "network":
	    hc["NetworkMode"] = arg
	elif weak == "docker_sock":
	    hc["Mounts"] = hc["Mounts"] + [{"Type": "bind", "Source": "/var/run/docker.sock",
	                                     "Target": "/var/run/docker.sock", "ReadOnly": True}]
	elif weak == "exec_tmpfs":
	    hc["Tmpfs"]["/run/agentic"] = hc["Tmpfs"]["/run/agentic"].replace("noexec", "exec")
	elif weak == "no_pids_limit":
	    hc["PidsLimit"] = 0
	elif weak == "host_pid":
	    hc["PidMode"] = "host"
	elif weak == "agent_dir_rw":
	    for m in hc["Mounts"]:
	        if m["Target"] == "/run/agentic-sandbox":
	            m["ReadOnly"] = False
	else:
	    sys.exit(f"vl_clone: unknown weakening {weak}")
	body = {"Image": cfg["Image"], "User": cfg["User"], "Entrypoint": cfg["Entrypoint"],
	        "Cmd": cfg["Cmd"], "WorkingDir": cfg["WorkingDir"], "Env": env, "Labels": labels,
	        "HostConfig": hc}
	made = call("POST", f"/containers/create?name={name}", body)
	call("POST", f"/containers/{made['Id']}/start", may_fail=True)
	print(made["Id"])
	EOF
}

# vl_free_uid: a control uid inside agenticd's range that no container on the engine claims and
# far above where its next-fit allocation starts (the test's daemon makes a few sandboxes)
vl_free_uid() {
	local used u
	used=" $(docker ps -aq | xargs -r docker inspect -f '{{index .Config.Labels "agentic-control-uid"}}' 2>/dev/null | tr '\n' ' ') ${VL_UIDS_TAKEN:-} "
	while :; do
		u=$((790000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 9000))
		case $used in *" $u "*) ;; *) break ;; esac
	done
	VL_UIDS_TAKEN="${VL_UIDS_TAKEN:-} $u"
	echo "$u"
}

# vl_fail_ids: the ids of the FAIL lines of verify's text output on stdin, sorted, one line
vl_fail_ids() { awk '$1 == "FAIL" { print $2 }' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

# vl_pass_ids: the same for PASS
vl_pass_ids() { awk '$1 == "PASS" { print $2 }' | sort -u | tr '\n' ' ' | sed 's/ $//'; }
