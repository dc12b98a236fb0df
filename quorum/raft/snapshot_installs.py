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
from .follower_jobs import FollowerJobs

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


class SnapshotInstalls(FollowerJobs):
    def __init__(self) -> None:
        super().__init__("installing", lambda job: job.part.abort())
        self.installed = 0

    def start(self, download) -> InstallJob:
        group = download.group
        job = InstallJob(group, group.key, group.epoch, download.leader_id, download.snapshot_id, download.part,
                         download.size, group.partition.snapshots.machine.prepare)
        self.add(job)
        return job

    def done(self, job: InstallJob, error: BaseException | None) -> bool:
        """The job ran. True: the file is in place, install it now (the caller does)."""
        if not self.finish(job, error):
            if error is not None:
                log.warning("%s-%d: downloaded snapshot %s is invalid (%s); fetching again", *job.key,
                            job.snapshot_id, error)
            job.part.abort()
            return False
        job.part.publish()
        self.installed += 1
        return True
