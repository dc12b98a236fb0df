"""Snapshots of one snapshot-policy partition: when to take one, what to do once it exists.

KIP-630 "When to Snapshot": both metadata.log.max.record.bytes.between.snapshots (log bytes
since the latest snapshot) and metadata.snapshot.min.changed_records.ratio must hold; or the
operator asked for one. "When to Increase the LogStartOffset": to a snapshot's end offset once
every live replica has it — on a single node, at once. Older snapshots then go.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...storage.snapshots import SnapshotId

from .state_machine import KeyValueStateMachine


class SnapshotInvariantError(RuntimeError):
    """The partition's files contradict each other; starting would serve wrong data."""


@dataclass(eq=False)
class SnapshotJob:
    """Writing one snapshot; `run()` blocks on file I/O and belongs in a worker thread."""

    key: tuple
    snapshot_id: SnapshotId
    items: dict
    last_contained_log_timestamp: int
    store: object
    size: int = -1
    done: bool = False
    bytes_at_start: int = 0  # the machine's log-byte counter when the snapshot's state was taken
    touched_since: set = field(default_factory=set)
    voters: bytes | None = None  # the VotersRecord in force at the end offset (KIP-853)

    def run(self) -> None:
        writer = self.store.writer(self.snapshot_id, last_contained_log_timestamp=self.last_contained_log_timestamp,
                                   voters=self.voters)
        try:
            writer.append_many(self.items.items())
            writer.freeze()
        except BaseException:
            writer.abort()
            raise
        self.size = self.store.size(self.snapshot_id)


class PartitionSnapshots:
    def __init__(self, partition, store, machine=None) -> None:
        self.partition = partition
        self.store = store
        self.machine = machine if machine is not None else KeyValueStateMachine()
        self.job: SnapshotJob | None = None
        self.requested = False
        self.load_ms: float | None = None
        self.latest_taken_ms = 0  # when the latest snapshot was taken here (log-start lag timer)

    @property
    def latest(self) -> SnapshotId | None:
        return self.store.latest()

    # -- startup -------------------------------------------------------------------------
    def recover(self) -> list[str]:
        """KIP-630 startup invariants; returns what was cleaned up. Raises SnapshotInvariantError."""
        removed = self.store.remove_leftovers()
        log = self.partition.log
        latest = self.store.latest()
        if log.log_start_offset > 0 and (latest is None or latest.end_offset < log.log_start_offset):
            raise SnapshotInvariantError(
                f"{self.partition.topic}-{self.partition.index}: log starts at {log.log_start_offset} but no "
                f"snapshot reaches it (latest: {latest}); the records before it are gone and the state "
                f"cannot be rebuilt. Restore the missing .checkpoint file or remove the partition directory.")
        if latest is not None and latest.end_offset > log.log_end_offset:
            # A snapshot newer than the log: the log restarts at the snapshot (KIP-630).
            log.truncate_fully_and_start_at(latest.end_offset)
            log.epoch_cache.assign(latest.epoch, latest.end_offset)
            self.seed_voters(latest)
            self.store.delete_older_than(latest)  # the earliest snapshot sits at the log start
        return removed

    def seed_voters(self, snapshot_id) -> None:
        """The log restarted at a snapshot's end: the voter set in force there is the snapshot's."""
        voters = self.store.voters_value(snapshot_id)
        if voters is not None:
            self.partition.log.voter_sets.assign(snapshot_id.end_offset - 1, voters)

    def load(self, prepared=None) -> None:
        """The state from the latest snapshot (decoded already: `prepared`, a PreparedState);
        the log tail is applied by catch_up()."""
        latest = self.store.latest()
        if latest is None:
            return
        if prepared is not None:
            self.machine.install(prepared, latest.end_offset)
            return
        with self.store.reader(latest) as reader:
            self.machine.load(reader.items(), latest.end_offset, reader.last_contained_log_timestamp)

    # -- steady state ----------------------------------------------------------------------
    def catch_up(self) -> None:
        self.machine.catch_up(self.partition.log, self.partition.high_watermark)

    def due(self) -> bool:
        if self.job is not None:
            return False
        # The HW can move without a catch-up (at startup, past the new epoch's LeaderChange):
        # a snapshot must cover everything committed, so apply it first.
        self.catch_up()
        latest = self.store.latest()
        covered = latest.end_offset if latest else self.partition.log.log_start_offset
        if self.machine.applied_offset <= covered:
            return False
        if self.requested:
            return True
        config = self.partition.config
        return (self.machine.bytes_applied >= config.snapshot_max_bytes_between
                and self.machine.changed_ratio() >= config.snapshot_min_changed_records_ratio)

    def start_job(self) -> SnapshotJob:
        machine, log = self.machine, self.partition.log
        end = machine.applied_offset
        epoch = log.epoch_cache.epoch_for_offset(end - 1)
        job = SnapshotJob(key=self.partition.key, snapshot_id=SnapshotId(end, -1 if epoch is None else epoch),
                          items=machine.state.copy(), last_contained_log_timestamp=machine.last_timestamp,
                          store=self.store, bytes_at_start=machine.bytes_applied,
                          voters=log.voter_sets.value_at(end - 1))
        machine.recent = job.touched_since
        self.job = job
        self.requested = False
        return job

    def finish(self, job: SnapshotJob, error: BaseException | None, now_ms: int = 0) -> None:
        """Register the new snapshot; the node then decides whether the log start may move."""
        self.job = None
        self.machine.recent = None
        if error is not None:
            return
        self.store.add(job.snapshot_id)
        applied_since = self.machine.bytes_applied - job.bytes_at_start
        self.machine.set_baseline(job.items, job.touched_since)
        # What was applied while the file was written is log after this snapshot: it counts
        # towards the next one (KIP-630: bytes since the latest snapshot).
        self.machine.bytes_applied = applied_since
        self.latest_taken_ms = now_ms

    def advance_log_start(self) -> None:
        """Move the log start to the latest snapshot (the node checked the replicas have it)."""
        latest = self.store.latest()
        if latest is None:
            return
        log = self.partition.log
        if latest.end_offset > log.log_start_offset and latest.end_offset <= log.log_end_offset:
            log.advance_log_start(latest.end_offset)
            self.partition.after_log_start_moved()
        self.store.delete_older_than(latest)

    def snapshot_for_fetch(self, fetch_offset: int, last_fetched_epoch: int) -> SnapshotId | None:
        """KIP-595/630: the snapshot a fetcher must load first, or None if the log serves it."""
        log_start = self.partition.log.log_start_offset
        if log_start == 0:
            return None
        earliest = self.store.earliest_at_or_after(log_start)
        if earliest is None:
            return None
        if fetch_offset < log_start or (last_fetched_epoch >= 0 and (
                (fetch_offset == log_start and last_fetched_epoch != earliest.epoch)
                or last_fetched_epoch < earliest.epoch)):
            return self.store.latest()
        return None

    def lag(self) -> int:
        """Offsets between the latest snapshot and the high watermark (kraftd_snapshot_lag)."""
        latest = self.store.latest()
        return self.partition.high_watermark - (latest.end_offset if latest else self.partition.log.log_start_offset)
