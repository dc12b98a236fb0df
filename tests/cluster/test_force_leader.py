"""Issue "Recovery", item 2: unclean recovery after losing a majority for good.

Node 1 stops; nodes 2 and 3 commit more records, which careful consumers of three clients read;
then 2 and 3 are lost. `kraftd quorum force-leader` on node 1's stopped data dir (refused on a
live one) and a start with `--voters 1@...` make node 1 lead the metadata quorum and the
partition at a new epoch with the log it has. New records are produced. Each consumer (automatic
offset reset off) must detect the truncation (KIP-320: a newer leader epoch, then
OffsetForLeaderEpoch) and continue from the divergence point: never skipping a new record,
never reading different data at an offset it had already consumed without having been told.
A lost node that comes back with the new voters sets its data aside and joins as a broker.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.replica_logs import read_replica_log
from tests.cluster.support import metadata, wait_cluster_ready
from tests.cluster.truncation_consumers import ConfluentConsumer, JavaConsumer, KafkaPythonConsumer
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka import Producer  # noqa: E402

TOPIC = "ledger"


def _produce(bootstrap: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                         "message.timeout.ms": 60000, "retries": 1000})
    failed = []
    for v in values:
        producer.produce(TOPIC, value=v.encode(), partition=0,
                         on_delivery=lambda err, msg: err is not None and failed.append(err))
    assert producer.flush(90) == 0 and not failed, failed


def _force_leader(data_dir: Path, spec: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftd", "quorum", "force-leader", "--data-dir", str(data_dir),
                           "--voters", spec], capture_output=True, text=True, timeout=120)


def test_force_leader_survivor_leads_and_careful_consumers_detect_the_truncation(tmp_path):
    with KraftdCluster(tmp_path, nodes=3) as cluster:
        wait_cluster_ready(cluster, 60)
        cluster.create_topic(TOPIC, 1, 3)
        _produce(cluster.bootstrap(), [f"old-{i}" for i in range(100)])
        wait_until(lambda: 1 in metadata(cluster.node(2), [TOPIC]).topics[TOPIC][1][0].isr, 30, "node 1 in the ISR")
        wait_until(lambda: read_replica_log(tmp_path / "node1", TOPIC, 0).end_offset >= 100, 30,
                   "node 1 to hold the first 100 records")

        assert cluster.stop(1) == 0
        survivor_end = read_replica_log(tmp_path / "node1", TOPIC, 0).end_offset
        _produce(f"{cluster.node(2)},{cluster.node(3)}", [f"lost-{i}" for i in range(50)])
        lost_end = read_replica_log(tmp_path / "node2", TOPIC, 0).end_offset
        assert lost_end > survivor_end + 50 - 1

        readers = f"{cluster.node(1)},{cluster.node(2)},{cluster.node(3)}"
        consumers = [KafkaPythonConsumer(readers, TOPIC).start(), ConfluentConsumer(readers, TOPIC).start(),
                     JavaConsumer(readers, TOPIC, classes_dir=tmp_path / "java").start()]
        try:
            for c in consumers:
                _wait_for(c, lambda c=c: c.has_offset(lost_end - 1), "the records only nodes 2 and 3 have")

            # Refused against a live data dir, and it says why.
            live = _force_leader(tmp_path / "node2", f"2@{cluster.node(2)}")
            assert live.returncode != 0 and "live process" in live.stderr, live.stderr

            cluster.kill(2)
            cluster.kill(3)
            cluster.change_voters([1])
            forced = _force_leader(tmp_path / "node1", cluster.voters_spec(1))
            assert forced.returncode == 0, forced.stderr
            summary = json.loads(forced.stdout.strip().splitlines()[-1])
            assert summary["lost"] == [2, 3] and summary["voters"] == [1]
            assert "FORCED RECOVERY" in forced.stderr and f"{TOPIC}-0" in forced.stderr  # what it may discard
            cluster.start(1)
            _produce(cluster.node(1), [f"new-{i}" for i in range(30)])

            for c in consumers:
                _wait_for(c, lambda c=c: any(v == "new-29" for _, v in c.records()), "the new records")
        finally:
            for c in consumers:
                c.stop()
        for c in consumers:
            _assert_detected_and_continued(c, survivor_end)

        # Node 1 led alone at a new epoch; the controller recorded the shrink, then forgot the file.
        view = metadata(cluster.node(1), [TOPIC]).topics[TOPIC][1][0]
        assert view.leader == 1 and view.replicas == (1,) and view.leader_epoch > 1000
        wait_until(lambda: not (tmp_path / "node1" / "forced-recovery.json").exists(), 30,
                   "the forced-recovery file to go once recorded")
        survivor = read_replica_log(tmp_path / "node1", TOPIC, 0)
        assert [e.value.decode() for e in survivor.records()] == (
            [f"old-{i}" for i in range(100)] + [f"new-{i}" for i in range(30)])

        # A lost node started with the new voters sets its data aside and joins as a broker.
        cluster.start(2)
        wait_until(lambda: 2 in metadata(cluster.node(1), []).brokers, 30, "node 2 to register as a broker")
        node2 = tmp_path / "node2"
        assert any(p.name.startswith("discarded-") and (p / f"{TOPIC}-0").is_dir() for p in node2.iterdir())
        assert not (node2 / f"{TOPIC}-0").exists()

        def node2_names_leader_1():
            error, partitions = metadata(cluster.node(2), [TOPIC]).topics[TOPIC]
            return error == 0 and 0 in partitions and partitions[0].leader == 1

        wait_until(node2_names_leader_1, 30, "node 2 to learn the topic and its leader from node 1")


def _wait_for(consumer, predicate, what: str, timeout: float = 90) -> None:
    try:
        wait_until(lambda: predicate() or consumer.failure, timeout, f"{consumer.name} to read {what}")
    except Exception as exc:
        raise AssertionError(f"{exc}; its journal ends with {consumer.entries()[-12:]}"
                             + (f"; stderr {consumer.stderr_tail}" if hasattr(consumer, "stderr_tail") else ""))
    assert consumer.failure is None, (consumer.name, consumer.failure)


def _assert_detected_and_continued(consumer, divergence: int) -> None:
    entries = consumer.entries()
    cut = next((i for i, e in enumerate(entries) if e[0] == "truncation"), None)
    assert cut is not None, f"{consumer.name} never reported a truncation: {entries[-20:]}"
    assert entries[cut][2] == divergence, (consumer.name, entries[cut], divergence)
    before = [e for e in entries[:cut] if e[0] == "record"]
    after = [e for e in entries[cut:] if e[0] == "record"]
    # Before: the whole lost log, each offset once, in order (nothing silently re-read).
    assert [e[1] for e in before] == sorted({e[1] for e in before}), consumer.name
    assert [e[2] for e in before] == [f"old-{i}" for i in range(100)] + [f"lost-{i}" for i in range(50)], consumer.name
    # After: from the divergence point on, every new record once, in order, none of the lost ones.
    assert after and after[0][1] >= divergence, (consumer.name, after[:3])
    assert [e[2] for e in after] == [f"new-{i}" for i in range(30)], (consumer.name, after)
