"""test_egress_worker.py: `agentic egress-worker` run directly, as agenticd would start it.

Driven by tests/integration/test_egress_worker (TAP on stdout). This file stands in for
agenticd: it makes the socketpairs (fd 3 data, SOCK_STREAM; fd 4 ctl, SOCK_SEQPACKET), sends
the first control packet, answers a secret request, and reads the last packet, the audit record
(agenticd writes the line from it; the worker holds no file). Upstreams are loopback servers of its own: a TLS server with a
certificate from a CA the test makes (openssl), a raw TCP echo that counts what it received,
and TLS/plain HTTP servers that record the request they got.
"""
import atexit
import base64
import json
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ["AGENTIC_BIN"]
TMP = tempfile.mkdtemp(prefix="egress-worker.")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
tap_n = 0
tap_failed = 0


def ok(what):
    global tap_n
    tap_n += 1
    print(f"ok {tap_n} - {what}", flush=True)


def not_ok(what, detail=""):
    global tap_n, tap_failed
    tap_n += 1
    tap_failed += 1
    print(f"not ok {tap_n} - {what}", flush=True)
    for line in str(detail).splitlines():
        print(f"# {line}", flush=True)


def check(what, cond, detail=""):
    if cond:
        ok(what)
    else:
        not_ok(what, detail)
    return cond


# ---- a test CA and a certificate for localhost ----

def make_certs():
    ca_key, ca_crt = f"{TMP}/ca.key", f"{TMP}/ca.pem"
    key, csr, crt = f"{TMP}/srv.key", f"{TMP}/srv.csr", f"{TMP}/srv.pem"
    ext = f"{TMP}/ext.cnf"
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", ca_key, "-out", ca_crt, "-days", "2", "-subj", "/CN=egress test CA")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
        "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    return ca_crt, crt, key


# ---- upstreams ----

class Upstream:
    """A loopback server on 127.0.0.1: each connection handled by handler(conn, self) in a
    thread; received bytes are counted and kept."""

    def __init__(self, handler, tls=None, bind="127.0.0.1"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((bind, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.handler = handler
        self.tls = tls
        self.received = bytearray()
        self.connections = 0
        self.lock = threading.Lock()
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        try:
            c.settimeout(20)
            if self.tls:
                c = self.tls.wrap_socket(c, server_side=True)
            self.handler(c, self)
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                c.close()
            except OSError:
                pass

    def note(self, data):
        with self.lock:
            self.received += data


def echo_handler(c, up):
    while True:
        d = c.recv(65536)
        if not d:
            break
        up.note(d)
        c.sendall(d)
    try:
        c.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def tls_greeter(c, up):
    """TLS: reads a line, answers 'hello <line>' and closes."""
    buf = b""
    while not buf.endswith(b"\n"):
        d = c.recv(4096)
        if not d:
            return
        buf += d
    up.note(buf)
    c.sendall(b"hello " + buf)
    c.unwrap() if hasattr(c, "unwrap") else None


def http_recorder(c, up):
    """HTTP/1.1: reads one request head (and a Content-Length body), answers 200 with a body
    that repeats the request's x-api-key value (so a route's masking shows)."""
    buf = recv_head(c)
    up.note(buf)
    key = b""
    for line in buf.split(b"\r\n"):
        if line.lower().startswith(b"x-api-key:"):
            key = line.split(b":", 1)[1].strip()
    body = b"you sent key=" + key + b"\n"
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" %
              (len(body), body))


def own_private_address():
    """A private IPv4 address of this host's (10/8, 172.16/12, 192.168/16), or None."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for m in re.finditer(r"inet (\d+\.\d+\.\d+\.\d+)/", out):
        a = [int(x) for x in m.group(1).split(".")]
        if a[0] == 10 or (a[0] == 172 and 16 <= a[1] < 32) or (a[0] == 192 and a[1] == 168):
            return m.group(1)
    return None


# ---- a ClientHello made by hand (for raw tunnels) ----

def client_hello(name):
    u16 = lambda v: struct.pack(">H", v)
    n = name.encode()
    sni = u16(0) + u16(len(n) + 5) + u16(len(n) + 3) + b"\x00" + u16(len(n)) + n
    body = (u16(0x0303) + os.urandom(32) + b"\x00" + u16(2) + b"\x13\x01" + b"\x01\x00" +
            u16(len(sni)) + sni)
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + u16(len(hs)) + hs


# ---- the worker, as agenticd starts it ----

class Worker:
    def __init__(self, name, policy, rate_limited=False, secret=None, extra=None,
                 audit_later=False, own=None, extra_fds=0):
        """audit_later: as agenticd starts a worker ahead, waiting a moment for its start
        packet; extra_fds: descriptors sent with the start packet (none is what agenticd sends
        for a call); own: this host's addresses as agenticd sends them (a list of IP strings)
        when the worker asks, at dial."""
        self.data, data_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ctl, ctl_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        hi = [fcntl_dup(data_w.fileno()), fcntl_dup(ctl_w.fileno())]

        # Only 3 and 4 reach the worker: python's own descriptors are close-on-exec, the
        # copies above too, and dup2 makes the two inheritable.
        def place():
            for i, fd in enumerate(hi):
                os.dup2(fd, 3 + i)

        self.stderr = open(f"{TMP}/{name}.stderr", "w+")
        self.proc = subprocess.Popen([BIN, "egress-worker"], stdin=subprocess.DEVNULL,
                                     stdout=self.stderr, stderr=self.stderr,
                                     preexec_fn=place, close_fds=False)
        for fd in hi:
            os.close(fd)
        data_w.close()
        ctl_w.close()
        start = {"sandbox": "s1", "instance": "inst-" + name, "conn": 7,
                 "rate_limited": rate_limited, "policy": policy, "io_timeout_ms": 5000}
        if own is not None:
            start["own"] = True
        self.own = own
        self.own_asked = 0
        start.update(extra or {})
        if audit_later:
            time.sleep(0.2)  # started ahead: it waits for its connection
        if extra_fds:
            nul = [os.open("/dev/null", os.O_RDONLY) for _ in range(extra_fds)]
            socket.send_fds(self.ctl, [json.dumps(start).encode()], nul)
            for fd in nul:
                os.close(fd)
        else:
            self.ctl.send(json.dumps(start).encode())
        self.secret = secret
        self.packets = []
        self.secret_asked = []
        self.ctl_thread = threading.Thread(target=self.ctl_loop, daemon=True)
        self.ctl_thread.start()
        self.data.settimeout(20)

    def ctl_loop(self):
        while True:
            try:
                p = self.ctl.recv(65536)
            except OSError:
                return
            if not p:
                return
            msg = json.loads(p)
            if msg == {"own": True}:
                self.own_asked += 1
                own = self.own or []
                self.ctl.send(json.dumps({"own": len(own)}).encode())
                rec = b""
                for a in own:
                    fam = socket.AF_INET6 if ":" in a else socket.AF_INET
                    raw = socket.inet_pton(fam, a)
                    rec += (b"\x06" if fam == socket.AF_INET6 else b"\x04") + raw.ljust(16, b"\0")
                if rec:  # none: no packet
                    self.ctl.send(rec)
            elif "secret" in msg and len(msg) == 1:
                self.secret_asked.append(msg["secret"])
                if self.secret is None:
                    self.ctl.send(b'{"error":"secret_unavailable"}')
                else:
                    self.ctl.send(json.dumps(
                        {"secret_b64": base64.b64encode(self.secret).decode()}).encode())
            else:
                self.packets.append(p)

    def read_until_closed(self, limit=1 << 20):
        out = b""
        while len(out) < limit:
            try:
                d = self.data.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not d:
                break
            out += d
        return out

    def finish(self, timeout=30):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.ctl_thread.join(timeout=5)
        self.records = [p for p in self.packets if b'"decision"' in p]
        self.audit_raw = b"".join(r + b"\n" for r in self.records)
        self.audit = json.loads(self.records[0]) if self.records else None
        self.rc = rc
        self.stderr.seek(0)
        self.err = self.stderr.read()
        return self.audit


def fcntl_dup(fd):
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)


def tls_close(t):
    """As agenticd does for a workload that read to the end and closed: the upstream's close
    arrives, then eof is a half-close (shutdown SHUT_WR) and the socket stays open until the
    worker's side ends too."""
    try:
        while t.recv(4096):
            pass
        t.shutdown(socket.SHUT_WR)
        while socket.socket.recv(t, 4096):
            pass
    except (OSError, ssl.SSLError):
        pass
    t.close()


def recv_head(sock):
    """What sock sends until the end of a head (CRLFCRLF), or its eof."""
    resp = b""
    while b"\r\n\r\n" not in resp:
        d = sock.recv(4096)
        if not d:
            break
        resp += d
    return resp


def connect_head(w, host_port):
    w.data.sendall(f"CONNECT {host_port} HTTP/1.1\r\nHost: {host_port}\r\n\r\n".encode())
    return recv_head(w.data)


AUDIT_KEYS = ["ts", "sandbox", "instance", "conn", "kind", "method", "host", "port", "path",
              "decision", "reason", "status", "bytes_up", "bytes_down", "duration_ms", "end"]


def audit_ok(what, w, **want):
    a = w.audit
    if a is None:
        return not_ok(what, f"no audit line (rc={w.rc}) stderr: {w.err[-500:]}")
    bad = [f"{k}={a.get(k)!r} (want {v!r})" for k, v in want.items() if a.get(k) != v]
    if list(a.keys()) != AUDIT_KEYS:
        bad.append(f"keys {list(a.keys())}")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", a.get("ts", "")):
        bad.append(f"ts {a.get('ts')!r}")
    if w.audit_raw.count(b"\n") != 1 or not w.audit_raw.endswith(b"\n"):
        bad.append("not exactly one line")
    if not w.packets or w.packets[-1] != w.audit_raw.rstrip(b"\n"):
        bad.append(f"last ctl packet differs: {w.packets[-1:]!r}")
    if w.rc != 0:
        bad.append(f"exit {w.rc}")
    check(what, not bad, "; ".join(bad) + f"\nline: {w.audit_raw!r}\nstderr: {w.err[-400:]}")


def main():
    ca, crt, key = make_certs()
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(crt, key)
    tls_up = Upstream(tls_greeter, tls=sctx)
    echo_up = Upstream(echo_handler)
    count_up = Upstream(echo_handler)
    http_up = Upstream(http_recorder)
    route_up = Upstream(http_recorder, tls=sctx)
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.load_verify_locations(ca)
    loop = ["loopback"]

    # 1. CONNECT allowed: a real TLS session through the tunnel, bytes both ways.
    w = Worker("allow", {"allow": [f"localhost:{tls_up.port}"], "allow_ranges": loop})
    resp = connect_head(w, f"localhost:{tls_up.port}")
    check("CONNECT allowed: 200 Connection established",
          resp == b"HTTP/1.1 200 Connection established\r\n\r\n", repr(resp))
    got = b""
    try:
        t = cctx.wrap_socket(w.data, server_hostname="localhost")
        t.sendall(b"ping through the tunnel\n")
        while not got.endswith(b"\n"):
            d = t.recv(4096)
            if not d:
                break
            got += d
        tls_close(t)
    except (OSError, ssl.SSLError) as e:
        got = repr(e).encode()
    check("CONNECT allowed: TLS through the tunnel, both ways",
          got == b"hello ping through the tunnel\n", repr(got))
    w.finish()
    audit_ok("CONNECT allowed: audit line", w, kind="tunnel", method="CONNECT",
             host="localhost", port=tls_up.port, path="", decision="allow",
             reason="allowlisted", status=200, end="closed", sandbox="s1",
             instance="inst-allow", conn=7)
    check("CONNECT allowed: bytes counted both ways",
          w.audit and w.audit["bytes_up"] > 100 and w.audit["bytes_down"] > 100, w.audit)

    # 2. SNI mismatch: closed, the upstream got not a byte.
    before = len(count_up.received)
    w = Worker("sni", {"allow": [f"localhost:{count_up.port}"], "allow_ranges": loop})
    resp = connect_head(w, f"localhost:{count_up.port}")
    w.data.sendall(client_hello("evil.example") + b"after the hello")
    rest = w.read_until_closed()
    w.finish()
    time.sleep(0.2)
    check("SNI mismatch: the tunnel closes with nothing more sent", rest == b"", repr(rest))
    check("SNI mismatch: the upstream saw zero bytes (it was connected to)",
          len(count_up.received) == before and count_up.connections >= 1,
          f"received {len(count_up.received) - before}, connections {count_up.connections}")
    audit_ok("SNI mismatch: audit sni_mismatch", w, kind="tunnel", decision="deny",
             reason="sni_mismatch", status=200, bytes_up=0, bytes_down=0)
    # positive control of the counter: the same upstream counts a matching hello's bytes
    w = Worker("sni-ok", {"allow": [f"localhost:{count_up.port}"], "allow_ranges": loop})
    connect_head(w, f"localhost:{count_up.port}")
    hello = client_hello("LOCALHOST")
    w.data.sendall(hello)
    echoed = b""
    while len(echoed) < len(hello):
        d = w.data.recv(65536)
        if not d:
            break
        echoed += d
    w.data.shutdown(socket.SHUT_WR)
    w.read_until_closed()
    w.finish()
    check("SNI match (any case): the counting upstream got the hello and echoed it",
          echoed == hello and bytes(count_up.received[before:]) == hello,
          f"echoed {len(echoed)}, counted {len(count_up.received) - before}")
    audit_ok("SNI match: audit allow, closed", w, decision="allow", reason="allowlisted",
             bytes_up=len(hello), bytes_down=len(hello), end="closed")
    w = Worker("nosni", {"allow": [f"localhost:{count_up.port}"], "allow_ranges": loop})
    connect_head(w, f"localhost:{count_up.port}")
    w.data.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    w.read_until_closed()
    w.finish()
    audit_ok("no TLS after CONNECT: audit no_sni", w, decision="deny", reason="no_sni",
             bytes_up=0)

    # 3. A host not allowed: 403, the reason word as the body, the policy never.
    w = Worker("deny", {"allow": [f"localhost:{tls_up.port}", "secret-name.example"],
                        "allow_ranges": loop})
    w.data.sendall(b"CONNECT other.example:443 HTTP/1.1\r\n\r\n")
    resp = w.read_until_closed()
    w.finish()
    check("denied host: 403 with Connection: close, text/plain, the reason word",
          resp.startswith(b"HTTP/1.1 403 Forbidden\r\n") and b"\r\nConnection: close\r\n" in resp
          and b"\r\nContent-Type: text/plain\r\n" in resp
          and resp.endswith(b"\r\n\r\nhost_not_allowed\n"), repr(resp))
    check("denied host: the answer names no policy entry", b"secret-name" not in resp, repr(resp))
    audit_ok("denied host: audit", w, kind="tunnel", host="other.example", port=443,
             decision="deny", reason="host_not_allowed", status=403, bytes_up=0)

    # 4. A name resolving to loopback, without allow_ranges: refused before any connect.
    conns = echo_up.connections
    w = Worker("addr", {"allow": [f"localhost:{echo_up.port}"]})
    w.data.sendall(f"CONNECT localhost:{echo_up.port} HTTP/1.1\r\n\r\n".encode())
    resp = w.read_until_closed()
    w.finish()
    check("loopback without allow_ranges: 403 address_not_allowed, no connection made",
          resp.startswith(b"HTTP/1.1 403 ") and resp.endswith(b"address_not_allowed\n")
          and echo_up.connections == conns, repr(resp))
    audit_ok("loopback without allow_ranges: audit", w, decision="deny",
             reason="address_not_allowed", status=403)
    w = Worker("addr-report", {"mode": "report", "allow": []})
    w.data.sendall(f"CONNECT 127.0.0.1:{echo_up.port} HTTP/1.1\r\n\r\n".encode())
    resp = w.read_until_closed()
    w.finish()
    audit_ok("loopback in report mode: still refused", w, decision="deny",
             reason="address_not_allowed", status=403)

    # A private address the host holds itself (docker0's, or any other of its own) is "host",
    # not "private": refused with ["private"], allowed with ["host"] (the positive control).
    own = own_private_address()
    if own is None:
        print(f"ok {tap_n + 1} # SKIP own address: this host holds no private IPv4 address")
        globals()["tap_n"] += 1
    else:
        any_up = Upstream(echo_handler, bind="0.0.0.0")
        # allowed, it connects and answers 200, then ends for want of a hello (no_sni)
        for ranges, want, status, conns in ((["private"], "address_not_allowed", 403, 0),
                                            (["host"], "no_sni", 200, 1)):
            before = any_up.connections
            w = Worker("own-" + ranges[0], {"allow": [f"{own}:{any_up.port}"],
                                            "allow_ranges": ranges})
            connect_head(w, f"{own}:{any_up.port}")
            w.data.close()
            w.finish()
            time.sleep(0.1)
            audit_ok(f"this host's own {own} with allow_ranges {ranges}: {want}", w,
                     host=own, reason=want, status=status)
            check(f"this host's own {own} with allow_ranges {ranges}: {conns} connection(s)",
                  any_up.connections - before == conns, any_up.connections - before)

    # A worker started ahead (agenticd's spare) takes its connection with its start packet,
    # and this host's addresses from agenticd's list (asked for at dial) instead
    # of its own getifaddrs: with the own address in the list it is refused as above; with an empty
    # list the same address is private only (allowed with ["private"]), which the worker's
    # own reading (the cases above) never allows: so the list is what it judged by.
    if own is not None:
        for listed, want, status, conns in (([own, "::1"], "address_not_allowed", 403, 0),
                                            ([], "no_sni", 200, 1)):
            before = any_up.connections
            w = Worker("ahead-" + str(len(listed)), {"allow": [f"{own}:{any_up.port}"],
                                                     "allow_ranges": ["private"]},
                       audit_later=True, own=listed)
            connect_head(w, f"{own}:{any_up.port}")
            w.data.close()
            w.finish()
            time.sleep(0.1)
            audit_ok(f"a worker started ahead, own addresses {listed} from agenticd: {want}, "
                     "in its record", w, host=own,
                     reason=want, status=status)
            check(f"a worker started ahead, own addresses {listed}: {conns} connection(s), "
                  "the list asked for once, at dial",
                  any_up.connections - before == conns and w.own_asked == 1,
                  f"connections {any_up.connections - before}, asked {w.own_asked}")
    # a worker started ahead whose start packet brings two descriptors (one at most: a direct
    # connection's socket or listener) ends at once (exit 1, the start refused) and says
    # nothing: the control is the worker just above
    w = Worker("ahead-2fd", {"allow": ["a.example:443"]}, audit_later=True, extra_fds=2)
    try:
        rc = w.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        w.proc.kill()
        rc = "still running"
    w.ctl_thread.join(timeout=5)
    check("a worker started ahead whose start packet brings two descriptors is refused (exit 1)",
          rc == 1 and not w.packets, f"rc={rc} packets={w.packets}")

    # 5. Rate limited by agenticd: 429.
    w = Worker("rate", {"allow": [f"localhost:{echo_up.port}"], "allow_ranges": loop},
               rate_limited=True)
    w.data.sendall(f"CONNECT localhost:{echo_up.port} HTTP/1.1\r\n\r\n".encode())
    resp = w.read_until_closed()
    w.finish()
    check("rate_limited: 429", resp.startswith(b"HTTP/1.1 429 Too Many Requests\r\n") and
          resp.endswith(b"rate_limited\n"), repr(resp))
    audit_ok("rate_limited: audit", w, decision="deny", reason="rate_limited", status=429)

    # 6. A bad head: 400.
    w = Worker("bad", {"allow": []})
    w.data.sendall(b"GET /origin-form HTTP/1.1\r\nHost: x\r\n\r\n")
    resp = w.read_until_closed()
    w.finish()
    check("origin form: 400 bad_request", resp.startswith(b"HTTP/1.1 400 Bad Request\r\n"),
          repr(resp))
    audit_ok("origin form: audit kind unknown", w, kind="unknown", method="", host="", port=0,
             decision="deny", reason="bad_request", status=400)

    # 7. The byte cap: up plus down, exactly, then cut.
    cap = 20000
    w = Worker("cap", {"allow": [f"localhost:{echo_up.port}"], "allow_ranges": loop,
                       "max_bytes_per_connection": cap})
    connect_head(w, f"localhost:{echo_up.port}")
    hello = client_hello("localhost")
    got = bytearray()

    def reader():
        while True:
            try:
                d = w.data.recv(65536)
            except OSError:
                return
            if not d:
                return
            got.extend(d)

    rt = threading.Thread(target=reader)
    rt.start()
    try:
        w.data.sendall(hello + b"x" * 100000)
    except OSError:
        pass
    rt.join(timeout=20)
    w.finish()
    a = w.audit or {}
    check("byte cap: cut at up + down == max_bytes_per_connection",
          a.get("bytes_up", 0) + a.get("bytes_down", 0) == cap and len(got) == a.get("bytes_down"),
          f"audit {a}, workload got {len(got)}")
    audit_ok("byte cap: audit end byte_cap", w, decision="allow", end="byte_cap", status=200)

    # 8. Report mode: what enforce would deny goes through, audited would_deny.
    w = Worker("report", {"mode": "report", "allow": ["elsewhere.example"],
                          "allow_ranges": loop})
    resp = connect_head(w, f"localhost:{tls_up.port}")
    got = b""
    try:
        t = cctx.wrap_socket(w.data, server_hostname="localhost")
        t.sendall(b"report\n")
        while not got.endswith(b"\n"):
            d = t.recv(4096)
            if not d:
                break
            got += d
        tls_close(t)
    except (OSError, ssl.SSLError) as e:
        got = repr(e).encode()
    w.finish()
    check("report mode: the tunnel works", got == b"hello report\n", repr(got))
    audit_ok("report mode: audit would_deny host_not_allowed", w, decision="would_deny",
             reason="host_not_allowed", status=200, end="closed")

    # 9. agenticd gone mid-transfer (both its ends closed): the worker ends (exit 0) with no
    # record to send and no file to write (agenticd writes the lines: a connection cut by its
    # end has none, docs/EGRESS.md "Audit").
    w = Worker("lost", {"allow": [f"localhost:{echo_up.port}"], "allow_ranges": loop})
    connect_head(w, f"localhost:{echo_up.port}")
    hello = client_hello("localhost")
    w.data.sendall(hello)
    echoed = b""
    while len(echoed) < len(hello):
        d = w.data.recv(65536)
        if not d:
            break
        echoed += d
    w.data.close()
    w.ctl.shutdown(socket.SHUT_RDWR)
    w.ctl.close()
    w.finish()
    check("agenticd gone mid-transfer: the worker ends (exit 0), no record, no file of its own",
          echoed == hello and w.audit is None and w.rc == 0,
          f"{w.audit_raw!r} rc={w.rc} {w.err[-300:]}")

    # 10. Plain forward in report mode (no route): the query reaches the upstream, never the
    # audit; the positive control is the same search finding it where it was sent.
    canary_q = "QUERYCANARY4711"
    w = Worker("plain", {"mode": "report", "allow": [], "allow_ranges": loop})
    w.data.sendall(f"GET http://localhost:{http_up.port}/p/a?token={canary_q} HTTP/1.1\r\n"
                   f"Host: localhost\r\nProxy-Authorization: Basic eA==\r\n\r\n".encode())
    resp = w.read_until_closed()
    w.data.shutdown(socket.SHUT_WR)
    w.finish()
    sent = bytes(http_up.received)
    check("report mode, no route: forwarded in origin form without proxy headers",
          resp.startswith(b"HTTP/1.1 200 OK") and
          sent.startswith(f"GET /p/a?token={canary_q} HTTP/1.1\r\n".encode()) and
          b"proxy-authorization" not in sent.lower() and b"\r\nConnection: close\r\n" in sent,
          f"resp {resp[:80]!r} sent {sent[:200]!r}")
    audit_ok("report mode, no route: audit would_deny, upstream status, path without query", w,
             kind="route", method="GET", host="localhost", port=http_up.port, path="/p/a",
             decision="would_deny", reason="host_not_allowed", status=200, end="closed")
    check("no query in the audit (the search finds it in what the upstream got)",
          canary_q.encode() not in w.audit_raw and canary_q.encode() in sent, w.audit_raw)
    w = Worker("plain-enforce", {"allow": [f"localhost:{http_up.port}"], "allow_ranges": loop})
    w.data.sendall(f"GET http://localhost:{http_up.port}/p HTTP/1.1\r\n\r\n".encode())
    resp = w.read_until_closed()
    w.finish()
    audit_ok("enforce, absolute form without a route: 403", w, kind="route", decision="deny",
             reason="host_not_allowed", status=403)

    # 11. A credential route: the secret is injected upstream, masked on the way back, and in
    # no audit line; the positive control is the upstream's copy of the request.
    secret = b"SECRETCANARY0815"
    route = {"host": "api.test", "upstream": f"https://localhost:{route_up.port}",
             "header": "x-api-key", "value": "{secret}", "secret_file": "/nonexistent/s",
             "methods": ["GET"], "path_prefixes": ["/v1/"]}
    w = Worker("route", {"routes": [route], "allow_ranges": loop}, secret=secret,
               extra={"ca_file": ca})
    w.data.sendall(b"GET http://api.test/v1/models?q=" + canary_q.encode() +
                   b" HTTP/1.1\r\nHost: api.test\r\nx-api-key: mine\r\n\r\n")
    resp = w.read_until_closed()
    w.finish()
    sent = bytes(route_up.received)
    check("route: agenticd was asked for route 0's secret", w.secret_asked == [0],
          w.secret_asked)
    check("route: the upstream got the secret in x-api-key and the query",
          secret in sent and b"x-api-key: mine" not in sent.lower() and
          canary_q.encode() in sent, repr(sent[:300]))
    check("route: the response reaches the workload with the secret masked",
          resp.startswith(b"HTTP/1.1 200") and b"key=" + b"*" * len(secret) in resp and
          secret not in resp, repr(resp[-120:]))
    audit_ok("route: audit", w, kind="route", method="GET", host="api.test", port=80,
             path="/v1/models", decision="allow", reason="route", status=200)
    check("no secret and no query in the route's audit line",
          secret not in w.audit_raw and canary_q.encode() not in w.audit_raw, w.audit_raw)
    w = Worker("route-nosecret", {"routes": [route], "allow_ranges": loop}, secret=None,
               extra={"ca_file": ca})
    w.data.sendall(b"GET http://api.test/v1/x HTTP/1.1\r\n\r\n")
    resp = w.read_until_closed()
    w.finish()
    audit_ok("route: agenticd has no secret: 502 secret_unavailable", w, decision="deny",
             reason="secret_unavailable", status=502)
    w = Worker("route-path", {"routes": [route], "allow_ranges": loop}, secret=secret,
               extra={"ca_file": ca})
    w.data.sendall(b"GET http://api.test/v2/x HTTP/1.1\r\n\r\n")
    resp = w.read_until_closed()
    w.finish()
    audit_ok("route: a path outside the prefixes: 403 path_not_allowed", w, decision="deny",
             reason="path_not_allowed", status=403)
    check("route: no secret asked for a refused path", w.secret_asked == [], w.secret_asked)

    # 12. Report mode and a hello for another name: forwarded, would_deny sni_mismatch.
    before = len(count_up.received)
    w = Worker("sni-report", {"mode": "report", "allow": [f"localhost:{count_up.port}"],
                              "allow_ranges": loop})
    connect_head(w, f"localhost:{count_up.port}")
    hello = client_hello("evil.example")
    w.data.sendall(hello)
    w.data.shutdown(socket.SHUT_WR)
    echoed = w.read_until_closed()
    w.finish()
    check("report mode, SNI mismatch: forwarded", echoed == hello, len(echoed))
    audit_ok("report mode, SNI mismatch: audit would_deny sni_mismatch", w,
             decision="would_deny", reason="sni_mismatch", end="closed", bytes_up=len(hello))

    # 13. No byte either way for io_timeout_ms: end timeout.
    w = Worker("idle", {"allow": [f"localhost:{echo_up.port}"], "allow_ranges": loop},
               extra={"io_timeout_ms": 500})
    connect_head(w, f"localhost:{echo_up.port}")
    w.data.sendall(client_hello("localhost"))
    t0 = time.monotonic()
    w.read_until_closed()
    w.finish()
    audit_ok("idle tunnel: end timeout", w, decision="allow", end="timeout")
    check("idle tunnel: cut after about io_timeout_ms", time.monotonic() - t0 < 5,
          time.monotonic() - t0)

    # 14. The start packet refused: exit 1, no audit line.
    w = Worker("badstart", {"allow": "not a list"})
    w.finish()
    check("a bad policy in the start packet: exit 1, no line", w.rc == 1 and w.audit_raw == b"",
          f"rc={w.rc} {w.audit_raw!r}")

    # 14b. Reuse: a direct connection's worker ("reuse": true) waits after its record with
    # /dev/null in fd 3's place, takes the next start packet (the listener, "listen": true, a
    # new audit file, conn and instance) and serves a connection accepted on it; its control
    # socket's eof then ends it (exit 0). Nothing of the first connection is in the second's.
    w = Worker("reuse", {"allow": [f"localhost:{echo_up.port}"], "allow_ranges": loop},
               extra={"reuse": True})
    resp = connect_head(w, f"localhost:{echo_up.port}")
    w.data.sendall(b"\x00not a hello")
    w.read_until_closed()
    for _ in range(100):
        if w.packets:
            break
        time.sleep(0.05)
    fd3 = ""
    for _ in range(50):
        try:
            fd3 = os.readlink(f"/proc/{w.proc.pid}/fd/3")
        except OSError:
            fd3 = "gone"
        if fd3 == "/dev/null":
            break
        time.sleep(0.05)
    check("reuse: after its record the worker waits, fd 3 on /dev/null",
          resp.startswith(b"HTTP/1.1 200") and len(w.packets) == 1 and w.proc.poll() is None
          and fd3 == "/dev/null", f"{resp!r} packets={w.packets} fd3={fd3} rc={w.proc.poll()}")
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(4)
    start2 = {"sandbox": "s1", "instance": "inst-reuse-second", "conn": 8, "rate_limited": False,
              "policy": {"allow": [f"localhost:{tls_up.port}"], "allow_ranges": loop},
              "io_timeout_ms": 5000, "listen": True, "reuse": True}
    socket.send_fds(w.ctl, [json.dumps(start2).encode()], [lst.fileno()])
    c = socket.create_connection(lst.getsockname(), timeout=10)
    lst.close()
    c.sendall(f"CONNECT localhost:{echo_up.port} HTTP/1.1\r\n\r\n".encode())
    r2 = recv_head(c)
    c.close()
    for _ in range(100):
        if len(w.packets) >= 3:
            break
        time.sleep(0.05)
    check("reuse: armed again, it accepts on the listener it was given and says so",
          len(w.packets) >= 2 and json.loads(w.packets[1]) == {"accepted": True},
          f"packets={w.packets}")
    # the second packet's policy allows only the TLS upstream: the echo one is refused now
    check("reuse: the second connection is judged by the second packet's policy (403)",
          r2.startswith(b"HTTP/1.1 403"), repr(r2))
    w.ctl.shutdown(socket.SHUT_RDWR)
    w.finish()
    recs = [json.loads(x) for x in w.records]
    first, second = recs[:1], recs[1:]
    check("reuse: one record each, with its own conn and instance",
          len(first) == 1 and len(second) == 1 and first[0]["conn"] == 7
          and first[0]["reason"] == "no_sni" and second[0]["conn"] == 8
          and second[0]["instance"] == "inst-reuse-second"
          and second[0]["reason"] == "host_not_allowed" and second[0]["bytes_up"] == 0,
          f"first={first} second={second}")
    check("reuse: its control socket's eof ends it (exit 0)", w.rc == 0, f"rc={w.rc} {w.err}")

    # 15. The applet: reached by name, never listed, never linked.
    r = subprocess.run([BIN, "--list"], capture_output=True, text=True)
    check("--list does not name the internal applet",
          r.returncode == 0 and "egress" not in r.stdout and "agentic-probe" in r.stdout, r.stdout)
    links = f"{TMP}/links"
    os.mkdir(links)
    r = subprocess.run([BIN, "--install", links], capture_output=True, text=True)
    check("--install makes no agentic-egress-worker link",
          r.returncode == 0 and not os.path.lexists(f"{links}/agentic-egress-worker")
          and os.path.islink(f"{links}/agentic-probe"), r.stdout + r.stderr)
    os.symlink(BIN, f"{links}/agentic-egress-worker")
    r = subprocess.run([f"{links}/agentic-egress-worker", "--help"], capture_output=True,
                       text=True)
    check("a link named agentic-egress-worker does not run it", r.returncode == 2,
          r.stdout + r.stderr)
    r = subprocess.run([BIN, "egress-worker", "--help"], capture_output=True, text=True)
    check("agentic egress-worker --help prints its usage",
          r.returncode == 0 and r.stdout.startswith("usage: agentic egress-worker"), r.stdout)
    r = subprocess.run([BIN, "egress-worker", "extra"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    check("an argument is a usage error (exit 2)", r.returncode == 2, r.stderr)
    r = subprocess.run([BIN, "egress-worker"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    check("without fds 3, 4, 5: exit 2", r.returncode == 2, r.stderr)

    print(f"1..{tap_n}")
    return 1 if tap_failed else 0


if __name__ == "__main__":
    sys.exit(main())
