"""The simulated cluster: nodes (the real quorum core on memory disks), a scheduler in virtual
time, and the glue that plays the shell's part (persist, then send; group commit; timers)."""
from __future__ import annotations

import heapq
import random
import uuid

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.quorum.metadata.plane import METADATA_TOPIC
from kraftd.quorum.node import Node
from kraftd.quorum.node_config import NodeConfig
from kraftd.quorum.outcomes import NoResponse, Park, Respond
from kraftd.quorum.peer import Peer
from kraftd.quorum.raft.config import RaftConfig
from kraftd.quorum.raft.group import SafetyViolation

from .network import Message, Network, on_the_wire
from .stores import Disk

CLUSTER_ID = "sim-cluster-0000000000"
RAFT = RaftConfig(election_timeout_ms=300, fetch_timeout_ms=600, election_backoff_max_ms=300,
                  request_timeout_ms=400, retry_backoff_ms=50, fetch_max_wait_ms=100)


class SimNode:
    def __init__(self, sim, node_id: int) -> None:
        self.sim = sim
        self.id = node_id
        self.disk = Disk(CLUSTER_ID)
        self.node: Node | None = None
        self.incarnation = 0
        self.parked: dict[int, tuple] = {}      # token -> (source, api_key, version, correlation)
        self.persisting = False
        self.flushing = False
        self.wake_at = None

    @property
    def up(self) -> bool:
        return self.node is not None

    def boot(self, now_ms: int, *, rejoining: bool = False) -> None:
        self.incarnation += 1
        # Every node is a voter of the metadata quorum (the real cluster's controller, broker
        # registrations, leadership reports and producer-id blocks run under the faults too);
        # the data topics are placed out of band, as the seed drew them.
        config = NodeConfig(node_id=self.id, fsync_policy="acks_all", retention_check_interval_ms=500,
                            snapshot_max_bytes_between=3000, snapshot_min_changed_records_ratio=0.0,
                            snapshot_start_offset_lag_time_max_ms=2000, broker_session_timeout_ms=2000,
                            voters={i: ("sim", 9092) for i in self.sim.nodes})
        seed = self.sim.rng.getrandbits(64)
        session_rng = random.Random(seed ^ 0x5EED)
        self.node = Node(config, catalog=self.disk.catalog, election_store=self.disk.elections,
                         producer_id_store=self.disk.producer_ids, open_log=self.disk.open_log,
                         open_snapshot_store=self.disk.open_snapshot_store,
                         new_session_id=lambda: session_rng.randrange(1, 0x7FFFFFFF), rng=random.Random(seed),
                         raft_config=RAFT, bugs=self.sim.bugs, cluster_id=CLUSTER_ID,
                         # The disk remembers it replaced a lost one (a durable marker, like a
                         # data dir formatted to join an existing cluster): groups without a
                         # persisted state must catch up before they vote, across restarts too.
                         rejoining=rejoining or self.disk.lost)
        self.parked.clear()
        self.persisting = self.flushing = False
        self.node.start(now_ms)
        if not [t for t in self.disk.catalog.all() if t.name != METADATA_TOPIC]:
            for name, topic_id, assignments in self.sim.topics:
                if any(self.id in a for a in assignments):
                    self.node.create_replicated_topic(name, topic_id, assignments, self.sim.topic_configs[name],
                                                      now_ms)

    def crash(self) -> None:
        self.node = None
        self.disk.crash()

    def lose_disk(self) -> None:
        self.node = None
        self.sim.old_disks.append(self.disk)
        self.disk = Disk(CLUSTER_ID)
        self.disk.lost = True


class Simulation:
    def __init__(self, seed: int, *, nodes: int, groups: int, rates, bugs=None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.rates = rates
        self.bugs = bugs
        self.now = 0
        self._events: list = []
        self._seq = 0
        self.network = Network(self.rng, rates)
        self.nodes = {i: SimNode(self, i) for i in range(1, nodes + 1)}
        self.topics = []
        self.topic_configs: dict = {}
        self.old_disks: list = []
        ids = list(self.nodes)
        for g in range(groups):
            replicas = 3 if nodes >= 3 else nodes
            if nodes == 5 and g % 3 == 2:
                replicas = 5
            start = g % nodes
            voters = tuple(sorted(ids[(start + k) % nodes] for k in range(replicas)))
            self.topics.append((f"t{g}", uuid.UUID(int=self.rng.getrandbits(128) | 1), [voters]))
            # Every other group keeps state: KIP-630 snapshots, log start gated by the replicas.
            self.topic_configs[f"t{g}"] = {"cleanup.policy": "snapshot"} if g % 2 == 1 or groups == 1 and seed % 2 else {}
        self.clients: dict = {}
        self.admin_problems: list[str] = []
        self.removed_topic_ids: set = set()
        self.events_run = 0
        self.wire_messages = 0  # node-to-node messages encoded and decoded with the real codec
        self.fault_log: list[str] = []
        self.observers: list = []  # called after every event (invariant checks)

    def voters_of(self, topic: str) -> tuple:
        """A group's voters: the seed's placement, all nodes for the metadata, else (a topic an
        admin created through the controller) the replicas the image names; () once deleted."""
        if topic == METADATA_TOPIC:
            return tuple(self.nodes)
        for t, _, a in self.topics:
            if t == topic:
                return a[0]
        return self.admin_topics().get(topic, ())

    def admin_topics(self) -> dict:
        """Topics created through the controller and not deleted: name -> replicas (any image)."""
        images = [sn.node.plane.image for sn in self.nodes.values() if sn.node is not None and sn.node.plane]
        for image in images:  # a committed deletion is for good, even if the nodes that saw it are down
            self.removed_topic_ids |= image.removed
        removed = self.removed_topic_ids
        out: dict = {}
        for image in images:
            for topic in image.topics.values():
                if topic.name not in out and 0 in topic.partitions and topic.topic_id not in removed:
                    out[topic.name] = tuple(topic.partitions[0].replicas)
        return out

    def metadata_groups(self) -> list:
        return [(METADATA_TOPIC, tuple(self.nodes))] + sorted(self.admin_topics().items())

    # -- scheduling ----------------------------------------------------------------------------
    def at(self, time_ms: int, kind: str, *payload) -> None:
        self._seq += 1
        heapq.heappush(self._events, (time_ms, self._seq, kind, payload))

    def run_until(self, end_ms: int) -> None:
        while self._events and self._events[0][0] <= end_ms:
            time_ms, _, kind, payload = heapq.heappop(self._events)
            self.now = max(self.now, time_ms)
            getattr(self, "_on_" + kind)(*payload)
            self.events_run += 1
            for check in self.observers:
                check(self)
        self.now = max(self.now, end_ms)

    def log_fault(self, text: str) -> None:
        self.fault_log.append(f"{self.now:>7} ms  {text}")

    # -- node glue: the shell's part -------------------------------------------------------------
    def boot_all(self) -> None:
        for sn in self.nodes.values():
            sn.boot(self.now)
            self.settle(sn)

    def settle(self, sn: SimNode) -> None:
        """After anything happened on a node: deliver what it produced, persist, flush, re-arm."""
        node = sn.node
        if node is None:
            return
        try:
            self._answer(sn, node.poll(self.now))
            out = node.take_outbox(self.now)
        except SafetyViolation:
            raise
        if out.persist and not sn.persisting:
            sn.persisting = True
            self.at(self.now + self.rates.fsync_ms, "persisted", sn.id, sn.incarnation, out.persist)
        for send in out.sends:
            self.send(Message(sn.id, send.destination, True, send.api_key, send.api_version, send.correlation_id,
                              send.request, sn.incarnation))
        self._answer(sn, out.completions)
        for job in node.snapshot_jobs():
            self.at(self.now + self.rates.fsync_ms, "snapshot", sn.id, sn.incarnation, job)
        if not sn.flushing and node.logs_to_flush():
            sn.flushing = True
            self.at(self.now + self.rates.fsync_ms, "flush", sn.id, sn.incarnation)
        deadline = node.next_deadline_ms()
        if deadline is not None:
            deadline = max(deadline, self.now + 1)
            if sn.wake_at is None or deadline < sn.wake_at or sn.wake_at <= self.now:
                sn.wake_at = deadline
                self.at(deadline, "wake", sn.id, sn.incarnation)

    def _answer(self, sn: SimNode, completions) -> None:
        for c in completions:
            target = sn.parked.pop(c.token, None)
            if target is not None:
                source, api_key, version, correlation, request, incarnation = target
                self.send(Message(sn.id, source, False, api_key, version, correlation, c.response, incarnation))
                self._maybe_crash_after_vote(sn, api_key, request, c.response)

    def _maybe_crash_after_vote(self, sn: SimNode, api_key: int, request, response) -> None:
        """Buggify: crash a node the moment it granted a real vote. Correct code persisted the
        vote before answering, so this must be harmless."""
        if api_key != api.VOTE or not self.rates.crash_after_vote:
            return
        real = {(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions if not p.pre_vote}
        granted = any(p.vote_granted and (t.topic_name, p.partition_index) in real
                      for t in response.topics for p in t.partitions)
        if granted and self.rng.random() < self.rates.crash_after_vote:
            self.at(self.now, "crash", sn.id, False, self.rng.choice([5, 50]))

    def send(self, message: Message) -> None:
        delays = self.network.delays(message)
        if delays and isinstance(message.source, int) and isinstance(message.destination, int):
            requester = message.source if message.is_request else message.destination
            message = on_the_wire(message, f"kraftd-node-{requester}")  # the bytes sent now
            self.wire_messages += 1
        for delay in delays:
            self.at(self.now + delay, "deliver", message)

    def _on_deliver(self, message: Message) -> None:
        if isinstance(message.destination, str):
            client = self.clients.get(message.destination)
            if client is not None and not message.is_request:
                client.on_response(self, message)
            return
        sn = self.nodes[message.destination]
        if sn.node is None:
            if message.is_request and isinstance(message.source, int):
                # A crashed process: the sender's connection is refused (a partition, by contrast,
                # drops messages silently).
                self.at(self.now + 1, "unreachable", message.source, message.incarnation, message.destination)
            return
        if message.is_request:
            client_id = f"kraftd-node-{message.source}" if isinstance(message.source, int) else message.source
            header = m.RequestHeader(request_api_key=message.api_key, request_api_version=message.api_version,
                                     correlation_id=message.correlation_id, client_id=client_id)
            outcome = sn.node.handle(header, message.body, self.now, Peer(f"{client_id}:1", message.source if isinstance(message.source, int) else None))
            if isinstance(outcome, Respond):
                self.send(Message(sn.id, message.source, False, message.api_key, message.api_version,
                                  message.correlation_id, outcome.response, message.incarnation))
                self._maybe_crash_after_vote(sn, message.api_key, message.body, outcome.response)
            elif isinstance(outcome, Park):
                sn.parked[outcome.token] = (message.source, message.api_key, message.api_version,
                                            message.correlation_id, message.body, message.incarnation)
            else:
                assert isinstance(outcome, NoResponse)
        elif message.incarnation == sn.incarnation:  # (a connection does not outlive a restart)
            sn.node.on_response(message.source, message.correlation_id, message.body, self.now)
        self.settle(sn)

    def _on_unreachable(self, node_id: int, incarnation: int, peer: int) -> None:
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation:
            return
        sn.node.on_unreachable(peer, self.now)
        self.settle(sn)

    def _on_wake(self, node_id: int, incarnation: int) -> None:
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation:
            return
        if sn.wake_at is not None and sn.wake_at <= self.now:
            sn.wake_at = None
        self.settle(sn)

    def _on_persisted(self, node_id: int, incarnation: int, states: dict) -> None:
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation:
            return  # crashed before the write completed: it never happened
        sn.node.persist_election_states(states)
        sn.persisting = False
        self.settle(sn)

    def _on_flush(self, node_id: int, incarnation: int) -> None:
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation:
            return
        sn.flushing = False
        for key, log in sn.node.logs_to_flush():
            sn.node.on_flushed(key, log.flush(), self.now)
        self.settle(sn)

    def _on_snapshot(self, node_id: int, incarnation: int, job) -> None:
        """The shell's snapshot thread: write the file, then tell the core."""
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation:
            return  # crashed while writing: the .part is removed at the next start
        job.run()
        sn.node.on_snapshot_done(job, self.now)
        self.settle(sn)

    def discard(self) -> None:
        for disk in [sn.disk for sn in self.nodes.values()] + self.old_disks:
            disk.discard()

    # -- faults ----------------------------------------------------------------------------------
    def _on_crash(self, node_id: int, lose_disk: bool, down_ms: int | None = None) -> None:
        sn = self.nodes[node_id]
        if sn.node is None:
            return
        if lose_disk:
            sn.lose_disk()
            self.log_fault(f"node {node_id} crashes and loses its disk")
        else:
            sn.crash()
            self.log_fault(f"node {node_id} crashes")
        self.at(self.now + (self.rates.down_ms if down_ms is None else down_ms), "restart", node_id, lose_disk)

    def _on_restart(self, node_id: int, rejoining: bool) -> None:
        sn = self.nodes[node_id]
        if sn.node is not None:
            return
        sn.boot(self.now, rejoining=rejoining)
        self.log_fault(f"node {node_id} restarts{' on an empty disk' if rejoining else ''}")
        self.settle(sn)

    def _on_partition(self) -> None:
        self.log_fault("partition " + self.network.partition(list(self.nodes), list(self.clients)))

    def _on_heal(self) -> None:
        self.network.heal()
        self.log_fault("network healed")

    def _on_client(self, name: str) -> None:
        client = self.clients.get(name)
        if client is not None:
            client.tick(self)
