"""aiokafka consumers in a group: three members share a 6-partition topic exactly once through a
member leaving and one joining. aiokafka's default assignor is round robin over an eager
protocol: its members sorted by id get {0,3}, {1,4}, {2,5}, and every rebalance revokes all of
each member's partitions before it rejoins."""
from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

from tests.groups.support import PARTITIONS, Collected, assert_exactly_once, make_topic, produce_records

pytestmark = pytest.mark.clients


class _Journal(ConsumerRebalanceListener):
    def __init__(self, name, revoked: dict) -> None:
        self.name, self.revoked = name, revoked

    async def on_partitions_revoked(self, revoked):
        self.revoked.setdefault(self.name, []).append({tp.partition for tp in revoked})

    async def on_partitions_assigned(self, assigned):
        pass


async def _consume(name, bootstrap, topic, group, collected, stop: asyncio.Event, assigned: dict, revoked: dict):
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name,
                                auto_offset_reset="earliest", heartbeat_interval_ms=300, session_timeout_ms=6000,
                                auto_commit_interval_ms=200)
    consumer.subscribe([topic], listener=_Journal(name, revoked))
    await consumer.start()
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=100)
            for tp, records in batches.items():
                for r in records:
                    collected.add(name, tp.partition, r.offset, r.value)
            assigned[name] = {tp.partition for tp in consumer.assignment()}
    finally:
        await consumer.stop()


async def _until(predicate, timeout, what):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def test_three_members_exactly_once_through_leave_and_join(groups_server):
    bootstrap = groups_server.bootstrap
    topic, group = "aio-groups", "aio-group"
    sent = make_topic(bootstrap, topic, 600)
    collected = Collected()

    async def main():
        stops = {f"a{i}": asyncio.Event() for i in range(4)}
        assigned: dict = {}
        revoked: dict = {}

        def start(name):
            return asyncio.create_task(_consume(name, bootstrap, topic, group, collected, stops[name], assigned, revoked))
        tasks = {name: start(name) for name in ("a0", "a1", "a2")}

        def balanced(names, per):
            sets = [assigned.get(n, set()) for n in names]
            return all(len(s) == per for s in sets) and set().union(*sets) == set(range(PARTITIONS))

        def marks():
            return {n: len(revoked.get(n, [])) for n in ("a0", "a1")}

        def revoked_all_since(mark, had):   # eager: each survivor gave up everything it had
            return all(had[n] in revoked.get(n, [])[mark[n]:] for n in mark)
        try:
            await _until(lambda: collected.count() >= 600 and balanced(["a0", "a1", "a2"], 2), 40, "3 members")
            assert sorted(sorted(assigned[n]) for n in ("a0", "a1", "a2")) == [[0, 3], [1, 4], [2, 5]]
            mark, had = marks(), {n: set(assigned[n]) for n in ("a0", "a1")}
            stops["a2"].set()
            await tasks["a2"]
            await asyncio.to_thread(produce_records, bootstrap, topic, 600, 300, sent)
            await _until(lambda: collected.count() >= 900 and balanced(["a0", "a1"], 3), 40, "2 members, 3 each")
            assert revoked_all_since(mark, had), revoked

            mark, had = marks(), {n: set(assigned[n]) for n in ("a0", "a1")}
            tasks["a3"] = start("a3")
            await asyncio.to_thread(produce_records, bootstrap, topic, 900, 300, sent)
            await _until(lambda: collected.count() >= 1200 and balanced(["a0", "a1", "a3"], 2), 40, "a joiner")
            assert revoked_all_since(mark, had), revoked
            assert sorted(sorted(assigned[n]) for n in ("a0", "a1", "a3")) == [[0, 3], [1, 4], [2, 5]]
        finally:
            for s in stops.values():
                s.set()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
    asyncio.run(main())
    assert_exactly_once(collected, sent)
