"""grpc_peer: the python3-grpcio side of the interop tests and benchmarks.

load_stubs() generates the python stubs of proto/grpctest.proto and proto/health.proto with
python3-grpc-tools into a directory and imports them (and grpc) into this module; serve()
runs Debian's grpcio server with the same Test service agentic-grpctest hosts, on a Unix
socket.
"""
import subprocess
import sys
import threading

MIB = 1024 * 1024
PAT = bytes(i & 0xFF for i in range(4 * MIB + 16))
OPTS = [("grpc.max_receive_message_length", 4 * MIB),
        ("grpc.max_send_message_length", 8 * MIB)]

grpc = pb = pbg = health_pb2 = health_pb2_grpc = None


def load_stubs(top, outdir):
    global grpc, pb, pbg, health_pb2, health_pb2_grpc
    r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{top}/proto",
                        f"--python_out={outdir}", f"--grpc_python_out={outdir}",
                        "grpctest.proto", "health.proto"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    sys.path.insert(0, outdir)
    import grpc as g
    import grpctest_pb2
    import grpctest_pb2_grpc
    import health_pb2 as h
    import health_pb2_grpc as hg
    grpc, pb, pbg, health_pb2, health_pb2_grpc = g, grpctest_pb2, grpctest_pb2_grpc, h, hg
    _define_services()


def _define_services():
    global TestService, HealthService

    class TestService(pbg.TestServicer):
        def __init__(self):
            self.hang_ended = []

        def Unary(self, req, ctx):
            md = dict(ctx.invocation_metadata())
            out = [(k, md[k]) for k in ("x-echo", "x-echo-bin") if k in md]
            if out:
                ctx.send_initial_metadata(out)
            ctx.set_trailing_metadata([("x-trailer", "done")])
            return req

        def ServerStream(self, req, ctx):
            data = PAT[:req.size]
            for i in range(req.count):
                yield pb.Msg(data=data, seq=i)

        def ClientStream(self, it, ctx):
            s = pb.Summary()
            for m in it:
                s.messages += 1
                s.bytes += len(m.data)
                s.checksum += sum(m.data)
            return s

        def Bidi(self, it, ctx):
            for m in it:
                yield m

        def Hang(self, req, ctx):
            ended = threading.Event()
            ctx.add_callback(ended.set)
            ended.wait(30)
            self.hang_ended.append(ctx.is_active())
            return pb.Msg()

        def Fail(self, req, ctx):
            code = next(c for c in grpc.StatusCode if c.value[0] == req.code)
            ctx.abort(code, req.message)


    class HealthService(health_pb2_grpc.HealthServicer):
        def Check(self, req, ctx):
            if req.service not in ("", "agentic.test.v1.Test"):
                ctx.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
            return health_pb2.HealthCheckResponse(
                status=health_pb2.HealthCheckResponse.SERVING)


def serve(sock, workers=160):
    """Starts a grpcio server on unix:sock; returns (server, test servicer)."""
    from concurrent import futures
    svc = TestService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), options=OPTS)
    pbg.add_TestServicer_to_server(svc, server)
    health_pb2_grpc.add_HealthServicer_to_server(HealthService(), server)
    server.add_insecure_port("unix:" + sock)
    server.start()
    return server, svc
