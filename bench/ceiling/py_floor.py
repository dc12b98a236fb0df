"""kraftd bench "python floor": the least a Python uvloop server can do per raw-consume fetch.

It answers every request frame with the C ceiling's canned Fetch response header, then a
memoryview slice of an mmap of kraftd's *own* segment file (the same batches kraftd serves,
found by the fetch offset), then the canned trailer, in one ``transport.writelines`` — the
write path kraftd uses, with no Kafka logic at all (no decoding, no sessions, no epochs, no
metrics). ``kraftd / pyfloor`` is therefore what kraftd's request handling costs, and
``pyfloor / ceiling`` what Python, uvloop and reading 1 GiB of page cache (instead of one
cache-hot 1 MiB buffer) cost before any handling.

usage: py_floor.py PORT SEGMENT TEMPLATE RECORDS_POS BATCH_SIZE BATCHES_PER_CHUNK RECORDS_PER_BATCH
                   DATA_POS FIRST_OFFSET OFFSET_POS
SEGMENT is a kraftd segment holding uniform batches of BATCH_SIZE bytes from file position
DATA_POS (base offset FIRST_OFFSET); OFFSET_POS is where the fetch offset sits in a request
frame (size prefix included). Prints "pyfloor listening on <port>".
"""
from __future__ import annotations

import asyncio
import mmap
import os
import sys

import uvloop


def main(argv: list[str]) -> None:
    port, seg, tmpl_path = int(argv[0]), argv[1], argv[2]
    records_pos, batch, k, r, data_pos, first, offset_pos = map(int, argv[3:10])
    template = open(tmpl_path, "rb").read()
    head, tail = template[:records_pos], template[records_pos + k * batch:]
    fd = os.open(seg, os.O_RDONLY)
    data = memoryview(mmap.mmap(fd, 0, prot=mmap.PROT_READ))
    chunk = k * batch
    at = offset_pos - 4  # the frame body starts after the size prefix

    class Floor(asyncio.Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self.transport = transport
            self.buf = b""

        def data_received(self, data_in: bytes) -> None:
            buf = self.buf + data_in if self.buf else data_in
            pos, out = 0, []
            while len(buf) - pos >= 4:
                n = int.from_bytes(buf[pos:pos + 4], "big")
                if len(buf) - pos - 4 < n:
                    break
                frame = buf[pos + 4:pos + 4 + n]
                pos += 4 + n
                offset = int.from_bytes(frame[at:at + 8], "big")
                p = data_pos + max(0, (offset - first) // r) * batch
                out += [head[:4] + frame[4:8] + head[8:], data[p:p + chunk], tail]
            self.buf = buf[pos:]
            if out:
                self.transport.writelines(out)

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Floor, "127.0.0.1", port)
        print("pyfloor listening on", server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()

    uvloop.run(serve())


if __name__ == "__main__":
    main(sys.argv[1:])
