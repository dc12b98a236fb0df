"""A follower's truncation after a DivergingEpoch, off the event loop when its log can do it so
(storage/truncation.py: a file log cutting into a segment). The partition's fetching pauses, the
node hands the job to the shell (`Node.jobs()`), the shell runs `job.run()` on a worker thread
and reports back (`Node.on_job_done`), and the truncation is committed here, on the loop, if the
group still follows and the log did not change meanwhile. Otherwise (the group stood for
election, the leader changed, the job failed) the copy is discarded: fetching resumes from the
untruncated log, and the next answer finds the divergence again. Logs that truncate cheaply
(in memory, a whole-log reset) truncate at once, as before."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class TruncationJob:
    follower_job: ClassVar[bool] = True  # the shell runs it beside snapshot writes, not behind them
    group: object
    key: tuple
    epoch: int
    leader_id: int
    offset: int
    plan: object            # storage.truncation.TruncationPlan
    cancelled: bool = False

    def run(self) -> None:
        """The slow part, on a worker thread (the shell's)."""
        self.plan.run()


class Truncations:
    def __init__(self) -> None:
        self.by_key: dict = {}
        self._due: list[TruncationJob] = []
        self.committed = 0
        self.discarded = 0

    def start(self, group, offset: int) -> bool:
        """Truncate `group`'s log to `offset` through a job; False: its log truncates at once."""
        plan_truncation = getattr(group.partition.log, "plan_truncation", None)
        plan = plan_truncation(offset) if plan_truncation is not None and group.key not in self.by_key else None
        if plan is None:
            return False
        job = TruncationJob(group, group.key, group.epoch, group.leader_id, offset, plan)
        self.by_key[group.key] = job
        group.truncating = job
        self._due.append(job)
        return True

    def jobs(self) -> list[TruncationJob]:
        due, self._due = self._due, []
        return due

    def cancel(self, key) -> None:
        """The group stopped following (or is gone): the job's result will be discarded."""
        job = self.by_key.pop(key, None)
        if job is not None:
            job.cancelled = True
            job.group.truncating = None
            if job in self._due:  # never handed out: nothing runs it
                self._due.remove(job)
                job.plan.discard()

    def done(self, job: TruncationJob, error: BaseException | None) -> bool:
        """The job ran: commit it if it still holds. True when the log was truncated."""
        group = job.group
        if self.by_key.get(job.key) is job:
            del self.by_key[job.key]
            group.truncating = None
        still = (not job.cancelled and error is None and group.epoch == job.epoch
                 and group.leader_id == job.leader_id and not group.is_leader)
        if still and group.partition.log.commit_truncation(job.plan):
            self.committed += 1
            return True
        if error is not None:
            log.warning("%s-%d: truncation to %d failed: %r", *job.key, job.offset, error)
        job.plan.discard()  # idempotent (a stale plan was discarded by commit_truncation already)
        self.discarded += 1
        return False
