"""e2b_connect.py: envd's process.Process over Connect-JSON as the e2b SDK speaks it, for the
integration and security tests, on e2b_client.py's E2B (python3's http.client only): a sandbox
made and killed through the control plane, unary calls, and server streams whose envelopes are
read as they come, each with the time it arrived. Environment: E2B_PORT, E2B_KEY."""
import base64
import json
import os
import struct
import time

from e2b_client import E2B

API = E2B(int(os.environ.get("E2B_PORT", "0")), os.environ.get("E2B_KEY", ""))


class Sandbox:
    def __init__(self, template="base"):
        st, h, d = API.create({"templateID": template, "timeout": 300})
        if st != 201:
            raise RuntimeError("create: %s %s" % (st, d))
        self.id = d["sandboxID"]
        self.token = d["envdAccessToken"]

    def headers(self, extra=None):
        h = {"E2b-Sandbox-Id": self.id, "E2b-Sandbox-Port": "49983",
             "X-Access-Token": self.token, "Connect-Protocol-Version": "1"}
        h.update(extra or {})
        return h

    def kill(self):
        return API.req("DELETE", "/sandboxes/" + self.id)[0]

    def unary(self, method, msg, extra=None):
        """(status, content-type, body as JSON or bytes, headers)"""
        st, h, body = API.req("POST", "/process.Process/" + method, msg, key=False,
                              headers=self.headers(extra))
        return st, h.get("content-type"), body, h

    def stream(self, method, msg, extra=None):
        return Stream(self, method, msg, extra)


class Stream:
    """A server stream: frames() yields (flags, JSON, arrival time) as they come."""

    def __init__(self, sb, method, msg, extra):
        payload = json.dumps(msg).encode()
        self.c = API.conn()
        self.c.request("POST", "/process.Process/" + method,
                       body=struct.pack(">BI", 0, len(payload)) + payload,
                       headers=sb.headers(dict({"Content-Type": "application/connect+json"},
                                               **(extra or {}))))
        self.r = self.c.getresponse()
        self.status = self.r.status
        self.headers = dict((k.lower(), v) for k, v in self.r.getheaders())
        self.buf = b""

    def frame(self):
        """The next (flags, JSON, time), or None at the end of the body."""
        while True:
            if len(self.buf) >= 5:
                flags, n = struct.unpack(">BI", self.buf[:5])
                if len(self.buf) >= 5 + n:
                    data, self.buf = self.buf[5:5 + n], self.buf[5 + n:]
                    return flags, json.loads(data), time.monotonic()
            more = self.r.read1(65536)
            if not more:
                return None
            self.buf += more

    def frames(self):
        while True:
            f = self.frame()
            if f is None:
                return
            yield f

    def close(self):
        self.c.close()


def event(f):
    """A frame's event kind and value: ("start", {...}), ("data", {...}), ..."""
    flags, msg, _ = f
    if flags & 2:
        return "end-stream", msg
    ev = msg.get("event", {})
    (kind, val), = ev.items()
    return kind, val


def output(frames, key="stdout"):
    return b"".join(base64.b64decode(event(f)[1].get(key, ""))
                    for f in frames if event(f)[0] == "data")
