"""After Broker.stop() the node's outbox stays with the node. A peer that answers (or fails)
during shutdown kicks the broker; a persist scheduled then would land on the closed election
pool ("cannot schedule new futures after shutdown") and turn a clean SIGTERM into exit 1.
Node.close() writes whatever election state is still pending, synchronously."""
from __future__ import annotations

from types import SimpleNamespace

from kraftd.server.broker import Broker, Durability
from kraftd.server.metrics import ServerMetrics


class OutboxNode:
    def __init__(self) -> None:
        self.pending = {("t", 0): "voted"}
        self.written: list = []

    snapshots = SimpleNamespace(jobs=lambda: [])

    def jobs(self):
        return []

    def poll(self, now_ms):
        return []

    def next_deadline_ms(self):
        return None

    def take_outbox(self, now_ms):
        states, self.pending = self.pending, {}
        return SimpleNamespace(persist=states, sends=[], completions=[])

    def write_election_states(self, states) -> None:
        self.written.append(states)

    def logs_to_flush(self):
        return []

    def close(self) -> None:  # what quorum.node.Node.close does with a pending persist
        if self.pending:
            self.write_election_states(self.pending)
            self.pending = {}


async def test_a_kick_after_stop_leaves_the_pending_election_state_to_node_close():
    node = OutboxNode()
    broker = Broker(node, durability=Durability(fsync_policy="never"), metrics=ServerMetrics())
    node.pending = {}
    await broker.stop()
    node.pending = {("t", 0): "voted"}  # a vote answer arrived during shutdown
    broker.pump()
    assert broker.fatal is None and node.pending  # nothing taken, nothing scheduled
    node.close()
    assert node.written == [{("t", 0): "voted"}]
