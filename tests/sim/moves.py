"""Partition moves in the simulation (issue 25 item 5, KIP-455 over KIP-853): an operator
reassigns the admin's topics between nodes under every fault, as `kraftd cluster reassign` or
`rebalance` would, through random nodes (forwarded to the controller):

- it moves a partition that is not moving: one replica replaced by a node outside its replicas,
  or two (as rebalance and decommission plans often do; the leader may be among them), and now
  and then only the order changes (a new preferred leader);
- it cancels a move in progress now and then, often right after starting it (a move already
  done by then is answered NO_REASSIGNMENT_IN_PROGRESS).

Each partition's leader then changes its group's voters one at a time (quorum/metadata/
replica_moves.py); the checks that every change must pass are membership.MembershipChecks' (one
change in flight, successive sets differing by one voter, a new voter caught up, every HW on a
majority of the voter sets it may have moved under), and the majority checks of invariants.py
take a moved group's voter sets as they take the metadata quorum's. Once the network heals,
every move must end (tests/sim/run.py's liveness phase).
"""
from __future__ import annotations

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode

from .membership import metadata_image
from .network import Message

RETRIABLE = {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_LEADER_OR_FOLLOWER}
# The view the move came from changed meanwhile: a target node fenced, the topic deleted, the
# move finished before its cancel.
STALE = {ErrorCode.INVALID_REPLICA_ASSIGNMENT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
         ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
TIMEOUT_MS = 4500


class ReplicaMover:
    def __init__(self, name: str, rng, wide_rng=None, every_ms: int = 1100) -> None:
        self.name = name
        self.rng = rng
        # Whether a move replaces a second replica too (as a rebalance or a decommission plans
        # them): drawn from a generator of its own, so the seeds' other draws stay as they were.
        self.wide_rng = wide_rng
        self.every_ms = every_ms
        self.pending: dict = {}   # correlation -> (topic, target or None, sent ms, two replicas replaced)
        self.correlation = 0
        self.active = True

    def tick(self, sim) -> None:
        for c, (_, _, sent, _) in list(self.pending.items()):
            if sim.now - sent >= TIMEOUT_MS:
                del self.pending[c]
        if self.active and not self.pending:
            op = self._choose(sim)
            if op is not None:
                self._send(sim, *op)
        if self.active or self.pending:
            sim.at(sim.now + self.every_ms, "client", self.name)

    def _choose(self, sim):
        """(topic, target or None for a cancel, whether two replicas are replaced), or None."""
        image = metadata_image(sim)
        if image is None:
            return None
        topics = sorted(t.name for t in image.topics.values() if t.name.startswith("a") and 0 in t.partitions)
        if not topics:
            return None
        name = self.rng.choice(topics)
        info = image.topic(name).partitions[0]
        if info.reassigning:
            return (name, None, False) if self.rng.random() < 0.3 else None
        replicas = list(info.replicas)
        if self.rng.random() < 0.1:
            self.rng.shuffle(replicas)
            return name, replicas, False
        outside = [n for n in sim.nodes if n not in replicas and image.is_live(n)]
        if not outside:
            return None
        index = self.rng.randrange(len(replicas))
        replicas[index] = self.rng.choice(outside)
        wide = self.wide_rng is not None and len(outside) >= 2 and self.wide_rng.random() < 0.3
        if wide:
            others = [i for i in range(len(replicas)) if i != index]
            replicas[self.wide_rng.choice(others)] = next(n for n in outside if n not in replicas)
        return name, replicas, wide

    def _send(self, sim, topic: str, target, wide: bool = False) -> None:
        self.correlation += 1
        R = m.AlterPartitionReassignmentsRequest
        request = R(timeout_ms=3000, topics=[R.ReassignableTopic(name=topic, partitions=[
            R.ReassignablePartition(partition_index=0, replicas=target)])])
        self.pending[self.correlation] = (topic, target, sim.now, wide)
        sim.send(Message(self.name, self.rng.choice(list(sim.nodes)), True, api.ALTER_PARTITION_REASSIGNMENTS, 0,
                         self.correlation, request))

    def on_response(self, sim, message: Message) -> None:
        op = self.pending.pop(message.correlation_id, None)
        if op is None:
            return
        body = message.body
        error = body.error_code or (body.responses[0].partitions[0].error_code if body.responses else 0)
        if error == 0:
            sim.coverage["replica moves" if op[1] is not None else "moves cancelled"] += 1
            if op[3]:
                sim.coverage["two-replica moves"] += 1
            if op[1] is not None and self.rng.random() < 0.3:
                self._send(sim, op[0], None)  # an admin's change of mind, while the move runs
        elif error not in RETRIABLE and error not in STALE:
            sim.admin_problems.append(f"move {op[0]} to {op[1]}: unexpected error {error}")
