"""Jobs a follower hands the shell while its partition's fetching pauses: a truncation into a
segment file (truncations.py) or a downloaded snapshot's install (snapshot_installs.py). The
node gives them out through `Node.jobs()`; the shell runs `job.run()` on a worker thread and
reports back through `Node.on_job_done`; the loop then commits the job only if the group still
follows the leader, in the epoch, it followed when the job began. One job per group at a time;
a group that stops following (an election, a new leader, its deletion) cancels its job, and a
cancelled job's work is dropped when it comes back (or at once, if it was never handed out)."""
from __future__ import annotations

from typing import Callable


class FollowerJobs:
    """The pending jobs of one kind. `slot` names the RaftGroup attribute that holds a group's
    job while it runs (RaftGroup.fetch_paused reads it); `drop(job)` undoes a job's work."""

    def __init__(self, slot: str, drop: Callable) -> None:
        self._slot = slot
        self._drop = drop
        self.by_key: dict = {}
        self._due: list = []
        self._out: dict = {}  # key -> job handed out and not back yet (cancelled ones too)

    def pending(self, key) -> bool:
        return key in self.by_key

    def busy(self, key) -> bool:
        """A job of the group is pending or still running (even if cancelled): its files are
        not to be touched until it comes back."""
        return key in self.by_key or key in self._out

    def add(self, job) -> None:
        self.by_key[job.key] = job
        setattr(job.group, self._slot, job)
        self._due.append(job)

    def jobs(self) -> list:
        due, self._due = self._due, []
        for job in due:
            self._out[job.key] = job
        return due

    def cancel(self, key) -> None:
        job = self.by_key.pop(key, None)
        if job is not None:
            job.cancelled = True
            setattr(job.group, self._slot, None)
            if job in self._due:  # never handed out: nothing runs it
                self._due.remove(job)
                self._drop(job)

    def finish(self, job, error: BaseException | None) -> bool:
        """The job came back: True if it may be committed now (the caller commits, or drops it)."""
        group = job.group
        if self._out.get(job.key) is job:
            del self._out[job.key]
        if self.by_key.get(job.key) is job:
            del self.by_key[job.key]
            setattr(group, self._slot, None)
        return (not job.cancelled and error is None and group.epoch == job.epoch
                and group.leader_id == job.leader_id and not group.is_leader)
