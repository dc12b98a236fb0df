"""Acceptance: a three-node cluster serves real clients. Each of kafka-python, confluent-kafka and
aiokafka creates a 6-partition RF=3 topic through its own node (1, 2, 3), produces 10,000 keyed
records with acks=all to all three nodes, and reads them back exactly (assign + seek to the
beginning; groups are not implemented). Then every node's Metadata shows the three brokers, each
node leading two of the six partitions (leadership goes to each partition's first replica), a
full ISR everywhere, and the same controller, which is the metadata quorum's leader.

All three admin clients send CreateTopics to the controller named in Metadata, whatever node they
bootstrap from; the forwarding of a CreateTopics that reaches another node is tested on its own.
One cluster for the module; one topic per client."""
from __future__ import annotations

import asyncio
import re
import time
import zlib
from collections import Counter, defaultdict

import pytest

from tests.clients import helpers as h
from tests.cluster.support import gauge, metadata, samples, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import WaitTimeout, poll_until

pytestmark = pytest.mark.clients

N = 10_000
PARTITIONS = 6
RF = 3
TIMEOUT = 30.0  # a client's produce or read-back (each takes a few seconds)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Debug logging adds each Raft role change ("topic-p: Follower(2) -> Candidate(3)") to the
    # logs a failure message quotes.
    with KraftdCluster(tmp_path_factory.mktemp("three-node-clients"), nodes=3,
                       env={"KRAFTD_LOG_LEVEL": "debug"}) as cluster:
        wait_cluster_ready(cluster)
        yield cluster


# -- what was produced and what was read back -------------------------------------------------

def _expected(records: list[h.Rec], acked: list[tuple[int, int]]) -> dict[int, list[tuple[int, h.Rec]]]:
    """{partition: [(offset, record), ...] in produce order}, from (partition, offset) per record."""
    by_partition: dict[int, list[tuple[int, h.Rec]]] = defaultdict(list)
    for record, (partition, offset) in zip(records, acked, strict=True):
        by_partition[partition].append((offset, record))
    return dict(by_partition)


def assert_read_back_exactly(expected: dict[int, list[tuple[int, h.Rec]]],
                             got: dict[int, list[h.Got]]) -> None:
    """Per partition: the records read are the records acknowledged, at the acknowledged offsets,
    in produce order (offsets rise with produce order: the producers are idempotent), no more."""
    assert sum(map(len, expected.values())) == N
    assert set(got) <= set(range(PARTITIONS)), f"records from unexpected partitions {sorted(got)}"
    for partition in range(PARTITIONS):
        want = expected.get(partition, [])
        offsets = [o for o, _ in want]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), \
            f"partition {partition}: acknowledged offsets do not rise in produce order"
        read = got.get(partition, [])
        assert [g.offset for g in read] == offsets, (
            f"partition {partition}: read {len(read)} records at offsets "
            f"{[g.offset for g in read][:3]}..{[g.offset for g in read][-3:]}, "
            f"acknowledged {len(offsets)} at {offsets[:3]}..{offsets[-3:]}")
        h.assert_same(read, [r for _, r in want])


def _check_spread(records: list[h.Rec], acked: list[tuple[int, int]]) -> None:
    """Keyed records land on every partition (a partitioner bug would put them all on one)."""
    counts = Counter(p for p, _ in acked)
    assert set(counts) == set(range(PARTITIONS)), f"records per partition: {dict(counts)}"


# -- the clients ------------------------------------------------------------------------------

def kafka_python_create(address: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=address, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, RF)], timeout_ms=30_000)
    finally:
        admin.close()


def kafka_python_produce(bootstrap: str, topic: str, records: list[h.Rec]) -> list[tuple[int, int]]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", enable_idempotence=True,
                             linger_ms=5, max_block_ms=int(TIMEOUT * 1000))
    try:
        futures = [producer.send(topic, key=r.key, value=r.value, headers=list(r.headers)) for r in records]
        producer.flush(timeout=TIMEOUT)
        pending = sum(1 for f in futures if not f.is_done)
        if pending:
            raise h.ClientTimeout(f"kafka-python: {pending} records unacknowledged after {TIMEOUT}s")
        failed = [f.exception for f in futures if f.failed()]
        assert not failed, f"kafka-python delivery errors: {failed[:5]}"
        return [(f.value.partition, f.value.offset) for f in futures]
    finally:
        producer.close(timeout=5)


def kafka_python_consume(bootstrap: str, topic: str) -> dict[int, list[h.Got]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", fetch_max_wait_ms=200)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    got: dict[int, list[h.Got]] = defaultdict(list)
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + TIMEOUT
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise h.ClientTimeout(f"kafka-python consumer: positions {[consumer.position(tp) for tp in tps]}, "
                                      f"ends {[ends[tp] for tp in tps]}")
            for tp, recs in consumer.poll(timeout_ms=200, max_records=5000).items():
                got[tp.partition].extend(h.Got(r.offset, r.key, r.value, h._headers(r.headers)) for r in recs)
        return dict(got)
    finally:
        consumer.close()


def confluent_create(address: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": address})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, RF)], operation_timeout=30, request_timeout=30)
    futures[topic].result(timeout=TIMEOUT)


def confluent_produce(bootstrap: str, topic: str, records: list[h.Rec]) -> list[tuple[int, int]]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": int(TIMEOUT * 1000)})
    acked: list[tuple[int, int] | None] = [None] * len(records)
    errors = []

    def delivered(i):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                acked[i] = (msg.partition(), msg.offset())
        return cb

    deadline = time.monotonic() + TIMEOUT
    for i, r in enumerate(records):
        while True:
            try:
                producer.produce(topic, key=r.key, value=r.value, headers=list(r.headers), on_delivery=delivered(i))
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                if time.monotonic() > deadline:
                    raise h.ClientTimeout("confluent producer queue stayed full") from None
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(max(0.1, deadline - time.monotonic()))
    assert remaining == 0, f"confluent producer: {remaining} records not delivered in {TIMEOUT}s"
    assert not errors, f"confluent delivery errors: {errors[:5]}"
    return acked


def confluent_consume(bootstrap: str, topic: str) -> dict[int, list[h.Got]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    # librdkafka wants a group.id even for assign(); nothing is committed or joined with it.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kraftd-cluster-tests-unused",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "error", "enable.partition.eof": True, "fetch.wait.max.ms": 200})
    got: dict[int, list[h.Got]] = defaultdict(list)
    at_eof: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + TIMEOUT
        while not (len(at_eof) == PARTITIONS and sum(map(len, got.values())) >= N):
            if time.monotonic() > deadline:
                raise h.ClientTimeout(f"confluent consumer got {sum(map(len, got.values()))}/{N} records, "
                                      f"EOF on partitions {sorted(at_eof)}")
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                err = msg.error()
                if err is None:
                    got[msg.partition()].append(h.Got(msg.offset(), msg.key(), msg.value(), h._headers(msg.headers())))
                    at_eof.discard(msg.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_eof.add(msg.partition())
                else:
                    raise AssertionError(f"confluent consumer error: {err}")
        return dict(got)
    finally:
        consumer.close()


def aiokafka_create(address: str, topic: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=address, request_timeout_ms=30_000)
        await admin.start()
        try:
            response = await admin.create_topics([NewTopic(topic, PARTITIONS, RF)], timeout_ms=30_000)
            errors = [t for t in getattr(response, "topic_errors", ()) if t[1] != 0]
            assert not errors, f"aiokafka create_topics: {errors}"
        finally:
            await admin.close()

    asyncio.run(asyncio.wait_for(run(), TIMEOUT))


def aiokafka_produce(bootstrap: str, topic: str, records: list[h.Rec]) -> list[tuple[int, int]]:
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                                    linger_ms=5, request_timeout_ms=30_000)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=r.key, value=r.value, headers=list(r.headers))
                       for r in records]
            return [(md.partition, md.offset) for md in await asyncio.gather(*futures)]
        finally:
            await producer.stop()

    return asyncio.run(asyncio.wait_for(run(), TIMEOUT))


def aiokafka_consume(bootstrap: str, topic: str) -> dict[int, list[h.Got]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    got: dict[int, list[h.Got]] = defaultdict(list)

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="none", fetch_max_wait_ms=200)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            while True:
                positions = {tp: await consumer.position(tp) for tp in tps}
                if all(positions[tp] >= ends[tp] for tp in tps):
                    return
                batch = await consumer.getmany(*tps, timeout_ms=200, max_records=5000)
                for tp, recs in batch.items():
                    got[tp.partition].extend(h.Got(r.offset, r.key, r.value, h._headers(r.headers)) for r in recs)
        finally:
            await consumer.stop()

    try:
        asyncio.run(asyncio.wait_for(run(), TIMEOUT))
    except asyncio.TimeoutError:
        raise h.ClientTimeout(f"aiokafka consumer got {sum(map(len, got.values()))}/{N} records") from None
    return dict(got)


CLIENTS = {
    # client: (node its admin client bootstraps from, create, produce, consume)
    "kafka-python": (1, kafka_python_create, kafka_python_produce, kafka_python_consume),
    "confluent": (2, confluent_create, confluent_produce, confluent_consume),
    "aiokafka": (3, aiokafka_create, aiokafka_produce, aiokafka_consume),
}


# -- the cluster's view -----------------------------------------------------------------------

def _create_topics_requests(cluster: KraftdCluster) -> dict[int, float]:
    """CreateTopics requests each node has received (any version)."""
    return {i: sum(v for (name, labels), v in samples(cluster, i).items()
                   if name == "kraftd_requests_total" and dict(labels).get("api") == "CreateTopics")
            for i in cluster.ids}


def _server_notes(cluster: KraftdCluster, per_node: int = 8) -> str:
    """Each node's latest log lines above debug level, repeated lines counted once."""
    out = []
    for i in cluster.ids:
        lines, seen = [], Counter()
        for line in cluster.process(i).log_lines:
            if "[debug" in line:
                continue
            text = line.split("]", 1)[-1].strip()
            seen[text[:120]] += 1
            if seen[text[:120]] == 1:
                lines.append(line)
        out.append(f"--- node {i} ---\n" + "\n".join(
            f"{line}  (x{seen[line.split(']', 1)[-1].strip()[:120]]})" for line in lines[-per_node:]))
    return "\n".join(out)


def _placement_problems(cluster: KraftdCluster, topic: str) -> list[str]:
    """Everything each node's Metadata says about `topic` that is not yet the settled layout:
    six partitions of three replicas, led by their first replica, full ISR, two leaderships per node."""
    problems = []
    for i in cluster.ids:
        view = metadata(cluster.node(i), [topic])
        error, partitions = view.topics.get(topic, (None, {}))
        if error != 0:
            problems.append(f"node {i}: topic error {error}")
            continue
        if sorted(partitions) != list(range(PARTITIONS)):
            problems.append(f"node {i}: partitions {sorted(partitions)}")
            continue
        for p in partitions.values():
            if p.error_code != 0 or sorted(p.replicas) != [1, 2, 3] or sorted(p.isr) != [1, 2, 3] \
                    or p.leader != p.replicas[0]:
                problems.append(f"node {i}: {p}")
        leads = Counter(p.leader for p in partitions.values())
        if leads != {1: 2, 2: 2, 3: 2}:
            problems.append(f"node {i}: leaderships per node {dict(leads)}")
    return problems


def wait_settled(cluster: KraftdCluster, topic: str, after: str, timeout: float = 20.0) -> None:
    problems: list[str] = []

    def settled():
        problems[:] = _placement_problems(cluster, topic)
        return not problems

    if not poll_until(settled, timeout, interval=0.2):
        unsettled = {int(m) for m in re.findall(r"PartitionView\(index=(\d+)", "\n".join(problems))}
        keys = tuple(f"{topic}-{p}:" for p in sorted(unsettled))
        history = "\n".join(f"--- node {i} ---\n" + "\n".join(
            line for line in cluster.process(i).log_lines if any(k in line for k in keys) or "controller" in line)
            for i in cluster.ids)
        raise WaitTimeout(f"{topic} not settled {timeout:g} s after {after}:\n  " + "\n  ".join(problems)
                          + f"\nRole changes of {sorted(unsettled)} and controller changes:\n{history}")


@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_creates_produces_and_reads_back_exactly(cluster, client):
    node, create, produce, consume = CLIENTS[client]
    topic = f"cluster-{client}"
    records = h.make_records(N, seed=zlib.crc32(topic.encode()))
    before = _create_topics_requests(cluster)

    create(cluster.node(node), topic)
    received = {i: n - before[i] for i, n in _create_topics_requests(cluster).items() if n > before[i]}
    print(f"{client}: CreateTopics bootstrapped from node {node}, received by nodes {received}")

    try:
        acked = produce(cluster.bootstrap(), topic, records)
    except Exception as e:  # a client's timeout or error: say what the servers said meanwhile
        raise AssertionError(f"{client} produce failed: {e!r}\n{_server_notes(cluster)}") from e
    _check_spread(records, acked)
    got = consume(cluster.bootstrap(), topic)
    assert_read_back_exactly(_expected(records, acked), got)

    wait_settled(cluster, topic, "the read-back")


def test_create_topics_sent_to_a_non_controller_is_forwarded(cluster):
    """The three admin clients each send CreateTopics to the controller they learn from Metadata,
    whichever node they bootstrap from; a request that reaches another node is forwarded."""
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    controller = metadata(cluster.node(1)).controller_id
    for i in (j for j in cluster.ids if j != controller):
        topic = f"cluster-forwarded-via-{i}"
        client = WireClient(cluster.node(i), client_id="cluster-tests")
        try:
            response = client.request(api.CREATE_TOPICS, 7, m.CreateTopicsRequest(topics=[
                m.CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=PARTITIONS, replication_factor=RF,
                                                     assignments=[], configs=[])],
                timeout_ms=30_000, validate_only=False))
        finally:
            client.close()
        (result,) = response.topics
        assert (result.error_code, result.num_partitions, result.replication_factor) == (0, PARTITIONS, RF), \
            f"CreateTopics via node {i} (controller {controller}): {result}"
        wait_settled(cluster, topic, "its creation")


def test_every_node_lists_the_three_brokers_and_the_metadata_leader_as_controller(cluster):
    leaders = {i: gauge(cluster, i, "kraftd_metadata_leader_id") for i in cluster.ids}
    assert len(set(leaders.values())) == 1 and -1 not in leaders.values(), f"metadata leaders {leaders}"
    leader = int(leaders[1])
    views = {i: metadata(cluster.node(i)) for i in cluster.ids}
    for i, view in views.items():
        assert view.brokers == {j: cluster.node(j) for j in cluster.ids}, f"node {i}: brokers {view.brokers}"
        assert view.controller_id == leader, f"node {i}: controller {view.controller_id}, metadata leader {leader}"
    assert len({v.cluster_id for v in views.values()}) == 1 and views[1].cluster_id
