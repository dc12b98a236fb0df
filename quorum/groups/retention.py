"""Offsets expiry (`offsets_retention_minutes`) and offsets of deleted topics.

Every `offsets_retention_check_interval_ms`, on the partitions this node leads: an Empty
group's offsets older than the retention go (Kafka 2.1+ keeps offsets while the group has
members), offsets of topics that no longer exist go, and an Empty group left with no offsets
is removed. Removal is a tombstone in `__consumer_offsets`.
"""
from __future__ import annotations

import logging

from .offsets_topic import OFFSETS_TOPIC
from .state import GroupState
from .writes import append_records

log = logging.getLogger(__name__)


def start_retention(coordinator, now_ms: int = 0) -> None:
    interval = coordinator.settings.offsets_retention_check_interval_ms
    coordinator.ctx.purgatory.schedule(now_ms + interval, lambda now: _run(coordinator, now))


def _run(coordinator, now_ms: int):
    try:
        expire_offsets(coordinator, now_ms)
    finally:
        start_retention(coordinator, now_ms)
    return None


def topic_exists(ctx, topic: str) -> bool:
    if ctx.topics.get(topic) is not None:
        return True
    return ctx.plane is not None and ctx.plane.image.topic(topic) is not None


def expire_offsets(coordinator, now_ms: int) -> int:
    """Write tombstones for what has expired; returns how many records were written."""
    ctx = coordinator.ctx
    cutoff = now_ms - coordinator.settings.offsets_retention_ms
    # Commit timestamps are wall-clock times (a v1 client sends its own); group states are core times.
    commit_cutoff = ctx.wall.at(now_ms) - coordinator.settings.offsets_retention_ms
    by_partition: dict[int, list] = {}
    for index in coordinator.led_partitions(now_ms):
        for group_id in [g for g in list(coordinator.offsets) if coordinator.partition_index(g) == index]:
            group = coordinator.groups.get(group_id)
            empty = group is None or group.is_(GroupState.EMPTY)
            gone = [(t, p) for (t, p), entry in coordinator.offsets[group_id].items()
                    if not topic_exists(ctx, t) or (empty and entry.commit_timestamp < commit_cutoff)]
            records = coordinator.delete_offsets(group_id, gone)
            if empty and group_id not in coordinator.offsets and group is not None:
                records += coordinator.delete_group(group_id, now_ms)
            by_partition.setdefault(index, []).extend(records)
        for group_id, group in list(coordinator.groups.items()):
            if (group.partition == index and group.is_(GroupState.EMPTY) and group_id not in coordinator.offsets
                    and group.state_timestamp_ms < cutoff):
                by_partition.setdefault(index, []).extend(coordinator.delete_group(group_id, now_ms))
    written = 0
    for index, records in by_partition.items():
        if records:
            append_records(ctx, ctx.topics.partition(OFFSETS_TOPIC, index), records, now_ms)
            written += len(records)
    if written:
        log.info("offsets expiry: %d tombstones", written)
    return written
