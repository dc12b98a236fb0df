"""Acceptance: a leader killed under an idempotent acks=all producer loses nothing and duplicates
nothing. Three nodes, a topic of 6 partitions with 3 replicas; sequence-numbered records flow from
confluent-kafka while the node leading most partitions is SIGKILLed; afterwards every
acknowledged record is in the logs exactly once, at the offset its delivery report gave, and the
three replicas' logs are identical below the high watermark.

The pieces the chaos test shares (the producer thread, topic set-up, the final checks) live here.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter, deque

import pytest

from tests.cluster.replica_logs import (Ack, PartitionState, assert_acked_exactly_once,
                                        assert_replicas_identical_below_hw, end_offsets, first_difference,
                                        high_watermark, metadata, read_replica_logs)
from tests.support.cluster import KraftdCluster
from tests.support.waiting import poll_until, wait_until

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]

TOPIC = "failover"
PARTITIONS = 6


def key_of(seq: int) -> bytes:
    return b"%010d" % seq


def value_of(seq: int) -> bytes:
    return b"seq=%d;" % seq + b"x" * 64


# -- cluster set-up -----------------------------------------------------------------------------

def wait_brokers_registered(cluster: KraftdCluster, topic: str, timeout: float = 30.0) -> None:
    """Until every running node's Metadata (asked about `topic`, never creating it) lists every
    running broker: brokers register after the metadata quorum elects, and a CreateTopics with
    RF=3 sent earlier is refused."""
    cluster.wait_ready(timeout)
    running = cluster.running()

    def registered():
        try:
            return all(sorted(metadata(cluster.node(i), topic).brokers) == running for i in running)
        except OSError:
            return False

    wait_until(registered, timeout, f"every node to list brokers {running}", interval=0.1)


def create_topic(cluster: KraftdCluster, topic: str, partitions: int, rf: int, timeout: float = 60.0) -> None:
    """CreateTopics through confluent-kafka's AdminClient, retried while the controller settles;
    then until every node agrees on a leader for every partition and its ISR is full."""
    left = cluster.create_topic(topic, partitions, rf, timeout)
    wait_leaders_agreed(cluster, topic, partitions, rf, left)


def wait_leaders_agreed(cluster: KraftdCluster, topic: str, partitions: int, isr: int, timeout: float) -> dict[int, int]:
    """Until every running node names the same leader for each partition with an ISR of `isr`
    nodes; returns {partition: leader}."""
    def agreed():
        views = []
        for i in cluster.running():
            try:
                views.append(metadata(cluster.node(i), topic).partitions)
            except OSError:
                return None
        leaders = {p: {v[p].leader for v in views if p in v} for p in range(partitions)}
        if any(len(ls) != 1 or min(ls) < 0 or any(p not in v for v in views) for p, ls in leaders.items()):
            return None
        if any(len(v[p].isr) < isr for v in views for p in range(partitions)):
            return None
        return {p: ls.pop() for p, ls in leaders.items()}

    try:
        return wait_until(agreed, max(timeout, 1), f"leaders of {topic} agreed with ISR {isr}", interval=0.1)
    except AssertionError:
        raise AssertionError(f"{topic}: no agreed leaders:\n" + tails(cluster)) from None


def leaders(cluster: KraftdCluster, topic: str, partitions: int, timeout: float = 10.0) -> dict[int, PartitionState]:
    """{partition: state (leader, epoch, ...)} from the first running node whose Metadata names a
    leader for every partition. Odd answers on the way are printed."""
    def answer():
        for i in cluster.running():
            try:
                view = metadata(cluster.node(i), topic)
            except OSError as exc:
                print(f"Metadata from node {i}: {exc!r}")
                continue
            found = view.partitions
            if view.topic_error or len(found) != partitions or min(s.leader for s in found.values()) < 0:
                print(f"Metadata from node {i}: topic error {view.topic_error}, partitions {view.partitions}")
            else:
                return found
        return None

    found = poll_until(answer, timeout, interval=0.1)
    assert found, f"no node named a leader for every partition of {topic} within {timeout}s\n" + tails(cluster)
    return found


def tails(cluster: KraftdCluster, lines: int = 40) -> str:
    return "\n".join(cluster.logs(i, tail=lines) for i in cluster.ids)


# -- the producer -------------------------------------------------------------------------------

class _Lines(logging.Handler):
    def __init__(self, lines: deque) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((time.monotonic(), record.getMessage()))


# Words in librdkafka's "eos" debug lines that say the idempotent producer bumped its epoch, met
# a sequence error or failed for good, and why.
IDEMPOTENCE_EVENTS = ("bump", "errseq", "unkpid", "dupseq", "fatal")
# librdkafka's line when it decides to bump the epoch (rd_kafka_idemp_drain_epoch_bump0), and the
# reason it gives when a later request of a partition was refused only because an earlier one
# failed, as Kafka refuses it too (rdkafka_request.c, OUT_OF_ORDER_SEQUENCE_NUMBER, base seq > next).
_DRAIN_FOR_BUMP = re.compile(r"Beginning partition drain in state \S+ for PID\{Id:(?P<pid>-?\d+),"
                             r"Epoch:(?P<epoch>-?\d+)\} epoch bump .*?requests: (?P<reason>.*)$")
CLIENT_SIDE_BUMP_REASONS = ("skipped sequence numbers", )


def eos_debug_log(lines: deque) -> dict:
    """confluent-kafka settings that send librdkafka's idempotence ("eos") debug log, as
    (time, line), to `lines` through a logger of its own."""
    logger = logging.getLogger(f"{__name__}.rdkafka.{id(lines)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(_Lines(lines))
    return {"debug": "eos", "logger": logger}


def client_side_bumps(lines) -> set[tuple[int, int]]:
    """(producer id, epoch) of each epoch librdkafka bumped for a reason of its own, from its eos
    debug lines: a request refused only because an earlier one of the partition failed
    ("skipped sequence numbers"). Not a bump for a broker's UNKNOWN_PRODUCER_ID or a sequence the
    broker should have taken: those stay failures."""
    found = set()
    for line in lines:
        match = _DRAIN_FOR_BUMP.search(line)
        if match and match["reason"].startswith(CLIENT_SIDE_BUMP_REASONS):
            found.add((int(match["pid"]), int(match["epoch"])))
    return found


class SequenceProducer:
    """A confluent-kafka idempotent acks=all producer on its own thread, sending record n (key
    `key_of(n)`, value `value_of(n)`) at about `rate` records/s, partitioned by the client's
    default partitioner. Delivery reports are collected as Acks (success) or failures; the
    client's idempotence debug log is kept, to explain an epoch bump or a fatal error."""

    def __init__(self, bootstrap: str, topic: str, *, rate: int = 1000, **config) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.rate = rate
        self.acks: list[Ack] = []
        self.failures: list[tuple[int, str]] = []    # (seq, error) from delivery reports
        self.client_errors: list[tuple[float, str, bool]] = []  # (time, error, fatal) from error_cb
        self.client_log: deque = deque(maxlen=20_000)  # (time, line) of librdkafka's eos debug log
        self.sent = 0
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 5, "error_cb": self._on_error, **eos_debug_log(self.client_log),
                                   **config})
        self._thread = threading.Thread(target=self._run, name="sequence-producer", daemon=True)

    def start(self) -> "SequenceProducer":
        self._thread.start()
        return self

    def _on_error(self, err) -> None:
        self.client_errors.append((time.monotonic(), str(err), err.fatal()))

    def _delivered(self, seq: int):
        def report(err, msg) -> None:
            if err is not None:
                self.failures.append((seq, str(err)))
            else:
                self.acks.append(Ack(key_of(seq), msg.partition(), msg.offset(), time.monotonic()))
        return report

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate)  # records that should be out by now
            while self.sent < due and not self._stop.is_set():
                try:
                    self._producer.produce(self.topic, key=key_of(self.sent), value=value_of(self.sent),
                                           on_delivery=self._delivered(self.sent))
                except BufferError:  # the local queue is full: serve reports, then try again
                    self._producer.poll(0.05)
                    continue
                self.sent += 1
            self._producer.poll(0.005)

    def stop(self, flush_timeout: float = 120.0) -> int:
        """Stop producing and flush; the number of records still undelivered (0 when every record
        has its delivery report)."""
        self._stop.set()
        self._thread.join(10)
        return self._producer.flush(flush_timeout)

    def idempotence_events(self, since: float = 0.0) -> list[tuple[float, str]]:
        """The client's epoch bumps, sequence errors and fatal errors after `since`."""
        return [(at, line) for at, line in list(self.client_log)
                if at >= since and any(word in line.lower() for word in IDEMPOTENCE_EVENTS)]

    def fatal_errors(self) -> list:
        return [e for e in self.client_errors if e[2]]

    def epoch_bumps(self) -> list[str]:
        return [line for _, line in self.idempotence_events() if "bumped epoch" in line]

    def client_side_bumps(self) -> set[tuple[int, int]]:
        return client_side_bumps(line for _, line in self.client_log)

    def summary(self) -> str:
        errors = Counter(e for _, e, _ in self.client_errors)
        return (f"sent {self.sent}, acknowledged {len(self.acks)}, failed {len(self.failures)}; "
                f"producer epoch bumps: {len(self.epoch_bumps())}; client errors: {dict(errors) or 'none'}")


# -- the final checks -----------------------------------------------------------------------------

def wait_replicas_identical(cluster: KraftdCluster, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, int]:
    """Until, for every partition, the leader answers a HW and all replicas' logs reach it and
    agree below it; returns {partition: HW}. On timeout the assertion names what still differs."""
    dirs = {i: cluster.tmp_path / f"node{i}" for i in cluster.ids}
    addresses = [cluster.node(i) for i in cluster.running()]
    state: dict[int, str] = {}
    hws: dict[int, int] = {}

    def settled():
        for p in range(partitions):
            if p in hws:
                continue  # settled once, settled for good: nothing is produced any more
            found = high_watermark(addresses, topic, p)
            if found is None:
                state[p] = "no node leads it"
                continue
            leader, hw = found
            difference = first_difference(read_replica_logs(dirs, topic, p), hw)
            if difference is None:
                hws[p] = hw
                state.pop(p, None)
            else:
                state[p] = f"leader {leader}, {difference}"
        return not state

    try:
        wait_until(settled, timeout, "replicas to catch up", interval=0.25)
    except AssertionError:
        raise AssertionError(f"replicas of {topic} did not converge in {timeout}s:\n"
                             + "\n".join(f"partition {p}: {s}" for p, s in sorted(state.items()))
                             + f"\nlog ends: { {p: end_offsets(dirs, topic, p) for p in range(partitions)} }\n"
                             + tails(cluster)) from None
    return hws


def check_logs(cluster: KraftdCluster, topic: str, partitions: int, producer: SequenceProducer,
               hws: dict[int, int]) -> dict:
    """Replicas identical below each HW; every record `producer` had acknowledged there exactly
    once (but for its own re-sends under a bumped epoch: assert_acked_exactly_once), in report
    order, and no other data record (call it when every record sent was acknowledged); returns
    {partition: entries below the HW}."""
    dirs = {i: cluster.tmp_path / f"node{i}" for i in cluster.ids}
    logs = {p: assert_replicas_identical_below_hw(dirs, topic, p, hws[p]) for p in range(partitions)}
    acks = producer.acks
    assert_acked_exactly_once(logs, acks, nothing_else=True, client_resends=producer.client_side_bumps())
    entries = [e for es in logs.values() for e in es]
    print(f"HWs {dict(sorted(hws.items()))}: {len(entries)} offsets ({sum(e.control for e in entries)} control) "
          f"identical on {len(dirs)} replicas; {len(acks)} acknowledged records each found once")
    return logs


# -- the test -------------------------------------------------------------------------------------

def test_leader_killed_under_idempotent_producer_loses_and_duplicates_nothing(tmp_path):
    with KraftdCluster(tmp_path, nodes=3) as cluster:
        wait_brokers_registered(cluster, TOPIC)
        create_topic(cluster, TOPIC, PARTITIONS, 3)
        producer = SequenceProducer(cluster.bootstrap(), TOPIC).start()
        time.sleep(3)

        before = leaders(cluster, TOPIC, PARTITIONS)
        victim, led = Counter(s.leader for s in before.values()).most_common(1)[0]
        moved = {p: s.leader_epoch for p, s in before.items() if s.leader == victim}  # partition: epoch
        acked_before = len(producer.acks)
        killed_at = time.monotonic()
        cluster.kill(victim)
        print(f"\nkilled node {victim}, leader of {led} partitions {sorted(moved)}, after {acked_before} "
              f"acknowledgements; (leader, epoch) before: {_leaders_text(before)}")
        time.sleep(8)
        left = producer.stop()
        print(producer.summary())
        print(f"(leader, epoch) after: {_leaders_text(leaders(cluster, TOPIC, PARTITIONS))}")
        survivor = next(i for i in cluster.ids if i != victim)
        print(failover_time(producer.acks, moved, killed_at, cluster.tmp_path / f"node{survivor}"))
        try:
            assert left == 0, f"{left} records without a delivery report after flush; {producer.summary()}\n" \
                              + tails(cluster)
            assert not producer.failures, \
                f"failed deliveries (first 10): {producer.failures[:10]}; {producer.summary()}"
            assert not producer.fatal_errors(), f"fatal client errors: {producer.fatal_errors()}"
            assert len(producer.acks) == producer.sent

            cluster.start(victim)
            hws = wait_replicas_identical(cluster, TOPIC, PARTITIONS)
            check_logs(cluster, TOPIC, PARTITIONS, producer, hws)
        except AssertionError:
            print(f"the producer's epoch bumps and sequence errors: {producer.idempotence_events()[:40]}")
            raise


def failover_time(acks: list[Ack], moved: dict[int, int], killed_at: float, survivor_dir) -> str:
    """From the kill to the first acknowledgement of a record a new leader wrote (its batch carries
    a later leader epoch, read from a surviving node's log) on a partition the killed node led; a
    report served just after the kill may be for a record the old leader had committed."""
    epoch_of = {e.key: e.leader_epoch for p in moved for e in read_replica_logs([survivor_dir], TOPIC, p)[0].entries
                if not e.control}
    moved_acks = [a.at for a in acks if a.partition in moved and epoch_of.get(a.key, -1) > moved[a.partition]]
    others = [a.at for a in acks if a.at > killed_at and a.partition not in moved]

    def since_kill(times: list[float]) -> str:
        return f"{(min(times) - killed_at) * 1000:.0f} ms" if times else "none"

    return (f"kill -> first acknowledgement from a new leader: {since_kill(moved_acks)} "
            f"(on the other partitions: {since_kill(others)})")


def _leaders_text(states: dict[int, PartitionState]) -> str:
    return ", ".join(f"{p}: ({s.leader}, {s.leader_epoch})" for p, s in sorted(states.items()))
