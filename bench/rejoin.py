"""(q) Disk-loss rejoin: how long a voter restarted on an empty data dir takes to catch up 1 GiB
of snapshot-policy state, and at what rate.

Three real `kraftd serve` processes (tests.support.cluster.KraftdCluster, default settings but
the snapshot thresholds below). A 4-partition RF=3 topic with `cleanup.policy=snapshot` is
loaded with N keys of V bytes each (default 1,048,576 x 1,024 B = 1 GiB of values, random
bytes so nothing compresses, distinct keys so the state is as big as the log), produced by
confluent-kafka with acks=all. Every node then snapshots every partition (POST /admin/snapshot)
and the leaders move their log start to the snapshot (snapshot_start_offset_lag_time_max_ms
= 1 s), so a replica starting from nothing can only catch up through FetchSnapshot.

Node 3 is stopped (SIGTERM), its data dir deleted, and it is started again (no flag since issue
25: its new directory id tells the partitions placed on the old one). Catch-up time = start of
the process -> every partition of the topic votes again on node 3 (`mayVote` in its
quorum-state: it has durably reached its leader's HW; see README "Replacing a lost disk"). Until
issue 25 the end was the `--rejoin` marker's removal, which also waited for the metadata log.
Rate = bytes now in node 3's partition directories of the topic (snapshot files + log tail) /
catch-up time; MB = 10^6 bytes. The time until the process listens is printed apart (it is
part of the catch-up time).

Run: ``.venv/bin/python -m bench.rejoin [--keys N] [--value-bytes V]`` (~3-6 min at 1 GiB;
needs ~4 GiB of free memory: every node holds the state in memory).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.common import run_standalone, wait_for

NAME = "rejoin"
TOPIC = "state"
PARTITIONS = 4
ENV = {"KRAFTD_SNAPSHOT_MAX_BYTES_BETWEEN": str(256 * 1024 * 1024),
       "KRAFTD_SNAPSHOT_START_OFFSET_LAG_TIME_MAX_MS": "1000"}


def _load(bootstrap: str, keys: int, value_bytes: int, log, partitions: int = PARTITIONS, topic: str = TOPIC) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": 1_000_000, "enable.idempotence": False, "compression.type": "none",
                         "queue.buffering.max.kbytes": 512 * 1024, "message.timeout.ms": 600_000})
    failed = []
    pool = os.urandom(value_bytes * 64 + 4096)
    t0 = time.monotonic()
    for i in range(keys):
        start = (i * 4099) % (len(pool) - value_bytes)
        while True:
            try:
                producer.produce(topic, key=b"k%09d" % i, value=pool[start:start + value_bytes],
                                 partition=i % partitions, on_delivery=lambda e, m: e and failed.append(e))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 100_000 == 0 and i:
            producer.poll(0)
            log(f"  produced {i:,} records ({i * value_bytes / 1e6:,.0f} MB)")
    assert producer.flush(600) == 0 and not failed, failed[:3]
    return time.monotonic() - t0


def _snapshot_everywhere(cluster, partitions: int = PARTITIONS) -> None:
    for i in cluster.running():
        port = cluster.process(i).metrics_port
        for p in range(partitions):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/admin/snapshot?topic={TOPIC}&partition={p}",
                                             method="POST", data=b"")
            urllib.request.urlopen(request, timeout=30).read()


def _checkpoints(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob(f"{TOPIC}-*/*.checkpoint"))


def _votes_again(data_dir: Path, partitions: int) -> bool:
    """Every partition of the topic is in the node's quorum-state, and may vote."""
    try:
        doc = json.loads((data_dir / "quorum-state").read_text())
    except (FileNotFoundError, ValueError):
        return False
    groups = doc.get("groups", doc)
    return all(groups.get(f"{TOPIC}-{p}", {}).get("mayVote") is True for p in range(partitions))


def _dir_bytes(data_dir: Path) -> int:
    return sum(f.stat().st_size for d in data_dir.glob(f"{TOPIC}-*") for f in d.iterdir() if f.is_file())


def _log_starts(cluster, node: int) -> dict[int, int]:
    from tests.support.prometheus import scrape_samples

    samples = scrape_samples(cluster.process(node).metrics_port)
    return {int(dict(labels)["partition"]): int(v) for (name, labels), v in samples.items()
            if name == "kraftd_log_start_offset" and dict(labels).get("topic") == TOPIC}


def measure(keys: int, value_bytes: int, log, *, partitions: int = PARTITIONS, after=None) -> dict:
    """`after(cluster, res)`: called once node 3 has caught up, before the cluster stops."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from bench.cluster import wait_agreed, wait_brokers
    from tests.support.cluster import KraftdCluster

    res: dict = dict(name=NAME, keys=keys, value_bytes=value_bytes, partitions=partitions)
    tmp = Path(tempfile.mkdtemp(prefix="kraftd-bench-rejoin-"))
    cluster = KraftdCluster(tmp, nodes=3, env=ENV)
    try:
        cluster.start_all()
        wait_brokers(cluster)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic(TOPIC, partitions, 3, config={"cleanup.policy": "snapshot"})])[TOPIC].result(60)
        wait_agreed(cluster, TOPIC, partitions, 3, 60)
        res["load_s"] = _load(cluster.bootstrap(), keys, value_bytes, log, partitions)
        res["state_mb"] = keys * value_bytes / 1e6
        log(f"  loaded {res['state_mb']:,.0f} MB in {res['load_s']:.1f} s")
        wait_agreed(cluster, TOPIC, partitions, 3, 300)
        _snapshot_everywhere(cluster, partitions)
        node3 = tmp / "node3"
        wait_for("every node's snapshots", lambda: all(len({p.parent for p in _checkpoints(tmp / f"node{i}")}) == partitions
                                                    for i in cluster.ids), 600, 0.5)
        leaders = wait_agreed(cluster, TOPIC, partitions, 3, 60)
        others = [i for i in cluster.ids if i != 3]
        wait_for("the leaders' log start past 0", lambda: all(
            _log_starts(cluster, leaders[p]).get(p, 0) > 0 for p in range(partitions) if leaders[p] != 3), 120, 0.5)
        log(f"  snapshots taken, log starts moved; leaders {leaders}")
        res["leaders_before"] = leaders

        cluster.stop(3)
        shutil.rmtree(node3)
        process = cluster.process(3)
        t0 = time.monotonic()
        cluster.start(3, timeout=120)
        res["listening_s"] = time.monotonic() - t0
        wait_for("node 3's partitions to vote again", lambda: _votes_again(node3, partitions), 1800, 0.05)
        res["catch_up_s"] = time.monotonic() - t0
        res["bytes"] = _dir_bytes(node3)
        res["snapshot_bytes"] = sum(p.stat().st_size for p in _checkpoints(node3))
        res["mb_per_s"] = res["bytes"] / 1e6 / res["catch_up_s"]
        res["rejoin_log"] = process.log_lines[-300:]
        log(f"  node 3 caught up in {res['catch_up_s']:.1f} s ({res['mb_per_s']:.0f} MB/s)")
        res["others_alive"] = [i for i in others if cluster.process(i).alive()]
        if after is not None:
            after(cluster, res)
    finally:
        res["loadavg_end"] = os.getloadavg()
        cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def report(res: dict) -> str:
    if "catch_up_s" not in res:
        return f"(q) rejoin: no result ({res.get('error', 'see the log')})"
    return "\n".join([
        f"(q) Disk-loss rejoin of 1 voter, {res['partitions']} snapshot-policy partitions, "
        f"{res['keys']:,} keys x {res['value_bytes']:,} B = {res['state_mb']:,.0f} MB of state",
        f"  loaded with acks=all in {res['load_s']:.1f} s",
        f"  rejoining node listening after {res['listening_s']:.1f} s",
        f"  caught up (every partition votes again) after {res['catch_up_s']:.1f} s",
        f"  copied {res['bytes'] / 1e6:,.0f} MB ({res['snapshot_bytes'] / 1e6:,.0f} MB of snapshots): "
        f"{res['mb_per_s']:.0f} MB/s",
        f"  load average at the end {res['loadavg_end'][0]:.1f}",
    ])


def run(ctx) -> dict:
    return measure(1 << 20 if not ctx.quick else 1 << 16, 1024, ctx.log)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.rejoin", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=1 << 20)
    p.add_argument("--value-bytes", type=int, default=1024)
    return run_standalone(NAME, p, lambda args, log: measure(args.keys, args.value_bytes, log), report)


if __name__ == "__main__":
    sys.exit(main())
