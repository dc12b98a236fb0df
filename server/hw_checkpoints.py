"""The data dir's `replication-offset-checkpoint`: every hosted partition's high watermark,
rewritten every few seconds and at clean shutdown (Kafka's
replica.high.watermark.checkpoint.interval.ms, 5 s by default).

Nothing in the server reads it back: `kraftd verify` does, to know below which offset the
replicas of a partition must agree. So each entry must never exceed what was committed *and*
what this node holds durably: min(HW, flushed offset). A stale file is fine: an HW only grows,
so an older value is a lower bound too. The values are collected on the loop (they are the
core's state) and written (tmp + fsync + rename) on a thread of this writer's own, so a slow
disk delays the next checkpoint, never a request; an unchanged set is not rewritten.
"""
from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import structlog

from ..storage.replication_offset_checkpoint import (REPLICATION_OFFSET_CHECKPOINT_FILE,
                                                          write_replication_offsets)
from .node_api import NodeApi

log = structlog.get_logger("kraftd.hw_checkpoints")

CHECKPOINT_INTERVAL_S = 5.0


def checkpointed_offsets(node: NodeApi) -> dict[tuple[str, int], int]:
    """{(topic, partition): min(HW, flushed offset)} for every partition the node hosts. Under
    fsync_policy=never nothing is flushed until shutdown and nothing is durable anyway: min(HW,
    log end) then."""
    never = node.config.fsync_policy == "never"
    return {p.key: min(p.high_watermark, p.log.log_end_offset if never else p.log.flushed_offset)
            for p in node.topics.partitions()}


class HighWatermarkCheckpointer:
    def __init__(self, node: NodeApi, data_dir: str, *, interval_s: float = CHECKPOINT_INTERVAL_S) -> None:
        self._node = node
        self.path = os.path.join(data_dir, REPLICATION_OFFSET_CHECKPOINT_FILE)
        self._interval_s = interval_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftd-hw-checkpoint")
        self._task: asyncio.Task | None = None
        self._written: dict | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="kraftd-hw-checkpoint")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.write()
            except Exception:  # a full disk: log it, try again next time
                log.exception("writing the high-watermark checkpoint failed", path=self.path)

    async def write(self) -> None:
        offsets = checkpointed_offsets(self._node)
        if offsets == self._written or (self._written is None and not offsets):
            return  # (nothing hosted yet: nothing to write)
        await asyncio.get_running_loop().run_in_executor(self._pool, write_replication_offsets, self.path, offsets)
        self._written = offsets

    async def stop(self) -> None:
        """Clean shutdown, after the node closed (its logs flushed): one last, current write."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        try:
            await self.write()
        except Exception:
            log.exception("writing the high-watermark checkpoint failed", path=self.path)
        self._pool.shutdown(wait=False)
