"""The sendfile fast path: large file regions go out with os.sendfile while the socket takes
everything, and a short write hands the rest to the transport in order (real sockets, uvloop)."""
import asyncio
import os
import socket

import pytest
import uvloop

from kraftd.protocol.records import build_batch
from kraftd.server import connection
from kraftd.storage import FileLog


def _region(tmp_path, size: int):
    log = FileLog(tmp_path / "t-0")
    value = os.urandom(1000)
    while log.log_end_offset * 1000 < size:
        log.append_as_leader(bytearray(build_batch([(None, value, [], 1)] * 100)), 1, now_ms=1)
    result = log.read(0, 8 << 20, min_one_batch=True)
    return log, result.regions[0]


class _Writer(asyncio.Protocol):
    def __init__(self, parts, small_buffer: bool):
        self.parts = parts
        self.small_buffer = small_buffer

    def connection_made(self, transport):
        if self.small_buffer:  # force short writes: sendfile cannot finish in one go
            transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 10)
        connection.write_parts(transport, self.parts)
        transport.close()  # after the buffered rest is written


async def _roundtrip(parts, small_buffer: bool, slow: bool) -> bytes:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Writer(parts, small_buffer), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = bytearray()
    while chunk := await asyncio.wait_for(reader.read(64 << 10), 10):
        received += chunk
        if slow:
            await asyncio.sleep(0.001)
    writer.close()
    server.close()
    return bytes(received)


@pytest.mark.parametrize("small_buffer,slow", [(False, False), (True, True)])
def test_regions_arrive_whole_and_in_order(tmp_path, small_buffer, slow):
    log, region = _region(tmp_path, 3 << 20)
    assert len(region) >= connection.SENDFILE_MIN and hasattr(region, "fileno")
    parts = [b"head", bytearray(b"-size-"), region, b"tail"]
    expected = b"head-size-" + bytes(region.view()) + b"tail"
    calls = []
    real = connection._sendfile_all

    def spy(fd, r):
        sent = real(fd, r)
        calls.append((len(r), sent))
        return sent

    connection._sendfile_all = spy
    try:
        got = uvloop.run(_roundtrip(parts, small_buffer, slow))
    finally:
        connection._sendfile_all = real
    assert [size for size, _ in calls] == [len(region)]  # the fast path was taken
    if small_buffer:  # ...and a short write handed the rest to the transport
        assert calls[0][1] < len(region)
    assert got == expected
    log.close()


def test_busy_transport_keeps_the_ordinary_path(tmp_path):
    log, region = _region(tmp_path, 1 << 20)

    class Busy:
        def __init__(self):
            self.written = []

        def get_write_buffer_size(self):
            return 1  # something is queued: writing around it would reorder bytes

        def get_extra_info(self, name):
            raise AssertionError("must not look for the socket")

        def writelines(self, chunks):
            self.written += [bytes(c) for c in chunks]

        def write(self, chunk):
            self.written.append(bytes(chunk))

    busy = Busy()
    connection.write_parts(busy, [b"h", region])
    assert b"".join(busy.written) == b"h" + bytes(region.view())
    log.close()
