"""Group-test helpers: a topic with known records, members consuming on threads, and the
check that every record was consumed exactly once across the group."""
from __future__ import annotations

import threading
import time

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

PARTITIONS = 6


def make_topic(bootstrap: str, topic: str, records: int, partitions: int = PARTITIONS) -> set:
    """Create the topic and write `records` keyed records round robin; returns {(partition, value)}."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    sent: set = set()
    produce_records(bootstrap, topic, 0, records, sent, partitions)
    return sent


def produce_records(bootstrap: str, topic: str, start: int, count: int, sent: set,
                    partitions: int = PARTITIONS) -> None:
    """Records start..start+count-1 (key k<i>, value v<i>) round robin, acks=all; notes each
    (partition, value) in `sent`."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(start, start + count):
        p = i % partitions
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=p)
        sent.add((p, b"v%d" % i))
    producer.flush()
    producer.close()


def balanced(members, per_member: int, partitions: int = PARTITIONS) -> bool:
    """Every member (with an `assigned` set) holds `per_member` partitions, together all of them."""
    sets = [m.assigned for m in members]
    return all(len(a) == per_member for a in sets) and set().union(*sets) == set(range(partitions))


class Collected:
    """What members consumed: (member, partition, offset, value), thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list = []

    def add(self, member, partition, offset, value) -> None:
        with self.lock:
            self.items.append((member, partition, offset, value))

    def count(self) -> int:
        with self.lock:
            return len(self.items)

    def values(self) -> list:
        with self.lock:
            return [(p, v) for _, p, _, v in self.items]

    def by_member(self) -> dict:
        with self.lock:
            out: dict = {}
            for m, p, _, _ in self.items:
                out.setdefault(m, set()).add(p)
            return out


def assert_exactly_once(collected: Collected, sent: set) -> None:
    got = collected.values()
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} records consumed twice"
    assert set(got) == sent, f"missing {len(sent - set(got))}, unexpected {len(set(got) - sent)}"


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
