"""A follower catching up from its leader's snapshot (KIP-630): the partition's fetching pauses,
FetchSnapshot pulls the file in chunks into `.part`, which is validated (CRC of every batch,
header first, footer last, the size the leader announced) and renamed; the snapshot is then
loaded and the log restarts at its end offset, and fetching resumes from there."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from ...protocol.errors import ErrorCode
from ...storage.snapshots import SnapshotId

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class SnapshotDownload:
    group: object
    key: tuple
    leader_id: int
    epoch: int
    snapshot_id: SnapshotId
    part: object           # a storage PartialSnapshot: write(position, bytes), complete(size), abort()
    position: int = 0
    size: int = -1
    next_ms: int = 0


class SnapshotDownloads:
    def __init__(self) -> None:
        self.by_key: dict = {}
        self._in_flight: set[int] = set()  # leaders with a FetchSnapshot outstanding
        self.completed = 0

    def start(self, group, snapshot_id, part) -> bool:
        if group.key in self.by_key:
            return False
        self.by_key[group.key] = SnapshotDownload(group, group.key, group.leader_id, group.epoch, snapshot_id, part)
        group.downloading = self.by_key[group.key]
        return True

    def cancel(self, key) -> None:
        d = self.by_key.pop(key, None)
        if d is not None:
            d.part.abort()
            d.group.downloading = None

    def ready_by_leader(self, now_ms: int) -> dict:
        out: dict = {}
        for d in self.by_key.values():
            if d.leader_id not in self._in_flight and d.next_ms <= now_ms:
                out.setdefault(d.leader_id, []).append(d)
        return out

    def sent(self, leader: int) -> None:
        self._in_flight.add(leader)

    def failed(self, leader: int, retry_ms: int) -> None:
        self._in_flight.discard(leader)
        for d in self.by_key.values():
            if d.leader_id == leader:
                d.next_ms = retry_ms

    def on_response(self, leader: int, response, now_ms: int, env) -> None:
        self._in_flight.discard(leader)
        if response.error_code != 0:
            self.failed(leader, now_ms + env.config.retry_backoff_ms)
            return
        env.heard_from_leader(leader, now_ms)
        for topic in response.topics:
            for p in topic.partitions:
                d = self.by_key.get((topic.name, p.index))
                if d is None or d.leader_id != leader:
                    continue
                self._apply(d, p, now_ms, env)
                env.position_changed(d.group)  # resumed, or paused again: the fetch must know

    def _apply(self, d: SnapshotDownload, p, now_ms: int, env) -> None:
        group = d.group
        if p.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
            self.cancel(d.key)
            group.observe_leader(p.current_leader.leader_id, p.current_leader.leader_epoch, now_ms)
            return
        if p.error_code != 0 or (p.snapshot_id.end_offset, p.snapshot_id.epoch) != tuple(d.snapshot_id):
            # SNAPSHOT_NOT_FOUND (the leader moved on), a position problem: fetch again.
            log.info("%s-%d: snapshot %s download failed (error %d); fetching again", *d.key, d.snapshot_id,
                     p.error_code)
            self.cancel(d.key)
            return
        if p.position != d.position:
            return
        chunk = p.unaligned_records
        data = bytes(chunk.view()) if hasattr(chunk, "view") else bytes(chunk)
        d.part.write(d.position, data)
        d.position += len(data)
        d.size = p.size
        if d.position < d.size:
            return
        del self.by_key[d.key]
        group.downloading = None
        self.completed += 1
        env.start_install(d)  # validated, decoded and installed off the loop (snapshot_installs.py)
