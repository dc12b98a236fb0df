"""A downloaded snapshot's install, off the event loop (KIP-630 on the follower side).

Once the last FetchSnapshot chunk is written, the partition stays paused and the node hands
the shell an `InstallJob` (`Node.jobs()`). On a worker thread `run()` fsyncs the `.part` file,
checks its size, every CRC, the header and the footer, and decodes its records into the state
(storage/snapshots.py `PartialSnapshot.validate`, quorum/snapshots/state_machine.py
`PreparedState`). Back on the loop (`Node.on_job_done`) the install is committed only if the
group still follows the leader it downloaded from: the file is renamed into place, the log
restarts at the snapshot's end and the decoded state is swapped in. Otherwise, or if the file
was bad, it is dropped and fetching resumes (the leader offers the snapshot again)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, ClassVar

from ...storage.snapshots import SnapshotReader
from ..snapshots.state_machine import PreparedState

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class InstallJob:
    follower_job: ClassVar[bool] = True  # the shell runs it beside snapshot writes, not behind them
    group: object
    key: tuple
    epoch: int
    leader_id: int
    snapshot_id: object     # storage.snapshots.SnapshotId
    part: object            # storage.snapshots.PartialSnapshot, written to the end
    size: int
    prepare: Callable       # the partition's state machine's prepare(items, last_timestamp)
    prepared: PreparedState | None = None
    cancelled: bool = False

    def run(self) -> None:
        """The slow part, on a worker thread: validate the file and decode its state."""
        self.part.validate(self.size)
        with SnapshotReader.open(self.part.part_path) as reader:
            self.prepared = self.prepare(reader.items(), reader.last_contained_log_timestamp)


class SnapshotInstalls:
    def __init__(self) -> None:
        self.by_key: dict = {}
        self._due: list[InstallJob] = []
        self.installed = 0

    def start(self, download) -> InstallJob:
        group = download.group
        job = InstallJob(group, group.key, group.epoch, download.leader_id, download.snapshot_id, download.part,
                         download.size, group.partition.snapshots.machine.prepare)
        self.by_key[group.key] = job
        group.installing = job
        self._due.append(job)
        return job

    def jobs(self) -> list[InstallJob]:
        due, self._due = self._due, []
        return due

    def cancel(self, key) -> None:
        """The group stopped following (or is gone): the install will be dropped."""
        job = self.by_key.pop(key, None)
        if job is not None:
            job.cancelled = True
            job.group.installing = None
            if job in self._due:  # never handed out: nothing runs it
                self._due.remove(job)
                job.part.abort()

    def done(self, job: InstallJob, error: BaseException | None) -> bool:
        """The job ran. True: the file is in place, install it now (the caller does)."""
        group = job.group
        if self.by_key.get(job.key) is job:
            del self.by_key[job.key]
            group.installing = None
        still = (not job.cancelled and error is None and group.epoch == job.epoch
                 and group.leader_id == job.leader_id and not group.is_leader)
        if not still:
            if error is not None:
                log.warning("%s-%d: downloaded snapshot %s is invalid (%s); fetching again", *job.key,
                            job.snapshot_id, error)
            job.part.abort()
            return False
        job.part.publish()
        self.installed += 1
        return True
