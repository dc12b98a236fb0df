"""(v) Event-loop stalls under the three blocking jobs issue 23 names, read from each server's
own `kraftd_event_loop_lag_worst_ms` (server/loop_lag.py: how late a 10 ms heartbeat fired).

- **Topic churn**: one `kraftd serve` (default settings, data dir on disk); 1,000 topics of one
  partition created one CreateTopics at a time (confluent-kafka AdminClient), then deleted one
  DeleteTopics at a time.
- **Follower truncation**: three nodes, one RF=3 partition. 100 MB produced with acks=all;
  both followers SIGSTOPped; 10 MB produced with acks=1 (only the leader has it); the leader
  SIGKILLed; the followers resumed, elect a new leader, and take 1 MB more; the old leader
  restarts and truncates its 10 MB divergent suffix. Its worst stall from restart to caught up.
- **Snapshot install**: bench/rejoin.py at 100 MB of state in one snapshot-policy partition: a
  voter restarted on an empty data dir (`--rejoin`) downloads and installs a 100 MB snapshot.
  Its worst stall from restart to caught up.

Each scenario runs on fresh processes; a stall is charged to it only if the node's worst before
it was smaller. Target (issue 23): worst stall under 20 ms in each; the command exits 1 when a
scenario is over it (or did not measure).

Run: ``.venv/bin/python -m bench.loop_stall [--topics N] [--mb M]`` (~5 min; run it on an idle
machine: a CPU taken by another process shows up as loop lag too).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.common import wait_for

NAME = "loop_stall"
TARGET_MS = 20.0


def _worst(metrics_port: int) -> float:
    from tests.support.prometheus import scrape_unlabelled

    return scrape_unlabelled(metrics_port)["kraftd_event_loop_lag_worst_ms"]


def _lag_buckets(metrics_port: int) -> dict[float, float]:
    """kraftd_event_loop_lag_ms's cumulative bucket counts: {upper bound (ms): heartbeats}."""
    from tests.support.prometheus import scrape_samples

    return {float(dict(labels)["le"]): value for (name, labels), value in scrape_samples(metrics_port).items()
            if name == "kraftd_event_loop_lag_ms_bucket"}


def _stalls_between(before: dict[float, float], after: dict[float, float]) -> dict:
    """Heartbeats later than the target between two scrapes, and the bucket the worst fell in."""
    delta = {le: after[le] - before.get(le, 0.0) for le in after}
    total = delta[float("inf")]
    over = total - delta[TARGET_MS]
    worst_le = min((le for le in sorted(delta) if delta[le] == total), default=float("inf"))
    return dict(heartbeats=total, over_target=over, worst_at_most_ms=worst_le)


def _gauge(metrics_port: int, name: str, topic: str, partition: int) -> float | None:
    from tests.support.prometheus import scrape_samples

    for (sample, labels), value in scrape_samples(metrics_port).items():
        if sample == name and dict(labels) == {"topic": topic, "partition": str(partition)}:
            return value
    return None


def churn(topics: int, log) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.kraftd_process import KraftdProcess

    tmp = Path(tempfile.mkdtemp(prefix="kraftd-bench-stall-"))
    server = KraftdProcess(tmp / "data")
    try:
        server.start()
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        before = _worst(server.metrics_port)
        buckets = _lag_buckets(server.metrics_port)
        t0 = time.monotonic()
        for i in range(topics):
            admin.create_topics([NewTopic(f"churn-{i}", 1, 1)])[f"churn-{i}"].result(30)
        created_s = time.monotonic() - t0
        after_create = _worst(server.metrics_port)
        t0 = time.monotonic()
        for i in range(topics):
            admin.delete_topics([f"churn-{i}"])[f"churn-{i}"].result(30)
        deleted_s = time.monotonic() - t0
        worst = _worst(server.metrics_port)
        stalls = _stalls_between(buckets, _lag_buckets(server.metrics_port))
        log(f"  churn: {topics} created in {created_s:.1f} s, deleted in {deleted_s:.1f} s; worst stall "
            f"{before:.1f} ms before, {after_create:.1f} after creating, {worst:.1f} after deleting; {stalls}")
        return dict(topics=topics, created_s=created_s, deleted_s=deleted_s, before_ms=before,
                    after_create_ms=after_create, worst_ms=worst, stalls=stalls)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _produce(bootstrap: str, topic: str, mb: float, acks: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 10,
                         "batch.size": 1_000_000, "enable.idempotence": False, "compression.type": "none",
                         "message.timeout.ms": 120_000})
    value = os.urandom(1024)
    failed = []
    for _ in range(int(mb * 1e6 / 1024)):
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=lambda e, m: e and failed.append(e))
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0 and not failed, failed[:3]


def truncation(mb: float, log) -> dict:
    from bench.cluster import agreed_leaders, wait_agreed, wait_brokers
    from tests.support.cluster import KraftdCluster

    topic = "diverge"
    tmp = Path(tempfile.mkdtemp(prefix="kraftd-bench-stall-"))
    cluster = KraftdCluster(tmp, nodes=3)
    try:
        cluster.start_all()
        wait_brokers(cluster)
        cluster.create_topic(topic, 1, 3)
        leader = wait_agreed(cluster, topic, 1, 3, 60)[0]
        followers = [i for i in cluster.ids if i != leader]
        _produce(cluster.node(leader), topic, mb, "all")
        wait_agreed(cluster, topic, 1, 3, 120)
        for f in followers:
            os.kill(cluster.process(f).proc.pid, signal.SIGSTOP)
        kept = _gauge(cluster.process(leader).metrics_port, "kraftd_log_end_offset", topic, 0)
        _produce(cluster.node(leader), topic, mb / 10, "1")
        divergent_end = _gauge(cluster.process(leader).metrics_port, "kraftd_log_end_offset", topic, 0)
        cluster.kill(leader)
        for f in followers:
            os.kill(cluster.process(f).proc.pid, signal.SIGCONT)
        # (the survivors' metadata may still name the killed leader for a moment: wait for another)
        new_leader = wait_for("a new leader", lambda: next(
            (n for n in [(agreed_leaders(cluster, topic, 1, 2) or {}).get(0)] if n not in (None, leader)), None), 60)
        _produce(cluster.node(new_leader), topic, 1, "all")
        target = _gauge(cluster.process(new_leader).metrics_port, "kraftd_log_end_offset", topic, 0)
        t0 = time.monotonic()
        cluster.start(leader, timeout=120)
        port = cluster.process(leader).metrics_port
        at_start = _worst(port)  # (what the first moments cost: the truncation comes with the first fetches)
        wait_for("the old leader caught up", lambda: (_gauge(port, "kraftd_log_end_offset", topic, 0) or 0) >= target,
                 300, 0.05)
        worst = _worst(port)
        log(f"  truncation: {kept:,.0f} records kept, {divergent_end - kept:,.0f} divergent, "
            f"caught up in {time.monotonic() - t0:.1f} s; worst stall {worst:.1f} ms ({at_start:.1f} ms when listening)")
        return dict(mb=mb, kept=kept, divergent=divergent_end - kept, worst_ms=worst, at_start_ms=at_start)
    finally:
        cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)


def snapshot_install(mb: float, log) -> dict:
    from bench.rejoin import measure

    out: dict = {}

    def after(cluster, res) -> None:
        out["worst_ms"] = _worst(cluster.process(3).metrics_port)

    res = measure(int(mb * 1e6 / 1024), 1024, log, partitions=1, after=after)
    log(f"  snapshot install: {res.get('snapshot_bytes', 0) / 1e6:,.0f} MB of snapshot, caught up in "
        f"{res.get('catch_up_s', 0):.1f} s; worst stall {out.get('worst_ms', float('nan')):.1f} ms")
    return dict(mb=mb, snapshot_bytes=res.get("snapshot_bytes"), catch_up_s=res.get("catch_up_s"), **out)


def measure_all(topics: int, mb: float, log) -> dict:
    return dict(name=NAME, load_before=os.getloadavg(), churn=churn(topics, log), truncation=truncation(mb, log),
                snapshot_install=snapshot_install(mb, log), load_after=os.getloadavg())


def report(res: dict) -> str:
    def verdict(ms: float | None) -> str:
        return "n/a" if ms is None else f"{ms:.1f} ms ({'under' if ms < TARGET_MS else 'OVER'} {TARGET_MS:.0f} ms)"

    return "\n".join([
        "(v) Worst event-loop stall (kraftd_event_loop_lag_worst_ms)",
        f"  topic churn, {res['churn']['topics']:,} topics created and deleted: {verdict(res['churn']['worst_ms'])}",
        f"  follower truncation, {res['truncation']['mb']:.0f} MB kept: {verdict(res['truncation']['worst_ms'])}",
        f"  snapshot install, {res['snapshot_install']['mb']:.0f} MB: "
        f"{verdict(res['snapshot_install'].get('worst_ms'))}",
        f"  load average before {res['load_before'][0]:.1f}, after {res['load_after'][0]:.1f}",
    ])


def run(ctx) -> dict:
    return measure_all(100 if ctx.quick else 1000, 10 if ctx.quick else 100, ctx.log)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loop_stall", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--mb", type=float, default=100.0)
    p.add_argument("--only", choices=["churn", "truncation", "snapshot"], default=None)
    args = p.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.only:
        fn = {"churn": lambda: churn(args.topics, log), "truncation": lambda: truncation(args.mb, log),
              "snapshot": lambda: snapshot_install(args.mb, log)}[args.only]
        print(json.dumps(fn(), default=str))
        return 0
    res = measure_all(args.topics, args.mb, log)
    print(report(res))
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps(res, indent=1, default=str))
    over = [k for k in ("churn", "truncation", "snapshot_install")
            if not (res[k].get("worst_ms") is not None and res[k]["worst_ms"] < TARGET_MS)]
    if over:
        print(f"OVER the {TARGET_MS:.0f} ms target (or not measured): {', '.join(over)}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
