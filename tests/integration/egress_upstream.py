#!/usr/bin/python3
"""egress_upstream.py: the loopback upstream of the egress tests and benchmarks.

    egress_upstream.py serve --cert C --key K --log FILE [--plain] [--port P]
        listens on 127.0.0.1 (an ephemeral port unless --port), HTTPS with C and K (or plain
        HTTP with --plain), prints the port on its first line of stdout, serves until killed.
    egress_upstream.py pattern N
        prints the sha256 of what /bytes?n=N sends (to compare with what a client got).

Every request is logged to FILE, one JSON object per line, before it is answered: this is
"the upstream's view", the one place a credential route's secret may appear:
    {"ts": ..., "method": ..., "path": ..., "version": ..., "headers": [[name, value], ...],
     "sni": the TLS server name the client sent (null: none or plain)}

Paths (any method; a request body is read as framed by Content-Length or chunked):
    /echo                 the request line, headers and body length/sha256 as JSON
    /bytes?n=N[&chunked=1][&kbps=K]   N MiB of a deterministic pattern (every 64 KiB block
                          begins with its index, so a reordered or repeated block changes the
                          sum), with Content-Length unless chunked=1; kbps paces it
    /sse?n=N&ms=M         N server-sent events M ms apart (default 5, 400), flushed one by one
    /redirect             302 to https://elsewhere.invalid/landed
    /reflect?h=NAME[&gz=1]  the value of request header NAME (default x-api-key) inside the body,
                          twice, written a few bytes at a time (so a secret spans reads); with
                          gz=1, gzip'd when the request's Accept-Encoding names gzip
    /status?code=C        an empty answer with that status
"""
import gzip
import hashlib
import http.server
import json
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
import urllib.parse

BLOCK = 64 * 1024
_base = bytearray(BLOCK)
for _i in range(0, BLOCK, 8):
    _base[_i:_i + 8] = struct.pack(">Q", _i)
BASE = bytes(_base)


def block(i):
    """The i-th 64 KiB block of the pattern."""
    return struct.pack(">Q", 0x5A5A000000000000 | i) + BASE[8:]


def pattern_sha(mib):
    h = hashlib.sha256()
    for i in range(mib * 16):
        h.update(block(i))
    return h.hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "egress-upstream"
    sys_version = ""
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms delayed-ACK stall

    def log_message(self, fmt, *args):  # the JSON log is the record; stderr stays quiet
        pass

    def _record(self):
        sni = getattr(self.connection, "egress_sni", None)
        rec = {"ts": time.time(), "method": self.command, "path": self.path,
               "version": self.request_version, "headers": [[k, v] for k, v in self.headers.items()],
               "sni": sni}
        with self.server.log_lock:
            with open(self.server.log_path, "a") as f:
                f.write(json.dumps(rec) + "\n")

    def _body(self):
        n = self.headers.get("Content-Length")
        if n is not None:
            return self.rfile.read(int(n))
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return b""

    def _send(self, status, body, ctype="application/json", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        # head and body in one write (one TLS record): a small answer as most servers send it,
        # so no proxy in between meets Nagle's algorithm against the client's delayed ACK
        self._headers_buffer.append(b"\r\n")
        if self.command != "HEAD":
            self._headers_buffer.append(body)
        self.flush_headers()

    def setup(self):
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()  # here, in the request's thread, not the accept loop

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except (ConnectionError, ssl.SSLError, socket.timeout):
            self.close_connection = True

    def _any(self):
        self._record()
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        body = self._body()
        route = url.path
        if route == "/echo":
            out = {"method": self.command, "path": self.path, "version": self.request_version,
                   "headers": [[k, v] for k, v in self.headers.items()],
                   "body_len": len(body), "body_sha256": hashlib.sha256(body).hexdigest()}
            self._send(200, (json.dumps(out) + "\n").encode())
        elif route == "/bytes":
            self._bytes(int(q.get("n", "1")), q.get("chunked") == "1", int(q.get("kbps", "0")))
        elif route == "/sse":
            self._sse(int(q.get("n", "5")), int(q.get("ms", "400")))
        elif route == "/redirect":
            self._send(302, b"moved\n", "text/plain",
                       [("Location", "https://elsewhere.invalid/landed")])
        elif route == "/reflect":
            self._reflect(self.headers.get(q.get("h", "x-api-key"), ""),
                          q.get("gz") == "1" and "gzip" in self.headers.get("Accept-Encoding", ""))
        elif route == "/status":
            self._send(int(q.get("code", "204")), b"", "text/plain")
        else:
            self._send(404, b"no such path\n", "text/plain")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _any

    def _bytes(self, mib, chunked, kbps):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(mib << 20))
        self.end_headers()
        start = time.monotonic()
        for i in range(mib * 16):
            b = block(i)
            if chunked:
                self.wfile.write(b"%x\r\n" % len(b) + b + b"\r\n")
            else:
                self.wfile.write(b)
            if kbps:
                ahead = (i + 1) * 64 / kbps - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _sse(self, n, ms):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for i in range(n):
            self.wfile.write(b"event: tick\ndata: %d\n\n" % i)
            self.wfile.flush()
            if i + 1 < n:
                time.sleep(ms / 1000.0)

    def _reflect(self, value, gz=False):
        body = ("reflected[" + value + "] again[" + value + "]\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if gz:  # as a server that compresses when asked: the echo in a form the mask cannot read
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        for i in range(0, len(body), 5):  # a secret that spans the relay's reads
            self.wfile.write(body[i:i + 5])
            self.wfile.flush()
            time.sleep(0.002)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):  # a client that went away: nothing to say
        pass


def serve(argv):
    args = {"--plain": False, "--port": "0"}
    it = iter(argv)
    for a in it:
        args[a] = True if a == "--plain" else next(it)
    srv = Server(("127.0.0.1", int(args["--port"])), Handler)
    srv.log_path = args["--log"]
    srv.log_lock = threading.Lock()
    if not args["--plain"]:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args["--cert"], args["--key"])

        def on_sni(tls, name, _ctx):
            tls.egress_sni = name
        ctx.sni_callback = on_sni
        plain_get = srv.get_request

        def get_request():
            sock, addr = plain_get()
            sock.settimeout(30)
            return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr
        srv.get_request = get_request
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "pattern":
        print(pattern_sha(int(sys.argv[2])))
    elif len(sys.argv) >= 2 and sys.argv[1] == "serve":
        serve(sys.argv[2:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
