"""Directory ids (issue 25, KIP-853/KIP-858) in a three-node simulated cluster without random
faults: every node registers the directory id of its disk, a partition records the directory
of each replica it was placed on, and DescribeQuorum v2 reports each voter's directory id (as
its fetches say) and the listeners of the nodes it names. A node on a replaced disk registers
its new directory; the partitions placed on the old one keep it."""
from __future__ import annotations

import uuid

import pytest

from kraftd.protocol import api
from kraftd.protocol import messages as m

from .cluster import Simulation
from .network import Message
from .test_controller_answers import CLIENT, QUIET, _controller, _send, _settle


class Answers:
    def __init__(self) -> None:
        self.by_correlation: dict = {}

    def on_response(self, sim, message: Message) -> None:
        self.by_correlation[message.correlation_id] = message.body

    def tick(self, sim) -> None:
        pass


def quiet_cluster(seed: int, nodes: int, rates=QUIET):
    """A simulated cluster without random faults, its admin client's answers recorded: (sim,
    answers, the controller's node) once every broker is registered and live."""
    sim = Simulation(seed, nodes=nodes, groups=0, rates=rates)
    answers = Answers()
    sim.clients[CLIENT] = answers
    sim.boot_all()
    for _ in range(200):
        sim.run_until(sim.now + 50)
        sn = _controller(sim)
        if sn is not None and len(sn.node.plane.image.live_brokers()) == nodes:
            return sim, answers, sn
    pytest.fail(f"no controller with {nodes} live brokers")


def _cluster():
    return quiet_cluster(11, 3)


def _describe(sim, answers, node: int, correlation: int):
    request = m.DescribeQuorumRequest(topics=[m.DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[m.DescribeQuorumRequest.PartitionData(partition_index=0)])])
    sim.send(Message(CLIENT, node, True, api.DESCRIBE_QUORUM, 2, correlation, request))
    sim.run_until(sim.now + 20)
    return answers.by_correlation[correlation]


def _replace_a_disk(sim, controller):
    """A node other than the controller loses its disk and restarts on a new one: (node, the old
    directory id, the new one)."""
    victim = next(sn for sn in sim.nodes.values() if sn.id != controller.id)
    old = victim.disk.directory_id
    victim.crash()
    victim.lose_disk()
    victim.boot()
    assert victim.disk.directory_id != old
    return victim, old, victim.disk.directory_id


def test_registrations_and_partitions_carry_each_nodes_directory_id():
    sim, answers, controller = _cluster()
    disks = {i: sn.disk.directory_id for i, sn in sim.nodes.items()}
    assert len(set(disks.values())) == 3
    _send(sim, controller.id, 1, "create", "d")
    sim.run_until(sim.now + 300)
    _settle(sim)
    for sn in sim.nodes.values():
        image = sn.node.plane.image
        assert {i: b.directory_id for i, b in image.brokers.items()} == disks, f"node {sn.id}"
        info = image.topic("d").partitions[0]
        assert info.directories == [disks[r] for r in info.replicas], f"node {sn.id}"
        assert all(info.directory_of(r) == disks[r] for r in info.replicas)

    out = _describe(sim, answers, controller.id, 2)
    p = out.topics[0].partitions[0]
    assert p.error_code == 0 and p.leader_id == controller.id
    assert {v.replica_id: v.replica_directory_id for v in p.current_voters} == disks
    assert sorted(n.node_id for n in out.nodes) == [1, 2, 3]
    recorded = controller.node.plane.partition.raft.voter_set  # (a voter's listener as the VotersRecord holds it)
    for n in out.nodes:
        v = recorded.get(n.node_id)
        assert [(x.host, x.port) for x in n.listeners] == [(v.host, v.port)]


def test_a_replaced_disk_registers_a_new_directory_and_partitions_keep_the_old_one():
    sim, answers, controller = _cluster()
    _send(sim, controller.id, 1, "create", "d")
    sim.run_until(sim.now + 300)
    _settle(sim)
    victim, old, new = _replace_a_disk(sim, controller)
    for _ in range(100):
        sim.run_until(sim.now + 50)
        if controller.node.plane.image.brokers[victim.id].directory_id == new:
            break
    _settle(sim)
    image = controller.node.plane.image
    assert image.brokers[victim.id].directory_id == new
    assert image.topic("d").partitions[0].directory_of(victim.id) == old
    # The voter is the old directory (the quorum recorded it); the leader hears the new one in
    # the replaced node's fetches, and counts it as an observer.
    leader = _controller(sim)
    out = _describe(sim, answers, leader.id, 3)
    p = out.topics[0].partitions[0]
    voters = {v.replica_id: v.replica_directory_id for v in p.current_voters}
    observers = {v.replica_id: v.replica_directory_id for v in p.observers}
    assert voters[victim.id] == old and uuid.UUID(int=0) not in voters.values()
    assert observers == {victim.id: new}


def _metadata_group(sn):
    return sn.node.plane.partition.raft


def _change(sim, answers, node: int, correlation: int, kind: str, voter: int, directory):
    if kind == "add":
        request = m.AddRaftVoterRequest(cluster_id=None, timeout_ms=3000, voter_id=voter, voter_directory_id=directory,
                                        listeners=[m.AddRaftVoterRequest.Listener(name="PLAINTEXT", host="sim",
                                                                                  port=9092)])
        key = api.ADD_RAFT_VOTER
    else:
        request = m.RemoveRaftVoterRequest(cluster_id=None, voter_id=voter, voter_directory_id=directory)
        key = api.REMOVE_RAFT_VOTER
    sim.send(Message(CLIENT, node, True, key, 0, correlation, request))
    for _ in range(60):
        sim.run_until(sim.now + 50)
        if correlation in answers.by_correlation:
            return answers.by_correlation[correlation]
    pytest.fail(f"no answer to {kind} voter {voter}")


def test_the_metadata_quorum_records_its_voters_with_their_directories():
    sim, answers, controller = _cluster()
    _settle(sim)
    disks = {i: sn.disk.directory_id for i, sn in sim.nodes.items()}
    for sn in sim.nodes.values():
        group = _metadata_group(sn)
        assert group.log_voters.offset() >= 0, f"node {sn.id}: no VotersRecord"
        assert {v.node_id: v.directory_id for v in group.voter_set.voters} == disks
        assert group.is_voter


def test_a_replaced_disk_is_no_voter_until_removed_and_added_again():
    sim, answers, controller = _cluster()
    _settle(sim)
    victim, old, new = _replace_a_disk(sim, controller)
    _settle(sim)
    group = _metadata_group(victim)
    assert group.voter_set.get(victim.id).directory_id == old
    assert not group.is_voter and not group.may_stand
    # Adding it while its old directory is a voter: the node is a voter already.
    leader = _controller(sim)
    out = _change(sim, answers, leader.id, 20, "add", victim.id, new)
    assert out.error_code == 126, out  # DUPLICATE_VOTER
    out = _change(sim, answers, leader.id, 21, "remove", victim.id, old)
    assert out.error_code == 0, out
    leader = _controller(sim)
    assert victim.id not in _metadata_group(leader).voters
    for correlation in range(22, 40):  # (REQUEST_TIMED_OUT until it has caught up: retry)
        out = _change(sim, answers, leader.id, correlation, "add", victim.id, new)
        if out.error_code != 7:
            break
        sim.run_until(sim.now + 200)
    assert out.error_code == 0, out
    _settle(sim)
    for sn in sim.nodes.values():
        assert _metadata_group(sn).voter_set.get(victim.id).directory_id == new
    assert _metadata_group(victim).is_voter


def test_voters_record_their_advertised_listeners():
    """UpdateRaftVoter: the quorum first records the --voters addresses ("sim":9092 here); each
    voter then asks the leader to record its advertised listener (the leader records its own)."""
    sim, answers, controller = _cluster()
    for _ in range(60):
        sim.run_until(sim.now + 100)
        group = _metadata_group(_controller(sim) or controller)
        if all((v.host, v.port) == ("127.0.0.1", 9092) for v in group.voter_set.voters):
            break
    _settle(sim)
    for sn in sim.nodes.values():
        voters = _metadata_group(sn).voter_set.voters
        assert [(v.node_id, v.host, v.port) for v in voters] == [(i, "127.0.0.1", 9092) for i in sim.nodes]
        assert {v.directory_id for v in voters} == {s.disk.directory_id for s in sim.nodes.values()}
