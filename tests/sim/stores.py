"""In-memory stand-ins for a node's disk: what a crash keeps, and what a disk loss takes."""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import uuid

from kraftd.protocol.records import iter_batch_headers
from kraftd.quorum.node_wiring import NodeStorage
from kraftd.quorum.raft.election_state import MemoryElectionStore
from kraftd.storage import MemoryLog, cleaning
from kraftd.storage.file_log import FileLog
from kraftd.storage.segment import segment_path
from kraftd.storage.snapshots import SnapshotStore
from kraftd.storage.topic_catalog import TopicExistsError, TopicInfo, hosted

from .invariants import Violation


class MemoryTopicCatalog:
    def __init__(self, cluster_id: str) -> None:
        self._cluster_id = cluster_id
        self._topics: dict[str, TopicInfo] = {}
        self.metadata_offset = 0

    def set_metadata_offset(self, offset: int) -> None:
        self.metadata_offset = offset

    def create(self, name, partitions, configs=None, topic_id=None, assignments=None, joined=()) -> TopicInfo:
        if name in self._topics:
            raise TopicExistsError(name)
        info = TopicInfo(name, topic_id or uuid.uuid4(), partitions, dict(configs or {}),
                         tuple(tuple(a) for a in assignments) if assignments else None, tuple(sorted(joined)))
        self._topics[name] = info
        return info

    def set_hosted(self, name, index, voters, joined: bool, metadata_offset: int = -1) -> TopicInfo:
        info = hosted(self._topics[name], index, voters, joined)
        self._topics[name] = info
        self.metadata_offset = max(self.metadata_offset, metadata_offset)
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

    def write_later(self, state):
        self.write(state)  # (durable at once: a crash in the simulation keeps it)
        return lambda: True


class CountingLog(MemoryLog):
    """A MemoryLog that counts the truncations of a divergent suffix (a coverage figure)."""

    coverage = None  # the run's Counter, set by the Disk

    def truncate_to(self, offset: int) -> None:
        if offset < self.log_end_offset and self.coverage is not None:
            self.coverage["truncations"] += 1
        super().truncate_to(offset)


class Disk:
    """One node's durable storage. `crash()` keeps only what was flushed. Every disk has its own
    directory id (a replacement disk: a new one); the run numbers them without drawing from its RNG."""

    def __init__(self, cluster_id: str, coverage=None, number: int = 1) -> None:
        self.coverage = coverage
        self.directory_id = uuid.UUID(int=(2 << 64) + number)
        self.catalog = MemoryTopicCatalog(cluster_id)
        self.catalog.on_delete = self._drop_topic
        self.elections = MemoryElectionStore()
        self.producer_ids = MemoryStateFile()
        self.logs: dict = {}
        self.lost = False  # a replacement for a disk that was lost
        # Snapshot files are real files (tmpfs when there is one): the real SnapshotStore.
        self.snapshot_root = tempfile.mkdtemp(prefix="kraftd-sim-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self.snapshot_stores: dict = {}

    def storage(self) -> NodeStorage:
        return NodeStorage(catalog=self.catalog, election_store=self.elections, producer_id_store=self.producer_ids,
                           open_log=self.open_log, open_snapshot_store=self.open_snapshot_store,
                           directory_id=self.directory_id)

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


class SimulatedCrash(BaseException):
    """The process dies in the middle of a storage call (a BaseException: nothing in the core
    catches it); the simulation crashes the node there."""


class _CrashingOs:
    """`os` as storage/cleaning.py sees it during one commit of a cleaning pass: the process
    dies before its Nth rename, replace or unlink (a kill -9 in the middle of the swap)."""

    def __init__(self, ops_before_crash: int) -> None:
        self._left = ops_before_crash

    def __getattr__(self, name):
        return getattr(os, name)

    def _step(self) -> None:
        if self._left == 0:
            raise SimulatedCrash()
        self._left -= 1

    def rename(self, *args):
        self._step()
        return os.rename(*args)

    def replace(self, *args):
        self._step()
        return os.replace(*args)

    def unlink(self, *args):
        self._step()
        return os.unlink(*args)


class TrackedFileLog(FileLog):
    """The production FileLog, remembering how much of each segment file a flush made durable
    (what a power loss keeps), and counting truncations."""

    coverage = None
    swap_crash = None  # () -> how many file operations of a cleaning commit happen before a crash, or None

    def __init__(self, directory, *, durable: dict, swaps: dict, **kwargs) -> None:
        self.durable = durable  # segment path -> bytes made durable (shared by the Disk)
        # log dir -> the furthest end of a cleaning pass a crash cut in its swap (shared by the
        # Disk): the next open may finish that swap, with no cleaner checkpoint written for it
        self.swaps = swaps
        super().__init__(directory, **kwargs)
        for seg in self._segments:  # what recovery kept is on disk
            self.durable[seg.path] = seg.size

    def flush(self) -> int:
        offset = super().flush()
        for seg in self._segments:
            self.durable[seg.path] = seg.size
        return offset

    def truncate_to(self, offset: int) -> None:
        if offset < self.log_end_offset and self.coverage is not None:
            self.coverage["truncations"] += 1
            self._never_into_cleaned(offset, self.cleaner_checkpoint)
        super().truncate_to(offset)
        self._truncated()

    @staticmethod
    def _never_into_cleaned(offset: int, cleaned_to: int) -> None:
        """A truncation never cuts into what the cleaner cleaned: it cleans committed records only,
        and those are never truncated."""
        if offset < cleaned_to:
            raise Violation(f"a truncation to {offset} cuts into the range the cleaner cleaned (to {cleaned_to})")

    def append_as_follower(self, batches):
        """Counts a follower's copy of a cleaned range: a fetched batch past the log end, or past
        the batch before it (the leader's cleaner removed what lay between)."""
        if self.coverage is not None and self.gaps_allowed:
            expected = self.log_end_offset
            for _, h in iter_batch_headers(memoryview(batches)):
                if h.base_offset > expected:
                    self.coverage["follower appends across a gap"] += 1
                    break
                expected = h.next_offset
        return super().append_as_follower(batches)

    def commit_cleaning(self, plan) -> bool:
        """A cleaning pass swapped in (storage/cleaning.py): its segments were fsynced before the
        swap, so a power loss keeps them whole. It may crash in the middle (`swap_crash`): the
        next open finishes or undoes the swap."""
        ops = self.swap_crash() if self.swap_crash is not None else None
        if ops is None:
            committed = super().commit_cleaning(plan)
        else:
            cleaning.os = _CrashingOs(ops)
            try:
                committed = super().commit_cleaning(plan)
            except SimulatedCrash:
                if self.coverage is not None:
                    self.coverage["crashes in a cleaning swap"] += 1
                self.swaps[self.dir] = max(self.swaps.get(self.dir, 0), plan.end_offset)
                for group in plan.groups:  # a cleaned file already in place was fsynced before
                    if group.segment.path == segment_path(self.dir, group.sources[0].base_offset):
                        self.durable[group.segment.path] = os.path.getsize(group.segment.path)
                raise
            finally:
                cleaning.os = os
        if not committed:
            if self.coverage is not None:
                self.coverage["cleaning passes discarded"] += 1
            return False
        if self.coverage is not None:
            self.coverage["cleaning passes"] += 1
            self.coverage["records cleaned away"] += plan.stats.records_dropped
            self.coverage["tombstones cleaned away"] += plan.stats.tombstones_dropped
        for seg in self._segments:
            if seg.base_offset < plan.end_offset:
                self.durable[seg.path] = seg.size
        return True

    @property
    def cleaned_to(self) -> int:
        """How far this log may have been cleaned: its checkpoint, or a swap a crash cut."""
        return max(self.cleaner_checkpoint, self.swaps.get(self.dir, 0))

    def commit_truncation(self, plan) -> bool:
        """The second half of a truncation off the loop (storage/truncation.py)."""
        cleaned_to = self.cleaner_checkpoint
        if not super().commit_truncation(plan):
            if self.coverage is not None:
                self.coverage["truncation jobs discarded"] += 1
            return False
        if self.coverage is not None:
            self.coverage["truncations"] += 1
            self.coverage["truncation jobs"] += 1
            self._never_into_cleaned(plan.offset, cleaned_to)
        self._truncated()
        return True

    def _truncated(self) -> None:
        if self._segments:  # the cut segment was rewritten and fsynced
            last = self._segments[-1]
            self.durable[last.path] = last.size
        for seg in self._segments:
            self.durable[seg.path] = min(self.durable.get(seg.path, 0), seg.size)


class FileDisk(Disk):
    """A node's disk as real files on tmpfs, with the production FileLog. A crash is a power
    loss: each segment keeps its durable bytes and a random prefix of the rest (torn batches
    included; sometimes the kept tail reads back as zeros, as unwritten blocks of a grown file
    do), and the next open runs the log's recovery."""

    def __init__(self, cluster_id: str, coverage, rng, *, recovery_checks_crc: bool = True, number: int = 1) -> None:
        super().__init__(cluster_id, coverage, number)
        self.rng = rng
        self.recovery_checks_crc = recovery_checks_crc
        self.log_root = tempfile.mkdtemp(prefix="kraftd-sim-logs-", dir=_TMPFS)
        self.durable: dict = {}
        self.swaps: dict = {}    # (TrackedFileLog.swaps)
        self.configs: dict = {}  # (topic, index) -> the TopicConfig its log was opened with
        self.swap_crash = None   # (TrackedFileLog.swap_crash, set by the simulation)

    def open_log(self, topic, index, config):
        log = self.logs.get((topic, index))
        if log is None:
            self.configs[(topic, index)] = config
            log = self.logs[(topic, index)] = self._open(topic, index)
        return log

    def storage(self) -> NodeStorage:
        """As the server's: a new topic's logs are opened by a job (quorum/log_opening.py)."""
        return dataclasses.replace(super().storage(), opens_logs_off_loop=True)

    def _open(self, topic, index) -> TrackedFileLog:
        config = self.configs.get((topic, index))
        compacted = config is not None and config.is_compacted  # (a compacted topic rolls by time too)
        log = TrackedFileLog(os.path.join(self.log_root, f"{topic}-{index}"), durable=self.durable, swaps=self.swaps,
                             segment_bytes=64 * 1024, recovery_checks_crc=self.recovery_checks_crc,
                             compacted=compacted, segment_ms=config.segment_ms if compacted else None)
        log.coverage = self.coverage
        log.swap_crash = self.swap_crash
        report = log.recovery_report
        if report.truncated_bytes and self.coverage is not None:
            self.coverage["torn tails"] += 1
            if report.truncation_reason and "CRC" in report.truncation_reason:
                self.coverage["CRC failures at recovery"] += 1
        return log

    def crash(self) -> None:
        for key, log in list(self.logs.items()):
            paths = [seg.path for seg in log._segments]
            log.abandon()
            for path in paths:
                self._tear(path)
            self.logs[key] = self._open(*key)  # recovery (at the crash, not the restart: the same)

    def _tear(self, path: str) -> None:
        if not os.path.exists(path):
            return  # a segment a cleaning pass's swap removed before the crash
        size = os.path.getsize(path)
        durable = min(self.durable.get(path, 0), size)
        if size <= durable:
            return
        keep = durable + self.rng.randint(0, size - durable)
        with open(path, "r+b") as f:
            f.truncate(keep)
            if keep > durable and self.rng.random() < 0.3:
                start = self.rng.randint(durable, keep - 1)
                f.seek(start)
                f.write(bytes(keep - start))
                if self.coverage is not None:
                    self.coverage["zeroed tails"] += 1

    def _drop_topic(self, name) -> None:
        for key in [k for k in self.logs if k[0] == name]:
            self.logs.pop(key).abandon()
            shutil.rmtree(os.path.join(self.log_root, f"{key[0]}-{key[1]}"), ignore_errors=True)

    def discard(self) -> None:
        for log in self.logs.values():
            log.abandon()
        shutil.rmtree(self.log_root, ignore_errors=True)
        super().discard()


_TMPFS = "/dev/shm" if os.path.isdir("/dev/shm") else None
