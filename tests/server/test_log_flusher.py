"""LogFlusher: kernel AIO for logs whose flush is only fsyncs, the pool for the rest, together."""
import os
import threading

import pytest

from kraftd.server.log_flusher import LogFlusher
from kraftd.storage.aio_fsync import AioFsync


class Plan:
    def __init__(self, target, fds):
        self.target, self.fds = target, fds


class PlainLog:
    """A log whose flush is one fsync of its file (planned), or not (flush() in the pool)."""

    def __init__(self, fd, end, plannable=True):
        self.fd, self.end, self.plannable = fd, end, plannable
        self.flushed = 0
        self.aborted = 0
        self.flush_threads = []

    def begin_flush(self):
        return Plan(self.end, [self.fd]) if self.plannable else None

    def end_flush(self, plan):
        self.flushed = plan.target
        return self.flushed

    def abort_flush(self, plan):
        self.aborted += 1

    def flush(self):
        self.flush_threads.append(threading.get_ident())
        os.fsync(self.fd)
        self.flushed = self.end
        return self.flushed

    def flush_is_small(self, limit):
        return True


@pytest.fixture
def files(tmp_path):
    fds = []

    def make(n):
        for i in range(n):
            fd = os.open(tmp_path / f"seg{len(fds)}", os.O_RDWR | os.O_CREAT)
            os.write(fd, b"x" * 500)
            fds.append(fd)
        return fds[-n:]

    yield make
    for fd in fds:
        os.close(fd)


async def test_planned_logs_go_to_the_kernel_in_waves_and_the_rest_to_the_pool_alongside(tmp_path, files):
    aio = AioFsync.open(str(tmp_path), capacity=4)
    flusher = LogFlusher(inline_max_bytes=0, aio=aio)
    planned = [PlainLog(fd, 10 + i) for i, fd in enumerate(files(10))]  # 10 fsyncs, 4 at a time
    pooled = [PlainLog(fd, 100, plannable=False) for fd in files(2)]
    results = await flusher.flush(planned[:5] + pooled + planned[5:])
    assert results == [10, 11, 12, 13, 14, 100, 100, 15, 16, 17, 18, 19]
    assert all(lg.flush_threads == [] for lg in planned)
    assert all(lg.flush_threads and lg.flush_threads[0] != threading.get_ident() for lg in pooled)
    assert flusher.logs_flushed == {"aio": 10, "pool": 2}
    assert aio.in_flight == 0
    flusher.close()


async def test_a_failed_fsync_is_that_logs_result_and_its_plan_is_given_back(tmp_path, files):
    flusher = LogFlusher(inline_max_bytes=0, aio=AioFsync.open(str(tmp_path)))
    r, w = os.pipe()  # no fsync: io_submit refuses it, and the pool's os.fsync fails
    good, bad = PlainLog(files(1)[0], 7), PlainLog(w, 9)
    ok, failed = await flusher.flush([good, bad])
    assert ok == 7 and isinstance(failed, OSError) and bad.aborted == 1 and bad.flushed == 0
    os.close(r)
    os.close(w)
    flusher.close()


async def test_without_aio_a_small_flush_runs_on_the_loop(files):
    flusher = LogFlusher(inline_max_bytes=1024, aio=None)
    logs = [PlainLog(fd, 3) for fd in files(2)]
    assert await flusher.flush(logs) == [3, 3]
    assert all(lg.flush_threads == [threading.get_ident()] for lg in logs)
    assert flusher.logs_flushed == {"loop": 2}
    flusher.close()
