"""Quick measurement (not a test): cost of FileLog appends and reads on this machine.

Run: .venv/bin/python tests/storage/bench_append_read.py
"""
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from storage_helpers import batch  # noqa: E402

from kraftd.storage import FileLog  # noqa: E402


def percentiles(samples):
    samples = sorted(samples)
    return {p: samples[int(len(samples) * p / 100) - 1] * 1e6 for p in (50, 99)} | {
        "mean": statistics.fmean(samples) * 1e6}


def main(n=20000):
    d = tempfile.mkdtemp()
    log = FileLog(os.path.join(d, "b-0"), segment_bytes=256 << 20)
    proto = bytes(batch(16, value=b"x" * 1000))  # ~16 KiB
    print(f"batch size {len(proto)} bytes")
    appends = []
    for _ in range(n):
        buf = bytearray(proto)
        t = time.perf_counter()
        log.append_as_leader(buf, 1, now_ms=0)
        appends.append(time.perf_counter() - t)
    print("append_as_leader 16KiB (page cache) µs:", percentiles(appends))
    reads, reads_small, views = [], [], []
    leo = log.log_end_offset
    for i in range(n):
        off = (i * 7919 * 16) % leo
        t = time.perf_counter()
        r = log.read(off, 1 << 20)
        reads.append(time.perf_counter() - t)
        t = time.perf_counter()
        log.read(off, 16 << 10)
        reads_small.append(time.perf_counter() - t)
        t = time.perf_counter()
        for reg in r.regions:
            reg.view()
        views.append(time.perf_counter() - t)
    print("read(max_bytes=1MiB) -> regions µs:", percentiles(reads))
    print("read(max_bytes=16KiB) -> regions µs:", percentiles(reads_small))
    print("region.view() (active segment: pread 1 MiB) µs:", percentiles(views))
    t = time.perf_counter()
    log.flush()
    print(f"flush of {n * len(proto) >> 20} MiB: {(time.perf_counter() - t) * 1e3:.1f} ms")
    fs = []
    for _ in range(20):
        log.append_as_leader(bytearray(proto), 1, now_ms=0)
        t = time.perf_counter()
        log.flush()
        fs.append(time.perf_counter() - t)
    print("flush after one 16KiB append µs:", percentiles(fs))
    log.close()
    t = time.perf_counter()
    log = FileLog(os.path.join(d, "b-0"), segment_bytes=256 << 20)
    print(f"clean reopen: {(time.perf_counter() - t) * 1e3:.1f} ms; "
          f"unclean reopen would scan {log.segments[-1].size >> 20} MiB")


if __name__ == "__main__":
    main()
