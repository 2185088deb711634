#!/usr/bin/python3
"""test_vm_guest_host.py SOCKET: the host end of a VM guest's control port (QEMU's chardev
socket), for test_vm_guest. Connects (retrying until QEMU made the socket), waits for the
guest init's HTTP/2 client preface and its SETTINGS frame, hangs up; reconnects a second later
and waits for a fresh preface (the guest dialled again); reconnects once more and answers the
Connect call with a ShutdownSignal, then reads until the guest goes away. One line per step:
`NAME ok|fail SECONDS`.
"""
import socket
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
path = sys.argv[1]


def frame(kind, flags, stream, payload):
    return (len(payload).to_bytes(3, "big") + bytes([kind, flags]) +
            stream.to_bytes(4, "big") + payload)


def dial(deadline):
    while time.time() < deadline:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            s.settimeout(0.5)
            return s
        except OSError:
            s.close()
            time.sleep(0.05)
    return None


def preface(s, deadline):
    """The preface and a SETTINGS frame header: (True, what came after), else (False, b"")."""
    buf = b""
    while time.time() < deadline:
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        if not d:
            return False, b""
        buf += d
        if len(buf) >= len(PREFACE) + 9:
            return buf.startswith(PREFACE) and buf[len(PREFACE) + 3] == 4, buf[len(PREFACE):]
    return False, b""


def frames(buf):
    while len(buf) >= 9:
        n = int.from_bytes(buf[:3], "big")
        if len(buf) < 9 + n:
            break
        yield buf[3], int.from_bytes(buf[5:9], "big") & 0x7fffffff
        buf = buf[9 + n:]


def step(name, ok, t0):
    print(f"{name} {'ok' if ok else 'fail'} {time.time() - t0:.1f}", flush=True)
    return ok


def shutdown(s, rest, deadline):
    """Answers the first stream the guest opens with a ShutdownSignal; True once the guest
    closed the connection after it."""
    buf, answered = rest, False
    s.sendall(frame(4, 0, 0, b"") + frame(4, 1, 0, b""))
    while time.time() < deadline:
        if not answered:
            for kind, stream in frames(buf):
                if kind == 1 and stream:
                    # :status 200 (static 8), content-type (static 31, literal, not indexed)
                    block = b"\x88\x0f\x10\x10application/grpc"
                    # ManagementMessage{shutdown(4): ShutdownSignal{reason(1): "test"}}
                    msg = b"\x22\x06\x0a\x04test"
                    s.sendall(frame(1, 4, stream, block) +
                              frame(0, 0, stream, b"\0" + len(msg).to_bytes(4, "big") + msg))
                    answered = True
                    break
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return answered
        if not d:
            return answered
        buf += d
    return False


# the first dial waits for the boot; each later one follows a hangup a second before it
for name, wait in (("first", 90), ("redial", 10), ("shutdown", 10)):
    t0 = time.time()
    s = dial(t0 + wait)
    ok, rest = preface(s, t0 + wait) if s else (False, b"")
    if name == "shutdown":
        ok = ok and shutdown(s, rest, t0 + 60)
    if not step(name, ok, t0) or name == "shutdown":
        break
    s.close()
    time.sleep(1)
