"""Membership in the simulation (issue 25, KIP-853): an operator changes the metadata quorum's
voters under every fault, and the checks that a change must pass.

The operator, through random nodes (forwarded to the controller), as `kraftd quorum add-voter`
/ `remove-voter` would:
- re-keys a node whose disk was replaced: removes its old directory, then adds the new one;
- otherwise removes a random voter (keeping at least three, so that the quorum survives the
  loss of a disk) or adds back a node that is none;
- sometimes sends a second change before the first is answered (two admins racing): the leader
  must take one at a time.

The checks, on every leader of a group whose voters are dynamic:
- at most one change in flight (one VotersRecord above the HW);
- each VotersRecord differs from the set before it by one voter (any two successive sets'
  majorities overlap), the first excepted (it records the configured voters' directories);
- a voter added had caught up: its log reached the leader's HW;
- the HW a leader moves is durable on a majority of its voters; a voter whose disk was lost
  counts as holding it, as in the other majority checks (it can vote for no one: no leader
  lacking the batch is elected with it), and a removed voter never counts.
"""
from __future__ import annotations

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.quorum.metadata.names import METADATA_TOPIC
from kraftd.quorum.raft.voter_set import VoterSet

from .invariants import Violation, _abstains, _header_at
from .network import Message

RETRIABLE = {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_LEADER_OR_FOLLOWER}
STALE = {ErrorCode.DUPLICATE_VOTER, ErrorCode.VOTER_NOT_FOUND}  # the view the op came from changed
TIMEOUT_MS = 4500


def metadata_image(sim):
    """The metadata image of the node that leads the metadata quorum at the highest epoch, or None."""
    leader = metadata_leader(sim)
    return leader.partition.snapshots.machine.image if leader is not None else None


def metadata_leader(sim):
    """The metadata group of the node that leads it at the highest epoch, or None."""
    best = None
    for sn in sim.nodes.values():
        if sn.node is None or sn.node.plane is None:
            continue
        group = sn.node.plane.partition.raft if sn.node.plane.partition is not None else None
        if group is not None and group.is_leader and (best is None or group.epoch > best.epoch):
            best = group
    return best


class VoterOperator:
    def __init__(self, name: str, rng, every_ms: int = 900) -> None:
        self.name = name
        self.rng = rng
        self.every_ms = every_ms
        self.pending: dict = {}   # correlation -> (kind, node id, directory, sent ms)
        self.correlation = 0
        self.active = True
        self.done: list = []      # (kind, node id, directory) committed

    def tick(self, sim) -> None:
        for c, (_, _, _, sent) in list(self.pending.items()):
            if sim.now - sent >= TIMEOUT_MS:
                del self.pending[c]  # no answer: the view is asked again
        if self.active and not self.pending:
            op = self._choose(sim)
            if op is not None:
                self._send(sim, *op)
                if self.rng.random() < 0.25:
                    second = self._choose(sim, other_than=op[1])
                    if second is not None:
                        self._send(sim, *second)
        if self.active or self.pending:
            sim.at(sim.now + self.every_ms, "client", self.name)

    def _choose(self, sim, other_than: int | None = None):
        leader = metadata_leader(sim)
        if leader is None or leader.log_voters.offset() < 0:
            return None
        voters = leader.voter_set
        nodes = [n for n in sim.nodes if n != other_than]
        stale = [v for v in voters.voters
                 if v.directory_id is not None and v.directory_id != sim.nodes[v.node_id].disk.directory_id]
        for v in stale:  # a replaced disk: its old directory goes first
            if v.node_id in nodes:
                return "remove", v.node_id, v.directory_id
        if stale:
            return None  # (the other admin's op re-keys it: nothing else meanwhile)
        outside = [n for n in nodes if voters.get(n) is None and sim.nodes[n].node is not None]
        if outside and self.rng.random() < 0.6:
            n = self.rng.choice(outside)
            return "add", n, sim.nodes[n].disk.directory_id
        removable = [v for v in voters.voters if v.node_id in nodes]
        if len(voters.voters) > 3 and removable and self.rng.random() < 0.5:
            v = self.rng.choice(removable)
            return "remove", v.node_id, v.directory_id
        return None

    def _send(self, sim, kind: str, node_id: int, directory) -> None:
        self.correlation += 1
        if kind == "add":
            request = m.AddRaftVoterRequest(cluster_id=None, timeout_ms=3000, voter_id=node_id,
                                            voter_directory_id=directory, listeners=[
                                                m.AddRaftVoterRequest.Listener(name="PLAINTEXT", host="sim", port=9092)])
            key = api.ADD_RAFT_VOTER
        else:
            request = m.RemoveRaftVoterRequest(cluster_id=None, voter_id=node_id, voter_directory_id=directory)
            key = api.REMOVE_RAFT_VOTER
        self.pending[self.correlation] = (kind, node_id, directory, sim.now)
        sim.send(Message(self.name, self.rng.choice(list(sim.nodes)), True, key, 0, self.correlation, request))

    def on_response(self, sim, message: Message) -> None:
        op = self.pending.pop(message.correlation_id, None)
        if op is None:
            return
        error = message.body.error_code
        if error == 0:
            self.done.append(op[:3])
            sim.coverage[f"voters {'added' if op[0] == 'add' else 'removed'}"] += 1
            if op[0] == "remove" and op[2] != sim.nodes[op[1]].disk.directory_id:
                sim.coverage["replaced disks re-keyed"] += 1
        elif error not in RETRIABLE and error not in STALE:
            sim.admin_problems.append(f"{op[0]} voter {op[1]}: unexpected error {error}")


class MembershipChecks:
    """The per-leader checks above; `sets` caches decoded VotersRecords by their bytes."""

    def __init__(self) -> None:
        self.sets: dict = {}
        self.added_checked: set = set()   # (group, offset) of VotersRecords checked for caught-up voters
        self.hw_checked: dict = {}        # (node, group, epoch) -> HW already checked
        self.latest_seen: dict = {}       # (node, group, epoch) -> offset of the newest VotersRecord seen
        self.changes_seen: set = set()

    def _decode(self, value: bytes) -> VoterSet:
        found = self.sets.get(value)
        if found is None:
            found = self.sets[value] = VoterSet.from_value(value)
        return found

    def check(self, sim, sn, g, group) -> None:
        log = group.partition.log
        entries = log.voter_sets.entries()
        if not entries:
            return
        hw = group.partition.high_watermark
        latest_offset = entries[-1][0]
        if (g, latest_offset) not in self.added_checked and latest_offset >= group.role.epoch_start_offset \
                and len(entries) > 1 and entries[-2][0] >= hw:
            # One change at a time: a leader appends a change only once the one before committed.
            raise Violation(f"{g}: leader {sn.id} appended the voter change at {latest_offset} while the one at "
                            f"{entries[-2][0]} had not committed (HW {hw})")
        sets = [(offset, self._decode(value)) for offset, value in entries]
        for (_, before), (offset, after) in zip(sets, sets[1:]):
            if before.ids != after.ids and not before.differs_by_one(after):
                raise Violation(f"{g}: the voters at {offset} ({after.ids}) differ from the set before "
                                f"({before.ids}) by more than one voter")
        offset, latest = sets[-1]
        if (g, offset) not in self.added_checked:
            self.added_checked.add((g, offset))
            if (g, offset) not in self.changes_seen:
                self.changes_seen.add((g, offset))
                sim.coverage["voter changes" if g[0] == METADATA_TOPIC else "partition voter changes"] += 1
            previous = sets[-2][1] if len(sets) > 1 else None
            if previous is not None:
                for v in latest.voters:
                    if previous.get(v.node_id) is None:
                        self._caught_up(sim, g, v, hw, offset, _counted_fetch_at(sn, group, v.node_id))
        # (a HW that moved in the event that appended a change may have moved under either set)
        key = (sn.id, g, group.epoch)
        candidates = [latest]
        if self.latest_seen.get(key) != offset and len(sets) > 1:
            candidates.append(sets[-2][1])
        self.latest_seen[key] = offset
        self._hw_on_voter_majority(sim, sn, g, group, candidates, hw)

    @staticmethod
    def _caught_up(sim, g, voter, hw: int, offset: int, fetched_at: int | None) -> None:
        """`fetched_at`: when (simulation ms) the voter made the fetch its leader counted (None:
        the leader does not know)."""
        node = sim.nodes.get(voter.node_id)
        if node is None or node.disk.directory_id != voter.directory_id or _abstains(node, g):
            return  # (a replica that may not vote until caught up: the disk-loss rule covers it)
        if fetched_at is not None and node.booted_at > fetched_at:
            # It restarted since the fetch that showed it caught up, and a crash keeps only what
            # was flushed (a follower's fetch offset is not durable, in Kafka either): the
            # leader's rule held when it was applied (sim seed 1585).
            return
        log = node.disk.logs.get(g[:2])
        end = log.log_end_offset if log is not None else 0
        sim.admin_topics()  # (brings sim.removed_topic_ids up to date)
        if log is None and g[2] in sim.removed_topic_ids:
            return  # the topic was deleted meanwhile: the node dropped its copy after it caught up
        if log is None and g[0] != METADATA_TOPIC:
            # The node dropped a caught-up copy right after its last fetch (it had not replayed
            # the move back to it yet: sim seeds 3276, 7698); its next copy joins with no vote
            # until caught up, so the set is safe, and the leader is there to catch it up.
            return
        if end < hw:
            raise Violation(f"{g}: voter {voter.node_id} added at {offset} before it caught up: its log ends at "
                            f"{end}, the leader's HW is {hw}")

    def _hw_on_voter_majority(self, sim, sn, g, group, candidates: list, hw: int) -> None:
        key = (sn.id, g, group.epoch)
        if key not in self.hw_checked:
            self.hw_checked[key] = hw  # what it led with: committed by an earlier leader, checked then
            return
        if self.hw_checked[key] >= hw or hw <= group.partition.log.log_start_offset:
            return
        sim.admin_topics()  # (brings sim.removed_topic_ids up to date)
        if g[2] in sim.removed_topic_ids:
            return  # deleted: the replicas that replayed the deletion dropped their copies
        self.hw_checked[key] = hw
        target = _header_at(group.partition.log, hw - 1)
        if target is None:
            return
        problems = [self._not_on_majority(sim, sn, g, group, voters, hw, target) for voters in candidates]
        if all(problems):
            raise Violation(problems[0])

    def _not_on_majority(self, sim, sn, g, group, voters: VoterSet, hw: int, target) -> str | None:
        holding = []
        for v in voters.voters:
            node = sim.nodes.get(v.node_id)
            if node is None:
                continue
            if (v.directory_id is not None and node.disk.directory_id != v.directory_id) or _abstains(node, g):
                # The voter's disk was lost (after it acknowledged, maybe): it can vote for no one,
                # so no leader lacking the batch can be elected with it (the disk-loss rule).
                holding.append(v.node_id)
                continue
            log = node.disk.logs.get(g[:2])
            if log is None:
                continue
            durable = min(log.flushed_offset, log.log_end_offset)
            if v.node_id == sn.id:
                durable = group.durable_offset()
            if log.log_start_offset >= hw or (durable >= hw and _same(_header_at(log, hw - 1), target)):
                holding.append(v.node_id)
        if len(holding) < voters.majority():
            return (f"{g}: leader {sn.id} of epoch {group.epoch} moved its HW to {hw}, durable on only "
                    f"{holding} of its voters {voters.ids}")
        return None


def _same(a, b) -> bool:
    return a is not None and a.base_offset == b.base_offset and a.partition_leader_epoch == b.partition_leader_epoch


def _counted_fetch_at(sn, group, node_id: int) -> int | None:
    """When (simulation ms) leader `sn` last heard `node_id` fetch `group`, if it knows."""
    progress = getattr(group.role, "progress", None)
    p = progress.by_voter.get(node_id) if progress is not None else None
    if p is None or p.last_fetch_ms < 0:
        return None
    return sn.sim_time(p.last_fetch_ms)
