"""The controller answers CreateTopics/DeleteTopics from its working image, which holds its own
appends that have not committed yet. A second copy of a request (an admin client's retry, a
duplicated or forwarded message) must not be told TOPIC_ALREADY_EXISTS or
UNKNOWN_TOPIC_OR_PARTITION before the first copy's record commits: a leader change may still
truncate it, and the client would then believe in a creation or deletion that never happened
(simulation seeds 3348, 5184 and 3380 at 6a15813).

A three-node simulated cluster without random faults; the controller is cut off from the other
voters (not from the client) while the two copies arrive."""
from __future__ import annotations

import pytest

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode

from .cluster import Simulation
from .faults import FaultRates
from .network import Message

QUIET = FaultRates(drop=0.0, duplicate=0.0, min_delay_ms=1, max_delay_ms=2, partition_every_ms=0,
                   one_way_share=0.0, crash_every_ms=0, down_ms=20, disk_loss=False, fsync_ms=1,
                   crash_after_vote=0.0)
CLIENT = "admin"


class Client:
    """Records every answer: correlation -> [(time, error code, name in the answering
    controller's committed image)]."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.answers: dict = {}

    def on_response(self, sim, message: Message) -> None:
        results = message.body.topics if message.api_key == api.CREATE_TOPICS else message.body.responses
        committed = sim.nodes[message.source].node.plane.image.topic(self.topic) is not None
        self.answers.setdefault(message.correlation_id, []).append((sim.now, results[0].error_code, committed))

    def tick(self, sim) -> None:
        pass


def _request(kind: str, topic: str):
    if kind == "create":
        return api.CREATE_TOPICS, 5, m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=3, assignments=[], configs=[])],
            timeout_ms=3000, validate_only=False)
    return api.DELETE_TOPICS, 4, m.DeleteTopicsRequest(topic_names=[topic], timeout_ms=3000)


def _send(sim, node: int, correlation: int, kind: str, topic: str) -> None:
    key, version, request = _request(kind, topic)
    sim.send(Message(CLIENT, node, True, key, version, correlation, request))


def _controller(sim):
    for sn in sim.nodes.values():
        if sn.node is not None and sn.node.plane.active_controller() is not None:
            return sn
    return None


def _cluster(topic: str):
    sim = Simulation(7, nodes=3, groups=0, rates=QUIET)
    client = Client(topic)
    sim.clients[CLIENT] = client
    sim.boot_all()
    for _ in range(200):  # a controller, and every broker registered and live (replication factor 3)
        sim.run_until(sim.now + 50)
        sn = _controller(sim)
        if sn is not None and len(sn.node.plane.image.live_brokers()) == 3:
            return sim, client, sn
    pytest.fail("no controller with three live brokers")


def _isolate(sim, controller_id: int) -> None:
    for other in sim.nodes:
        if other != controller_id:
            sim.network.cut |= {(controller_id, other), (other, controller_id)}


def _images_have(sim, topic: str) -> set:
    return {sn.id for sn in sim.nodes.values() if sn.node is not None and sn.node.plane.image.topic(topic)}


def _settle(sim) -> None:
    """Heal, and run until a controller has committed its whole log and every node holds it."""
    sim.network.heal()
    for _ in range(100):
        sim.run_until(sim.now + 50)
        sn = _controller(sim)
        if sn is None:
            continue
        end = sn.node.plane.partition.log.log_end_offset
        if sn.node.plane.partition.high_watermark == end and all(
                s.node.plane.partition.log.log_end_offset == end for s in sim.nodes.values()):
            return
    pytest.fail("the metadata log did not converge after healing")


@pytest.mark.parametrize("kind", ["create", "delete"])
def test_a_second_copy_is_not_answered_from_what_a_leader_change_truncates(kind):
    topic = "x"
    sim, client, controller = _cluster(topic)
    if kind == "delete":
        _send(sim, controller.id, 1, "create", topic)
        sim.run_until(sim.now + 200)
        assert [a[1] for a in client.answers[1]] == [0]
        assert _images_have(sim, topic) == {1, 2, 3}
    _isolate(sim, controller.id)
    _send(sim, controller.id, 10, kind, topic)
    sim.run_until(sim.now + 5)
    _send(sim, controller.id, 11, kind, topic)  # the client's retry, or a duplicate
    sim.run_until(sim.now + 5)
    partition = controller.node.plane.partition
    assert partition.log.log_end_offset > partition.high_watermark  # the first copy's record, uncommitted
    # Nothing committed: neither copy may be answered yet.
    assert 10 not in client.answers and 11 not in client.answers, client.answers
    sim.run_until(sim.now + 4000)  # the others elect a new leader; the old one's appends are lost
    _settle(sim)
    assert _controller(sim).id != controller.id
    assert _images_have(sim, topic) == ({1, 2, 3} if kind == "delete" else set())
    for correlation in (10, 11):  # each was told it failed, nothing else
        codes = [a[1] for a in client.answers[correlation]]
        assert codes in ([ErrorCode.NOT_CONTROLLER], [ErrorCode.REQUEST_TIMED_OUT]), (correlation, codes)


@pytest.mark.parametrize("kind", ["create", "delete"])
def test_a_second_copy_is_answered_once_the_first_commits(kind):
    topic = "y"
    sim, client, controller = _cluster(topic)
    if kind == "delete":
        _send(sim, controller.id, 1, "create", topic)
        sim.run_until(sim.now + 200)
        assert _images_have(sim, topic) == {1, 2, 3}
    _isolate(sim, controller.id)
    _send(sim, controller.id, 10, kind, topic)
    sim.run_until(sim.now + 5)
    _send(sim, controller.id, 11, kind, topic)
    sim.run_until(sim.now + 50)
    assert 10 not in client.answers and 11 not in client.answers, client.answers
    sim.network.heal()  # before any election: the records commit under the same controller
    sim.run_until(sim.now + 1000)
    assert _controller(sim).id == controller.id
    done = ErrorCode.TOPIC_ALREADY_EXISTS if kind == "create" else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert [a[1] for a in client.answers[10]] == [0]
    assert [a[1] for a in client.answers[11]] == [done]
    # Both were answered only once the controller's committed image showed the change.
    want = kind == "create"
    assert [a[2] for a in client.answers[10] + client.answers[11]] == [want, want]


def test_a_repeated_partition_report_waits_for_the_first_to_commit():
    """AlterPartition too: a report the working image holds only through an uncommitted copy of
    itself is not answered at once (the reporter would take a truncated record as recorded)."""
    from kraftd.quorum.metadata.partition_reports import alter
    from kraftd.quorum.outcomes import Park

    topic = "z"
    sim, client, controller = _cluster(topic)
    _send(sim, controller.id, 1, "create", topic)
    sim.run_until(sim.now + 200)
    assert [a[1] for a in client.answers[1]] == [0]
    info = controller.node.plane.image.topic(topic).partitions[0]
    _isolate(sim, controller.id)

    def report():
        return m.AlterPartitionRequest(broker_id=info.leader, broker_epoch=-1, topics=[
            m.AlterPartitionRequest.TopicData(topic_id=info.topic_id, partitions=[
                m.AlterPartitionRequest.PartitionData(partition_index=0, leader_epoch=info.leader_epoch + 1,
                                                      new_isr=list(info.isr), leader_recovery_state=0,
                                                      partition_epoch=info.partition_epoch)])])

    ctrl = controller.node.plane.active_controller()
    assert isinstance(alter(ctrl, report(), 2, sim.now), Park)  # its record appended, not committed
    again = alter(ctrl, report(), 2, sim.now)  # the reporter's retry: nothing new to append
    assert isinstance(again, Park), again
