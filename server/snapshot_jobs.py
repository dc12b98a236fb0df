"""Runs the node's jobs off the loop: KIP-630 snapshots to write, followers' truncations and
snapshot installs (quorum/raft/truncations.py, snapshot_installs.py), and compacted logs'
cleaning passes (quorum/compaction.py). `job.run()` writes files, so it gets a worker thread;
a cleaning pass's work runs in a worker process the thread waits for.

Snapshots run one at a time on their own thread, so a large snapshot never delays a group
commit; followers' truncations and snapshot installs on another, so that a follower never
waits behind a snapshot being written. The shell's step
(shell_step.py) says which jobs are due and hears when one is done.
"""
from __future__ import annotations

import asyncio
import time
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Callable

import structlog

from .metrics import ServerMetrics
from .node_api import NodeApi

log = structlog.get_logger("kraftd.snapshots")
CLEANER_NICENESS = 10  # the cleaner's worker process, relative to the server


class SnapshotJobRunner:
    """`on_done(job, error)` is called on the loop when a job has finished; `on_requested()`
    when an admin asked for a snapshot (the step then hands out the job)."""

    def __init__(self, node: NodeApi, metrics: ServerMetrics, *,
                 on_done: Callable[[object, BaseException | None], None], on_requested: Callable[[], None]) -> None:
        self._node = node
        self._metrics = metrics
        self._on_done = on_done
        self._on_requested = on_requested
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftd-snap")
        self._other_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftd-trunc")
        self._cleaner_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftd-cleaner")
        # A cleaning pass is CPU-bound Python: run in a thread, it would take the GIL from the
        # event loop for most of its run (bench/README.md, (y)). It runs in a worker process,
        # started at the first pass (spawned, not forked: this process has threads).
        self._cleaner_processes: ProcessPoolExecutor | None = None
        self._cleaning: set = set()
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False

    def start(self, jobs: list) -> None:
        """Run each job (the step's `snapshot_jobs`) on the snapshot thread."""
        if self._stopping:
            return
        for job in jobs:
            task = asyncio.create_task(self._run(job), name="kraftd-snapshot")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, job) -> None:
        follower = getattr(job, "follower_job", False)  # a truncation or install: no snapshot metrics
        cleaning = getattr(job, "cleaner_job", False)  # a compacted log's cleaning pass (its own thread)
        pool = self._cleaner_pool if cleaning else self._other_pool if follower else self._pool
        started = time.perf_counter()
        error: BaseException | None = None
        if cleaning:
            self._cleaning.add(job)
        try:
            if cleaning:
                await asyncio.get_running_loop().run_in_executor(pool, job.run, self._cleaner_process())
            else:
                await asyncio.get_running_loop().run_in_executor(pool, job.run)
        except BrokenProcessPool as e:  # the worker died (killed, out of memory): a new one next time
            error = e
            broken, self._cleaner_processes = self._cleaner_processes, None
            if broken is not None:
                broken.shutdown(wait=False)
        except Exception as e:
            error = e
        finally:
            self._cleaning.discard(job)
        if cleaning:  # (the node logs the pass and counts it: quorum/compaction.py)
            self._on_done(job, error)
            return
        seconds = round(time.perf_counter() - started, 3)
        if follower:
            log.info("follower job ran", job=type(job).__name__, key=str(job.key), seconds=seconds,
                     error=repr(error) if error else None)
        elif error is not None:
            self._metrics.snapshot_failures.inc()
        else:
            self._metrics.snapshots_written.inc()
            topic, partition = job.key
            self._metrics.gen_snapshot_latency.labels(str(topic), str(partition)).observe(seconds * 1000.0)
            log.info("snapshot written", key=str(job.key), snapshot_id=str(job.snapshot_id), seconds=seconds)
        self._on_done(job, error)  # the step tells the node, and hands out what is due now

    def request(self, params: dict) -> tuple[int, dict]:
        """POST /admin/snapshot?topic=T&partition=P (`kraftd snapshot create`)."""
        topic, partition = params.get("topic"), params.get("partition", "")
        if not topic or not partition.lstrip("-").isdigit():
            return 400, {"requested": False, "error": "need topic and partition"}
        if not self._node.snapshots.request(topic, int(partition)):
            return 404, {"requested": False,
                         "error": f"{topic}-{partition} is not a snapshot-policy partition"}
        self._on_requested()
        return 202, {"requested": True, "topic": topic, "partition": int(partition)}

    async def stop(self) -> None:
        """Let running jobs finish (a half-written file would be discarded at startup anyway)."""
        self._stopping = True
        for job in self._cleaning:
            job.plan.discarded = True  # its copies are dropped, not committed
        if self._cleaner_processes is not None:  # a pass under way is cut short (a `.cleaned` left
            for process in list(getattr(self._cleaner_processes, "_processes", {}).values()):
                process.terminate()  # behind is removed at the next start)
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._pool.shutdown(wait=False)
        self._other_pool.shutdown(wait=False)
        self._cleaner_pool.shutdown(wait=False)
        if self._cleaner_processes is not None:
            self._cleaner_processes.shutdown(wait=False, cancel_futures=True)

    def _cleaner_process(self) -> ProcessPoolExecutor:
        if self._cleaner_processes is None:
            # At a lower CPU priority: where the cores are busy, the event loop goes first.
            self._cleaner_processes = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                          initializer=os.nice, initargs=(CLEANER_NICENESS,))
        return self._cleaner_processes
