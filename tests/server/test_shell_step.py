"""The shell's step (server/shell_step.py) on its own: what it asks for, in which order, and what
it tells the node, without a loop or a thread (the Broker and the simulation carry it out)."""
from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

from kraftd.quorum.raft.persist_gate import Outbox
from kraftd.server.shell_step import ShellStep

KEY = ("t", 0)
LOG = SimpleNamespace(discarded=False)


class StepNode:
    """Just enough of a node: an outbox the test fills, one log, a deadline."""

    def __init__(self) -> None:
        self.outbox = Outbox()
        self.persisted = 0
        self.dirty = False
        self.flushed: list = []
        self.deadline: int | None = None
        self.snapshots = SimpleNamespace(jobs=lambda: [])

    def jobs(self):
        return self.snapshots.jobs()

    def poll(self, now_ms):
        return []

    def take_outbox(self, now_ms):
        out, self.outbox = self.outbox, Outbox()
        return out

    def on_persisted(self):
        self.persisted += 1

    def logs_to_flush(self):
        return [(KEY, LOG)] if self.dirty else []

    def on_flushed(self, key, offset, now_ms):
        self.flushed.append((key, offset))
        self.dirty = False
        return ["done"]

    def next_deadline_ms(self):
        return self.deadline


def step(node, policy="acks_all", interval=100) -> ShellStep:
    return ShellStep(node, fsync_policy=policy, flush_interval_ms=interval)


def test_one_persist_at_a_time_and_no_flush_while_it_runs():
    node = StepNode()
    s = step(node)
    node.outbox = Outbox(persist={KEY: "voted"})
    node.dirty = True
    first = s.after_event(0)
    assert first.persist == {KEY: "voted"} and first.flush is None  # the epoch is durable first
    assert s.persisting
    assert s.after_event(1).flush is None
    node.outbox = Outbox(sends=["vote answer"])  # what the node released once it heard
    after = s.persisted(2)
    assert node.persisted == 1 and not s.persisting
    assert after.sends == ["vote answer"] and after.flush == [(KEY, LOG)]


def test_a_flush_waits_for_the_interval_unless_something_waits_for_it():
    node = StepNode()
    s = step(node, interval=100)
    node.dirty = True
    quiet = s.after_requests(10, waiting=False)  # an acks=1 produce
    assert quiet.flush is None and quiet.wake_at_ms == 110
    assert s.on_timer(60).flush is None
    assert s.on_timer(110).flush == [(KEY, LOG)]


def test_parked_requests_flush_at_once_and_one_flush_runs_at_a_time():
    node = StepNode()
    s = step(node)
    node.dirty = True
    assert s.after_requests(0, waiting=True).flush == [(KEY, LOG)]
    assert s.after_requests(1, waiting=True).flush is None  # covered by the next flush
    node.dirty = True  # appended meanwhile
    done = s.flushed(5, [(KEY, LOG, 1)])
    assert done.completions == ["done"] and node.flushed == [(KEY, 1)]
    node.dirty = True
    assert s.after_event(6).flush == [(KEY, LOG)]


def test_fsync_policy_never_flushes_nothing():
    node = StepNode()
    s = step(node, policy="never")
    node.dirty = True
    assert s.after_event(0).flush is None
    assert s.on_timer(10_000).flush is None


def test_a_failed_fsync_stops_everything_and_the_node_hears_of_no_offset():
    node = StepNode()
    s = step(node)
    node.dirty = True
    s.after_event(0)
    error = OSError(5, "Input/output error")
    out = s.flushed(1, [(("u", 0), LOG, 3), (KEY, LOG, error)])
    assert out.fatal is not None and out.fatal.error is error and out.fatal.key == KEY
    assert node.flushed == []
    node.outbox = Outbox(persist={KEY: "voted"})
    assert s.after_event(2).persist is None and s.after_event(3).flush is None


def test_a_log_discarded_while_its_flush_ran_is_left_out():
    """A topic deleted during a flush: the renamed-away directory fails the flush (ENOENT), and
    the offset of the old log is not the re-created topic's; neither reaches the node."""
    node = StepNode()
    s = step(node)
    node.dirty = True
    s.after_event(0)
    gone = SimpleNamespace(discarded=True)
    out = s.flushed(1, [(KEY, gone, FileNotFoundError(2, "No such file or directory")), (KEY, gone, 7)])
    assert out.fatal is None and node.flushed == []
    out = s.flushed(2, [(("u", 0), gone, 3), (KEY, LOG, 1)])
    assert out.fatal is None and node.flushed == [(KEY, 1)]


def test_stopped_it_leaves_the_outbox_to_the_node():
    node = StepNode()
    s = step(node)
    s.stop()
    node.outbox = Outbox(persist={KEY: "voted"})
    assert s.after_event(0).persist is None and node.outbox.persist  # Node.close() writes it


def test_the_wake_up_is_the_earlier_of_the_node_deadline_and_the_interval_flush():
    node = StepNode()
    s = step(node, interval=100)
    node.deadline = 50
    assert s.on_timer(0).wake_at_ms == 50
    node.dirty, node.deadline = True, 500
    assert s.on_timer(0).wake_at_ms == 100


def test_the_step_imports_no_asyncio():
    """The simulation drives it synchronously in virtual time."""
    tree = ast.parse((Path(__file__).resolve().parents[2] / "server" / "shell_step.py").read_text())
    imported = {alias.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for alias in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"asyncio", "concurrent", "threading", "time", "os"}
