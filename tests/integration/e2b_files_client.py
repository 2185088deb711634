#!/usr/bin/env python3
"""e2b_files_client.py: a raw HTTP/1.1 client of agenticd's E2B listener (127.0.0.1 only) for
the /files and filesystem.Filesystem tests: what the e2b SDK sends, written out by hand
(http.client), plus TAP helpers. `e2b_files_client.py create` makes a sandbox through the E2B
API and prints "ID TOKEN"; the tests import the rest.

Environment: E2B_PORT, E2B_KEY, and for the envd plane E2B_SANDBOX, E2B_TOKEN."""
import http.client
import json
import os
import socket
import sys
import time

HOST = "127.0.0.1"
BOUNDARY = "----formdata-undici-0" + "31337271828"

_n = 0
_failed = 0


def ok(what):
    global _n
    _n += 1
    print(f"ok {_n} - {what}", flush=True)


def not_ok(what, detail=""):
    global _n, _failed
    _n += 1
    _failed += 1
    print(f"not ok {_n} - {what}", flush=True)
    for line in str(detail).splitlines()[:20]:
        print(f"# {line}", flush=True)


def check(what, cond, detail=""):
    if cond:
        ok(what)
    else:
        not_ok(what, detail)
    return cond


def skip(what, why):
    global _n
    _n += 1
    print(f"ok {_n} # SKIP {what}: {why}", flush=True)


def finish():
    sys.exit(1 if _failed else 0)


def conn(timeout=30):
    return http.client.HTTPConnection(HOST, int(os.environ["E2B_PORT"]), timeout=timeout)


def api(method, path, body=None):
    """Control plane: (status, parsed JSON or text)."""
    c = conn()
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, path, body=data, headers={"X-API-KEY": os.environ["E2B_KEY"],
                                                 "Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw.decode(errors="replace")


def envd_headers(extra=None, user=None):
    h = {"E2b-Sandbox-Id": os.environ["E2B_SANDBOX"], "E2b-Sandbox-Port": "49983",
         "X-Access-Token": os.environ["E2B_TOKEN"]}
    if user:
        import base64
        h["Authorization"] = "Basic " + base64.b64encode(f"{user}:".encode()).decode()
    h.update(extra or {})
    return h


class Answer:
    def __init__(self, status, headers, body, seconds):
        self.status, self.headers, self.body, self.seconds = status, headers, body, seconds

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def ctype(self):
        return (self.headers.get("Content-Type") or "").split(";")[0].strip()

    def __repr__(self):
        return f"{self.status} {self.ctype()} {self.body[:300]!r} ({self.seconds:.2f} s)"


def request(method, target, body=None, headers=None, chunked=False, timeout=30):
    """The answer; status 0 when none came in time (a hang is a failed check, not a crash)."""
    t0 = time.monotonic()
    c = conn(timeout)
    h = dict(headers or {})
    try:
        if chunked:
            c.request(method, target, body=body, headers=h, encode_chunked=True)
        else:
            c.request(method, target, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
    except (OSError, http.client.HTTPException) as e:
        return Answer(0, {}, str(e).encode(), time.monotonic() - t0)
    finally:
        c.close()
    return Answer(r.status, dict(r.getheaders()), data, time.monotonic() - t0)


def rpc(method, msg, user=None, timeout=30):
    """A unary filesystem.Filesystem call, Connect JSON as connect-web sends it."""
    body = json.dumps(msg).encode()
    return request("POST", f"/filesystem.Filesystem/{method}", body,
                   envd_headers({"Content-Type": "application/json",
                                 "Connect-Protocol-Version": "1"}, user), timeout=timeout)


def q(s):
    from urllib.parse import quote
    return quote(s, safe="")


def get_file(path, user=None, timeout=30):
    target = f"/files?path={q(path)}" + (f"&username={q(user)}" if user else "")
    return request("GET", target, headers=envd_headers(), timeout=timeout)


def multipart(parts, boundary=BOUNDARY):
    """parts: [(filename, bytes)] as undici's FormData writes them."""
    out = b""
    for fn, data in parts:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"{fn}\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
        out += data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def pieces(data, size):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def post_files(parts, path=None, user=None, piece=65536, extra=None, timeout=60):
    """The SDK's multipart upload, its body chunked."""
    target = "/files" + (f"?path={q(path)}" if path else "")
    if user:
        target += ("&" if path else "?") + f"username={q(user)}"
    h = envd_headers({"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
    h.update(extra or {})
    return request("POST", target, pieces(multipart(parts), piece), h, chunked=True,
                   timeout=timeout)


def post_octet(path, data, piece=65536, extra=None, timeout=60):
    h = envd_headers({"Content-Type": "application/octet-stream"})
    h.update(extra or {})
    return request("POST", f"/files?path={q(path)}", pieces(data, piece) if data else [b""],
                   h, chunked=True, timeout=timeout)


def raw_socket():
    return socket.create_connection((HOST, int(os.environ["E2B_PORT"])), timeout=30)


def main():
    if sys.argv[1:] == ["create"]:
        st, body = api("POST", "/sandboxes", {"templateID": "base", "timeout": 600})
        if st != 201 or not isinstance(body, dict) or "sandboxID" not in body:
            print(f"create: {st} {body}")
            sys.exit(1)
        print(body["sandboxID"], body.get("envdAccessToken", ""))
        return
    print("usage: e2b_files_client.py create", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
