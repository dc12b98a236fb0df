"""confluent-kafka (librdkafka) consumers in a group: three members share a 6-partition topic
exactly once; with cooperative-sticky a leaving member's partitions move to the others and a
new member takes some, without the others giving up the partitions they keep (incremental)."""
from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, Producer

from tests.groups.support import PARTITIONS, Collected, assert_exactly_once, balanced, make_topic, produce_records, wait_for

pytestmark = pytest.mark.clients


class Member:
    def __init__(self, name, bootstrap, topic, group, collected, strategy):
        self.name, self.collected = name, collected
        self.revoked: list = []   # partitions taken away, in order
        self.assigned: set = set()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                  "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy,
                                  "heartbeat.interval.ms": 300, "session.timeout.ms": 6000,
                                  "auto.commit.interval.ms": 200})
        self.consumer.subscribe([topic], on_revoke=self._on_revoke)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_revoke(self, consumer, partitions):
        self.revoked.extend(tp.partition for tp in partitions)

    def _run(self):
        while not self.stop.is_set():
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                self.collected.add(self.name, msg.partition(), msg.offset(), msg.value())
            self.assigned = {tp.partition for tp in self.consumer.assignment()}
        self.consumer.close()

    def close(self):
        self.stop.set()
        self.thread.join(20)


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "roundrobin"])
def test_three_members_exactly_once_through_leave_and_join(groups_server, strategy):
    bootstrap = groups_server.bootstrap
    topic, group = f"ck-{strategy}", f"ck-group-{strategy}"
    sent = make_topic(bootstrap, topic, 600)
    collected = Collected()
    members = [Member(f"c{i}", bootstrap, topic, group, collected, strategy) for i in range(3)]
    try:
        wait_for(lambda: collected.count() >= 600 and balanced(members, 2), 40, "3 members, 2 partitions each")
        kept = [set(m.assigned) for m in members[:2]]
        revoked_before = [len(m.revoked) for m in members[:2]]
        members[2].close()
        produce_records(bootstrap, topic, 600, 300, sent)
        wait_for(lambda: collected.count() >= 900 and balanced(members[:2], 3), 40, "2 members, 3 partitions each")
        if strategy == "cooperative-sticky":
            # Incremental: the survivors only gained partitions; none was revoked from them.
            assert all(k <= m.assigned for k, m in zip(kept, members[:2]))
            assert [len(m.revoked) for m in members[:2]] == revoked_before
        members[2] = Member("c3", bootstrap, topic, group, collected, strategy)
        produce_records(bootstrap, topic, 900, 300, sent)
        wait_for(lambda: collected.count() >= 1200 and balanced(members, 2), 40, "a new member gets 2 partitions")
    finally:
        for m in members:
            m.close()
    assert_exactly_once(collected, sent)
