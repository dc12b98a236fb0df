"""(r) Moving a partition to a new broker (issue 25): bytes moved per second, unthrottled and
throttled, and what the move costs a producer's produce->consume latency.

Per mode (unthrottled; `reassignment_throttle_bytes_per_s` = 20 MB/s), four real `kraftd serve`
processes (tests.support.cluster.KraftdCluster): nodes 1-3 are the metadata voters and node 4
a broker. A 1-partition RF=3 topic on nodes 1-3 is loaded with --gib GiB of random 1 KiB values
(confluent-kafka, acks=all). A latency probe runs throughout: a paced producer (acks=all,
linger 0, 500 records/s of 100 B) to a 3-partition RF=3 topic on nodes 1-3, and a consumer of it
(latency = receive - send, one clock). Then `kraftd cluster reassign` moves the big partition
from [1,2,3] to [4,2,3].

- move time: the AlterPartitionReassignments answer -> ListPartitionReassignments empty (node 4
  caught up, added as a voter, node 1 removed, the move ended);
- rate: the bytes node 4's copy holds at the end / move time (MB = 10^6 bytes), and the
  leader's `kraftd_reassignment_bytes_total` (what it sent the joining replica) / move time;
- latency: p50/p99 of the probe's records sent during the move, against those sent in the
  same length of time just before it (same run, same cluster).

Run: ``.venv/bin/python -m bench.move [--gib G] [--throttle-mb 20]`` (~3 min at 1 GiB).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import run_standalone, wait_for

NAME = "move"
BIG, PROBE = "big", "probe"
VALUE_BYTES = 1024
_STAMP = struct.Struct(">qq")  # seq, perf_counter_ns at produce()


class _Probe:
    """Paced acks=all records and their produce->consume latencies, by send time."""

    def __init__(self, bootstrap: str, rate: int = 500) -> None:
        from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

        self.rate = rate
        self.samples: list[tuple[float, float]] = []  # (sent at, monotonic s; latency ms)
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 2,
                                   "socket.nagle.disable": True, "enable.idempotence": False})
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-move-probe", "log_level": 2,
                                   "enable.auto.commit": False, "fetch.wait.max.ms": 5, "socket.nagle.disable": True})
        self._consumer.assign([TopicPartition(PROBE, p, OFFSET_END) for p in range(3)])
        self._offset = time.monotonic() - time.perf_counter()
        self._threads = [threading.Thread(target=self._send, daemon=True),
                         threading.Thread(target=self._receive, daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)
        self._consumer.close()

    def _send(self) -> None:
        start, n, padding = time.perf_counter(), 0, b"x" * (100 - _STAMP.size)
        while not self._stop.is_set():
            due = int((time.perf_counter() - start) * self.rate) + 1
            while n < due:
                self._producer.produce(PROBE, _STAMP.pack(n, time.perf_counter_ns()) + padding, partition=n % 3)
                n += 1
            self._producer.poll(0)
            time.sleep(max(0.0, start + n / self.rate - time.perf_counter()))
        self._producer.flush(10)

    def _receive(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.05)
            now = time.perf_counter_ns()
            if msg is not None and not msg.error():
                _, sent = _STAMP.unpack_from(msg.value())
                self.samples.append((sent / 1e9 + self._offset, (now - sent) / 1e6))

    def between(self, t0: float, t1: float) -> list[float]:
        return [ms for at, ms in self.samples if t0 <= at < t1]


def _reassign(cluster, plan: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftd", "cluster", "reassign", "--bootstrap-server",
                           cluster.node(2), "--plan", str(plan), *args], capture_output=True, text=True, timeout=600)


def _dir_bytes(data_dir: Path) -> int:
    return sum(f.stat().st_size for d in data_dir.glob(f"{BIG}-*") for f in d.iterdir() if f.is_file())


def measure_mode(gib: float, throttle_mb: float, log) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    from bench.cluster import percentile, scrape, wait_agreed, wait_brokers
    from bench.rejoin import _load
    from kraftd.commands.cluster import ongoing
    from tests.support.cluster import KraftdCluster

    res: dict = dict(gib=gib, throttle_mb_per_s=throttle_mb)
    tmp = Path(tempfile.mkdtemp(prefix="kraftd-bench-move-"))
    env = {"KRAFTD_REASSIGNMENT_THROTTLE_BYTES_PER_S": str(int(throttle_mb * 1e6))} if throttle_mb else {}
    cluster = KraftdCluster(tmp, nodes=4, voter_ids=[1, 2, 3], env=env)
    probe = None
    try:
        cluster.start_all()
        wait_brokers(cluster)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        for name, count in ((BIG, 1), (PROBE, 3)):
            assignment = [[1, 2, 3][p % 3:] + [1, 2, 3][:p % 3] for p in range(count)]
            admin.create_topics([NewTopic(name, num_partitions=count, replica_assignment=assignment)])[name].result(60)
            wait_agreed(cluster, name, count, 3, 60)
        keys = int(gib * (1 << 30)) // VALUE_BYTES
        res["load_s"] = _load(cluster.bootstrap(), keys, VALUE_BYTES, log, 1, topic=BIG)
        wait_agreed(cluster, BIG, 1, 3, 300)
        log(f"  loaded {keys * VALUE_BYTES / 1e6:,.0f} MB in {res['load_s']:.1f} s")
        probe = _Probe(cluster.bootstrap())
        probe.start()
        time.sleep(3.0)  # warm-up: connections, the consumer's positions
        baseline_start = time.monotonic()
        plan = tmp / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": BIG, "partition": 0,
                                                                   "replicas": [4, 2, 3]}]}))
        sent_before = {i: scrape(cluster, i).get("kraftd_reassignment_bytes_total", 0) for i in (1, 2, 3)}
        t0 = time.monotonic()
        out = _reassign(cluster, plan)
        assert out.returncode == 0, out.stdout + out.stderr
        servers = [cluster.node(i) for i in (2, 3)]
        wait_for("the move to end", lambda: not ongoing(servers, None, 30.0), 1800, 0.05)
        assert _reassign(cluster, plan, "--verify").returncode == 0
        res["move_s"] = move_s = time.monotonic() - t0
        sent = sum(scrape(cluster, i).get("kraftd_reassignment_bytes_total", 0) - sent_before[i] for i in (1, 2, 3))
        res["bytes"] = _dir_bytes(tmp / "node4")
        res["mb_per_s"] = res["bytes"] / 1e6 / move_s
        res["sent_mb_per_s"] = sent / 1e6 / move_s
        during = probe.between(t0, t0 + move_s)
        before = probe.between(max(baseline_start, t0 - move_s), t0)
        res.update(p50_during_ms=percentile(during, 50), p99_during_ms=percentile(during, 99), n_during=len(during),
                   p50_before_ms=percentile(before, 50), p99_before_ms=percentile(before, 99), n_before=len(before))
        log(f"  moved {res['bytes'] / 1e6:,.0f} MB in {move_s:.1f} s ({res['mb_per_s']:.0f} MB/s); "
            f"p99 {res['p99_before_ms']:.1f} ms before, {res['p99_during_ms']:.1f} ms during")
    finally:
        if probe is not None:
            probe.stop()
        res["loadavg_end"] = os.getloadavg()
        cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def measure(gib: float, throttle_mb: float, log) -> dict:
    res: dict = dict(name=NAME, gib=gib)
    for mode, throttle in (("unthrottled", 0.0), ("throttled", throttle_mb)):
        log(f"{mode}:")
        res[mode] = measure_mode(gib, throttle, log)
    return res


def report(res: dict) -> str:
    lines = [f"(r) Moving a {res['gib']:g} GiB partition to a new broker ([1,2,3] -> [4,2,3]), "
             "with a 500 records/s acks=all probe to another topic on nodes 1-3"]
    for mode in ("unthrottled", "throttled"):
        r = res.get(mode)
        if not r or "move_s" not in r:
            lines.append(f"  {mode}: no result")
            continue
        limit = f" (throttle {r['throttle_mb_per_s']:g} MB/s)" if r["throttle_mb_per_s"] else ""
        lines.append(f"  {mode}{limit}: {r['bytes'] / 1e6:,.0f} MB in {r['move_s']:.1f} s = {r['mb_per_s']:.0f} MB/s "
                     f"(leader sent {r['sent_mb_per_s']:.0f} MB/s); probe p50/p99 {r['p50_before_ms']:.1f}/"
                     f"{r['p99_before_ms']:.1f} ms before the move, {r['p50_during_ms']:.1f}/{r['p99_during_ms']:.1f} ms "
                     f"during ({r['n_during']} records); load average at the end {r['loadavg_end'][0]:.1f}")
    return "\n".join(lines)


def run(ctx) -> dict:
    return measure(1.0 if not ctx.quick else 0.0625, 20.0, ctx.log)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.move", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gib", type=float, default=1.0)
    p.add_argument("--throttle-mb", type=float, default=20.0, help="the throttled mode's MB/s (default 20)")
    return run_standalone(NAME, p, lambda args, log: measure(args.gib, args.throttle_mb, log), report)


if __name__ == "__main__":
    sys.exit(main())
