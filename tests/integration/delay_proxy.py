# delay_proxy.py: a Unix-socket proxy between agenticd and the Docker engine that holds every
# request containing MARKER until the file RELEASE exists (at most 300 s) before passing it on
# (tests/integration/test_agenticd_scale). Everything else flows at once, so one held engine
# call can be shown not to stall the others, however slow the machine is.
#   python3 delay_proxy.py LISTEN_PATH ENGINE_PATH MARKER RELEASE
import asyncio
import os
import sys

listen, engine, marker, release = sys.argv[1], sys.argv[2], sys.argv[3].encode(), sys.argv[4]


async def hold_until_released():
    for _ in range(6000):
        if os.path.exists(release):
            break
        await asyncio.sleep(0.05)


async def pipe(reader, writer, hold):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if hold and marker in data:
                print("held", flush=True)
                await hold_until_released()
                print("released", flush=True)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def handle(client_r, client_w):
    engine_r, engine_w = await asyncio.open_unix_connection(engine)
    await asyncio.gather(pipe(client_r, engine_w, True), pipe(engine_r, client_w, False))


async def main():
    server = await asyncio.start_unix_server(handle, path=listen)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
