"""fake_agenticd: a test-side stand-in for agenticd's agent socket, on Debian's python3-grpcio.

It serves agentic.sandbox.v1.AgentService/Connect on a Unix socket (mode 0666, as agenticd's):
a call whose x-agent-id / x-agent-instance-id differ from the expected ones is finished with
UNAUTHENTICATED, as agenticd's resolver would; an accepted stream must open with a
registration naming the same ids, is acked (heartbeat_interval_seconds as configured) and then
has every message it sends recorded with its arrival time. Tests push ManagementMessages down
the live stream with send(). Stubs come from proto/agent.proto, generated at test time.
"""
import os
import queue
import subprocess
import sys
import threading
import time
from concurrent import futures

grpc = pb = pbg = None


def load_stubs(top, outdir):
    global grpc, pb, pbg
    r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{top}/proto",
                        f"--python_out={outdir}", f"--grpc_python_out={outdir}",
                        "agent.proto"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    sys.path.insert(0, outdir)
    import grpc as g
    import agent_pb2
    import agent_pb2_grpc
    grpc, pb, pbg = g, agent_pb2, agent_pb2_grpc


class Stream:
    """One Connect call as the fake saw it."""

    def __init__(self, md):
        self.md = md
        self.out = queue.Queue()
        self.messages = []          # (monotonic time, AgentMessage)
        self.problems = []          # what the fake found wrong, in words
        self.ended = False

    def of(self, kind):
        return [getattr(m, kind) for _, m in self.messages if m.WhichOneof("payload") == kind]


class FakeAgenticd:
    def __init__(self, path, agent_id, instance_id, heartbeat_s=1):
        self.path = path
        self.agent_id = agent_id
        self.instance_id = instance_id
        self.heartbeat_s = heartbeat_s
        self.streams = []
        self.refused = []           # metadata of the calls finished with UNAUTHENTICATED
        self.cond = threading.Condition()
        self.server = None

    # ---- the service ----
    def _read(self, it, st):
        try:
            for m in it:
                with self.cond:
                    st.messages.append((time.monotonic(), m))
                    if len(st.messages) == 1:
                        self._check_registration(st, m)
                    self.cond.notify_all()
        except Exception:  # the call was cancelled or the server stopped
            pass
        with self.cond:
            st.ended = True
            self.cond.notify_all()
        st.out.put(None)

    def _check_registration(self, st, m):
        if m.WhichOneof("payload") != "registration":
            st.problems.append(f"first message is {m.WhichOneof('payload')}, not a registration")
            st.out.put(None)
            return
        r = m.registration
        if r.agent_id != self.agent_id or r.instance_id != self.instance_id:
            st.problems.append("registration names other ids than the metadata")
            st.out.put(None)
            return
        st.out.put(pb.ManagementMessage(registration_ack=pb.RegistrationAck(
            accepted=True, heartbeat_interval_seconds=self.heartbeat_s)))

    def Connect(self, it, ctx):
        md = dict(ctx.invocation_metadata())
        if md.get("x-agent-id") != self.agent_id or \
                md.get("x-agent-instance-id") != self.instance_id:
            with self.cond:
                self.refused.append(md)
                self.cond.notify_all()
            ctx.abort(grpc.StatusCode.UNAUTHENTICATED, "agent identity not recognised")
        st = Stream(md)
        with self.cond:
            self.streams.append(st)
            self.cond.notify_all()
        threading.Thread(target=self._read, args=(it, st), daemon=True).start()
        while True:
            m = st.out.get()
            if m is None:
                return
            yield m

    # ---- control from the test ----
    def start(self):
        svc = self

        class Servicer(pbg.AgentServiceServicer):
            def Connect(self, it, ctx):
                yield from svc.Connect(it, ctx)

        if os.path.exists(self.path):
            os.unlink(self.path)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        pbg.add_AgentServiceServicer_to_server(Servicer(), self.server)
        self.server.add_insecure_port("unix:" + self.path)
        self.server.start()
        os.chmod(self.path, 0o666)

    def stop(self):
        if self.server:
            self.server.stop(grace=0).wait()
            self.server = None

    def send(self, msg, stream=None):
        (stream or self.streams[-1]).out.put(msg)

    def wait(self, pred, timeout):
        """Waits until pred() (called under the lock) is true; returns its last value."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                v = pred()
                if v or time.monotonic() >= end:
                    return v
                self.cond.wait(min(0.1, end - time.monotonic()))
