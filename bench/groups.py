"""(r) Committed offsets at volume: 1,000,000 OffsetCommits into ``__consumer_offsets``, its
snapshots, and how long a restarted coordinator takes to load them (issue 12, acceptance 4).

One real ``kraftd serve`` (default settings: fsync policy ``acks_all``, so every commit is
answered once durable; ``KRAFTD_OFFSETS_TOPIC_NUM_PARTITIONS=1`` so every group lives in one
offsets partition and one load covers them all). A 200-partition topic is created; then
``--writers`` threads, each with its own connection, send OffsetCommit v9 requests (generation
-1, as ``assign()`` users commit) of 200 partitions each for ``--groups`` groups in turn, until
``--commits`` offsets are committed (every request must answer NONE for every partition). The
state is groups x partitions keys (10,000 by default), each overwritten 100 times, so KIP-630
snapshots keep it small and the log start moves past what they cover.

Then: the snapshots on disk and ``__consumer_offsets-0``'s log start (ListOffsets earliest)
and end, the server is restarted (SIGTERM, same data dir), and an OffsetFetch of one group is
retried until it answers with the last committed offsets. Printed: the commit rate, the
snapshot count and log start, the coordinator's load time (``kraftd_coordinator_load_time_ms``
sum/count after the restart: the groups and offsets read from the loaded state) next to the
partition's snapshot load at start (``kraftd_load_snapshot_latency_ms``), and the wall time
from the restart to the first OffsetFetch answered. Target: load < 1 s.

    .venv/bin/python -m bench.groups            # 1M commits (~1-2 min on 2 cores)
    .venv/bin/python -m bench.groups --commits 100000
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import scrape_metrics, wait_for

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TOPIC = "bench-source"
OFFSETS = "__consumer_offsets"


def _client(address: str):
    from kraftd.client import WireClient
    return WireClient(address, client_id="bench-groups", timeout=30)


def _commit_request(group: str, partitions: int, offset: int):
    from kraftd.protocol import messages as m
    R = m.OffsetCommitRequest
    return R(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[R.OffsetCommitRequestTopic(
        name=TOPIC, partitions=[R.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=offset + p, committed_leader_epoch=0, committed_metadata="")
            for p in range(partitions)])])


def _offset_fetch(address: str, group: str):
    from kraftd.protocol import api
    from kraftd.protocol import messages as m
    client = _client(address)
    try:
        r = client.request(api.OFFSET_FETCH, 8, m.OffsetFetchRequest(groups=[
            m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]))
    finally:
        client.close()
    g = r.groups[0]
    return g.error_code, {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions}


def _offsets_range(address: str) -> tuple[int, int]:
    """(log start, log end) of __consumer_offsets-0 from ListOffsets."""
    from kraftd.protocol import api
    from kraftd.protocol import messages as m
    R = m.ListOffsetsRequest
    client = _client(address)
    try:
        out = []
        for ts in (-2, -1):
            r = client.request(api.LIST_OFFSETS, 7, R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
                name=OFFSETS, partitions=[R.ListOffsetsPartition(partition_index=0, timestamp=ts)])]))
            out.append(r.topics[0].partitions[0].offset)
    finally:
        client.close()
    return out[0], out[1]


def _histogram(metrics: dict, name: str) -> tuple[float, float]:
    total = sum(v for k, v in metrics.items() if k.startswith(name + "_sum"))
    count = sum(v for k, v in metrics.items() if k.startswith(name + "_count"))
    return total, count


def run(commits: int, groups: int, partitions: int, writers: int, data_dir: Path) -> dict:
    from kafka.admin import KafkaAdminClient, NewTopic

    from tests.support.kraftd_process import KraftdProcess

    env = {"KRAFTD_OFFSETS_TOPIC_NUM_PARTITIONS": "1"}
    server = KraftdProcess(data_dir, env=env).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])
        admin.close()
        from kraftd.protocol import api
        from kraftd.protocol import messages as m
        def coordinator_ready():   # the first FindCoordinator creates __consumer_offsets
            client = _client(server.bootstrap)
            try:
                client.request(api.FIND_COORDINATOR, 4, m.FindCoordinatorRequest(key_type=0, coordinator_keys=["g0"]))
            finally:
                client.close()
            return _offset_fetch(server.bootstrap, "g0")[0] == 0
        wait_for("the coordinator", coordinator_ready, 30)

        requests = commits // partitions
        rounds = -(-requests // groups)
        failures: list = []
        lock = threading.Lock()
        next_request = [0]

        def writer():
            client = _client(server.bootstrap)
            try:
                while True:
                    with lock:
                        i = next_request[0]
                        next_request[0] += 1
                    if i >= requests or failures:
                        return
                    group, round_ = f"g{i % groups}", i // groups
                    r = client.request(api.OFFSET_COMMIT, 9, _commit_request(group, partitions, round_ * 1000))
                    bad = [p.error_code for t in r.topics for p in t.partitions if p.error_code]
                    if bad:
                        failures.append((group, round_, bad[:3]))
            finally:
                client.close()

        print(f"committing {requests * partitions:,} offsets: {requests:,} OffsetCommits of {partitions} "
              f"partitions, {groups} groups, {writers} connections", file=sys.stderr)
        started = time.perf_counter()
        threads = [threading.Thread(target=writer) for _ in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        assert not failures, failures[:5]
        last_round = (requests - 1) // groups
        want = {p: last_round * 1000 + p for p in range(partitions)}   # g0's last commit (request last_round * groups)

        partition_dir = data_dir / f"{OFFSETS}-0"
        start, end = wait_for("a snapshot and the log start to move",
                              lambda: (r := _offsets_range(server.bootstrap))[0] > 0 and r, 120)
        snapshots = sorted(p.name for p in partition_dir.glob("*.checkpoint"))
        before = scrape_metrics("127.0.0.1", server.metrics_port)
        print(f"log start {start:,}, log end {end:,}, {len(snapshots)} snapshot(s) on disk", file=sys.stderr)

        restarted = time.perf_counter()
        server.restart()
        answered = wait_for("OffsetFetch after the restart",
                            lambda: (r := _offset_fetch(server.bootstrap, "g0"))[0] == 0 and r[1] == want and r, 60,
                            interval=0.01)
        wall = time.perf_counter() - restarted
        assert answered[1] == want
        after = scrape_metrics("127.0.0.1", server.metrics_port)
        load_sum, load_count = _histogram(after, "kraftd_coordinator_load_time_ms")
        snap_sum, snap_count = _histogram(after, "kraftd_load_snapshot_latency_ms")
        start_after, end_after = _offsets_range(server.bootstrap)
        return {
            "commits": requests * partitions, "requests": requests, "groups": groups, "partitions": partitions,
            "keys": groups * partitions, "rounds": rounds, "commit_seconds": elapsed,
            "commits_per_second": requests * partitions / elapsed,
            "log_start": start, "log_end": end, "log_start_after_restart": start_after,
            "log_end_after_restart": end_after, "snapshots_on_disk": snapshots,
            "coordinator_load_ms": load_sum / load_count if load_count else None,
            "coordinator_loads": load_count,
            "snapshot_load_ms_at_start": snap_sum / snap_count if snap_count else None,
            "restart_to_offsets_seconds": wall,
            "loads_before_restart": _histogram(before, "kraftd_coordinator_load_time_ms")[1],
        }
    finally:
        server.kill()


def report(result: dict) -> str:
    load = result["coordinator_load_ms"]
    verdict = "PASS" if load is not None and load < 1000 else "FAIL"
    return "\n".join([
        f"commits:                 {result['commits']:,} ({result['requests']:,} OffsetCommits, "
        f"{result['keys']:,} keys), {result['commits_per_second']:,.0f}/s",
        f"__consumer_offsets-0:    log start {result['log_start']:,} of end {result['log_end']:,}; "
        f"snapshots on disk: {', '.join(result['snapshots_on_disk']) or 'none'}",
        f"after the restart:       log start {result['log_start_after_restart']:,}, "
        f"end {result['log_end_after_restart']:,}",
        f"snapshot load at start:  {result['snapshot_load_ms_at_start'] or 0:.1f} ms (kraftd_load_snapshot_latency_ms)",
        f"coordinator load:        {load if load is not None else float('nan'):.1f} ms "
        f"(kraftd_coordinator_load_time_ms, {result['coordinator_loads']:.0f} load(s))  target < 1000 ms: {verdict}",
        f"restart -> offsets read: {result['restart_to_offsets_seconds']:.2f} s (process start included)",
    ])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.groups", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--commits", type=int, default=1_000_000)
    p.add_argument("--groups", type=int, default=50)
    p.add_argument("--partitions", type=int, default=200, help="partitions per OffsetCommit (and of the topic)")
    p.add_argument("--writers", type=int, default=16, help="connections committing at once")
    p.add_argument("--out", default=None, help="also write the result as JSON here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as tmp:
        result = run(args.commits, args.groups, args.partitions, args.writers, Path(tmp) / "data")
    print(report(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    return 0 if result["coordinator_load_ms"] is not None and result["coordinator_load_ms"] < 1000 else 1


if __name__ == "__main__":
    sys.exit(main())
