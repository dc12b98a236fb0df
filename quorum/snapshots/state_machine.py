"""The state of a snapshot-policy partition: a key/value map materialised from its log.

Each record sets key → value; a null value deletes the key; records without a key carry no
state and are skipped. Only committed data is applied (never past the high watermark, KIP-630).
"""
from __future__ import annotations

import gc
from contextlib import contextmanager

from ...protocol.records import decode_records, iter_batch_headers


class KeyValueStateMachine:
    def __init__(self) -> None:
        self.state: dict[bytes, bytes] = {}
        self.applied_offset = 0          # the next offset to apply
        self.last_timestamp = -1         # of the last applied record (SnapshotHeader's field)
        self.bytes_applied = 0           # log bytes applied since the counter was reset
        # Change tracking for metadata.snapshot.min.changed_records.ratio:
        self.baseline: dict | None = None   # the latest snapshot's content
        self.changed: set = set()           # baseline keys modified or deleted since
        self.recent: set | None = None      # every key touched while a snapshot is being written

    def load(self, items, end_offset: int, last_timestamp: int) -> None:
        self.install(self.prepare(items, last_timestamp), end_offset)

    def prepare(self, items, last_timestamp: int) -> "PreparedState":
        """The slow part of a load, safe on another thread: it reads nothing of this machine."""
        return PreparedState.of(items, last_timestamp)

    def install(self, prepared: "PreparedState", end_offset: int) -> None:
        """The state `prepare` decoded (perhaps on another thread), as of `end_offset`."""
        self.state = prepared.state
        self.applied_offset = end_offset
        self.last_timestamp = prepared.last_timestamp
        self.set_baseline(prepared.baseline)

    def set_baseline(self, content: dict, touched_since=()) -> None:
        self.baseline = content
        self.changed = {k for k in touched_since if k in content}
        self.bytes_applied = 0

    def changed_ratio(self) -> float:
        """Share of the latest snapshot's records modified or deleted since (new keys don't count)."""
        if not self.baseline:
            return 1.0
        return len(self.changed) / len(self.baseline)

    def catch_up(self, log, high_watermark: int, max_read: int = 1 << 20) -> int:
        """Apply committed records up to the high watermark; returns how many were applied."""
        applied = 0
        if self.applied_offset < log.log_start_offset:
            self.applied_offset = log.log_start_offset
        while self.applied_offset < high_watermark:
            result = log.read(self.applied_offset, max_read, max_offset=high_watermark)
            if not result.regions:
                break
            for region in result.regions:
                applied += self.apply_batches(region.view())
        return applied

    def apply_batches(self, buf) -> int:
        """Apply the records of whole batches at or after applied_offset; control batches skip."""
        state, baseline, changed, recent = self.state, self.baseline, self.changed, self.recent
        start = self.applied_offset
        count = 0
        for pos, header in iter_batch_headers(buf):
            if header.last_offset < start:
                continue
            if not header.is_control:
                self.bytes_applied += header.size
                for record in decode_records(buf[pos:pos + header.size], header):
                    if record.offset < start:
                        continue
                    entries = self.entries_of(record)
                    if entries is None:
                        continue
                    for key, value in entries:
                        if value is None:
                            state.pop(key, None)
                        else:
                            state[key] = value
                        if baseline is not None and key in baseline:
                            changed.add(key)
                        if recent is not None:
                            recent.add(key)
                    count += 1
                self.last_timestamp = max(self.last_timestamp, header.max_timestamp)
            self.applied_offset = header.next_offset
        return count

    def entries_of(self, record):
        """The (key, value or None) entries a record sets; None: the record carries no state."""
        if record.key is None:
            return None
        return ((record.key, record.value),)


class PreparedState:
    """A snapshot's records decoded into a state and its baseline copy: the slow part of a
    load, which a follower installing a downloaded snapshot does on a worker thread."""

    __slots__ = ("state", "baseline", "last_timestamp", "extra")

    def __init__(self, state: dict, last_timestamp: int, extra=None) -> None:
        self.state = state
        self.baseline = state.copy()
        self.last_timestamp = last_timestamp
        self.extra = extra  # what a machine derives besides the map (the metadata image)

    @classmethod
    def of(cls, items, last_timestamp: int) -> "PreparedState":
        with collector_paused():
            return cls(dict(items), last_timestamp)


@contextmanager
def collector_paused():
    """The cyclic GC paused for a block that allocates many objects and makes no cycles.
    Loading millions of long-lived objects: the collector would rescan them over and over
    (about half the load time), so it is paused while they are decoded (the /metrics scrape
    pauses it too: server/metrics_text.py). No gc.freeze() afterwards: it moved every object
    alive at that moment, the process's reference cycles included, into a generation the
    collector never scans, so they were never freed (a leak on every snapshot load: startup,
    every follower install)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
