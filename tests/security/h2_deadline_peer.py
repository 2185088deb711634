#!/usr/bin/python3
"""h2_deadline_peer.py: an independent raw HTTP/2 peer for tests/security/test_grpc_deadline_window
(plain sockets, frames and HPACK by hand, no gRPC or HTTP/2 library).

A peer that grants a server-streaming call a small flow-control window (SETTINGS_INITIAL_WINDOW_
SIZE) and never more must still see the call end at its deadline: RST_STREAM(CANCEL) when a
message is cut on the wire (trailers after a cut message would read as a broken stream), trailers
with grpc-status 4 (DEADLINE_EXCEEDED) when what arrived ends on a message boundary (a cut
message gets the server's 500 ms grace to finish, then the reset); never DATA beyond the window. Used as:

  h2_deadline_peer.py grpctest SOCKET   against agentic-grpctest serve --large-buffers 2
  h2_deadline_peer.py admin SOCKET NAME against agenticd's admin socket, sandbox NAME

Prints one line per check: `ok<TAB>what<TAB>detail` or `not_ok<TAB>what<TAB>detail`.
"""
import socket
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
CANCEL = 0x8
# RFC 7541 Appendix A, index i + 1 (the server's encoder uses the static table only)
STATIC = [(":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"),
          (":path", "/index.html"), (":scheme", "http"), (":scheme", "https"),
          (":status", "200"), (":status", "204"), (":status", "206"), (":status", "304"),
          (":status", "400"), (":status", "404"), (":status", "500")] + [
          (n, "") for n in (
              "accept-charset", "accept-encoding", "accept-language", "accept-ranges", "accept",
              "access-control-allow-origin", "age", "allow", "authorization", "cache-control",
              "content-disposition", "content-encoding", "content-language", "content-length",
              "content-location", "content-range", "content-type", "cookie", "date", "etag",
              "expect", "expires", "from", "host", "if-match", "if-modified-since",
              "if-none-match", "if-range", "if-unmodified-since", "last-modified", "link",
              "location", "max-forwards", "proxy-authenticate", "proxy-authorization", "range",
              "referer", "refresh", "retry-after", "server", "set-cookie",
              "strict-transport-security", "transfer-encoding", "user-agent", "vary", "via",
              "www-authenticate")]
STATIC[15] = ("accept-encoding", "gzip, deflate")


def results_line(good, what, detail=""):
    print(("ok" if good else "not_ok") + "\t" + what + "\t" +
          str(detail).replace("\n", "\\n").replace("\t", " ")[:400])
    sys.stdout.flush()


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def hp_int(prefix, flags, v):
    mask = (1 << prefix) - 1
    if v < mask:
        return bytes([flags | v])
    out, v = bytearray([flags | mask]), v - mask
    while v >= 0x80:
        out.append(0x80 | (v & 0x7f))
        v >>= 7
    out.append(v)
    return bytes(out)


def hp_literal(name, value):
    """Literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    n, v = name.encode(), value.encode()
    return b"\x00" + hp_int(7, 0, len(n)) + n + hp_int(7, 0, len(v)) + v


def hp_read_int(b, i, prefix):
    mask = (1 << prefix) - 1
    v, i = b[i] & mask, i + 1
    if v < mask:
        return v, i
    shift = 0
    while True:
        c, i = b[i], i + 1
        v += (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def hp_read_str(b, i):
    if b[i] & 0x80:
        raise ValueError("a Huffman string (the server's encoder sends none)")
    n, i = hp_read_int(b, i, 7)
    return b[i:i + n].decode("latin-1"), i + n


def hp_decode(b):
    """Decodes a block that uses the static table only (what the server sends)."""
    fields, i = [], 0
    while i < len(b):
        c = b[i]
        if c & 0x80:
            idx, i = hp_read_int(b, i, 7)
            fields.append(STATIC[idx - 1])
            continue
        if c & 0xe0 == 0x20:  # dynamic table size update
            _, i = hp_read_int(b, i, 5)
            continue
        idx, i = hp_read_int(b, i, 6 if c & 0x40 else 4)
        if idx:
            name = STATIC[idx - 1][0]
        else:
            name, i = hp_read_str(b, i)
        value, i = hp_read_str(b, i)
        fields.append((name, value))
    return fields


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(0x80 | (v & 0x7f))
        v >>= 7
    out.append(v)
    return bytes(out)


def pb_field(num, value):
    """A protobuf field: int (varint) or bytes/str (length-delimited)."""
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


class Call:
    """One connection, one call on stream 1; what the server sent, with times."""

    def __init__(self, sock_path, path, message, window, timeout, grant):
        self.events, self.data, self.closed = [], bytearray(), False
        self.grant = grant
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(sock_path)
        self.buf = b""
        settings = struct.pack(">HI", 2, 0) + struct.pack(">HI", 4, window)
        hdrs = b"".join(hp_literal(k, v) for k, v in (
            (":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", "localhost"), ("content-type", "application/grpc"),
            ("te", "trailers"), ("grpc-timeout", timeout)))
        body = b"\x00" + struct.pack(">I", len(message)) + message
        self.t0 = time.monotonic()
        self.s.sendall(PREFACE + frame(SETTINGS, 0, 0, settings) +
                       frame(HEADERS, END_HEADERS, 1, hdrs) + frame(DATA, END_STREAM, 1, body))

    def run(self, wait):
        """Reads until the stream ends or wait seconds pass; returns the end event or None."""
        limit = self.t0 + wait
        while True:
            end = self._parse()
            if end:
                return end
            left = limit - time.monotonic()
            if left <= 0 or self.closed:
                return None
            self.s.settimeout(left)
            try:
                got = self.s.recv(65536)
            except socket.timeout:
                return None
            except OSError as e:
                self.events.append(("error", time.monotonic() - self.t0, str(e)))
                self.closed = True
                return None
            if not got:
                self.events.append(("eof", time.monotonic() - self.t0, None))
                self.closed = True
                return None
            self.buf += got

    def _parse(self):
        while len(self.buf) >= 9:
            n = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + n:
                return None
            ftype, flags = self.buf[3], self.buf[4]
            sid = int.from_bytes(self.buf[5:9], "big") & 0x7fffffff
            p, self.buf = self.buf[9:9 + n], self.buf[9 + n:]
            t = time.monotonic() - self.t0
            if ftype == SETTINGS and not flags & ACK:
                self.s.sendall(frame(SETTINGS, ACK, 0))
            elif ftype == PING and not flags & ACK:
                self.s.sendall(frame(PING, ACK, 0, p))
            elif ftype == PING:
                self.events.append(("pong", t, p))
            elif ftype == DATA and sid == 1:
                self.events.append(("data", t, len(p)))
                self.data += p
                if self.grant and p:
                    self.s.sendall(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", len(p))) +
                                   frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", len(p))))
                if flags & END_STREAM:
                    return ("end_data", t, None)
            elif ftype == HEADERS and sid == 1:
                ev = ("trailers" if flags & END_STREAM else "headers", t, dict(hp_decode(p)))
                self.events.append(ev)
                if flags & END_STREAM:
                    return ev
            elif ftype == RST_STREAM and sid == 1:
                ev = ("rst", t, int.from_bytes(p[:4], "big"))
                self.events.append(ev)
                return ev
            elif ftype == GOAWAY:
                ev = ("goaway", t, int.from_bytes(p[4:8], "big"))
                self.events.append(ev)
                return ev
        return None

    def ping(self, wait=2.0):
        """True when the connection still answers a PING."""
        self.s.sendall(frame(PING, 0, 0, b"stillup!"))
        self.t0 = time.monotonic()
        while not any(e[0] == "pong" for e in self.events):
            if self.run(wait) or self.closed or time.monotonic() - self.t0 >= wait:
                break
        return any(e[0] == "pong" for e in self.events)

    def cut(self):
        """Bytes of a message begun in the DATA received and not finished (0: on a boundary)."""
        i = 0
        while i + 5 <= len(self.data):
            n = int.from_bytes(self.data[i + 1:i + 5], "big")
            if i + 5 + n > len(self.data):
                return len(self.data) - i
            i += 5 + n
        return len(self.data) - i

    def summary(self):
        return ", ".join(f"{k}@{t:.2f}s:{v}" for k, t, v in self.events[:12])

    def close(self):
        self.s.close()


def check_blocked(c, end, window, what, want_cut):
    """The checks for a call held at its window past its 300 ms deadline."""
    cut = c.cut()
    results_line(len(c.data) == window and (cut > 0) == want_cut,
                 f"{what}: the server sent exactly the {window}-octet window "
                 f"({'a message cut' if want_cut else 'whole messages'}), no DATA after it",
                 f"{len(c.data)} octets, {cut} of a cut message; {c.summary()}")
    if want_cut:
        good = end is not None and end[0] == "rst" and end[2] == CANCEL and end[1] < 2.0
        results_line(good, f"{what}: the deadline ends it with RST_STREAM(CANCEL) within 2 s",
                     f"end {end}; {c.summary()}")
        results_line(not any(e[0] == "trailers" for e in c.events),
                     f"{what}: no trailers after the cut message", c.summary())
    else:
        good = end is not None and end[0] == "trailers" and \
            end[2].get("grpc-status") == "4" and end[1] < 2.0
        results_line(good, f"{what}: the deadline ends it with trailers grpc-status 4 "
                     "within 2 s", f"end {end}; {c.summary()}")


def grpctest(sock):
    path = "/agentic.test.v1.Test/ServerStream"
    held = []
    # 1000 messages of 20000 bytes: the handler is still sending (its 4 MiB send buffer full)
    # when the deadline passes. They take large buffers, two in all: four such calls held at
    # their windows on connections kept open show each call's buffer came back at its reset.
    for i in range(4):
        c = Call(sock, path, pb_field(1, 1000) + pb_field(2, 20000), 100, "300m", False)
        check_blocked(c, c.run(3.0), 100, f"grpctest call {i + 1}, handler sending "
                      "(window 100)", True)
        held.append(c)
    results_line(held[-1].ping(), "the connection of a reset call is still served (PING)",
                 held[-1].summary())
    # 50 messages: all queued, the handler has finished (status OK decided, not sent)
    c = Call(sock, path, pb_field(1, 50) + pb_field(2, 20000), 100, "300m", False)
    check_blocked(c, c.run(3.0), 100, "grpctest call, handler finished (window 100)", True)
    held.append(c)
    # Messages of 93 bytes are 100 octets with their prefix: the window ends on a boundary.
    for count, what in ((100000, "handler sending"), (5, "handler finished")):
        c = Call(sock, path, pb_field(1, count) + pb_field(2, 93), 100, "300m", False)
        check_blocked(c, c.run(3.0), 100, f"grpctest call on a message boundary, {what} "
                      "(window 100)", False)
        c.close()
    # idle: Hang never answers, nothing is pending
    c = Call(sock, "/agentic.test.v1.Test/Hang", b"", 65535, "300m", True)
    end = c.run(3.0)
    results_line(end is not None and end[0] == "trailers" and end[2].get("grpc-status") == "4"
                 and end[1] < 2.0, "an idle call gets trailers grpc-status 4 at its deadline",
                 f"end {end}; {c.summary()}")
    c.close()
    # positive control: a new connection with a normal window gets the whole stream
    c = Call(sock, path, pb_field(1, 50) + pb_field(2, 20000), 65535, "20S", True)
    end = c.run(20.0)
    results_line(end is not None and end[0] == "trailers" and end[2].get("grpc-status") == "0"
                 and len(c.data) == 50 * (5 + 1 + 3 + 20000 + 2) - 2 and c.cut() == 0,
                 "positive control: a new connection, normal window: 50 messages, status 0",
                 f"{len(c.data)} octets; end {end}; {c.summary()}")
    for h in held + [c]:
        h.close()


def admin(sock, name):
    path = "/agentic.sandbox.v1.AgentService/Exec"
    for cmd, what in ((["-c", "yes xxxxxxxxxxxxxxxx"], "yes"),
                      (["-c", "head -c 10000000 /dev/zero"], "head -c 10000000 /dev/zero")):
        req = pb_field(1, name) + pb_field(2, "/bin/sh") + b"".join(pb_field(3, a) for a in cmd)
        c = Call(sock, path, req, 100, "300m", False)
        end = c.run(3.0)
        check_blocked(c, end, 100, f"admin Exec `{what}` (window 100)", True)
        results_line(c.ping(), f"admin Exec `{what}`: its connection is still served (PING)",
                     c.summary())
        c.close()
    # idle: a command with no output past the deadline
    req = pb_field(1, name) + pb_field(2, "/bin/sh") + pb_field(3, "-c") + pb_field(3, "sleep 5")
    c = Call(sock, path, req, 65535, "300m", True)
    end = c.run(3.0)
    results_line(end is not None and end[0] == "trailers" and end[2].get("grpc-status") == "4"
                 and end[1] < 2.0, "admin Exec idle (sleep 5): trailers grpc-status 4 at its "
                 "deadline", f"end {end}; {c.summary()}")
    c.close()
    # positive control: the same kind of call, normal window, a new connection
    req = pb_field(1, name) + pb_field(2, "/bin/sh") + pb_field(3, "-c") + \
        pb_field(3, "head -c 200000 /dev/zero")
    c = Call(sock, path, req, 65535, "20S", True)
    end = c.run(20.0)
    results_line(end is not None and end[0] == "trailers" and end[2].get("grpc-status") == "0"
                 and len(c.data) > 200000 and c.cut() == 0,
                 "positive control: admin Exec, normal window, new connection: all output, "
                 "status 0", f"{len(c.data)} octets; end {end}; {c.summary()}")
    c.close()


if __name__ == "__main__":
    if sys.argv[1] == "grpctest":
        grpctest(sys.argv[2])
    else:
        admin(sys.argv[2], sys.argv[3])
