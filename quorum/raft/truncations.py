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

from .follower_jobs import FollowerJobs

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


class Truncations(FollowerJobs):
    def __init__(self) -> None:
        super().__init__("truncating", lambda job: job.plan.discard())
        self.committed = 0
        self.discarded = 0

    def start(self, group, offset: int) -> bool:
        """Truncate `group`'s log to `offset` through a job; False: its log truncates at once."""
        plan_truncation = getattr(group.partition.log, "plan_truncation", None)
        plan = plan_truncation(offset) if plan_truncation is not None and not self.pending(group.key) else None
        if plan is None:
            return False
        self.add(TruncationJob(group, group.key, group.epoch, group.leader_id, offset, plan))
        return True

    def done(self, job: TruncationJob, error: BaseException | None) -> bool:
        """The job ran: commit it if it still holds. True when the log was truncated."""
        if self.finish(job, error) and job.group.partition.log.commit_truncation(job.plan):
            self.committed += 1
            return True
        if error is not None:
            log.warning("%s-%d: truncation to %d failed: %r", *job.key, job.offset, error)
        job.plan.discard()  # idempotent (a stale plan was discarded by commit_truncation already)
        self.discarded += 1
        return False
