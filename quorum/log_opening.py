"""A new topic's logs, opened off the event loop.

Making a partition's files (its directory, segment, index and recovery-point files) costs a
few ms of filesystem calls per partition (~3.7 ms on the bench VM, bench/README.md (v)): a
CreateTopics of 100 partitions held the loop for ~0.4 s. When the storage says so
(`NodeStorage.opens_logs_off_loop`, the server's file storage), a new topic is reserved in the
catalog at once (`TopicRegistry.reserve`: its name is taken, nothing is served yet) and an
`OpenLogsJob` goes to the shell through `Node.jobs()`. The shell opens the logs on a worker
thread and hands the job back (`Node.on_job_done`); on the loop the topic is then added with
those logs and its groups start.

This is how CreateTopics, the `__consumer_offsets` topic a first FindCoordinator creates, and
a cluster's hosting (the metadata image) make topics. Meanwhile Metadata and Produce answer
LEADER_NOT_AVAILABLE for it, FindCoordinator COORDINATOR_NOT_AVAILABLE, and a CreateTopics
waits, up to its timeout, until the topic is served (handlers/create_topics.py). An
auto-creation by Metadata or Produce (one topic of `default_partitions`, rate-limited) still
opens inline and answers with the topic, as clients written against it expect. A topic deleted
meanwhile (DeleteTopics; in a cluster, the metadata image) loses its reservation, and the logs
its job opened are discarded when the job comes back. Until then the name cannot be created
again (CreateTopics: TOPIC_ALREADY_EXISTS, "marked for deletion", as Kafka answers while it
deletes a topic; a cluster hosts it once the job is back): those logs sit in the directories a
new topic of that name would use. A job that failed loses the reservation too: the catalog
entry goes, and in a cluster the next reconciliation tries again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .topics import LogOpener, PendingTopic, TopicRegistry


def opened_key(name: str) -> tuple:
    """The purgatory key a CreateTopics waiting for `name` watches."""
    return ("topic-open", name)


@dataclass(eq=False)
class OpenLogsJob:
    pending: PendingTopic
    open_log: LogOpener
    logs: dict = field(default_factory=dict)  # partition index -> its log, once run
    cancelled: bool = False
    follower_job = True  # the shell runs it beside truncations, not on the snapshot thread

    @property
    def key(self) -> tuple:
        return (self.pending.name, "open")

    def run(self) -> None:
        """On a worker thread: open (create) each hosted partition's log."""
        pending = self.pending
        try:
            for index in pending.hosted:
                self.logs[index] = self.open_log(pending.name, index, pending.config)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        for log in self.logs.values():
            log.discard()
        self.logs = {}


class LogOpening:
    """The topics whose logs are being opened, and the jobs not handed out yet."""

    def __init__(self, topics: TopicRegistry, open_log: LogOpener) -> None:
        self._topics = topics
        self._open_log = open_log
        self._jobs: dict[str, OpenLogsJob] = {}  # by topic name
        self._due: list[OpenLogsJob] = []
        # Cancelled after they were handed out: until each comes back, the logs it may have
        # opened sit in its topic's directories, so nothing may open a log of that name.
        self._returning: dict[str, OpenLogsJob] = {}

    def start(self, pending: PendingTopic) -> None:
        job = OpenLogsJob(pending, self._open_log)
        self._jobs[pending.name] = job
        self._due.append(job)

    def jobs(self) -> list[OpenLogsJob]:
        due, self._due = self._due, []
        return due

    def busy(self, name: str) -> bool:
        """A cancelled job for `name` is still out: a new log of that name must wait for it."""
        return name in self._returning

    def cancel(self, name: str) -> PendingTopic | None:
        """The topic is deleted before it was served: its reservation goes now, its logs when
        the job comes back (at once if it never left)."""
        pending = self._topics.drop_pending(name)
        job = self._jobs.pop(name, None)
        if job is not None:
            job.cancelled = True
            if job in self._due:
                self._due.remove(job)
            else:
                self._returning[name] = job
        return pending

    def finish(self, job: OpenLogsJob, error: BaseException | None) -> dict | None:
        """The job came back: the logs to add its topic with, or None (the job was dropped)."""
        name = job.pending.name
        if self._jobs.get(name) is job:
            del self._jobs[name]
        if self._returning.get(name) is job:
            del self._returning[name]
        if job.cancelled or self._topics.pending(name) is not job.pending:
            job.discard()
            return None
        if error is not None:
            job.discard()
            self._topics.drop_pending(name)
            return None
        return job.logs
