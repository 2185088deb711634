# tools/bench/benchlib.py: what the Python benchmarks share: agenticd's admin API over its Unix
# socket, and the docker CLI pair a create is measured against (`docker network create
# --internal` + `docker run -d` with the hardened flags agenticd gives a sandbox: only a
# started container, no init registered).
import http.client
import json
import os
import socket
import subprocess
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(TOP, "agentic")
IMAGE = "agentic/loadout:local"


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("agenticd", timeout=120)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(self.path)


def api(sock, method, path, body=None):
    c = UnixHTTP(sock)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"} if body is not None else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data else None


def sh(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def cli_pair(i, run_id, octet, label, sbx, ws, nets):
    """ms of the CLI pair for run i (its /28 in 10.OCTET.255.0/24), removed afterwards."""
    net = f"agentic-bench-{run_id}-{i}"
    name = f"bench-cli-{run_id}-{i}"
    t0 = time.monotonic()
    sh("docker", "network", "create", "--internal", "--subnet", f"10.{octet}.255.{(i % 8) * 16}/28",
       "-o", "com.docker.network.bridge.inhibit_ipv4=true", "--label", label,
       "--label", "agentic-egress-policy=default-deny", net)
    nets.append(net)
    sh("docker", "run", "-d", "--name", name, "--user", "0:0", "--cap-drop", "ALL",
       "--cap-add", "SETUID", "--cap-add", "SETGID", "--security-opt", "no-new-privileges",
       "--tmpfs", "/run/agentic:rw,noexec,nosuid,nodev,mode=0700,uid=200000,gid=200000,size=64k",
       "--sysctl", "net.ipv6.conf.all.disable_ipv6=1",
       "--mount", f"type=bind,source={sbx},target=/run/agentic-sandbox,readonly",
       "--mount", f"type=bind,source={BIN},target=/sbin/agentic-init,readonly",
       "--mount", f"type=bind,source={ws},target=/workspace",
       "--entrypoint", "/bin/sleep", "--network", net, "--pids-limit", "512",
       "--memory", "1g", "--cpus", "1", "--restart", "no", "--label", label,
       "--label", f"agentic-managed-network={net}", IMAGE, "60")
    t = (time.monotonic() - t0) * 1000
    sh("docker", "rm", "-f", name)
    sh("docker", "network", "rm", net)
    nets.remove(net)
    return t
