"""The group commit's disk work: fsync a batch of dirty logs, and say how far each is durable.

Three ways, cheapest first (bench/README.md, (g)):

1. **Native AIO** (`fsync_aio`, Linux): a log whose flush is only segment fsyncs (`begin_flush`)
   has them started by one io_submit; the kernel's workers run them and an eventfd wakes the
   loop. No thread, no GIL hand-off, and the loop keeps serving while the disk works.
2. **On the loop**: without AIO, a small flush (at most 2 logs, each one segment with at most
   `fsync_inline_max_bytes` appended) is fsynced inline: a thread hand-off costs more.
3. **The fsync pool**: everything else (directory fsyncs, epoch checkpoints, large flushes
   without AIO), a few logs per job.
"""
from __future__ import annotations

import asyncio
import collections
import os
from concurrent.futures import ThreadPoolExecutor

import structlog

from ..storage.aio_fsync import AioFsync

log = structlog.get_logger("kraftd.flusher")

FSYNC_WORKERS = 4
FLUSH_LOGS_PER_JOB = 8  # up to this many dirty logs: one pool job flushes them all
INLINE_FLUSH_MAX_LOGS = 2


class LogFlusher:
    def __init__(self, *, inline_max_bytes: int, aio: AioFsync | None = None, counter=None) -> None:
        self._loop = asyncio.get_running_loop()
        self._inline_max_bytes = inline_max_bytes
        self._pool = ThreadPoolExecutor(max_workers=FSYNC_WORKERS, thread_name_prefix="kraftd-fsync")
        self._aio = aio
        self._waiting: dict[int, tuple[_Wave, int]] = {}  # AIO token -> (its wave, index in it)
        self._next_token = 0
        self.logs_flushed = collections.Counter()  # logs flushed by way: "aio", "loop", "pool"
        self._counters = {way: counter.labels(way) for way in ("aio", "loop", "pool")} if counter else {}
        if aio is not None:
            self._loop.add_reader(aio.fileno(), self._on_fsyncs_done)

    @property
    def uses_aio(self) -> bool:
        return self._aio is not None

    async def flush(self, logs) -> list:
        """Flush each log; its new flushed offset, or the exception its flush raised."""
        if self._aio is not None:
            return await self._flush_by_aio(logs)
        if self._is_small(logs):
            self._count("loop", len(logs))
            return flush_each(logs)  # on the loop: see fsync_inline_max_bytes
        return await self._flush_in_pool(logs)

    def _count(self, way: str, logs: int) -> None:
        self.logs_flushed[way] += logs
        child = self._counters.get(way)
        if child is not None:
            child.inc(logs)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        if self._aio is not None:
            self._loop.remove_reader(self._aio.fileno())
            if not self._waiting:
                self._aio.close()

    # -- the three ways ----------------------------------------------------------------------
    async def _flush_by_aio(self, logs) -> list:
        results: list = [None] * len(logs)
        plans: list = []   # (index, log, plan)
        pooled: list = []  # indexes of logs whose flush is more than fsyncs
        for i, lg in enumerate(logs):
            plan = lg.begin_flush()
            if plan is None:
                pooled.append(i)
            else:
                plans.append((i, lg, plan))
        # Started now, so the pool's flushes run alongside the kernel's.
        pool_job = asyncio.ensure_future(self._flush_in_pool([logs[i] for i in pooled])) if pooled else None
        errors = await self._fsync_fds([fd for _, _, plan in plans for fd in plan.fds])
        at = 0
        for i, lg, plan in plans:
            failed = [e for e in errors[at:at + len(plan.fds)] if e]
            at += len(plan.fds)
            if failed:
                lg.abort_flush(plan)
                results[i] = OSError(failed[0], f"fsync: {os.strerror(failed[0])}")
            else:
                self._count("aio", 1)
                try:
                    results[i] = lg.end_flush(plan)
                except Exception as e:  # noqa: BLE001 - reported per log, as flush_each does
                    results[i] = e
        if pool_job is not None:
            for i, result in zip(pooled, await pool_job):
                results[i] = result
        return results

    def _is_small(self, logs) -> bool:
        """Cheap enough for the loop: at most 2 logs, each one fsync of a few appended KB
        (bench/README.md, (g): ~0.5 ms for the whole flush, measured under load)."""
        limit = self._inline_max_bytes
        return bool(limit) and len(logs) <= INLINE_FLUSH_MAX_LOGS and all(lg.flush_is_small(limit) for lg in logs)

    async def _flush_in_pool(self, logs) -> list:
        # A few pool jobs, not one per log: each job is a thread wake-up and a GIL hand-off
        # each way, which cost more than a small fsync on a busy 2-core VM.
        self._count("pool", len(logs))
        size = max(FLUSH_LOGS_PER_JOB, -(-len(logs) // FSYNC_WORKERS))
        jobs = [logs[i:i + size] for i in range(0, len(logs), size)]
        done = await asyncio.gather(*(self._loop.run_in_executor(self._pool, flush_each, job) for job in jobs))
        return [r for job_results in done for r in job_results]

    # -- AIO -----------------------------------------------------------------------------------
    async def _fsync_fds(self, fds: list[int]) -> list[int]:
        """fsync every fd: 0 or the errno each failed with. As many at once as the context has
        room for; what it refuses goes through the pool."""
        errors = [0] * len(fds)
        start = 0
        while start < len(fds):
            batch = []
            for fd in fds[start:]:
                self._next_token += 1
                batch.append((self._next_token, fd))
            try:
                started = self._aio.submit(batch)
            except OSError as e:
                log.warning("AIO refused an fsync; the fsync pool does the rest", error=repr(e))
                started = 0
            if started == 0:
                rest = await self._loop.run_in_executor(self._pool, fsync_each, fds[start:])
                errors[start:] = rest
                break
            wave = _Wave(self._loop.create_future(), errors, started)
            for offset, (token, _) in enumerate(batch[:started]):
                self._waiting[token] = (wave, start + offset)
            await wave.done
            start += started
        return errors

    def _on_fsyncs_done(self) -> None:
        for token, error in self._aio.reap():
            entry = self._waiting.pop(token, None)
            if entry is not None:
                wave, index = entry
                wave.finished(index, error)


class _Wave:
    """The fsyncs of one io_submit: `done` once all have finished."""

    __slots__ = ("done", "errors", "pending")

    def __init__(self, done: asyncio.Future, errors: list[int], pending: int) -> None:
        self.done = done
        self.errors = errors
        self.pending = pending

    def finished(self, index: int, error: int) -> None:
        self.errors[index] = error
        self.pending -= 1
        if self.pending == 0 and not self.done.done():
            self.done.set_result(None)


def flush_each(logs) -> list:
    """Flush logs one after another (one pool job, or inline): each one's flushed offset, or
    the error that flushing it raised."""
    out: list = []
    for lg in logs:
        try:
            out.append(lg.flush())
        except Exception as e:  # noqa: BLE001 - reported per log by the caller
            out.append(e)
    return out


def fsync_each(fds) -> list[int]:
    """fsync fds one after another in a pool thread: 0 or the errno of each."""
    out: list[int] = []
    for fd in fds:
        try:
            os.fsync(fd)
            out.append(0)
        except OSError as e:
            out.append(e.errno or 5)
    return out
