"""(g) Three-node cluster: what replication costs a producer, how fast a record goes from
producer to consumer through it, and how long writes stop when a partition leader crashes.

Real ``kraftd serve`` processes on loopback with ephemeral ports, started through the test
harness (``tests.support.cluster.KraftdCluster``: node ids 1..3, each with ``--voters`` naming
all three; the single node is the same harness with ``nodes=1, voters=False``). Default
settings everywhere (fsync policy ``acks_all``, Raft timeouts of ``quorum/raft/config.py``),
data dirs in the system temp dir. One confluent-kafka client in this process drives every part.

1. **Throughput** (target cluster/single >= 0.8x): the same N records (default 1,000,000, value
   sizes uniform in 100..1000 bytes, fixed seed, no keys, record i to partition i % 6) produced
   with ``linger.ms=5``, default ``batch.size``, idempotence off, no compression, into a
   6-partition topic: acks=1 on a single node (no --voters) and acks=all on the three-node
   cluster (RF=3). Time = first produce() to flush() returned. One warm-up of 5,000 records per
   system, then the passes alternate single/cluster (``--repeats``, default 5); medians, and
   the ratio of the medians. MB = 10^6 bytes of record values. (The default was 200,000 until
   2026-12-06: on a fast day those passes took 0.3 s, too short to measure.)
2. **Latency** (target p99 <= 15 ms): acks=all, ``linger.ms=0``, at a fixed rate (default
   1,000 records/s for 10 s, after 1 s of warm-up whose last record the consumer has
   received) round-robin into a 6-partition RF=3 topic;
   each value carries ``perf_counter_ns()`` at produce(). A consumer in the same process
   (``assign`` all partitions at the end, ``fetch.wait.max.ms=5``) notes ``perf_counter_ns()``
   when ``poll()`` hands it the record; latency = receive - send, same clock. Both clients set
   ``socket.nagle.disable`` (a latency client would; librdkafka leaves Nagle on). The
   producer's delivery-report latency and the servers' Raft commit latency (/metrics) are
   printed alongside, to tell replication from consumption.
3. **Failover** (target p50 and max <= 2 s): a 1-partition RF=3 topic. Each round (default
   10): a fresh producer thread (acks=all, ``linger.ms=0``, idempotence off, client defaults
   otherwise) sends one record every ~2 ms and serves delivery reports in between; once 100
   records are acknowledged and every node names one leader with all three replicas in the
   ISR, that leader is SIGKILLed. The time is kill -> the first successful delivery report of
   a record produce()d after the kill. A side thread polls Metadata on a surviving node every
   10 ms, so the time until a new leader is visible is reported too (the rest is the client
   finding it: librdkafka re-asks for metadata with a backoff of up to
   ``retry.backoff.max.ms`` = 1 s). Then the node is restarted on its data dir and the round
   waits until it is back in the ISR, the producer still writing (see ``_failover_round``).
   A fresh producer per round, because librdkafka's reconnect backoff to a node killed in an
   earlier round grows towards 10 s and would be billed to a later round in which it leads.

Benchmarks print numbers; nothing here asserts. Run: ``.venv/bin/python -m bench.cluster
[--quick]`` (~2-3 min; --quick ~45 s) or ``python -m bench.run --benches cluster``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import wait_for
from bench.servers import process_cpu_seconds

if __package__ in (None, ""):  # `python bench/cluster.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

NAME = "cluster"
TITLE = ("(g) three-node cluster (RF=3, loopback): acks=all produce throughput vs one node's "
         "acks=1, produce->consume latency, leader failover")
TARGET_RATIO = 0.8  # issue 27 (was 0.5)
TARGET_P99_MS = 15.0
TARGET_FAILOVER_S = 2.0
PARTITIONS = 6
TOPIC_SINGLE = "bench-tput-single"
TOPIC_TPUT = "bench-tput"
TOPIC_LATENCY = "bench-latency"
TOPIC_FAILOVER = "bench-failover"
WARMUP_RECORDS = 5_000


def _options(quick: bool) -> dict:
    return dict(records=50_000 if quick else 1_000_000, repeats=1 if quick else 5,
                rate=1000, latency_s=4.0 if quick else 10.0, rounds=3 if quick else 10,
                send_interval_s=0.002, round_timeout_s=30.0, seed=42)


# --------------------------------------------------------------------------------------------
# talking to the nodes


def metadata_response(address: str, topics: list[str] | None, timeout: float = 5.0):
    """MetadataResponse v12 from one node, raw (nothing cached or merged by a client library)."""
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    request = m.MetadataRequest(
        topics=None if topics is None else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    client = WireClient(address, client_id="kraftd-bench-cluster", timeout=timeout)
    try:
        return client.request(api.METADATA, 12, request)
    finally:
        client.close()


def metadata(address: str, topics: list[str] | None, timeout: float = 5.0) -> dict:
    """{"brokers": [ids], "topics": {name: (error, {partition: (leader, isr)})}} from one node."""
    r = metadata_response(address, topics, timeout)
    return dict(brokers=sorted(b.node_id for b in r.brokers),
                topics={t.name: (t.error_code, {p.partition_index: (p.leader_id, tuple(sorted(p.isr_nodes)))
                                                for p in t.partitions}) for t in r.topics})


def wait_brokers(cluster, timeout: float = 60.0) -> None:
    """Until every running node's Metadata lists every running broker (brokers register after
    the metadata quorum elects; an RF=3 CreateTopics before that is refused)."""
    cluster.wait_ready(timeout)
    running = cluster.running()
    wait_for(f"brokers {running} registered",
          lambda: all(metadata(cluster.node(i), [])["brokers"] == running for i in running), timeout)


def agreed_leaders(cluster, topic: str, partitions: int, isr: int) -> dict[int, int] | None:
    """{partition: leader} if every running node names the same leader for every partition,
    each with at least `isr` replicas in sync; else None."""
    views = []
    for i in cluster.running():
        error, parts = metadata(cluster.node(i), [topic])["topics"].get(topic, (-1, {}))
        if error != 0 or len(parts) != partitions:
            return None
        views.append(parts)
    leaders = {}
    for p in range(partitions):
        ls = {v[p][0] for v in views}
        if len(ls) != 1 or min(ls) < 0 or any(len(v[p][1]) < isr for v in views):
            return None
        leaders[p] = ls.pop()
    return leaders


def views(cluster, topic: str) -> str:
    """Each running node's {partition: (leader, ISR)} for a timeout message."""
    out = []
    for i in cluster.running():
        try:
            out.append(f"node {i}: {metadata(cluster.node(i), [topic])['topics'].get(topic)}")
        except OSError as e:
            out.append(f"node {i}: {e}")
    return "; ".join(out)


def wait_agreed(cluster, topic: str, partitions: int, isr: int, timeout: float) -> dict[int, int]:
    try:
        return wait_for(f"{topic}: one leader named by every node, ISR {isr}",
                     lambda: agreed_leaders(cluster, topic, partitions, isr), timeout)
    except TimeoutError as e:
        raise TimeoutError(f"{e}; Metadata (error, {{partition: (leader, ISR)}}): {views(cluster, topic)}") from None


def create_topic(cluster, topic: str, partitions: int, rf: int, timeout: float = 60.0) -> dict[int, int]:
    """CreateTopics via confluent's AdminClient (retried while the controller settles), then
    until every node agrees on the leaders and the ISR is full. {partition: leader}."""
    left = cluster.create_topic(topic, partitions, rf, timeout)
    return wait_agreed(cluster, topic, partitions, rf, max(left, 5))


def scrape(cluster, i: int) -> dict[str, float]:
    from bench.common import scrape_metrics

    try:
        return scrape_metrics("127.0.0.1", cluster.process(i).metrics_port)
    except OSError:
        return {}


def commit_latency(cluster, before: dict[int, dict], after: dict[int, dict]) -> float | None:
    """Mean Raft commit latency (leader append -> HW past it) between two scrapes, all nodes."""
    s = sum(after[i].get("kraftd_raft_commit_latency_ms_sum", 0) - before[i].get("kraftd_raft_commit_latency_ms_sum", 0)
            for i in after if i in before)
    n = sum(after[i].get("kraftd_raft_commit_latency_ms_count", 0)
            - before[i].get("kraftd_raft_commit_latency_ms_count", 0) for i in after if i in before)
    return s / n if n else None


def percentile(xs: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100)."""
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


# --------------------------------------------------------------------------------------------
# 1. throughput


def make_values(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    blob = rng.randbytes(1 << 20)
    out = []
    for _ in range(n):
        size = rng.randint(100, 1000)
        start = rng.randrange(0, len(blob) - size)
        out.append(blob[start:start + size])
    return out


def produce_pass(bootstrap: str, topic: str, acks: str, values: list[bytes]) -> dict:
    """Produce every value (record i to partition i % 6) and flush; rate over the whole pass."""
    from confluent_kafka import Producer

    failed = [0]

    def on_error(err, _msg):  # delivery.report.only.error: failures only
        if err is not None:
            failed[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "enable.idempotence": False,
                  "compression.type": "none", "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2_097_151, "delivery.report.only.error": True,
                  "client.id": "kraftd-bench-cluster"})
    # Metadata first, so the pass does not time the client's start-up.
    p.list_topics(topic, timeout=10)
    produce = p.produce
    t0 = time.perf_counter()
    i = 0
    n = len(values)
    while i < n:
        try:
            produce(topic, values[i], partition=i % PARTITIONS, on_delivery=on_error)
        except BufferError:
            p.poll(0.01)
            continue
        i += 1
        if not i & 4095:
            p.poll(0)
    left = p.flush(120)
    secs = time.perf_counter() - t0
    nbytes = sum(len(v) for v in values)
    acked = n - failed[0] - left
    return dict(records=n, acked=acked, errors=failed[0] + left, seconds=secs,
                records_per_s=acked / secs, mb_per_s=nbytes * acked / n / secs / 1e6)


def cpu_snapshot(system) -> dict:
    """CPU seconds so far: this process (the client, librdkafka's threads included) and the
    sum over the system's nodes."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return dict(client=usage.ru_utime + usage.ru_stime,
                nodes=sum(process_cpu_seconds(system.process(i).proc.pid) for i in system.ids),
                machine=machine_busy_seconds())


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (user, nice, system, irq and softirq time of
    every CPU, from /proc/stat; not idle, iowait or the hypervisor's steal): also the kernel's
    own threads, which run the fsyncs' journal commits for the nodes, billed to no process."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in f.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def work_counts(system) -> dict:
    """Counters summed over the system's nodes: requests by API (Produce, Fetch) and logs the
    group commit fsynced. Their change over a pass says how many request/answer cycles and
    fsyncs its bytes took."""
    out: dict = {"Produce": 0.0, "Fetch": 0.0, "fsyncs": 0.0}
    for i in system.ids:
        for name, value in scrape(system, i).items():
            if name.startswith("kraftd_requests_total{"):
                api = name.partition('api="')[2].partition('"')[0]
                if api in out:
                    out[api] += value
            elif name.startswith("kraftd_log_flushes_total"):
                out["fsyncs"] += value
    return out


def measure_throughput(single, cluster, opts: dict, log) -> dict:
    values = make_values(opts["records"], opts["seed"])
    mean_size = sum(len(v) for v in values) / len(values)
    log(f"  throughput: {len(values):,} records, mean value {mean_size:.0f} B "
        f"({sum(len(v) for v in values) / 1e6:.0f} MB)")
    systems = {"single": (single.bootstrap(), TOPIC_SINGLE, "1"),
               "cluster": (cluster.bootstrap(), TOPIC_TPUT, "all")}
    for name, (bootstrap, topic, acks) in systems.items():
        w = produce_pass(bootstrap, topic, acks, values[:WARMUP_RECORDS])
        log(f"  warm-up {name}: {w['records_per_s']:,.0f} rec/s")
    runs: dict[str, list[dict]] = {"single": [], "cluster": []}
    for r in range(opts["repeats"]):
        order = ["single", "cluster"] if r % 2 == 0 else ["cluster", "single"]
        for name in order:
            bootstrap, topic, acks = systems[name]
            system = single if name == "single" else cluster
            counts0 = work_counts(system)
            cpu0 = cpu_snapshot(system)
            res = produce_pass(bootstrap, topic, acks, values)
            cpu1 = cpu_snapshot(system)
            counts1 = work_counts(system)
            res["client_cpu_s"] = cpu1["client"] - cpu0["client"]
            res["nodes_cpu_s"] = cpu1["nodes"] - cpu0["nodes"]
            res["machine_cpu_s"] = cpu1["machine"] - cpu0["machine"]
            res["work"] = {k: int(counts1[k] - counts0[k]) for k in counts0}
            runs[name].append(res)
            work = res["work"]
            log(f"  {name} acks={acks}: {res['records_per_s']:,.0f} rec/s, {res['mb_per_s']:.1f} MB/s, "
                f"{res['seconds']:.1f} s, errors {res['errors']}; CPU s: client {res['client_cpu_s']:.2f}, "
                f"nodes {res['nodes_cpu_s']:.2f}, machine {res['machine_cpu_s']:.2f}; over the nodes: "
                f"{work['Produce']:,} Produce, {work['Fetch']:,} Fetch, {work['fsyncs']:,} logs fsynced")
    med = {name: dict(records_per_s=statistics.median(x["records_per_s"] for x in rs),
                      mb_per_s=statistics.median(x["mb_per_s"] for x in rs),
                      errors=sum(x["errors"] for x in rs)) for name, rs in runs.items()}
    ratio = med["cluster"]["records_per_s"] / med["single"]["records_per_s"]
    return dict(records=len(values), mean_value_bytes=mean_size, runs=runs, median=med, ratio=ratio)


# --------------------------------------------------------------------------------------------
# 2. latency


_STAMP = struct.Struct(">qq")  # seq (-1: warm-up), perf_counter_ns at produce()


def measure_latency(cluster, opts: dict, log) -> dict:
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

    bootstrap = cluster.bootstrap()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kraftd-bench-latency",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "fetch.wait.max.ms": 5, "fetch.min.bytes": 1, "socket.nagle.disable": True,
                         "client.id": "kraftd-bench-latency"})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False, "socket.nagle.disable": True,
                         "client.id": "kraftd-bench-latency"})
    padding = b"x" * (100 - _STAMP.size)
    latencies: list[float] = []
    seen: set[int] = set()
    warm_seen = [0]
    warm_low = [0]  # the lowest warm-up seq received: -1, -2, ... in send order
    stop = threading.Event()

    def consume_loop():
        # poll(), not consume(n, timeout): librdkafka's batch consume waits for n records or
        # the timeout, which would be billed to the server as latency.
        poll = consumer.poll
        while not stop.is_set():
            msg = poll(0.05)
            now = time.perf_counter_ns()
            if msg is None or msg.error():
                continue
            seq, sent = _STAMP.unpack_from(msg.value())
            if seq < 0:
                warm_seen[0] += 1
                warm_low[0] = min(warm_low[0], seq)
            elif seq not in seen:
                seen.add(seq)
                latencies.append((now - sent) / 1e6)

    consumer.assign([TopicPartition(TOPIC_LATENCY, p, OFFSET_END) for p in range(PARTITIONS)])
    reader = threading.Thread(target=consume_loop, name="latency-consumer", daemon=True)
    reader.start()
    failed = [0]
    acks: list[float] = []

    def on_delivery(err, msg):
        now = time.perf_counter_ns()
        if err is not None:
            failed[0] += 1
            return
        seq, sent_ns = _STAMP.unpack_from(msg.value())
        if seq >= 0:
            acks.append((now - sent_ns) / 1e6)

    def send(seconds: float, warm: bool, first_seq: int) -> int:
        start = time.perf_counter()
        n = 0
        interval = 1.0 / opts["rate"]
        while True:
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return n
            due = int(elapsed / interval) + 1
            while n < due:
                seq = -1 - n if warm else first_seq + n  # warm-up: -1, -2, ...
                producer.produce(TOPIC_LATENCY, _STAMP.pack(seq, time.perf_counter_ns()) + padding,
                                 partition=(first_seq + n) % PARTITIONS, on_delivery=on_delivery)
                n += 1
            producer.poll(0)
            time.sleep(max(0.0, start + n * interval - time.perf_counter()))

    sent = 0
    before: dict = {}
    try:
        warm = send(1.0, True, 0)  # warm-up: connections, the consumer's positions
        producer.flush(10)
        # The measured records start once the last warm-up record has arrived: the consumer's
        # fetch sessions and positions are set up (it starts at the log end, so the first
        # warm-up records may go unseen), and so is the group coordinator's topic (librdkafka
        # asks for a coordinator, which creates __consumer_offsets).
        try:
            wait_for("the last warm-up record to arrive", lambda: warm_low[0] <= -warm, 10.0, 0.01)
        except TimeoutError:
            log("  latency: the last warm-up record did not arrive; measuring anyway")
        before = {i: scrape(cluster, i) for i in cluster.running()}
        sent = send(opts["latency_s"], False, 0)
        producer.flush(10)
        if sent:
            wait_for("the last records to arrive", lambda: len(seen) >= sent, 5.0, 0.01)
    except TimeoutError:
        pass  # reported as received < sent
    finally:
        stop.set()
        reader.join(5)
        after = {i: scrape(cluster, i) for i in cluster.running()}
        consumer.close()
    log(f"  latency: sent {sent}, received {len(seen)}, warm-up received {warm_seen[0]}, "
        f"delivery failures {failed[0]}")
    return dict(sent=sent, received=len(seen), failures=failed[0], rate=opts["rate"], seconds=opts["latency_s"],
                p50_ms=percentile(latencies, 50), p99_ms=percentile(latencies, 99),
                p999_ms=percentile(latencies, 99.9), max_ms=max(latencies, default=None),
                mean_ms=statistics.fmean(latencies) if latencies else None,
                ack_p50_ms=percentile(acks, 50), ack_p99_ms=percentile(acks, 99),
                over_100ms=sum(1 for x in latencies if x > 100),
                server_commit_mean_ms=commit_latency(cluster, before, after))


# --------------------------------------------------------------------------------------------
# 3. failover


class PacedProducer:
    """acks=all, linger 0: record n is produce()d at start + n * interval, serving delivery
    reports in between. `watch(t)` arms a stopwatch: the time of the first successful delivery
    report of a record produce()d at or after monotonic time t."""

    def __init__(self, bootstrap: str, topic: str, interval: float) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.interval = interval
        self.sent = 0
        self.acked = 0
        self.failed = 0
        self._since: float | None = None
        self.first_ack: float | None = None
        self._stop = threading.Event()
        # log_level 2: the connection-refused lines for the killed node are expected here.
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                   "enable.idempotence": False, "client.id": "kraftd-bench-failover",
                                   "log_level": 2})
        self._thread = threading.Thread(target=self._run, name="failover-producer", daemon=True)

    def watch(self, since: float) -> None:
        self.first_ack = None
        self._since = since

    def _report(self, sent_at: float):
        def on_delivery(err, _msg):
            if err is not None:
                self.failed += 1
                return
            self.acked += 1
            if self.first_ack is None and self._since is not None and sent_at >= self._since:
                self.first_ack = time.monotonic()
        return on_delivery

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                self._producer.produce(self.topic, b"%d" % self.sent, partition=0, on_delivery=self._report(now))
                self.sent += 1
            except BufferError:
                pass
            due = start + self.sent * self.interval
            while (wait := due - time.monotonic()) > 0:
                self._producer.poll(wait)

    def start(self) -> "PacedProducer":
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self._producer.flush(30)


def leader_and_epoch(address: str, topic: str) -> tuple[int, int]:
    """(leader id, leader epoch) of partition 0 of `topic`, as the node at `address` sees it."""
    p = _partition0(address, topic)
    return p.leader_id, p.leader_epoch


def _settled_leader(cluster, topic: str) -> int | None:
    """The leader of partition 0 once automatic preferred-leader election has nothing left to
    move: every node names the first replica as leader, with all three replicas in sync."""
    leaders = agreed_leaders(cluster, topic, 1, 3)
    if leaders is None:
        return None
    leader = leaders[0]
    return leader if _partition0(cluster.node(leader), topic).replica_nodes[0] == leader else None


def _partition0(address: str, topic: str):
    return metadata_response(address, [topic], timeout=1).topics[0].partitions[0]


def _watch_new_leader(cluster, survivor: int, old_leader: int, old_epoch: int, stop: threading.Event,
                      out: dict) -> None:
    """Poll Metadata on a surviving node every 10 ms; note when it names a leader of a newer
    epoch (the election, as the cluster reports it to clients). The epoch check matters: a node
    that has left the old epoch but knows no leader yet answers from its metadata image, which
    can still name an older leader."""
    while not stop.is_set():
        try:
            leader, epoch = leader_and_epoch(cluster.node(survivor), TOPIC_FAILOVER)
            if leader >= 0 and leader != old_leader and epoch > old_epoch:
                out.update(t=time.monotonic(), leader=leader, epoch=epoch)
                return
        except (OSError, IndexError):
            pass
        time.sleep(0.01)


def measure_failover(cluster, opts: dict, log) -> dict:
    rounds: list[dict] = []
    totals = dict(sent=0, acked=0, failed=0, unflushed=0)
    error = None
    try:
        for r in range(opts["rounds"]):
            _failover_round(cluster, opts, r, rounds, totals, log)
    except Exception as e:  # noqa: BLE001 - keep the rounds measured so far
        error = f"round {len(rounds) + 1}: {type(e).__name__}: {e}"
        log(f"  failover stopped: {error}")
    times = [x["failover_s"] for x in rounds]
    ok = [t for t in times if t is not None]
    elected = [x["elected_s"] for x in rounds if x["elected_s"] is not None]
    return dict(rounds=rounds, timeouts=len(times) - len(ok), error=error,
                p50_s=statistics.median(ok) if ok else None,
                max_s=None if (not ok or len(ok) < len(times)) else max(ok),
                elected_p50_s=statistics.median(elected) if elected else None,
                elected_max_s=max(elected) if elected else None, **totals)


def _failover_round(cluster, opts: dict, r: int, rounds: list, totals: dict, log) -> None:
    """One kill of the leader under a fresh producer (its row appended to `rounds`); the node
    is back in the ISR on return. The producer runs from before the ISR check until the
    restarted node is back in it: an idle partition's followers fall out of the ISR after
    replica_lag_time_max_ms here (their session fetches do not name it, so the leader does not
    see them caught up), and only traffic brings them back."""
    producer = PacedProducer(cluster.bootstrap(), TOPIC_FAILOVER, opts["send_interval_s"]).start()
    try:
        wait_for("the failover producer's first acks", lambda: producer.acked >= 100, 30, 0.01)
        # A steady state: the preferred replica leads. Once the node killed last round is back
        # in the ISR, leadership moves back to it if it is the first replica; a kill in the
        # middle of that hand-over measured the hand-over too (2.6 s: bench/README.md, (g)).
        leader = wait_for("the preferred replica leading, ISR 3",
                          lambda: _settled_leader(cluster, TOPIC_FAILOVER), 60, 0.05)
        _, epoch_before = leader_and_epoch(cluster.node(leader), TOPIC_FAILOVER)
        time.sleep(0.2)  # steady state: the producer is writing to this leader
        survivor = next(i for i in cluster.running() if i != leader)
        seen: dict = {}
        stop_watch = threading.Event()
        t_kill = time.monotonic()
        killed_at = time.strftime("%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
        producer.watch(t_kill)
        cluster.kill(leader)
        watcher = threading.Thread(target=_watch_new_leader, args=(cluster, survivor, leader, epoch_before, stop_watch, seen),
                                   daemon=True)
        watcher.start()
        try:
            t_ack = wait_for("an acknowledged write after the kill", lambda: producer.first_ack,
                          opts["round_timeout_s"], 0.005)
        except TimeoutError:
            t_ack = None
        stop_watch.set()
        watcher.join(2)
        row = dict(round=r + 1, killed=leader, killed_at=killed_at, new_leader=seen.get("leader"),
                   epoch_before=epoch_before, epoch_after=seen.get("epoch"),
                   failover_s=None if t_ack is None else t_ack - t_kill,
                   elected_s=seen["t"] - t_kill if "t" in seen else None, rejoin_s=None,
                   leader_rejoined=None, epoch_rejoined=None)
        rounds.append(row)
        t0 = time.monotonic()
        cluster.restart(leader, crash=True)
        now_leader = wait_agreed(cluster, TOPIC_FAILOVER, 1, 3, 60)[0]  # the restarted node is back in the ISR
        row["rejoin_s"] = time.monotonic() - t0
        row["leader_rejoined"], row["epoch_rejoined"] = leader_and_epoch(cluster.node(now_leader), TOPIC_FAILOVER)
    finally:
        totals["unflushed"] += producer.stop()
        for k in ("sent", "acked", "failed"):
            totals[k] += getattr(producer, k)
    log(f"  round {r + 1}: killed node {leader} (epoch {epoch_before}); new leader {row['new_leader']} "
        f"(epoch {row['epoch_after']}) in Metadata after {_s(row['elected_s'])}, first ack after "
        f"{_s(row['failover_s'])}; back in ISR {row['rejoin_s']:.1f} s after restart")


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


# --------------------------------------------------------------------------------------------
# driver


def settle_disk(single_dir: Path, log) -> None:
    """Between the throughput and failover parts: the single node's acks=1 data (about 1 GB) is
    never fsynced, and the kernel would write it back during the next part (dirty pages
    expire after 30 s), stalling the cluster's fsyncs. Delete it (dirty pages of a deleted
    file are dropped, not written) and sync() what the cluster wrote."""
    t0 = time.monotonic()
    shutil.rmtree(single_dir, ignore_errors=True)
    os.sync()
    log(f"  settled the disk before the failover part in {time.monotonic() - t0:.1f} s")


def measure(opts: dict, log) -> dict:
    from tests.support.cluster import KraftdCluster

    res: dict = dict(name=NAME, options=opts, errors={})
    tmp = Path(tempfile.mkdtemp(prefix="kraftd-bench-cluster-"))
    single = KraftdCluster(tmp / "single", nodes=1, voters=False)
    cluster = KraftdCluster(tmp / "cluster", nodes=3)
    res["data_dir"] = str(tmp)
    res["loadavg_start"] = os.getloadavg()
    try:
        t0 = time.monotonic()
        single.start_all()
        cluster.start_all()
        wait_brokers(single)
        wait_brokers(cluster)
        create_topic(single, TOPIC_SINGLE, PARTITIONS, 1)
        leaders = create_topic(cluster, TOPIC_TPUT, PARTITIONS, 3)
        create_topic(cluster, TOPIC_LATENCY, PARTITIONS, 3)
        create_topic(cluster, TOPIC_FAILOVER, 1, 3)
        log(f"  nodes up, topics created in {time.monotonic() - t0:.1f} s; {TOPIC_TPUT} leaders {leaders}")
        # Latency first, on the fresh cluster: the throughput part leaves gigabytes behind it
        # (page cache, writeback, the clients' heaps) that a latency figure should not carry.
        for part, fn in (("latency", lambda: measure_latency(cluster, opts, log)),
                         ("throughput", lambda: measure_throughput(single, cluster, opts, log))):
            try:
                res[part] = fn()
            except Exception as e:  # noqa: BLE001 - report and go on with the next part
                res["errors"][part] = f"{type(e).__name__}: {e}"
                log(f"  {part} failed: {res['errors'][part]}")
            if part == "throughput":
                single.close()  # not needed any more; frees its CPU and memory
                settle_disk(tmp / "single", log)
        try:
            res["failover"] = measure_failover(cluster, opts, log)
        except Exception as e:  # noqa: BLE001
            res["errors"]["failover"] = f"{type(e).__name__}: {e}"
            log(f"  failover failed: {res['errors']['failover']}")
        res["nodes_alive_end"] = cluster.running()
        res["failover_log"] = {i: [line for line in cluster.process(i).log_lines
                                   if TOPIC_FAILOVER in line or "resign" in line]
                               for i in cluster.ids}
        res["server_warnings"] = {i: [line for line in cluster.process(i).log_lines
                                      if any(w in line for w in ("[warning", "[error", "[critical", "Traceback"))]
                                  for i in cluster.ids}
    finally:
        res["loadavg_end"] = os.getloadavg()
        single.close()
        cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def _verdicts(res: dict) -> None:
    def v(ok):
        return "n/a" if ok is None else ("PASS" if ok else "MISS")
    t, lat, f = res.get("throughput"), res.get("latency"), res.get("failover")
    res["verdicts"] = dict(
        ratio=v(None if not t else t["ratio"] >= TARGET_RATIO),
        p99=v(None if not lat or lat["p99_ms"] is None else lat["p99_ms"] <= TARGET_P99_MS),
        failover_p50=v(None if not f or f["p50_s"] is None else f["p50_s"] <= TARGET_FAILOVER_S),
        failover_max=v(None if not f else (f["max_s"] is not None and f["max_s"] <= TARGET_FAILOVER_S)),
    )


def report(res: dict) -> str:
    from bench.common import fmt, table

    if "verdicts" not in res:
        _verdicts(res)
    vd = res["verdicts"]
    out = [TITLE]
    rows = []
    t = res.get("throughput")
    if t:
        s, c = t["median"]["single"], t["median"]["cluster"]
        rows += [
            ["1 node, acks=1 (records/s | MB/s)", f"{fmt(s['records_per_s'], 0)} | {fmt(s['mb_per_s'])}", "", ""],
            ["3 nodes RF=3, acks=all (records/s | MB/s)", f"{fmt(c['records_per_s'], 0)} | {fmt(c['mb_per_s'])}",
             "", ""],
            ["throughput ratio acks=all 3 nodes / acks=1 1 node", f"{t['ratio']:.2f}x", f">= {TARGET_RATIO}x",
             vd["ratio"]],
        ]
    lat = res.get("latency")
    if lat:
        rows += [
            ["produce->consume latency p50 (ms)", fmt(lat["p50_ms"], 2), "", ""],
            ["produce->consume latency p99 (ms)", fmt(lat["p99_ms"], 2), f"<= {TARGET_P99_MS:g}", vd["p99"]],
        ]
    f = res.get("failover")
    if f:
        rows += [
            ["failover: kill -9 leader -> first ack, p50 (s)", fmt(f["p50_s"], 2), f"<= {TARGET_FAILOVER_S:g}",
             vd["failover_p50"]],
            ["failover: kill -9 leader -> first ack, max (s)",
             fmt(f["max_s"], 2) if f["max_s"] is not None else f"timeout x{f['timeouts']}",
             f"<= {TARGET_FAILOVER_S:g}", vd["failover_max"]],
        ]
    if rows:
        out.append(table(["measure", "value", "target", "verdict"], rows))
    if t:
        out.append(f"  throughput: {t['records']:,} records per pass (values 100-1000 B, mean "
                   f"{t['mean_value_bytes']:.0f} B), 6 partitions, linger.ms=5, idempotence off; medians of "
                   f"{len(t['runs']['single'])} alternating passes; errors single {t['median']['single']['errors']}, "
                   f"cluster {t['median']['cluster']['errors']}")
        for name in ("single", "cluster"):
            runs = t["runs"][name]
            out.append(f"    {name:7s} passes (rec/s): "
                       + ", ".join(f"{x['records_per_s']:,.0f}" for x in runs))
            if runs and "nodes_cpu_s" in runs[0]:
                out.append(f"    {name:7s} CPU s per pass, medians: client "
                           f"{statistics.median(x['client_cpu_s'] for x in runs):.2f}, nodes (sum) "
                           f"{statistics.median(x['nodes_cpu_s'] for x in runs):.2f}, machine "
                           f"{statistics.median(x.get('machine_cpu_s', 0) for x in runs):.2f} "
                           f"(of {os.cpu_count() * statistics.median(x['seconds'] for x in runs):.2f} available)")
    if lat:
        out.append(f"  latency: {lat['rate']}/s for {lat['seconds']:g} s, linger.ms=0, acks=all: received "
                   f"{lat['received']}/{lat['sent']} (failures {lat['failures']}); mean {fmt(lat['mean_ms'], 2)} ms, "
                   f"p99.9 {fmt(lat['p999_ms'], 2)} ms, max {fmt(lat['max_ms'], 2)} ms; {lat['over_100ms']} "
                   f"records over 100 ms")
        out.append(f"    produce->ack (delivery report) p50 {fmt(lat['ack_p50_ms'], 2)} ms, p99 "
                   f"{fmt(lat['ack_p99_ms'], 2)} ms; server Raft commit latency (append -> HW) mean "
                   f"{fmt(lat['server_commit_mean_ms'], 2)} ms")
    if f:
        ft = [x["failover_s"] for x in f["rounds"]]
        el = [x["elected_s"] for x in f["rounds"]]
        out.append(f"  failover: {len(f['rounds'])} rounds; new leader visible in Metadata p50 "
                   f"{fmt(f['elected_p50_s'], 2)} s, max {fmt(f['elected_max_s'], 2)} s; producer sent "
                   f"{f['sent']:,}, acked {f['acked']:,}, failed {f['failed']}, unflushed {f['unflushed']}")
        out.append("    per round, kill -> first ack (s): " + ", ".join("-" if x is None else f"{x:.2f}" for x in ft))
        out.append("    per round, kill -> new leader in Metadata (s): "
                   + ", ".join("-" if x is None else f"{x:.2f}" for x in el))
        out.append("    per round, leader@epoch at the kill -> new leader -> once the killed node is back "
                   "(one election per kill is the ideal): "
                   + ", ".join(f"{x['killed']}@{x['epoch_before']}->{x['new_leader']}@{x['epoch_after']}"
                               f"->{x['leader_rejoined']}@{x['epoch_rejoined']}" for x in f["rounds"]))
        out.append("    per round, restart -> back in ISR (s): "
                   + ", ".join("-" if x["rejoin_s"] is None else f"{x['rejoin_s']:.1f}" for x in f["rounds"]))
        if f.get("error"):
            out.append(f"    STOPPED EARLY at {f['error']}")
    resigned = [f"node {i} {line.split('] ', 1)[-1].split(':')[0]} at {line[11:23]}"
                for i, lines in res.get("failover_log", {}).items() for line in lines if "resigning" in line]
    if resigned:
        out.append(f"  leaders that resigned (check-quorum: no fetch from a majority): {'; '.join(resigned)}")
    if f:
        out.append("  kill times (UTC, for the server logs): "
                   + ", ".join(f"{x['killed_at']} node {x['killed']}" for x in f["rounds"]))
    warnings = {i: len(w) for i, w in res.get("server_warnings", {}).items() if w}
    if warnings:
        out.append(f"  server log warnings/errors per node: {warnings} (lines in the JSON)")
    if "loadavg_start" in res:
        out.append(f"  load average at start {res['loadavg_start'][0]:.1f}, at end {res['loadavg_end'][0]:.1f} "
                   f"({os.cpu_count()} CPUs; other work on the machine shows up here)")
    for k, e in res.get("errors", {}).items():
        out.append(f"  {k}: ERROR {e}")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# bench.run hook and command line


def run(ctx) -> dict:
    if "kraftd" not in ctx.systems:
        return dict(name=NAME, error="kraftd not among the systems", errors={})
    res = measure(_options(ctx.quick), ctx.log)
    _verdicts(res)
    return res


def main(argv=None) -> int:
    from bench import servers

    p = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="50k records x 1 pass, 4 s latency, 3 failover rounds")
    p.add_argument("--records", type=int, help="records per throughput pass (default 1,000,000)")
    p.add_argument("--repeats", type=int, help="throughput passes per system (default 5)")
    p.add_argument("--rate", type=int, help="latency: records/s (default 1000)")
    p.add_argument("--latency-seconds", type=float, help="latency: measured seconds (default 10)")
    p.add_argument("--rounds", type=int, help="failover rounds (default 10)")
    p.add_argument("--out", help="JSON result path (default bench/out/cluster-<time>.json)")
    args = p.parse_args(argv)
    servers.install_signal_handlers()
    opts = _options(args.quick)
    for key, value in (("records", args.records), ("repeats", args.repeats), ("rate", args.rate),
                       ("latency_s", args.latency_seconds), ("rounds", args.rounds)):
        if value is not None:
            opts[key] = value
    t0 = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    res = measure(opts, log)
    _verdicts(res)
    res["elapsed_s"] = time.monotonic() - t0
    print(report(res))
    print(f"  total {res['elapsed_s']:.0f} s")
    out = Path(args.out) if args.out else servers.BENCH_DIR / "out" / f"cluster-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
