"""aiokafka consumers in a group: three members share a 6-partition topic exactly once, and
a member leaving moves its partitions to the other two."""
from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer

from tests.groups.support import PARTITIONS, Collected, assert_exactly_once, make_topic

pytestmark = pytest.mark.clients


async def _consume(name, bootstrap, topic, group, collected, stop: asyncio.Event, assigned: dict):
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=name,
                                auto_offset_reset="earliest", heartbeat_interval_ms=300, session_timeout_ms=6000,
                                auto_commit_interval_ms=200)
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


def test_three_members_exactly_once_and_a_leave(groups_server):
    bootstrap = groups_server.bootstrap
    topic, group = "aio-groups", "aio-group"
    sent = make_topic(bootstrap, topic, 600)
    collected = Collected()

    async def main():
        stops = [asyncio.Event() for _ in range(3)]
        assigned: dict = {}
        tasks = [asyncio.create_task(_consume(f"a{i}", bootstrap, topic, group, collected, stops[i], assigned))
                 for i in range(3)]

        def balanced(names, per):
            sets = [assigned.get(n, set()) for n in names]
            return all(len(s) == per for s in sets) and set().union(*sets) == set(range(PARTITIONS))
        try:
            await _until(lambda: collected.count() >= 600 and balanced(["a0", "a1", "a2"], 2), 40, "3 members")
            stops[2].set()
            await tasks[2]
            await _until(lambda: balanced(["a0", "a1"], 3), 40, "2 members, 3 partitions each")
        finally:
            for s in stops:
                s.set()
            await asyncio.gather(*tasks, return_exceptions=True)
    asyncio.run(main())
    assert_exactly_once(collected, sent)
