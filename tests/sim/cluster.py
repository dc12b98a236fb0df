"""The simulated cluster: nodes (the real quorum core on memory disks), a scheduler in virtual
time, and the shell's real step (server/shell_step.py: persist, then send; group commit; timers)
carried out in virtual time, with persists, flushes and snapshot writes that take time, are lost
in a crash and may fail."""
from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
import random
import uuid
from collections import Counter

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.quorum.log_opening import OpenLogsJob
from kraftd.quorum.metadata.names import METADATA_TOPIC, METADATA_TOPIC_ID
from kraftd.quorum.node import Node
from kraftd.quorum.node_wiring import NodeRuntime, NodeStartup
from kraftd.quorum.node_config import NodeConfig
from kraftd.quorum.outcomes import NoResponse, Park, Respond
from kraftd.quorum.peer import Peer
from kraftd.quorum.raft.config import RaftConfig
from kraftd.quorum.raft.voter_set import VoterSet
from kraftd.server.log_flusher import flush_each
from kraftd.server.shell_step import ShellStep, StepActions

from .faults import MOMENT_CRASHES_MAX
from .invariants import Violation
from .network import Message, Network, on_the_wire
from .stores import Disk, FileDisk, SimulatedCrash

CLUSTER_ID = "sim-cluster-0000000000"
RAFT = RaftConfig(election_timeout_ms=300, fetch_timeout_ms=600, election_backoff_max_ms=300,
                  request_timeout_ms=400, retry_backoff_ms=50, fetch_max_wait_ms=100)


class InjectedFsyncError(OSError):
    """The fsync failure the fault plan draws: the only reason a node may stop on its own."""


class SimNode:
    def __init__(self, sim, node_id: int) -> None:
        self.sim = sim
        self.id = node_id
        self.disk = sim.new_disk()
        self.node: Node | None = None
        self.step: ShellStep | None = None      # the shell's step driving this incarnation
        self.incarnation = 0
        self.parked: dict[int, tuple] = {}      # token -> (source, api_key, version, correlation)
        self.wake_at = None
        self.booted_at = -1
        self.paused_until = 0
        self.led: set = set()  # (group, epoch) leaderships seen (for the new-leader moment)
        self.view: dict = {}   # group -> (leader?, epoch, HW, LEO) at the end of the last step
        # Its own clock: drifts from the simulation's (FaultRates.clock_drift), never goes back.
        drift = sim.rates.clock_drift
        self.clock_rate = 1.0 + (sim.rng.uniform(-drift, drift) if drift else 0.0)
        self.clock_offset = sim.rng.randrange(0, 10**6) if drift else 0
        # Its wall clock (timestamps only, quorum/wall_clock.py) steps now and then by up to an
        # hour either way, as NTP or an operator sets it. Timers must not notice. Drawn from a
        # generator of its own, so that the seeds' other draws stay as they were.
        wall_rng = random.Random(sim.seed * 1_000_003 + node_id)
        self.wall_step_at: list[int] = []   # simulation ms of each step
        self.wall_step_sum: list[int] = []  # the clock's total offset from then on
        if wall_rng.random() < 0.5:
            at, total = 0, 0
            while at < 30_000:
                at += wall_rng.randrange(500, 6000)
                total += wall_rng.choice((-1, 1)) * wall_rng.randrange(1000, 3_600_000)
                self.wall_step_at.append(at)
                self.wall_step_sum.append(total)

    @property
    def up(self) -> bool:
        return self.node is not None

    def clock(self) -> int:
        """Now, on this node's clock (ms)."""
        return self.clock_offset + int(self.sim.now * self.clock_rate)

    def wall_clock(self) -> int:
        """Now, on this node's wall clock (ms): its timer clock plus the steps so far."""
        steps = bisect.bisect_right(self.wall_step_at, self.sim.now)
        return self.clock() + (self.wall_step_sum[steps - 1] if steps else 0)

    def sim_time(self, node_ms: int) -> int:
        """The first simulation ms at which this node's clock shows at least `node_ms`."""
        return math.ceil((node_ms - self.clock_offset) / self.clock_rate)

    def boot(self, *, rejoining: bool = False) -> None:
        now_ms = self.clock()
        self.incarnation += 1
        # Every node is a voter of the metadata quorum (the real cluster's controller, broker
        # registrations, leadership reports and producer-id blocks run under the faults too);
        # the data topics are placed out of band, as the seed drew them.
        config = NodeConfig(node_id=self.id, fsync_policy="acks_all", retention_check_interval_ms=500,
                            snapshot_max_bytes_between=3000, snapshot_min_changed_records_ratio=0.0,
                            snapshot_start_offset_lag_time_max_ms=2000, broker_session_timeout_ms=2000,
                            log_cleaner_backoff_ms=100,
                            voters={i: ("sim", 9092) for i in self.sim.nodes})
        seed = self.sim.rng.getrandbits(64)
        session_rng = random.Random(seed ^ 0x5EED)
        runtime = NodeRuntime(rng=random.Random(seed), new_session_id=lambda: session_rng.randrange(1, 0x7FFFFFFF),
                              raft_config=self.sim.raft, bugs=self.sim.bugs, cluster_id=CLUSTER_ID,
                              wall_clock=self.wall_clock)
        # The disk remembers it replaced a lost one (a durable marker, like a data dir formatted
        # to join an existing cluster): groups without a persisted state must catch up before
        # they vote, across restarts too.
        startup = NodeStartup(rejoining=rejoining or self.disk.lost, on_rejoin_complete=self._rejoined)
        self.node = Node(config, self.disk.storage(), runtime, startup)
        self.step = ShellStep(self.node, fsync_policy=config.fsync_policy, flush_interval_ms=config.flush_interval_ms)
        self.step.clustered = True
        self.parked.clear()
        self.paused_until = 0
        # The last incarnation's wake is void (its event is dropped): kept, it would keep this
        # one's earlier-or-not check from scheduling any (a node nobody talked to then slept
        # for good: sim seed 7418).
        self.wake_at = None
        self.booted_at = self.sim.now  # (simulation ms)
        self.view = {}
        hooks = self.node.group_hooks
        install = hooks.install_snapshot

        def counted_install(*args, **kwargs):
            self.sim.coverage["snapshot installs"] += 1
            return install(*args, **kwargs)

        hooks.install_snapshot = counted_install
        self.node.start(now_ms)
        if not [t for t in self.disk.catalog.all() if t.name != METADATA_TOPIC]:
            for name, topic_id, assignments in self.sim.topics:
                if any(self.id in a for a in assignments):
                    self.node.create_replicated_topic(name, topic_id, assignments, self.sim.topic_configs[name],
                                                      now_ms)

    @property
    def rejoining(self) -> bool:
        """Its disk replaced a lost one and a group of it may not vote yet. (The node's own rejoin
        check reads the image, which the simulation's out-of-band data topics are not in, so
        the marker alone says too little.)"""
        if self.disk.lost:
            return True
        if self.node is not None:
            return any(not g.state.may_vote for g in self.node.replication.groups.values())
        return any(not s.may_vote for s in self.disk.elections.states.values())

    def _rejoined(self) -> None:
        """Every group caught up: the durable rejoin marker goes, as the server removes its file."""
        if self.disk.lost:
            self.disk.lost = False
            self.sim.coverage["rejoins completed"] += 1

    def crash(self) -> None:
        self.node = self.step = None
        self.disk.crash()

    def lose_disk(self) -> None:
        self.node = self.step = None
        self.sim.old_disks.append(self.disk)
        self.disk = self.sim.new_disk()
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
        self.moments = dict(rates.moments)
        self.moment_crashes = 0
        self.faults_on = True    # off in the liveness phase
        # How often each fault class and protocol event happened in this run (make sim sums them).
        self.coverage: Counter = Counter()
        self.request_timeout_ms = RAFT.request_timeout_ms
        self.raft = RAFT
        if rates.chunk_bytes:
            self.raft = dataclasses.replace(RAFT, snapshot_chunk_bytes=rates.chunk_bytes,
                                            partition_max_bytes=rates.chunk_bytes, fetch_max_bytes=4 * rates.chunk_bytes)
            self.coverage["small-size seeds"] += 1
        self.disks_made = 0
        self.nodes = {i: SimNode(self, i) for i in range(1, nodes + 1)}
        self._metadata_voter_sets = [tuple(self.nodes)]
        self._dynamic_voter_sets: dict = {}  # topic -> (topic id, the sets last seen), see voter_sets
        self._decoded_voters: dict = {}      # a VotersRecord's value -> its voter ids
        self.coverage["drifting clocks"] = sum(sn.clock_rate != 1.0 for sn in self.nodes.values())
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
        # Half the file-log seeds compact one group (cleanup.policy=compact, issue 26): short
        # segment.ms and a low dirty ratio make the cleaner run many passes in a run, and tombstones
        # go a second after their segment is cleaned. Drawn from a generator of its own, so that
        # the seeds' other draws stay as they were.
        self.compacted: set = set()
        if rates.file_logs and random.Random(seed * 7_368_787 + 3).random() < 0.5:
            plain = [f"t{g}" for g in range(groups) if not self.topic_configs[f"t{g}"]]
            if plain:
                self.compacted.add(plain[-1])
                self.topic_configs[plain[-1]] = {"cleanup.policy": "compact", "segment.ms": "150",
                                                 "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"}
                self.coverage["compacted seeds"] = 1
        self.clients: dict = {}
        self.admin_problems: list[str] = []
        self.removed_topic_ids: set = set()
        self.events_run = 0
        self.fault_log: list[str] = []
        self.observers: list = []  # called after every event (invariant checks)
        # The nodes whose state the current event changed: every change goes through a step
        # (carry_out) or a crash. The checks look at these only; None: every node (at boot).
        self.touched: set | None = None
        self._checking = False
        self._admin_topics: dict = {}
        self._admin_topics_at = -1
        self._admin_topic_ids: dict = {}

    def voters_of(self, topic: str) -> tuple:
        """A group's voters: the seed's placement, all nodes for the metadata, else (a topic an
        admin created through the controller) the replicas the image names; () once deleted."""
        if topic == METADATA_TOPIC:
            return self.metadata_voters()
        for t, _, a in self.topics:
            if t == topic:
                return a[0]
        return self.admin_topics().get(topic, ())

    def metadata_voters(self) -> tuple:
        """Every voter of the sets the metadata quorum's newest leader may have committed its HW
        under (`metadata_voter_sets`)."""
        return tuple(sorted({v for voters in self.metadata_voter_sets() for v in voters}))

    def metadata_voter_sets(self, hw: int | None = None) -> list:
        """The voter sets a HW (default: the newest leader's) may have moved under (KIP-853):
        the one in force at it, and the newest in the newest leader's log (at most one change
        is in flight); the last seen while no node leads."""
        from .membership import metadata_leader

        leader = metadata_leader(self)
        if leader is not None:
            log = leader.partition.log
            hw = leader.partition.high_watermark if hw is None else hw
            value = log.voter_sets.value_at(hw - 1)
            sets = [leader.voters]
            if value is not None:
                sets.append(self._voter_ids(value))
            self._metadata_voter_sets = sets
        return self._metadata_voter_sets

    def _voter_ids(self, value) -> tuple:
        """The voter ids of a VotersRecord's value, decoded once."""
        key = bytes(value)
        ids = self._decoded_voters.get(key)
        if ids is None:
            ids = self._decoded_voters[key] = VoterSet.from_value(key).ids
        return ids

    def voter_sets(self, topic: str, hw: int | None = None) -> list | None:
        """The voter sets a group's HW (default: its newest leader's) may have moved under, once
        its voters are dynamic (KIP-853: the metadata quorum's, a partition a move changed): the
        one in force at the HW and the newest in the newest leader's log; the last seen while
        no node leads. None: the group's voters are static (`voters_of`)."""
        if topic == METADATA_TOPIC:
            return self.metadata_voter_sets(hw)
        topic_id = self.topic_id_of(topic)
        leader = None
        for sn in self.nodes.values():
            group = sn.node.replication.groups.get((topic, 0)) if sn.node is not None else None
            if (group is not None and group.is_leader and group.partition.topic_id == topic_id
                    and (leader is None or group.epoch > leader.epoch)):
                leader = group
        if leader is not None and leader.log_voters.offset() >= 0:
            log = leader.partition.log
            hw = leader.partition.high_watermark if hw is None else hw
            value = log.voter_sets.value_at(hw - 1)
            # (at an HW below the first VotersRecord, the static set was in force)
            sets = [leader.voters, self._voter_ids(value) if value is not None else leader.log_voters.static.ids]
            self._dynamic_voter_sets[topic] = (topic_id, sets)
            return sets
        known = self._dynamic_voter_sets.get(topic)
        return known[1] if known is not None and known[0] == topic_id else None

    def admin_topics(self) -> dict:
        """Topics created through the controller and not deleted: name -> replicas (any image;
        during a move, those before it)."""
        if self._checking and self._admin_topics_at == self.events_run:
            return self._admin_topics
        images = [sn.node.plane.image for sn in self.nodes.values() if sn.node is not None and sn.node.plane]
        for image in images:  # a committed deletion is for good, even if the nodes that saw it are down
            self.removed_topic_ids |= image.removed
        removed = self.removed_topic_ids
        out: dict = {}
        ids: dict = {}
        for image in images:
            for topic in image.topics.values():
                if topic.name not in out and 0 in topic.partitions and topic.topic_id not in removed:
                    # (during a move: the replicas it had, the voters of a group not changed yet)
                    out[topic.name] = tuple(topic.partitions[0].original())
                    ids[topic.name] = topic.topic_id
        self._admin_topic_ids = ids
        if self._checking:
            self._admin_topics, self._admin_topics_at = out, self.events_run
        return out

    def topic_id_of(self, topic: str):
        """The id of the topic now called `topic` (a deleted and re-created admin topic is a new
        topic under the old name); None once deleted."""
        if topic == METADATA_TOPIC:
            return METADATA_TOPIC_ID
        for t, topic_id, _ in self.topics:
            if t == topic:
                return topic_id
        self.admin_topics()
        return self._admin_topic_ids.get(topic)

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
            self.touched = set()
            getattr(self, "_on_" + kind)(*payload)
            self.events_run += 1
            self._checking = True  # nothing changes while the checks run: admin_topics() is cached
            for check in self.observers:
                check(self)
            self._checking = False
            self.touched = None
        self.now = max(self.now, end_ms)

    def log_fault(self, text: str) -> None:
        self.fault_log.append(f"{self.now:>7} ms  {text}")

    # -- node glue: the shell's part -------------------------------------------------------------
    def new_disk(self) -> Disk:
        self.disks_made += 1
        if self.rates.file_logs:
            self.coverage["file-log seeds"] = 1
            disk = FileDisk(CLUSTER_ID, self.coverage, self.rng, number=self.disks_made,
                            recovery_checks_crc=not (self.bugs and self.bugs.recovery_keeps_torn_batch))
            disk.swap_crash = self._swap_crash
            return disk
        return Disk(CLUSTER_ID, self.coverage, self.disks_made)

    def boot_all(self) -> None:
        for sn in self.nodes.values():
            sn.boot()
            self.carry_out(sn, sn.step.on_timer(sn.clock()))

    def carry_out(self, sn: SimNode, actions: StepActions) -> None:
        """Do what the shell's step decided, in its order (server/shell_step.py), as the server
        does, but in virtual time: a persist, a flush or a snapshot write completes fsync_ms
        later (or never: a crash loses it), and a node may crash at a protocol moment between
        two actions."""
        if self.touched is not None:
            self.touched.add(sn.id)
        if actions.fatal is not None:  # a failed fsync: the server stops at once
            fatal = actions.fatal
            if not isinstance(fatal.error, InjectedFsyncError):
                raise Violation(f"node {sn.id} stopped on a fault nobody injected: {fatal.what} "
                                f"({fatal.error!r}) for {fatal.key}")
            return self._on_crash(sn.id, False, logged=True)
        before = sn.view if self.moments else None  # as the last step left it
        if before is not None and self._new_leadership(sn) and self._moment("new-leader"):
            return self._crash_at_moment(sn, "new-leader")  # before its first sends leave
        if actions.persist is not None:
            self.at(self.now + self.rates.fsync_ms, "persisted", sn.id, sn.incarnation, actions.persist)
            if self._moment("persist-pending"):
                return self._crash_at_moment(sn, "persist-pending")
        for send in actions.sends:
            self.send(Message(sn.id, send.destination, True, send.api_key, send.api_version, send.correlation_id,
                              send.request, sn.incarnation))
        self._answer(sn, actions.completions)
        if before is not None:
            moment = self._moment_after(sn, before)
            if moment is not None:
                return self._crash_at_moment(sn, moment)
            sn.view = self._moment_view(sn)
        for job in actions.snapshot_jobs:
            self.at(self.now + self.rates.fsync_ms, "snapshot", sn.id, sn.incarnation, job)
        if actions.flush is not None:
            self.at(self.now + self.rates.fsync_ms, "flush", sn.id, sn.incarnation, actions.flush)
        deadline = actions.wake_at_ms
        if deadline is not None:
            deadline = max(sn.sim_time(deadline), self.now + 1)
            if sn.wake_at is None or deadline < sn.wake_at or sn.wake_at <= self.now:
                sn.wake_at = deadline
                self.at(deadline, "wake", sn.id, sn.incarnation)

    # -- protocol moments --------------------------------------------------------------------------
    def _moment(self, name: str) -> bool:
        chance = self.moments.get(name)
        return (chance is not None and self.faults_on and self.moment_crashes < MOMENT_CRASHES_MAX
                and self.rng.random() < chance)

    @staticmethod
    def _moment_view(sn) -> dict:
        return {key: (g.is_leader, g.epoch, g.partition.high_watermark, g.partition.log.log_end_offset)
                for key, g in sn.node.replication.groups.items()}

    def _new_leadership(self, sn) -> bool:
        new = False
        for key, g in sn.node.replication.groups.items():
            if g.is_leader and (key, g.epoch) not in sn.led:
                sn.led.add((key, g.epoch))
                self.coverage["elections"] += 1
                new = True
        return new

    def _moment_after(self, sn, before: dict) -> str | None:
        for key, g in sn.node.replication.groups.items():
            was = before.get(key)
            if was is None:
                continue
            p = g.partition
            if g.is_leader and was[0] and was[1] == g.epoch and p.high_watermark > was[2]:
                if self._moment("hw-advanced"):
                    return "hw-advanced"
            elif not g.is_leader and p.log.log_end_offset > was[3] and p.log.flushed_offset < p.log.log_end_offset:
                if self._moment("appended-unflushed"):
                    return "appended-unflushed"
        return None

    def _crash_at_moment(self, sn, moment: str) -> None:
        for check in self.observers:  # what it did up to now (a HW it just moved and sent) is seen
            check(self)
        self.moment_crashes += 1
        self.coverage["moment:" + moment] += 1
        self.log_fault(f"node {sn.id} crashes at a protocol moment: {moment}")
        self._on_crash(sn.id, False, self.rng.choice([5, 50, self.rates.down_ms]), logged=True)

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
        if delays and isinstance(message.source, int) and (isinstance(message.destination, int)
                                                           or not message.is_request):
            # Between nodes, and every answer to a client: the bytes sent now (a Fetch answer's
            # file regions are read now, not after the node crashed and its files were torn).
            requester = message.source if message.is_request else message.destination
            client_id = f"kraftd-node-{requester}" if isinstance(requester, int) else requester
            message = on_the_wire(message, client_id)
            self.coverage["wire messages"] += 1
        message.sent_ms = self.now
        for delay in delays:
            self.at(self.now + delay, "deliver", message)

    def _on_deliver(self, message: Message) -> None:
        if isinstance(message.destination, str):
            client = self.clients.get(message.destination)
            if client is not None and not message.is_request:
                client.on_response(self, message)
            return
        sn = self.nodes[message.destination]
        if sn.paused_until > self.now and sn.node is not None:
            return self.at(sn.paused_until, "deliver", message)  # queued in its socket meanwhile
        if sn.node is None:
            if message.is_request and isinstance(message.source, int):
                # A crashed process: the sender's connection is refused (a partition, by contrast,
                # drops messages silently).
                self.at(self.now + 1, "unreachable", message.source, message.incarnation, message.destination)
            return
        if message.is_request:
            if message.api_key == api.FETCH_SNAPSHOT and any(p.position > 0 for t in message.body.topics
                                                             for p in t.partitions):
                self.coverage["later snapshot chunks"] += 1  # a download of more than one chunk
            client_id = f"kraftd-node-{message.source}" if isinstance(message.source, int) else message.source
            header = m.RequestHeader(request_api_key=message.api_key, request_api_version=message.api_version,
                                     correlation_id=message.correlation_id, client_id=client_id)
            peer = Peer(f"{client_id}:1", message.source if isinstance(message.source, int) else None)
            outcome = sn.node.handle(header, message.body, sn.clock(), peer)
            if isinstance(outcome, Respond):
                self.send(Message(sn.id, message.source, False, message.api_key, message.api_version,
                                  message.correlation_id, outcome.response, message.incarnation))
                self._maybe_crash_after_vote(sn, message.api_key, message.body, outcome.response)
            elif isinstance(outcome, Park):
                sn.parked[outcome.token] = (message.source, message.api_key, message.api_version,
                                            message.correlation_id, message.body, message.incarnation)
            else:
                assert isinstance(outcome, NoResponse)
            self.carry_out(sn, sn.step.after_requests(sn.clock(), waiting=bool(sn.parked)))
            return
        if message.incarnation == sn.incarnation:  # (a connection does not outlive a restart)
            if message.sent_ms is not None and self.now - message.sent_ms > self.request_timeout_ms:
                self.coverage["late answers"] += 1
            sn.node.on_response(message.source, message.correlation_id, message.body, sn.clock())
        self.carry_out(sn, sn.step.after_event(sn.clock()))

    def _paused(self, sn, kind: str, *payload) -> bool:
        """A paused process does nothing: the event waits for the end of the pause."""
        if sn.paused_until > self.now:
            self.at(sn.paused_until, kind, *payload)
            return True
        return False

    def _on_unreachable(self, node_id: int, incarnation: int, peer: int) -> None:
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation or self._paused(sn, "unreachable", node_id, incarnation, peer):
            return
        sn.node.on_unreachable(peer, sn.clock())
        self.carry_out(sn, sn.step.after_event(sn.clock()))

    def _on_wake(self, node_id: int, incarnation: int) -> None:
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation or self._paused(sn, "wake", node_id, incarnation):
            return
        if sn.wake_at is not None and sn.wake_at <= self.now:
            sn.wake_at = None
        self.carry_out(sn, sn.step.on_timer(sn.clock()))

    def _on_persisted(self, node_id: int, incarnation: int, states: dict) -> None:
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation:
            self.coverage["lost persists"] += 1
            return  # crashed before the write completed: it never happened
        if self._paused(sn, "persisted", node_id, incarnation, states):
            return
        sn.node.write_election_states(states)  # the shell's election-state thread
        self.carry_out(sn, sn.step.persisted(sn.clock()))

    def _on_flush(self, node_id: int, incarnation: int, logs: list) -> None:
        """The shell's fsync pool: flush the logs the step handed out (appends made since are
        flushed too, as a real flush may), then report each one's durable offset."""
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation or self._paused(sn, "flush", node_id, incarnation, logs):
            return
        if self.rates.fsync_failure and self.faults_on and self.rng.random() < self.rates.fsync_failure:
            # fsync failed: the step tells the server to stop (it cannot know what reached the disk).
            self.coverage["fsync failures"] += 1
            self.log_fault(f"node {node_id}: fsync fails, the node stops")
            results = [(logs[0][0], logs[0][1], InjectedFsyncError(5, "fsync: Input/output error"))]
        else:  # what the server's pool runs, a log its topic's deletion discarded meanwhile included
            offsets = flush_each([log for _, log in logs])
            results = [(key, log, offset) for (key, log), offset in zip(logs, offsets)]
        self.carry_out(sn, sn.step.flushed(sn.clock(), results))

    def _on_snapshot(self, node_id: int, incarnation: int, job) -> None:
        """The shell's snapshot thread: write the file, then tell the core."""
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation:
            return  # crashed while writing: the .part is removed at the next start
        if self._paused(sn, "snapshot", node_id, incarnation, job):
            return
        job.run()
        if isinstance(job, OpenLogsJob):
            self.coverage["log-opening jobs"] += 1
        if getattr(job, "cleaner_job", False):
            self.coverage["cleaning jobs"] += 1
            self._cleans_committed_only(sn, job)
        if getattr(job, "follower_job", False) or getattr(job, "cleaner_job", False):
            # A truncation's copy, an install's decoded state or a cleaning pass's files are
            # ready; the loop hears of it later: the log and the group may change meanwhile.
            self.at(self.now + max(1, self.rates.fsync_ms), "job_done", node_id, incarnation, job)
            return
        self.carry_out(sn, sn.step.snapshot_done(job, sn.clock()))

    @staticmethod
    def _cleans_committed_only(sn, job) -> None:
        """The cleaner decides which records to drop from committed ones only: a pass never
        reaches past its replica's HW (at the plan, which is at or below the HW now)."""
        p = sn.node.topics.partition(*job.key)
        if p is not None and p.log is job.log and job.plan.end_offset > p.high_watermark:
            raise Violation(f"node {sn.id} {job.key}: a cleaning pass runs to offset {job.plan.end_offset}, past "
                            f"the HW {p.high_watermark}")

    def _swap_crash(self) -> int | None:
        """Whether the node dies in the middle of swapping in a cleaning pass (in one commit of
        four, while the faults are on): after how many of its file operations."""
        if self.faults_on and self.moment_crashes < MOMENT_CRASHES_MAX and self.rng.random() < 0.25:
            return self.rng.randrange(0, 6)
        return None

    def _on_job_done(self, node_id: int, incarnation: int, job) -> None:
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation:
            if getattr(job, "cleaner_job", False):
                self.coverage["cleaning passes cut by a crash"] += 1
            return  # crashed before the commit: the next open removes the .trunc or .cleaned files
        if self._paused(sn, "job_done", node_id, incarnation, job):
            return
        try:
            actions = sn.step.snapshot_done(job, sn.clock())
        except SimulatedCrash:
            self.moment_crashes += 1
            self.log_fault(f"node {node_id} crashes in the middle of a cleaning pass's swap")
            return self._on_crash(node_id, False, self.rng.choice([5, 50, self.rates.down_ms]), logged=True)
        self.carry_out(sn, actions)

    def discard(self) -> None:
        for disk in [sn.disk for sn in self.nodes.values()] + self.old_disks:
            disk.discard()

    # -- faults ----------------------------------------------------------------------------------
    def _on_crash(self, node_id: int, lose_disk: bool, down_ms: int | None = None, logged: bool = False) -> None:
        sn = self.nodes[node_id]
        if sn.node is None:
            return
        if self.touched is not None:
            self.touched.add(node_id)
        if sn.step.persisting:
            self.coverage["crashes while persisting"] += 1
        if lose_disk and (any(other.rejoining for other in self.nodes.values()) or not self._quorum_spares_a_disk()):
            lose_disk = False  # one replaced disk at a time: an earlier rejoin has not completed
        if lose_disk:
            sn.lose_disk()
            self.coverage["disk losses"] += 1
            self.log_fault(f"node {node_id} crashes and loses its disk")
        else:
            sn.crash()
            self.coverage["crashes"] += 1
            if not logged:
                self.log_fault(f"node {node_id} crashes")
        self.at(self.now + (self.rates.down_ms if down_ms is None else down_ms), "restart", node_id, lose_disk)

    def _quorum_spares_a_disk(self) -> bool:
        """The metadata quorum can lose a voter's disk for good: three voters or more, each on
        the disk it was recorded with (a replaced one re-keyed already: KIP-853), in every voter
        set a live node's log holds and in the one the leader committed (a change in flight may
        yet be lost). The fault model loses one disk at a time, as the operator replaces it
        before the next loss."""
        from .membership import metadata_leader

        sets = []
        for sn in self.nodes.values():
            group = sn.node.plane.partition.raft if sn.node is not None and sn.node.plane else None
            if group is not None and group.log_voters.offset() >= 0:
                sets.append(group.voter_set)
        leader = metadata_leader(self)
        if leader is not None:
            committed = leader.partition.log.voter_sets.value_at(leader.partition.high_watermark - 1)
            if committed is not None:
                sets.append(VoterSet.from_value(committed))
        if not all(len(s.voters) >= 3 and all(v.directory_id in (None, self.nodes[v.node_id].disk.directory_id)
                                                  for v in s.voters) for s in sets):
            return False
        # Likewise every partition group a move made dynamic: its voters each on their disk (a
        # replaced one re-keyed by the partition's leader already).
        for sn in self.nodes.values():
            for group in (sn.node.replication.groups.values() if sn.node is not None else ()):
                if group.log_voters.offset() >= 0 and group.partition.topic != METADATA_TOPIC and not all(
                        v.directory_id in (None, self.nodes[v.node_id].disk.directory_id)
                        for v in group.voter_set.voters if v.node_id in self.nodes):
                    return False
        return True

    def _on_restart(self, node_id: int, rejoining: bool) -> None:
        sn = self.nodes[node_id]
        if sn.node is not None:
            return
        sn.boot(rejoining=rejoining)
        self.log_fault(f"node {node_id} restarts{' on an empty disk' if rejoining else ''}")
        self.carry_out(sn, sn.step.on_timer(sn.clock()))

    def _on_pause(self, node_id: int, pause_ms: int) -> None:
        """The process stops (a GC pause, a stopped VM) and comes back with a stale view."""
        sn = self.nodes[node_id]
        if sn.node is None or sn.paused_until > self.now:
            return
        sn.paused_until = self.now + pause_ms
        self.coverage["pauses"] += 1
        self.log_fault(f"node {node_id} pauses for {pause_ms} ms")

    def _on_partition(self) -> None:
        self.log_fault("partition " + self.network.partition(list(self.nodes), list(self.clients)))

    def _on_heal(self) -> None:
        self.network.heal()
        self.log_fault("network healed")

    def _on_client(self, name: str) -> None:
        client = self.clients.get(name)
        if client is not None:
            client.tick(self)
