# e2b_client.py: a small client of agenticd's E2B listener for the tests (python3 http.client
# and raw sockets, traffic to 127.0.0.1 only), and TAP-ish output the bash tests turn into
# their own lines: "PASS what" / "FAIL what" with the detail on "# " lines after it.
import http.client
import json
import socket
import sys


def say(good, what, detail=""):
    print(("PASS " if good else "FAIL ") + what, flush=True)
    if not good and detail:
        for line in str(detail).splitlines()[:20]:
            print("# " + line, flush=True)


class E2B:
    def __init__(self, port, key):
        self.port, self.key = port, key

    def conn(self, timeout=90):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def req(self, method, path, body=None, headers=None, key=True, chunked=False, conn=None):
        """(status, headers dict (lower-case names), parsed JSON or raw bytes)"""
        h = dict(headers or {})
        if key and self.key:
            h.setdefault("X-API-KEY", self.key)
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        own = conn is None
        c = conn or self.conn()
        if chunked and data is not None:
            c.putrequest(method, path)
            for k, v in h.items():
                c.putheader(k, v)
            c.putheader("Transfer-Encoding", "chunked")
            c.endheaders()
            for i in range(0, len(data), 7):  # small chunks, as undici's stream may send
                part = data[i:i + 7]
                c.send(b"%x\r\n%s\r\n" % (len(part), part))
            c.send(b"0\r\n\r\n")
        else:
            c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        hd = {k.lower(): v for k, v in r.getheaders()}
        if own:
            c.close()
        try:
            out = json.loads(raw) if raw else None
        except ValueError:
            out = raw
        return r.status, hd, out

    def create(self, body, **kw):
        return self.req("POST", "/v2/sandboxes", body, **kw)

    def envd(self, method, path, sid, token=None, body=None, headers=None):
        h = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983"}
        if token:
            h["X-Access-Token"] = token
        h.update(headers or {})
        return self.req(method, path, body, headers=h, key=False)


def raw(port, data, timeout=10):
    """Sends data on a fresh socket, returns what comes back until the close or the timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        pass
    s.close()
    return out


if __name__ == "__main__":
    sys.exit(0)
