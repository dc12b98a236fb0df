"""How to hand a 1 MiB storage region to the transport: join vs writelines vs write per part.

Not a test (not collected). Run: .venv/bin/python tests/server/bench_write_parts.py STRATEGY [N]
STRATEGY: join | writelines | perpart | kraftd (server.connection.write_parts).
A subprocess reads N responses of header + 1 MiB mmap slice over loopback; prints throughput
and the server process's CPU seconds per GB.
"""
import asyncio, mmap, os, socket, sys, time, tempfile
import uvloop

from kraftd.server.connection import write_parts


class Region:
    def __init__(self, mv): self.mv = mv
    def __len__(self): return len(self.mv)
    def view(self): return self.mv

SIZE = 1 << 20
N = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
fd, path = tempfile.mkstemp(); os.write(fd, os.urandom(SIZE * 4)); os.close(fd)
f = open(path, "rb"); mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
header = [b"\x00\x10\x00\x28", b"\x00\x00\x00\x07", b"\x00" * 40]

class Writer(asyncio.Protocol):
    def __init__(self, strat, done):
        self.strat, self.done, self.i = strat, done, 0
        self.paused = False
    def connection_made(self, t):
        self.t = t; t.set_write_buffer_limits(high=1 << 20, low=256 << 10); self.pump()
    def pause_writing(self): self.paused = True
    def resume_writing(self): self.paused = False; self.pump()
    def pump(self):
        t = self.t
        while not self.paused and self.i < N:
            off = (self.i % 4) * SIZE
            mv = memoryview(mm)[off:off + SIZE]
            if self.strat == "join":
                t.write(b"".join(header + [mv]))
            elif self.strat == "writelines":
                t.writelines([b"".join(header), mv])
            elif self.strat == "kraftd":
                write_parts(t, header + [Region(mv)])
            elif self.strat == "perpart":
                t.write(b"".join(header)); t.write(mv)
            self.i += 1
        if self.i >= N and not self.done.done():
            t.close(); self.done.set_result(None)
    def data_received(self, d): pass

async def main(strat):
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    srv = await loop.create_server(lambda: Writer(strat, done), "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    code = ("import socket,sys\ns=socket.create_connection(('127.0.0.1',%d))\nb=bytearray(1<<20);t=0\n"
            "while True:\n n=s.recv_into(b)\n if not n: break\n t+=n\nprint(t)" % port)
    t0 = time.perf_counter(); c0 = time.process_time()
    p = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE)
    out, _ = await p.communicate()
    dt = time.perf_counter() - t0; cpu = time.process_time() - c0
    total = int(out)
    srv.close()
    return (total / dt / 1e9, cpu / (total / 1e9))

strat = sys.argv[1]
res = [uvloop.run(main(strat)) for _ in range(5)]
res.sort()
print(f"{strat:11s} median {res[2][0]:.2f} GB/s; server CPU s/GB median {sorted(r[1] for r in res)[2]:.3f}")
os.unlink(path)
