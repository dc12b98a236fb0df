"""In-memory stand-ins for a node's disk: what a crash keeps, and what a disk loss takes."""
from __future__ import annotations

import os
import shutil
import tempfile
import uuid

from kraftd.quorum.raft.election_state import MemoryElectionStore
from kraftd.storage import MemoryLog
from kraftd.storage.snapshots import SnapshotStore
from kraftd.storage.topic_catalog import TopicExistsError, TopicInfo


class MemoryTopicCatalog:
    def __init__(self, cluster_id: str) -> None:
        self._cluster_id = cluster_id
        self._topics: dict[str, TopicInfo] = {}
        self.metadata_offset = 0

    def set_metadata_offset(self, offset: int) -> None:
        self.metadata_offset = offset

    def create(self, name, partitions, configs=None, topic_id=None, assignments=None) -> TopicInfo:
        if name in self._topics:
            raise TopicExistsError(name)
        info = TopicInfo(name, topic_id or uuid.uuid4(), partitions, dict(configs or {}),
                         tuple(tuple(a) for a in assignments) if assignments else None)
        self._topics[name] = info
        return info

    def all(self) -> list[TopicInfo]:
        return list(self._topics.values())

    def delete(self, name) -> TopicInfo:
        """The node deleted the topic: its catalog entry and its logs are gone from this disk."""
        info = self._topics.pop(name)
        self.on_delete(name)
        return info

    def on_delete(self, name) -> None:
        pass

    def get(self, name):
        return self._topics.get(name)

    def cluster_id(self) -> str:
        return self._cluster_id


class MemoryStateFile:
    def __init__(self) -> None:
        self.state = None

    def read(self):
        return self.state

    def write(self, state) -> None:
        self.state = dict(state)


class CountingLog(MemoryLog):
    """A MemoryLog that counts the truncations of a divergent suffix (a coverage figure)."""

    coverage = None  # the run's Counter, set by the Disk

    def truncate_to(self, offset: int) -> None:
        if offset < self.log_end_offset and self.coverage is not None:
            self.coverage["truncations"] += 1
        super().truncate_to(offset)


class Disk:
    """One node's durable storage. `crash()` keeps only what was flushed."""

    def __init__(self, cluster_id: str, coverage=None) -> None:
        self.coverage = coverage
        self.catalog = MemoryTopicCatalog(cluster_id)
        self.catalog.on_delete = self._drop_topic
        self.elections = MemoryElectionStore()
        self.producer_ids = MemoryStateFile()
        self.logs: dict = {}
        self.lost = False  # a replacement for a disk that was lost
        # Snapshot files are real files (tmpfs when there is one): the real SnapshotStore.
        self.snapshot_root = tempfile.mkdtemp(prefix="kraftd-sim-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.snapshot_stores: dict = {}

    def open_snapshot_store(self, topic, index) -> SnapshotStore:
        return SnapshotStore(os.path.join(self.snapshot_root, f"{topic}-{index}"))

    def discard(self) -> None:
        shutil.rmtree(self.snapshot_root, ignore_errors=True)

    def _drop_topic(self, name) -> None:
        for key in [k for k in self.logs if k[0] == name]:
            del self.logs[key]
        for key in [k for k in self.snapshot_stores if k[0] == name] if isinstance(self.snapshot_stores, dict) else []:
            del self.snapshot_stores[key]

    def open_log(self, topic, index, config) -> MemoryLog:
        log = self.logs.get((topic, index))
        if log is None:
            log = self.logs[(topic, index)] = CountingLog(segment_bytes=64 * 1024)
            log.coverage = self.coverage
        return log

    def crash(self) -> None:
        for log in self.logs.values():
            log.crash()
