"""When a copy moved away is dropped (quorum/partition_moves.py `drop_departed`): once the
leader, answering after the node saw the move, has committed past the log end that answer left,
and its last answer is fresh. The collaborators are stand-ins holding just what the rule reads."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

from kraftd.quorum.partition_moves import PartitionMoves

TOPIC_ID = uuid.UUID(int=5)
KEY = ("m", 0)
FETCH_WAIT_MS = 100
IMAGE_OFFSET = 42


class Stream:
    def __init__(self) -> None:
        self.last_answer_ms = -1

    def answered_since(self, key, since_ms: int) -> bool:
        return key == KEY and self.last_answer_ms >= since_ms


class Log:
    def __init__(self, end: int) -> None:
        self.log_end_offset = end

    def discard(self, remove: bool) -> None:
        pass

    def remove_discarded(self) -> None:
        pass


class Topics:
    def __init__(self, topic) -> None:
        self.topic = topic
        self.deleted = False
        self.dropped_at = None

    def get(self, name):
        return self.topic if name == self.topic.name and not self.deleted else None

    def drop_partition(self, topic, index, replicas, image_offset):
        self.dropped_at = image_offset  # (the catalog records it: tests/sim/test_reassignment.py)
        partition, topic.partitions[index] = topic.partitions[index], None
        return partition

    def delete(self, name) -> None:
        self.deleted = True


def _moving_away(log_end: int):
    """Node 5 hosts partition m-0 (log end `log_end`, HW 0), which the image now places on
    nodes 1-3; the static voters are 1-3 (no VotersRecord)."""
    stream = Stream()
    group = SimpleNamespace(is_leader=False, is_voter=False, log_voters=SimpleNamespace(offset=lambda: -1))
    partition = SimpleNamespace(key=KEY, raft=group, log=Log(log_end), high_watermark=0)
    topic = SimpleNamespace(name="m", topic_id=TOPIC_ID, partitions=[partition])
    replication = SimpleNamespace(streams=SimpleNamespace(of=lambda g: stream), remove_group=lambda key: None,
                                  config=SimpleNamespace(fetch_max_wait_ms=FETCH_WAIT_MS), poll=lambda now: None)
    changes = SimpleNamespace(dirty={}, wake=lambda keys: None)
    topics = Topics(topic)
    moves = PartitionMoves(5, topics, replication, {}, None, changes,
                           SimpleNamespace(forget=lambda key: None), None)
    info = SimpleNamespace(topic_id=TOPIC_ID, partitions={0: SimpleNamespace(replicas=[1, 2, 3])})
    image = SimpleNamespace(topic=lambda name: info if name == "m" else None)
    moves.reconcile(topic, info, 1000)
    assert moves.departing
    return moves, image, partition, stream, topics


def test_a_copy_goes_once_the_hw_passes_what_the_first_answer_after_the_move_left():
    moves, image, partition, stream, topics = _moving_away(3)
    assert not moves.drop_departed(image, 1050, IMAGE_OFFSET)  # no answer since the move was seen
    stream.last_answer_ms = 1100
    partition.high_watermark = 2
    assert not moves.drop_departed(image, 1100, IMAGE_OFFSET)  # the answer left log end 3; the HW is 2
    partition.high_watermark = 3
    stream.last_answer_ms = 1200
    assert not moves.drop_departed(image, 1200 + FETCH_WAIT_MS + 1, IMAGE_OFFSET)  # the leader's last answer is stale
    assert moves.drop_departed(image, 1200, IMAGE_OFFSET)
    assert not moves.departing and topics.dropped_at == IMAGE_OFFSET


def test_a_copy_truncated_below_its_mark_takes_the_mark_again_from_the_next_answer():
    """Sim seed 5111: the mark was the log end 3 after an answer of the old leader's; a new
    leader's log ended at 2 and the copy was truncated to it. The partition was idle, its HW
    stayed 2, and the copy was never dropped."""
    moves, image, partition, stream, _ = _moving_away(3)
    stream.last_answer_ms = 1100
    assert not moves.drop_departed(image, 1100, IMAGE_OFFSET)  # mark: 3
    partition.log.log_end_offset = 2  # the new leader's divergence answer truncated entry 2
    partition.high_watermark = 2
    assert not moves.drop_departed(image, 1300, IMAGE_OFFSET)  # the old answer does not count: a new mark is due
    stream.last_answer_ms = 1350
    assert moves.drop_departed(image, 1350, IMAGE_OFFSET)  # the new leader's answer: mark 2, HW 2
