"""One step of the shell around the sans-IO node: what to persist, send, answer, run and flush
next, decided without doing any of it (as h11 decides without a socket).

The asyncio Broker (broker.py) and the deterministic simulation (tests/sim/cluster.py) drive a
node through this one class, so the simulation runs the shell's real ordering under its faults.
It imports no asyncio and reads no clock: the caller says what happened and when.

Inputs: `after_requests`, `after_event`, `on_timer`, `persisted` / `persist_failed`,
`flushed`, `snapshot_done`. Each returns a `StepActions` for the shell to carry out in its
field order:

1. `persist`: write these election states off the loop (`node.write_election_states`), then
   call `persisted()` (or `persist_failed()`). One batch at a time; the node holds the sends
   and answers of the steps behind it until it is durable (quorum/raft/persist_gate.py).
2. `sends`: requests to peers.
3. `completions`: answers to parked requests.
4. `snapshot_jobs`: the node's jobs (snapshots to write, followers' truncations): run each off
   the loop (`job.run()`), then call `snapshot_done()`.
5. `flush`: flush these (key, log) pairs off the loop, then call `flushed()` with each result
   as a (key, log, result) triple.
6. `wake_at_ms`: call `on_timer()` by then (the node's clock; None: the node has no deadline).

`fatal` replaces them all: a persist or an fsync failed and the shell must stop, as Kafka halts
(nobody knows what reached the disk, so acknowledging anything more could lie).

Group commit: one flush at a time, never while an election state is being written (the epochs
a log's batches start are durable first), none with fsync_policy=never. A flush starts at once
when something waits for it (a peer's answer or a persist finished: a follower's appends count
once durable; parked requests wait on the HW, which moves only with fsync; in a cluster, after
a flush, a follower's next fetch waited for it), else flush_interval_ms after a step first saw
an unflushed append. A flush covers every append made before it started, so what is appended
while one runs is covered by the next.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .node_api import NodeApi


@dataclass(slots=True)
class Failure:
    """Why the shell must stop: what failed (a log's key for a flush) and the error."""
    what: str
    error: BaseException
    key: object = None


@dataclass(slots=True)
class StepActions:
    persist: dict | None = None                          # GroupKey -> ElectionState
    sends: list = field(default_factory=list)            # Send, to peers
    completions: list = field(default_factory=list)      # Completion, to parked requests
    snapshot_jobs: list = field(default_factory=list)    # SnapshotJob, TruncationJob (node.jobs())
    flush: list | None = None                            # (key, log) pairs
    wake_at_ms: int | None = None
    fatal: Failure | None = None


class ShellStep:
    """`contain`, when given, is called with a description when node.poll, node.jobs or
    node.on_job_done raise, and the step goes on (the server logs a core bug and keeps
    serving); without it the exception propagates (the simulation fails the seed)."""

    def __init__(self, node: NodeApi, *, fsync_policy: str, flush_interval_ms: int,
                 contain: Callable[[str], None] | None = None) -> None:
        self._node = node
        self._flushes = fsync_policy != "never"
        self._flush_interval_ms = flush_interval_ms
        self._contain = contain
        self.clustered = False        # a flush done wakes the node (followers' fetches wait on it)
        self._persisting = False      # an election-state batch is being written
        self._flushing = False        # a flush is running
        self._flush_wanted = False    # something waits for the next flush: start it at once
        self._flush_due_ms: int | None = None  # else the interval flush, once appends are unflushed
        self._stopped = False         # nothing more is taken from the outbox, nothing flushed

    @property
    def persisting(self) -> bool:
        """An election-state batch handed out has not been reported back yet."""
        return self._persisting

    # -- inputs ----------------------------------------------------------------------------------
    def after_requests(self, now_ms: int, *, waiting: bool) -> StepActions:
        """After a batch of requests (a client's or a peer's). `waiting`: parked requests wait on
        the HW, which moves only with fsync, so commit now rather than at the interval."""
        return self._step(now_ms, want_flush=waiting)

    def after_event(self, now_ms: int) -> StepActions:
        """Something happened outside a request: a peer's answer, an unreachable peer, a nudge."""
        return self._step(now_ms, want_flush=True)

    def on_timer(self, now_ms: int) -> StepActions:
        return self._step(now_ms, want_flush=False)

    def persisted(self, now_ms: int) -> StepActions:
        """The election states of the last `persist` are durable: release what waited for them."""
        self._persisting = False
        self._node.on_persisted()
        return self._step(now_ms, want_flush=True)

    def persist_failed(self, error: BaseException) -> StepActions:
        self._persisting = False
        return self._fail(Failure("persisting the election state failed", error))

    def flushed(self, now_ms: int, results: list) -> StepActions:
        """The last `flush` finished: (key, log, flushed offset or the exception its flush
        raised) for each log. One failure stops everything; the node hears of no offset.

        A log discarded while its flush ran (its topic deleted, its directory renamed away) is
        left out either way: its error is about files nobody owns, and its offset is not the
        offset of whatever log now has its key (a topic re-created under the same name)."""
        self._flushing = False
        if self._stopped:
            return StepActions()
        results = [(key, result) for key, log, result in results if not log.discarded]
        for key, result in results:
            if isinstance(result, BaseException):
                return self._fail(Failure("fsync failed", result, key))
        done: list = []
        for key, offset in results:
            done += self._node.on_flushed(key, offset, now_ms)
        return self._step(now_ms, want_flush=self.clustered, completions=done)

    def snapshot_done(self, job, now_ms: int, error: BaseException | None = None) -> StepActions:
        self._guard("node.on_job_done failed", self._node.on_job_done, job, now_ms, error)
        return self._step(now_ms, want_flush=False)

    def stop(self) -> None:
        """Shutting down: from here on the node's outbox stays with the node (Node.close() writes
        a pending election state and flushes every log, synchronously)."""
        self._stopped = True

    # -- the step --------------------------------------------------------------------------------
    def _step(self, now_ms: int, *, want_flush: bool, completions: list | None = None) -> StepActions:
        node = self._node
        actions = StepActions()
        done = completions or []
        polled = self._guard("node.poll failed", node.poll, now_ms)
        if polled:
            done += polled
        if not self._stopped:
            out = node.take_outbox(now_ms)
            if out.persist:
                if self._persisting:  # the node hands out one batch at a time (PersistGate)
                    raise RuntimeError("a second election-state batch while one is being written")
                self._persisting = True
                actions.persist = out.persist
            actions.sends = out.sends
            done += out.completions
        actions.completions = done
        actions.snapshot_jobs = self._guard("node.jobs failed", node.jobs) or []
        if want_flush:
            self._flush_wanted = True
        actions.flush = self._next_flush(now_ms)
        deadline = node.next_deadline_ms()
        due = self._flush_due_ms
        actions.wake_at_ms = due if due is not None and (deadline is None or due < deadline) else deadline
        return actions

    def _next_flush(self, now_ms: int) -> list | None:
        if not self._flushes or self._flushing or self._persisting or self._stopped:
            return None
        logs = self._node.logs_to_flush()
        if not logs:
            self._flush_wanted = False
            self._flush_due_ms = None
            return None
        if not self._flush_wanted:
            if self._flush_due_ms is None:
                self._flush_due_ms = now_ms + self._flush_interval_ms
            if now_ms < self._flush_due_ms:
                return None
        self._flush_wanted = False
        self._flush_due_ms = None
        self._flushing = True
        return logs

    def _fail(self, failure: Failure) -> StepActions:
        self._stopped = True
        return StepActions(fatal=failure)

    def _guard(self, what: str, call, *args):
        if self._contain is None:
            return call(*args)
        try:
            return call(*args)
        except Exception:
            self._contain(what)
            return None
