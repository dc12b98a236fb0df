"""KafkaConnection over real loopback sockets, on both asyncio's loop and uvloop."""
from __future__ import annotations

import asyncio
import functools
import socket
import struct

import pytest
import uvloop

from kraftd.server import connection as connmod
from kraftd.server.connection import KafkaConnection
from server_fakes import ScriptedDispatcher, frame


def on_both_loops(test):
    """Run an async test body once on asyncio's loop and once on uvloop (production)."""

    @pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
    @functools.wraps(test)
    def wrapper(loop_kind):
        (uvloop.run if loop_kind == "uvloop" else asyncio.run)(asyncio.wait_for(test(), 30))

    del wrapper.__wrapped__  # pytest must see wrapper's signature, not the coroutine's
    return wrapper


async def start(dispatcher, **kw):
    conns: list[KafkaConnection] = []

    def factory():
        conn = KafkaConnection(dispatcher, max_frame_bytes=kw.get("max_frame", 1 << 20),
                               idle_timeout_s=kw.get("idle", 60))
        conns.append(conn)
        return conn

    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], conns


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), 3) == b""
    except ConnectionResetError:  # abort() may reset instead of FIN
        return True


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (n,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(n)


@on_both_loops
async def test_slow_reader_bounds_server_buffering():
    d = ScriptedDispatcher()
    server, port, conns = await start(d)
    size, count = 256 * 1024, 400  # 100 MiB of responses requested up front
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(b"".join(frame(b"B%d" % size) for _ in range(count)))
    await writer.drain()
    await asyncio.sleep(0.5)  # the client reads nothing meanwhile
    (conn,) = conns
    buffered = conn._transport.get_write_buffer_size()
    assert len(d.frames) < count // 4, "the server kept producing responses nobody reads"
    # Responses are written once WRITE_HIGH_WATER of them is ready, and writing pauses once the
    # transport holds more than WRITE_HIGH_WATER: what the kernel took decides whether the first
    # such write pauses or a second one goes first (seen on a busy machine: 2.0 MiB).
    assert buffered <= 2 * connmod.WRITE_HIGH_WATER + size
    # Now drain: every response arrives, complete and in order.
    for _ in range(count):
        body = await asyncio.wait_for(read_frame(reader), 10)
        assert len(body) == size
    assert len(d.frames) == count
    writer.close()
    server.close()


@on_both_loops
async def test_idle_connection_is_closed():
    d = ScriptedDispatcher()
    server, port, conns = await start(d, idle=0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(b"Rhi"))
    assert await read_frame(reader) == b"hi"
    assert await asyncio.wait_for(reader.read(), 3) == b""  # EOF: closed by the server
    writer.close()
    server.close()


@on_both_loops
async def test_connection_with_parked_request_is_not_idle():
    d = ScriptedDispatcher()
    server, port, conns = await start(d, idle=0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(b"Plong"))
    await asyncio.sleep(0.6)
    assert not conns[0].closed
    d.complete("long", b"done")
    assert await read_frame(reader) == b"done"
    writer.close()
    server.close()


@on_both_loops
async def test_broken_connection_does_not_affect_others():
    d = ScriptedDispatcher()
    server, port, conns = await start(d)
    r1, w1 = await asyncio.open_connection("127.0.0.1", port)
    r2, w2 = await asyncio.open_connection("127.0.0.1", port)
    w1.write(frame(b"Rbefore") + frame(b"Eboom"))  # handler bug on connection 1: aborted
    assert await closed_by_server(r1)
    w2.write(frame(b"Rstill-fine"))
    assert await read_frame(r2) == b"still-fine"
    w3_reader, w3 = await asyncio.open_connection("127.0.0.1", port)  # still accepting
    w3.write(struct.pack(">i", -5))
    assert await closed_by_server(w3_reader)
    w2.write(frame(b"Ragain"))
    assert await read_frame(r2) == b"again"
    for w in (w1, w2, w3):
        w.close()
    server.close()


@on_both_loops
async def test_pipelined_requests_over_socket_keep_order():
    d = ScriptedDispatcher()
    server, port, conns = await start(d)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame(b"R1") + frame(b"Pt") + frame(b"N") + frame(b"R3"))
    await asyncio.sleep(0.05)
    d.complete("t", b"2")
    assert [await read_frame(reader) for _ in range(3)] == [b"1", b"2", b"3"]
    writer.close()
    server.close()
