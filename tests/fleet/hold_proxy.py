# hold_proxy.py: a TCP proxy on loopback that takes connections at once but passes nothing
# either way until the file RELEASE exists (at most 120 s), then joins each to UPSTREAM
# (tests/fleet/test_fleet_relay_restart: a node whose etcd answers late). It listens on a port
# of the kernel's choosing and writes that port to PORT_FILE.
#   python3 hold_proxy.py UPSTREAM_HOST:PORT RELEASE PORT_FILE
import asyncio
import os
import sys

upstream, release, port_file = sys.argv[1], sys.argv[2], sys.argv[3]
up_host, up_port = upstream.rsplit(":", 1)


async def released():
    for _ in range(2400):
        if os.path.exists(release):
            return
        await asyncio.sleep(0.05)


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def serve(reader, writer):
    await released()
    try:
        up_reader, up_writer = await asyncio.open_connection(up_host, int(up_port))
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with open(port_file + ".tmp", "w") as f:
        f.write(f"{port}\n")
    os.rename(port_file + ".tmp", port_file)
    async with server:
        await server.serve_forever()


asyncio.run(main())
