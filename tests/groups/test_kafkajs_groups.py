"""kafkajs (2.2.4, Node) in a group: kafkajs consumes only through a group. Three members share a
6-partition topic and every record is consumed exactly once through a member leaving and one
joining; its default assignor is round robin over an eager protocol, so each rebalance hands
every member a fresh assignment, and with members sorted by id three members get {0,3},
{1,4}, {2,5}."""
from __future__ import annotations

import subprocess
import threading

import pytest

from tests.groups.support import PARTITIONS, Collected, assert_exactly_once, balanced, make_topic, produce_records, wait_for
from tests.support.driver_process import stop_driver
from tests.support.node_client import install_js_clients, node_command

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def kafkajs():
    return install_js_clients()


class JsMember:
    def __init__(self, name, bootstrap, topic, group, collected: Collected) -> None:
        self.name, self.collected = name, collected
        self.proc = subprocess.Popen(node_command("group_consumer.js", bootstrap, topic, group, name),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.joins: list[tuple] = []   # (protocol, member id, leader?, {partitions})
        self.other: list[str] = []
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    @property
    def assigned(self) -> set:
        return self.joins[-1][3] if self.joins else set()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            word, _, rest = line.rstrip("\n").partition(" ")
            if word == "record":
                partition, offset, value = rest.split(" ", 2)
                self.collected.add(self.name, int(partition), int(offset), value.encode())
            elif word == "join":
                protocol, member_id, role, parts = (rest.split(" ") + [""])[:4]
                self.joins.append((protocol, member_id, role == "leader", {int(p) for p in parts.split(",") if p}))
            elif word not in ("ready", "closed"):
                self.other.append(line.rstrip("\n"))

    def close(self, timeout: float = 20.0) -> None:
        stop_driver(self.proc, timeout)
        self.thread.join(5)


def test_three_members_exactly_once_through_leave_and_join(groups_server, kafkajs):
    bootstrap = groups_server.bootstrap
    topic, group = "kafkajs-groups", "kafkajs-group"
    sent = make_topic(bootstrap, topic, 600)
    collected = Collected()
    members = [JsMember(f"js{i}", bootstrap, topic, group, collected) for i in range(3)]
    try:
        wait_for(lambda: collected.count() >= 600 and balanced(members, 2), 60, "3 members, 2 partitions each")
        assert sorted(sorted(m.assigned) for m in members) == [[0, 3], [1, 4], [2, 5]]
        assert {j[0] for m in members for j in m.joins} == {"RoundRobinAssigner"}
        assert sum(m.joins[-1][2] for m in members) == 1   # one leader ran the assignor
        survivors = members[:2]
        joins = [len(m.joins) for m in survivors]

        members[2].close()   # disconnect(): commit, LeaveGroup
        produce_records(bootstrap, topic, 600, 300, sent)
        wait_for(lambda: collected.count() >= 900 and balanced(survivors, 3), 40, "2 members, 3 partitions each")
        assert [len(m.joins) > n for m, n in zip(survivors, joins)] == [True, True]   # both rejoined

        members[2] = JsMember("js3", bootstrap, topic, group, collected)
        produce_records(bootstrap, topic, 900, 300, sent)
        wait_for(lambda: collected.count() >= 1200 and balanced(members, 2), 40, "a new member gets 2 partitions")
        assert sorted(sorted(m.assigned) for m in members) == [[0, 3], [1, 4], [2, 5]]
    finally:
        for m in members:
            m.close()
    assert_exactly_once(collected, sent)
    assert not [line for m in members for line in m.other if line.startswith("crash")], \
        [m.other for m in members]
