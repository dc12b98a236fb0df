"""kafka-python consumers in a group: three members share a 6-partition topic, every record
is consumed exactly once; a member leaving and one joining move partitions (eager range and
roundrobin); committed offsets survive a server restart."""
from __future__ import annotations

import threading

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from tests.groups.support import PARTITIONS, Collected, assert_exactly_once, balanced, make_topic, produce_records, wait_for

pytestmark = pytest.mark.clients

ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}


class Member:
    def __init__(self, name, bootstrap, topic, group, collected, assignor):
        self.name, self.collected = name, collected
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=name,
                                      auto_offset_reset="earliest", heartbeat_interval_ms=300,
                                      session_timeout_ms=6000, auto_commit_interval_ms=200,
                                      partition_assignment_strategy=[assignor])
        self.stop = threading.Event()
        self.assigned: set = set()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            for tp, records in self.consumer.poll(100).items():
                for r in records:
                    self.collected.add(self.name, tp.partition, r.offset, r.value)
            self.assigned = {tp.partition for tp in self.consumer.assignment()}
        self.consumer.close()  # commits, then LeaveGroup

    def close(self):
        self.stop.set()
        self.thread.join(20)


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_three_members_exactly_once_through_leave_and_join(groups_server, assignor):
    bootstrap = groups_server.bootstrap
    topic, group = f"kp-{assignor}", f"kp-group-{assignor}"
    sent = make_topic(bootstrap, topic, 600)
    collected = Collected()
    members = [Member(f"m{i}", bootstrap, topic, group, collected, ASSIGNORS[assignor]) for i in range(3)]
    try:
        wait_for(lambda: collected.count() >= 600 and balanced(members, 2), 30, "3 members, 2 partitions each")
        if assignor == "range":  # range hands out contiguous pairs
            assert sorted(sorted(m.assigned) for m in members) == [[0, 1], [2, 3], [4, 5]]
        members[2].close()   # leaves: the other two take its partitions
        produce_records(bootstrap, topic, 600, 300, sent)
        wait_for(lambda: collected.count() >= 900 and balanced(members[:2], 3), 30, "2 members, 3 partitions each")
        members.append(Member("m3", bootstrap, topic, group, collected, ASSIGNORS[assignor]))
        del members[2]
        produce_records(bootstrap, topic, 900, 300, sent)
        wait_for(lambda: collected.count() >= 1200 and balanced(members, 2), 30, "a new member gets 2 partitions")
        assert members[2].assigned
    finally:
        for m in members:
            m.close()
    assert_exactly_once(collected, sent)


def test_committed_offsets_survive_a_restart(tmp_path):
    from tests.groups.conftest import GROUP_ENV
    from tests.support.kraftd_process import KraftdProcess

    server = KraftdProcess(tmp_path / "data", env=GROUP_ENV).start()
    try:
        topic, group = "kp-restart", "kp-restart-group"
        sent = make_topic(server.bootstrap, topic, 600)
        collected = Collected()
        members = [Member(f"r{i}", server.bootstrap, topic, group, collected, RangePartitionAssignor)
                   for i in range(2)]
        wait_for(lambda: collected.count() >= 600, 30, "the first 600 records")
        for m in members:
            m.close()   # commits on close
        first = set(collected.values())
        assert first == sent

        server.restart()
        later: set = set()
        produce_records(server.bootstrap, topic, 600, 300, later)
        collected = Collected()
        members = [Member(f"s{i}", server.bootstrap, topic, group, collected, RangePartitionAssignor)
                   for i in range(2)]
        try:
            wait_for(lambda: collected.count() >= 300, 30, "the records written after the restart")
        finally:
            for m in members:
                m.close()
        assert_exactly_once(collected, later)   # no re-reads before the committed offsets

        consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=group, enable_auto_commit=False)
        # Per partition: LeaderChange at 0, 100 records, the restart's LeaderChange, 50 records.
        assert [consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)] == [152] * PARTITIONS
        consumer.close()
        # kafka-python commits the leader epoch of the last record it consumed (KIP-320): the
        # records after the restart were written in the restarted node's (higher) epoch.
        from kraftd.protocol import api
        from kraftd.protocol import messages as m
        from tests.clients.helpers import RawClient
        with RawClient(server.bootstrap) as raw:
            fetched = raw.request(api.OFFSET_FETCH, 8, m.OffsetFetchRequest(groups=[
                m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]))
        epochs = {p.committed_leader_epoch for t in fetched.groups[0].topics for p in t.partitions}
        assert len(epochs) == 1 and epochs.pop() >= 1

        from tests.support.prometheus import scrape_samples
        samples = scrape_samples(server.metrics_port)
        assert samples[("kraftd_groups", (("state", "Empty"),))] == 1   # everyone left
        assert samples[("kraftd_group_members", ())] == 0
        assert samples[("kraftd_offset_commits_total", ())] >= PARTITIONS
        assert samples[("kraftd_group_rebalances_total", ())] >= 1
        assert samples[("kraftd_coordinator_load_time_ms_count", ())] >= 1   # loaded after the restart
    finally:
        server.kill()
