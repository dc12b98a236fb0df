"""Acceptance: a seeded run of 20 faults (crash and restart, two-way and one-way partitions,
isolation) against three nodes while an idempotent acks=all confluent-kafka producer and a
kafka-python consumer run. Afterwards nothing acknowledged is lost or duplicated, the consumer has
read a gapless prefix of each final log, the replicas agree below the high watermark, and no node
told the consumer OFFSET_OUT_OF_RANGE for an offset its log held. One duplicate is no server's
to prevent and is allowed: a record librdkafka re-sent under a new producer epoch after bumping it
for "skipped sequence numbers" (confluentinc/librdkafka#4953; see run_chaos).

One fault at a time, each healed before the next, so at most one node is down or cut off and the
other two always form a connected majority. The seed decides the faults, nodes and durations; the
timing of the processes does not replay exactly, but the same seed replays the same plan:

    KRAFTD_CHAOS_SEED=N .venv/bin/python -m pytest tests/cluster/test_chaos.py -q -p no:cacheprovider -s
"""
from __future__ import annotations

import os
import random
import threading
import time
from typing import NamedTuple

import pytest

from tests.cluster.replica_logs import (LogEntry, assert_acked_exactly_once, assert_replicas_identical_below_hw,
                                        consumer_fetch, log_end_offset, metadata)
from tests.cluster.test_failover import (SequenceProducer, create_topic, wait_brokers_registered,
                                         wait_replicas_identical)
from tests.support.cluster import KraftdCluster
from tests.support.waiting import poll_until

pytestmark = [pytest.mark.clients, pytest.mark.timeout(300)]

TOPIC = "chaos"
PARTITIONS = 6
FAULTS = 20
KINDS = ("kill", "partition", "one-way", "isolate")


class Fault(NamedTuple):
    kind: str                # one of KINDS
    nodes: tuple[int, ...]   # kill/isolate: (node,); partition: (i, j); one-way: (from, to)
    duration: float          # seconds until healed (kill: until restarted)
    pause: float             # seconds after healing before the next fault

    def describe(self) -> str:
        if self.kind == "kill":
            return f"kill -9 node {self.nodes[0]}, restart after {self.duration:.1f}s"
        if self.kind == "partition":
            return f"partition {self.nodes[0]} <-/-> {self.nodes[1]} for {self.duration:.1f}s"
        if self.kind == "one-way":
            return f"one-way partition: nothing {self.nodes[0]} sends reaches {self.nodes[1]}, for {self.duration:.1f}s"
        return f"isolate node {self.nodes[0]} for {self.duration:.1f}s"


def draw_faults(rng: random.Random, nodes: list[int], count: int = FAULTS) -> list[Fault]:
    faults = []
    for _ in range(count):
        kind = rng.choice(KINDS)
        if kind in ("kill", "isolate"):
            chosen = (rng.choice(nodes),)
        else:
            chosen = tuple(rng.sample(nodes, 2))
        faults.append(Fault(kind, chosen, round(rng.uniform(1, 4), 2), round(rng.uniform(0.5, 2), 2)))
    return faults


def chaos_seed() -> int:
    seed = os.environ.get("KRAFTD_CHAOS_SEED")
    return int(seed) if seed else random.randrange(2 ** 32)


def replay_command(seed: int) -> str:
    return (f"KRAFTD_CHAOS_SEED={seed} .venv/bin/python -m pytest tests/cluster/test_chaos.py "
            f"-q -p no:cacheprovider -s")


# -- the consumer -------------------------------------------------------------------------------

class Read(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None


class TailingConsumer:
    """A kafka-python consumer on its own thread: every partition assigned, read from the
    beginning, nothing committed. OffsetOutOfRange is not acted on (a reset would skip or re-read
    data): it is recorded, and the same position is fetched again."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, log, *, explain=lambda: "",
                 probe=lambda partition, offset: []) -> None:
        """`explain()` describes the cluster when the consumer meets an error (at most once a
        second); `probe(partition, offset)` asks every node, as Probes, when one says out of range."""
        from kafka import KafkaConsumer, TopicPartition

        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.probes: list[Probe] = []
        self._explain = explain
        self._probe = probe
        self._explained_at = 0.0
        self.reads: dict[int, list[Read]] = {p: [] for p in range(partitions)}
        self.positions: dict[int, int] = {}
        self.errors: list[str] = []
        self.out_of_range: list[tuple[float, int, int]] = []  # (time, partition, offset) answered out of range
        self._log = log
        self._stop = threading.Event()
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                       auto_offset_reset="none", fetch_max_wait_ms=200,
                                       request_timeout_ms=10_000, retry_backoff_ms=100,
                                       reconnect_backoff_max_ms=500, metadata_max_age_ms=5_000)
        self._consumer.assign(self.tps)
        self._consumer.seek_to_beginning()
        self._thread = threading.Thread(target=self._run, name="tailing-consumer", daemon=True)

    def start(self) -> "TailingConsumer":
        self._thread.start()
        return self

    def _run(self) -> None:
        from kafka.errors import KafkaError, OffsetOutOfRangeError

        while not self._stop.is_set():
            try:
                for tp, records in self._consumer.poll(timeout_ms=200, max_records=5000).items():
                    self.reads[tp.partition] += [Read(r.offset, r.key, r.value) for r in records]
                self.positions = {tp.partition: self._consumer.position(tp) for tp in self.tps}
            except KafkaError as exc:  # noted; the next poll fetches the same positions again
                context = ""
                if isinstance(exc, OffsetOutOfRangeError):
                    for tp, offset in exc.args[0].items():
                        self.out_of_range.append((time.monotonic(), tp.partition, offset))
                        probes = self._probe(tp.partition, offset)
                        self.probes += probes
                        context += f"; asked again at {offset}: " + ", ".join(map(str, probes))
                self.errors.append(repr(exc))
                if time.monotonic() - self._explained_at > 1:
                    self._explained_at = time.monotonic()
                    context += f"; {self._explain()}"
                self._log(f"consumer: {exc!r}{context}")
                time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()

    def caught_up(self, hws: dict[int, int]) -> bool:
        positions = self.positions
        return all(positions.get(p, -1) >= hw for p, hw in hws.items())


def check_consumed(reads: dict[int, list[Read]], logs: dict[int, list[LogEntry]], resent: set[bytes] = frozenset()
                   ) -> None:
    """Per partition, what the consumer read is the final log's data records from the start, in
    order, with no gap and nothing the log does not hold. Reading one offset again is allowed if
    it returns the same record; the same key at two offsets is a duplicate, unless the client
    re-sent it under a bumped epoch (`resent`, from assert_acked_exactly_once: both copies are in
    the log, so the consumer must read both)."""
    errors = []
    for p, got in reads.items():
        records = [e for e in logs[p] if not e.control]
        by_offset: dict[int, Read] = {}
        first_reads: list[int] = []
        for r in got:
            earlier = by_offset.setdefault(r.offset, r)
            if earlier is r:
                first_reads.append(r.offset)
            elif earlier != r:
                errors.append(f"partition {p}: offset {r.offset} read twice with different records: "
                              f"{earlier} then {r}")
        if first_reads != sorted(first_reads):
            errors.append(f"partition {p}: new offsets not read in increasing order")
        at: dict[bytes, int] = {}
        for r in by_offset.values():
            if r.key in at and r.key not in resent:
                errors.append(f"partition {p}: key {r.key!r} read at offsets {at[r.key]} and {r.offset}")
            at[r.key] = r.offset
        offsets = sorted(by_offset)
        for i, offset in enumerate(offsets):
            if i >= len(records):
                errors.append(f"partition {p}: read offset {offset}, past the log's {len(records)} records")
                break
            want, read = records[i], by_offset[offset]
            if want.offset != offset:
                errors.append(f"partition {p}: the consumer's record #{i} is at offset {offset}, the log's at "
                              f"{want.offset} (a gap, or a record the log does not hold)")
                break
            if (read.key, read.value) != (want.key, want.value):
                errors.append(f"partition {p}: offset {offset} read as {read.key!r}={read.value!r:.60}, "
                              f"the log holds {want.key!r}={want.value!r:.60}")
                break
        if len(offsets) < len(records):
            errors.append(f"partition {p}: read {len(offsets)} of the log's {len(records)} records")
        if len(got) > len(offsets):
            print(f"partition {p}: {len(got) - len(offsets)} offsets read again (same records)")
    assert not errors, "consumer saw:\n" + "\n".join(errors[:20])


# -- the test -------------------------------------------------------------------------------------

@pytest.mark.long
def test_chaos_faults_lose_and_duplicate_nothing(tmp_path):
    seed = chaos_seed()
    print(f"\nchaos seed {seed}; replay: {replay_command(seed)}")
    try:
        run_chaos(tmp_path, seed)
    except BaseException:
        print(f"chaos seed {seed} failed; replay: {replay_command(seed)}")
        raise


def run_chaos(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    t0 = time.monotonic()

    def log(line: str) -> None:
        print(f"[{time.monotonic() - t0:7.3f}s] {line}", flush=True)

    failures: list[str] = []

    def check(what: str, step, *args):
        """Run one check; a failure is collected (so the others still run) and its result is None."""
        try:
            return step(*args)
        except AssertionError as exc:
            failures.append(f"{what}: {exc}")
            log(f"FAILED: {what}")
            return None

    with KraftdCluster(tmp_path, nodes=3, proxies=True) as cluster:
        faults = draw_faults(rng, cluster.ids)
        wait_brokers_registered(cluster, TOPIC)
        create_topic(cluster, TOPIC, PARTITIONS, 3)
        log("topic created")
        # One request in flight per connection, to make a known client fault rarer: librdkafka
        # answers "skipped sequence numbers" (a later batch refused because an earlier one failed)
        # with a producer epoch bump, which re-sends under new sequences every record it believes
        # unwritten, on any partition; one a leader had appended before answering
        # NOT_LEADER_OR_FOLLOWER (as Kafka does when leadership moves under an acks=all produce)
        # is then written twice, and no broker can tell (confluentinc/librdkafka#4953). With the
        # default of 5 a duplicate was seen here with seed 4174684575; with 1 the bump still
        # happens now and then (CI, seed 1558193955). Such a duplicate (first copy under the epoch
        # the client bumped for "skipped sequence numbers", second under the next) is printed and
        # allowed; any other duplicate fails. The failover test keeps 5.
        producer = SequenceProducer(cluster.bootstrap(), TOPIC, rate=500,
                                    **{"max.in.flight.requests.per.connection": 1}).start()
        consumer = TailingConsumer(cluster.bootstrap(), TOPIC, PARTITIONS, log,
                                   explain=lambda: leadership(cluster, TOPIC),
                                   probe=lambda p, offset: probe_offset(cluster, TOPIC, p, offset, t0)).start()
        try:
            for n, fault in enumerate(faults, 1):
                inject(cluster, fault, f"fault {n}/{len(faults)}", log, producer)
            log("faults over")
            assert cluster.running() == cluster.ids
            left = producer.stop(flush_timeout=60)
            log(f"producer flushed: {producer.summary()}")
            check("deliveries", check_deliveries, producer, left)
            hws = check("replicas", wait_replicas_identical, cluster, TOPIC, PARTITIONS, 30)
            if hws is not None:
                log(f"replicas agree below the HWs {dict(sorted(hws.items()))}")
                caught_up = poll_until(lambda: consumer.caught_up(hws), 30, interval=0.1)
                log(f"consumer {'caught up' if caught_up else 'did not catch up'}: positions "
                    f"{dict(sorted(consumer.positions.items()))}, {sum(map(len, consumer.reads.values()))} "
                    f"records read, errors: {consumer.errors[:5] or 'none'}")
        finally:
            consumer.stop()
        if hws is not None:
            dirs = {i: cluster.tmp_path / f"node{i}" for i in cluster.ids}
            logs = {p: assert_replicas_identical_below_hw(dirs, TOPIC, p, hws[p]) for p in range(PARTITIONS)}
            resent = check("acknowledged records",
                           lambda: assert_acked_exactly_once(logs, producer.acks, nothing_else=not producer.failures,
                                                             client_resends=producer.client_side_bumps()))
            check("consumer", check_consumed, consumer.reads, logs, resent or set())
            if not caught_up:
                failures.append(f"consumer: did not reach the HWs {hws} within 30s: {consumer.positions}")
            check("out-of-range answers", check_out_of_range, consumer)
        if failures:
            events = producer.idempotence_events()
            print(f"the producer's epoch bumps and sequence errors ({len(events)}, first 40):")
            for at, line in events[:40]:
                print(f"  [{at - t0:7.3f}s] {line}")
        assert not failures, "\n\n".join(failures)
        entries = sum(len(e) for e in logs.values())
        log(f"all checks passed: {entries} offsets identical on 3 replicas, {len(producer.acks)} acknowledged "
            f"records each once, the consumer read every one")


def leadership(cluster: KraftdCluster, topic: str) -> str:
    """What each running node's Metadata says: partition -> leader@epoch."""
    views = []
    for i in cluster.running():
        try:
            view = metadata(cluster.node(i), topic, timeout=1.0)
            views.append(f"node {i} says " + " ".join(f"{p}:{s.leader}@{s.leader_epoch}"
                                                      for p, s in sorted(view.partitions.items())))
        except Exception as exc:  # a diagnostic: never let it stop the consumer
            views.append(f"node {i}: {exc!r}")
    return "; ".join(views)


def check_deliveries(producer: SequenceProducer, left: int) -> None:
    failed = producer.failures + producer.fatal_errors()
    assert left == 0 and not failed, (f"{left} records without a delivery report; failed deliveries and fatal "
                                      f"errors (first 20): {failed[:20]}\n{producer.summary()}")
    assert len(producer.acks) == producer.sent


def check_out_of_range(consumer: TailingConsumer) -> None:
    """Kafka answers a Fetch OFFSET_OUT_OF_RANGE only outside [log start, log end]; an offset
    between the HW and the log end gets an empty answer. Whenever the consumer was told out of
    range, every node was asked again at that offset (its log end read first, so the log held at
    least that much when it answered). A wrong answer makes a consumer with the default
    auto.offset.reset=latest skip records, one with earliest read everything again."""
    wrong = [probe for probe in consumer.probes if probe.wrong()]
    print(f"the consumer was told out of range {len(consumer.out_of_range)} times; "
          f"{len(consumer.probes)} probes, {len(wrong)} wrong answers")
    assert not wrong, ("OFFSET_OUT_OF_RANGE for offsets within the answering node's log (first 10): "
                       + "; ".join(map(str, wrong[:10])))


OFFSET_OUT_OF_RANGE = 1


class Probe(NamedTuple):
    """One node's answer to a consumer Fetch at `offset`, and its log end just before."""
    at: float           # seconds into the run
    node: int
    partition: int
    offset: int
    error: int          # Kafka error code
    hw: int             # -1 in an error answer
    log_end: int        # the node's log end, read from its files before the Fetch

    def wrong(self) -> bool:
        return self.error == OFFSET_OUT_OF_RANGE and self.offset <= self.log_end

    def __str__(self) -> str:
        return (f"[{self.at:.3f}s] node {self.node} partition {self.partition} offset {self.offset}: error "
                f"{self.error}, HW {self.hw}, log end {self.log_end}{' WRONG' if self.wrong() else ''}")


def probe_offset(cluster: KraftdCluster, topic: str, partition: int, offset: int, t0: float) -> list[Probe]:
    probes = []
    for i in cluster.running():
        try:
            end = log_end_offset(cluster.tmp_path / f"node{i}", topic, partition)
            error, hw = consumer_fetch(cluster.node(i), topic, partition, offset)
        except Exception:  # a diagnostic: a node that does not answer now tells nothing
            continue
        probes.append(Probe(round(time.monotonic() - t0, 3), i, partition, offset, error, hw, end))
    return probes


def inject(cluster: KraftdCluster, fault: Fault, name: str, log, producer: SequenceProducer) -> None:
    """Apply one fault, hold it for its duration, heal, then pause. A killed node is restarted
    during the pause (its start takes most of a second), and is up before the next fault."""
    log(f"{name}: {fault.describe()} (acknowledged so far: {len(producer.acks)})")
    if fault.kind == "kill":
        node = fault.nodes[0]
        cluster.kill(node)
        time.sleep(fault.duration)
        restart = threading.Thread(target=start, args=(cluster, node, log, name), daemon=True)
        restart.start()
        time.sleep(fault.pause)
        restart.join(30)
        assert cluster.process(node).alive(), f"node {node} did not restart"
        return
    if fault.kind == "partition":
        cluster.partition(*fault.nodes)
    elif fault.kind == "one-way":
        cluster.partition(*fault.nodes, one_way=True)
    else:
        cluster.isolate(fault.nodes[0])
    time.sleep(fault.duration)
    cluster.heal_all()
    log(f"{name}: healed")
    time.sleep(fault.pause)


def start(cluster: KraftdCluster, node: int, log, name: str, timeout: float = 15.0) -> None:
    """Start a killed node, retrying while its ports are still being released."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            cluster.start(node)
            log(f"{name}: node {node} restarted")
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
