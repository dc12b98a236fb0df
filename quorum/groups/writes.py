"""Appending coordinator records to a `__consumer_offsets` partition this node leads, and
waiting until they are committed (under the high watermark: acks=all on the replicated log,
durable on a single node) before answering."""
from __future__ import annotations

from typing import Callable

from ...protocol.records import build_batch


def append_records(ctx, partition, entries: list, now_ms: int) -> int:
    """Append (key, value-or-None) records as one batch; returns the offset to wait for."""
    batch = build_batch([(key, value, [], ctx.wall.at(now_ms)) for key, value in entries])
    result = partition.log.append_as_leader(bytearray(batch), partition.leader_epoch, now_ms=now_ms)
    ctx.appended[partition.key] = partition
    return result.last_offset + 1


class DelayedWrite:
    """A request answered once its records are committed: `finish(outcome, now_ms)`
    builds the response from the outcome: "committed", "moved" (leadership changed) or
    "timeout"."""

    def __init__(self, partition, end_offset: int, deadline_ms: int, finish: Callable) -> None:
        self.partition = partition
        self.end_offset = end_offset
        self.epoch = partition.leader_epoch
        self.deadline_ms = deadline_ms
        self.finish = finish

    def watch_keys(self):
        return [self.partition.key]

    def try_complete(self, now_ms: int):
        p = self.partition
        if p.raft is None or not p.is_leader or p.leader_epoch != self.epoch:
            return self.finish("moved", now_ms)
        if p.high_watermark >= self.end_offset:
            return self.finish("committed", now_ms)
        return None

    def expire(self, now_ms: int):
        return self.finish("timeout", now_ms)
