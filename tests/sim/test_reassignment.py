"""Partition reassignment (issue 25 item 3, KIP-455 over KIP-853) in a four-node simulated
cluster without random faults, under an idempotent acks=all producer: a partition placed on
nodes 1-3 moves to 2-4. The new replica joins as an observer, the leader adds it once caught up
and then removes node 1; node 1 deletes its copy once that commits; the image ends the move.
Nothing acknowledged is lost, and the replicas agree below the HW. A cancelled move goes back."""
from __future__ import annotations

import dataclasses

import pytest

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode

from .invariants import _batches
from .network import Message
from .test_controller_answers import CLIENT, QUIET
from .test_directory_ids import quiet_cluster
from .workload import Producer


def _cluster(seed: int, rates=QUIET):
    sim, answers, _ = quiet_cluster(seed, 4, rates)
    return sim, answers


def _ask(sim, answers, node: int, correlation: int, key: int, request, *, within_ms: int = 5000):
    sim.send(Message(CLIENT, node, True, key, 0 if key != api.CREATE_TOPICS else 5, correlation, request))
    for _ in range(within_ms // 50):
        sim.run_until(sim.now + 50)
        if correlation in answers.by_correlation:
            return answers.by_correlation[correlation]
    pytest.fail(f"no answer to api {key}")


def _create(sim, answers, name: str, replicas: list):
    T = m.CreateTopicsRequest
    request = T(topics=[T.CreatableTopic(name=name, num_partitions=-1, replication_factor=-1, configs=[], assignments=[
        T.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)])], timeout_ms=3000, validate_only=False)
    out = _ask(sim, answers, 1, 1, api.CREATE_TOPICS, request)
    assert out.topics[0].error_code == 0, out
    _run_until(sim, lambda: all(sn.node.plane.image.topic(name) is not None for sn in sim.nodes.values())
               and _leader(sim, name)[0] is not None, 5000)


def _reassign(sim, answers, node: int, correlation: int, name: str, target):
    R = m.AlterPartitionReassignmentsRequest
    request = R(timeout_ms=3000, topics=[R.ReassignableTopic(name=name, partitions=[
        R.ReassignablePartition(partition_index=0, replicas=target)])])
    return _ask(sim, answers, node, correlation, api.ALTER_PARTITION_REASSIGNMENTS, request)


def _listed(sim, answers, node: int, correlation: int):
    out = _ask(sim, answers, node, correlation, api.LIST_PARTITION_REASSIGNMENTS,
               m.ListPartitionReassignmentsRequest(timeout_ms=3000, topics=None))
    assert out.error_code == 0
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in out.topics for p in t.partitions}


def _hosts(sn, name: str) -> bool:
    return sn.node.topics.partition(name, 0) is not None


def _leader(sim, name: str):
    for sn in sim.nodes.values():
        group = sn.node.replication.groups.get((name, 0))
        if group is not None and group.is_leader:
            return sn, group
    return None, None


def _moved(sim, name: str, target: list) -> bool:
    """Every node's image ended the move, the leader's committed voters are the target, and
    only the target's nodes host the partition."""
    for sn in sim.nodes.values():
        info = sn.node.plane.image.topic(name).partitions[0]
        if info.reassigning or sorted(info.replicas) != sorted(target):
            return False
        if _hosts(sn, name) != (sn.id in target):
            return False
    _, group = _leader(sim, name)
    return (group is not None and sorted(group.voters) == sorted(target)
            and group.log_voters.offset() < group.partition.high_watermark)


def _run_until(sim, done, within_ms: int) -> None:
    for _ in range(within_ms // 50):
        sim.run_until(sim.now + 50)
        if done():
            return
    pytest.fail("did not happen in time")


def test_a_partition_moves_to_a_new_node_under_load_and_the_old_replica_goes():
    sim, answers = _cluster(21)
    _create(sim, answers, "m", [1, 2, 3])
    topic_id = sim.nodes[1].node.plane.image.topic("m").topic_id
    producer = Producer("p", 7, -1, [("m", topic_id, [(1, 2, 3, 4)])], sim.rng, every_ms=15)
    sim.clients["p"] = producer
    sim.at(sim.now, "client", "p")
    sim.run_until(sim.now + 1000)
    before = len(producer.acked)
    assert before > 10

    out = _reassign(sim, answers, 4, 10, "m", [2, 3, 4])  # through a node that is not the controller
    assert out.error_code == 0 and out.responses[0].partitions[0].error_code == 0, out
    ongoing = _listed(sim, answers, 3, 11)
    if ("m", 0) in ongoing:  # (it may already have ended)
        assert ongoing[("m", 0)] == ([2, 3, 4, 1], [4], [1])
    _run_until(sim, lambda: _moved(sim, "m", [2, 3, 4]), 30_000)
    assert _listed(sim, answers, 2, 12) == {}
    assert not sim.nodes[1].disk.logs.get(("m", 0)) or not _hosts(sim.nodes[1], "m")

    sim.run_until(sim.now + 1000)
    producer.active = False
    sim.run_until(sim.now + 2000)
    assert len(producer.acked) > before  # it kept writing through the move
    leader, group = _leader(sim, "m")
    p = leader.node.topics.partition("m", 0)
    committed = {(b[4], b[7], b[5]): b[0] for b in _batches(p.log, 0, p.high_watermark) if b[4] >= 0}
    for _, _, (epoch, seq), _, offset in producer.acked:
        assert committed.get((7, epoch, seq)) == offset, f"acknowledged seq {seq} at {offset} is not there"
    hw = min(sim.nodes[n].node.topics.partition("m", 0).high_watermark for n in (2, 3, 4))
    reference = _batches(p.log, 0, hw)
    for n in (2, 3, 4):
        assert _batches(sim.nodes[n].node.topics.partition("m", 0).log, 0, hw) == reference, f"node {n}"


def test_a_copy_moved_away_goes_at_the_first_answer_after_its_removal_committed():
    """Sim seed 9460: a copy moved away went only if a once-a-second check found the leader's
    last answer younger than the fetch wait. An idle partition is answered every fetch wait plus
    a round trip, and a copy stayed for good. Now every step checks, and the first answer of the
    leader's after the removal committed is fresh when it comes."""
    sim, answers = _cluster(24, dataclasses.replace(QUIET, min_delay_ms=30, max_delay_ms=40))
    _create(sim, answers, "d", [1, 2, 3])
    sim.run_until(sim.now + 500)
    out = _reassign(sim, answers, 2, 10, "d", [2, 3, 4])
    assert out.responses[0].partitions[0].error_code == 0

    def removal_committed():
        _, group = _leader(sim, "d")
        return (group is not None and 1 not in group.voters
                and group.log_voters.offset() < group.partition.high_watermark)
    _run_until(sim, removal_committed, 30_000)
    committed_ms = sim.now
    _run_until(sim, lambda: not _hosts(sim.nodes[1], "d"), 5_000)
    # The HW that covers the removal reaches node 1 in its next answer or the one after (each
    # a fetch wait plus a round trip, 100 + 60-80 ms here).
    assert sim.now - committed_ms <= 500, f"node 1 deleted its copy {sim.now - committed_ms} ms after"
    _run_until(sim, lambda: _moved(sim, "d", [2, 3, 4]), 10_000)


def test_a_node_restarted_on_an_older_image_does_not_bring_back_a_copy_it_dropped():
    """Sim seed 4034: node 1 dropped its copy of a partition moved away, crashed, and restarted
    on its latest metadata snapshot, from before the move: that image lists node 1 as a replica
    and nothing of the topic was hosted, so node 1 made a fresh copy, a voter with no election
    state, which voted a second time in an epoch it had voted in (two leaders). The drop now
    records the image offset it reflects in the catalog, and a restarted node hosts nothing
    new until it has replayed that far."""
    sim, answers = _cluster(25)
    _create(sim, answers, "b", [1, 2, 3])
    n1 = sim.nodes[1]
    created = n1.node.plane.machine.applied_offset
    T = m.CreateTopicsRequest  # metadata records enough for a snapshot (3,000 bytes here) that holds "b"
    fillers = [T.CreatableTopic(name=f"f{i}", num_partitions=1, replication_factor=1, configs=[], assignments=[])
               for i in range(40)]
    _ask(sim, answers, 1, 2, api.CREATE_TOPICS, T(topics=fillers, timeout_ms=3000, validate_only=False))
    metadata = n1.node.plane.partition
    _run_until(sim, lambda: metadata.snapshots.latest is not None and metadata.snapshots.latest.end_offset > created,
               10_000)
    out = _reassign(sim, answers, 2, 10, "b", [2, 3, 4])
    assert out.responses[0].partitions[0].error_code == 0
    _run_until(sim, lambda: not _hosts(n1, "b"), 10_000)

    n1.crash()
    for other in (2, 3, 4):
        sim.network.cut |= {(1, other), (other, 1)}
    n1.boot()
    sim.run_until(sim.now + 500)
    image = n1.node.plane.image.topic("b")
    assert image is not None and 1 in image.partitions[0].replicas, "the restart's image is not older than the move"
    assert not _hosts(n1, "b")
    assert ("b", 0) not in n1.disk.elections.states

    sim.network.cut.clear()
    _run_until(sim, lambda: _moved(sim, "b", [2, 3, 4]), 10_000)
    sim.run_until(sim.now + 1000)
    assert not _hosts(n1, "b")


def test_a_cancelled_move_goes_back_to_the_original_replicas():
    sim, answers = _cluster(22)
    _create(sim, answers, "c", [1, 2, 3])
    sim.run_until(sim.now + 500)
    out = _reassign(sim, answers, 2, 10, "c", [1, 2, 4])
    assert out.responses[0].partitions[0].error_code == 0
    _run_until(sim, lambda: _leader(sim, "c")[1] is not None and 4 in _leader(sim, "c")[1].voters, 10_000)
    assert _hosts(sim.nodes[4], "c")
    out = _reassign(sim, answers, 2, 11, "c", None)  # node 4 is a voter already: the leader removes it
    assert out.responses[0].partitions[0].error_code == 0
    _run_until(sim, lambda: _moved(sim, "c", [1, 2, 3]), 30_000)
    out = _reassign(sim, answers, 2, 12, "c", None)
    assert out.responses[0].partitions[0].error_code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_bad_targets_are_refused():
    sim, answers = _cluster(23)
    _create(sim, answers, "b", [1, 2, 3])
    for correlation, target in ((10, []), (11, [1, 1, 2]), (12, [1, 2, 9])):
        out = _reassign(sim, answers, 1, correlation, "b", target)
        assert out.responses[0].partitions[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT, target
    out = _reassign(sim, answers, 1, 13, "nope", [1, 2, 3])
    assert out.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _move_time(seed: int, throttle_bytes_per_s: int) -> tuple[int, int]:
    """(virtual ms from the move's start until it ended, bytes the leader counted as sent to the
    joining replica) for a partition of ~40 KB moving to node 4."""
    from kraftd.quorum.move_throttle import MoveThrottle

    sim, answers = _cluster(seed)
    for sn in sim.nodes.values():
        sn.node._ctx.move_throttle = MoveThrottle(throttle_bytes_per_s)
    _create(sim, answers, "t", [1, 2, 3])
    topic_id = sim.nodes[1].node.plane.image.topic("t").topic_id
    producer = Producer("p", 9, -1, [("t", topic_id, [(1, 2, 3)])], sim.rng, every_ms=5)
    sim.clients["p"] = producer
    sim.at(sim.now, "client", "p")
    _run_until(sim, lambda: _leader(sim, "t")[1] is not None
               and _leader(sim, "t")[1].partition.high_watermark > 600, 20_000)
    producer.active = False
    sim.run_until(sim.now + 500)
    start = sim.now
    out = _reassign(sim, answers, 1, 10, "t", [1, 2, 4])
    assert out.responses[0].partitions[0].error_code == 0
    _run_until(sim, lambda: _moved(sim, "t", [1, 2, 4]), 120_000)
    sent = sum(sn.node._ctx.move_throttle.sent_bytes for sn in sim.nodes.values())
    return sim.now - start, sent


def test_the_move_throttle_bounds_the_bytes_a_joining_replica_is_sent_per_second():
    fast_ms, size = _move_time(24, 0)
    slow_ms, throttled_size = _move_time(24, 4000)
    assert size > 20_000 and throttled_size >= size
    # At 4000 B/s the bytes take at least (size - the first second's bucket) / rate.
    assert slow_ms >= (size - 4000) * 1000 // 4000 > 3 * fast_ms, (fast_ms, slow_ms, size)
