"""Runs the node's KIP-630 snapshot jobs: `job.run()` writes a file, so it gets a worker thread.

One job at a time on its own thread, so a large snapshot never delays a group commit.
"""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import structlog

from .metrics import ServerMetrics
from .node_api import NodeApi

log = structlog.get_logger("kraftd.snapshots")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class SnapshotJobRunner:
    def __init__(self, node: NodeApi, metrics: ServerMetrics) -> None:
        self._node = node
        self._metrics = metrics
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftd-snap")
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False

    def start_due(self) -> None:
        """Start every job the node says is due (cheap when none is: called after each batch)."""
        if self._stopping:
            return
        try:
            due = self._node.snapshots.jobs()
        except Exception:
            log.exception("node.snapshots.jobs failed")
            return
        for job in due:
            task = asyncio.create_task(self._run(job), name="kraftd-snapshot")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, job) -> None:
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, job.run)
        except Exception as e:
            error = e
            self._metrics.snapshot_failures.inc()
        else:
            self._metrics.snapshots_written.inc()
            topic, partition = job.key
            self._metrics.gen_snapshot_latency.labels(str(topic), str(partition)).observe(
                (time.perf_counter() - started) * 1000.0)
        try:
            self._node.on_snapshot_done(job, now_ms(), error)
        except Exception:
            log.exception("node.on_snapshot_done failed")
        if error is None:
            log.info("snapshot written", key=str(job.key), snapshot_id=str(job.snapshot_id),
                     seconds=round(time.perf_counter() - started, 3))
        self.start_due()  # more may have become due meanwhile

    def request(self, params: dict) -> tuple[int, dict]:
        """POST /admin/snapshot?topic=T&partition=P (`kraftd snapshot create`)."""
        topic, partition = params.get("topic"), params.get("partition", "")
        if not topic or not partition.lstrip("-").isdigit():
            return 400, {"requested": False, "error": "need topic and partition"}
        if not self._node.snapshots.request(topic, int(partition)):
            return 404, {"requested": False,
                         "error": f"{topic}-{partition} is not a snapshot-policy partition"}
        self.start_due()
        return 202, {"requested": True, "topic": topic, "partition": int(partition)}

    async def stop(self) -> None:
        """Let running jobs finish (a half-written file would be discarded at startup anyway)."""
        self._stopping = True
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._pool.shutdown(wait=False)
