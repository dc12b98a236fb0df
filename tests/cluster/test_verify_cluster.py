"""`kraftd verify` on a real three-node cluster's data dirs: after acks=all writes and a clean stop
of every node, the three dirs audit clean and every replicated partition is compared below the
high watermarks the nodes checkpointed; one byte flipped in one replica's record data is then
found at its batch (a CRC finding) and as the offset where that replica differs from the others."""
from __future__ import annotations

import subprocess
import sys

import pytest

from kraftd.protocol.records import iter_batch_headers
from kraftd.storage.replication_offset_checkpoint import read_replication_offsets
from tests.cluster.support import gauge, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.clients

TOPIC = "audited"
PARTITIONS = 2
RECORDS = 300


def _verify(dirs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftd", "verify", "--data-dir", *map(str, dirs)],
                          capture_output=True, text=True, timeout=120)


def test_verify_three_nodes_clean_then_a_flipped_byte_is_found(tmp_path):
    from kafka import KafkaProducer

    with KraftdCluster(tmp_path, nodes=3) as cluster:
        wait_cluster_ready(cluster)
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all", linger_ms=5, retries=10)
        futures = [producer.send(TOPIC, key=b"key-%d" % i, value=b"value-%d" % i * 10) for i in range(RECORDS)]
        producer.flush(60)
        metas = [f.get(30) for f in futures]
        producer.close()
        ends = {p: max(m.offset for m in metas if m.partition == p) + 1 for p in range(PARTITIONS)}

        def every_node_knows_the_hw():
            return all((gauge(cluster, i, "kraftd_high_watermark", topic=TOPIC, partition=p) or 0) >= ends[p]
                       for i in cluster.ids for p in range(PARTITIONS))
        wait_until(every_node_knows_the_hw, 30, "every replica to learn the HW")
        for i in cluster.ids:
            assert cluster.stop(i) == 0, cluster.logs(i, tail=30)
    dirs = [tmp_path / f"node{i}" for i in (1, 2, 3)]

    # Each node checkpointed (at its clean shutdown) an HW covering everything acknowledged.
    hws = [read_replication_offsets(d / "replication-offset-checkpoint") for d in dirs]
    for checkpoint in hws:
        for p in range(PARTITIONS):
            assert checkpoint[TOPIC, p] >= ends[p], checkpoint
        assert ("__cluster_metadata", 0) in checkpoint

    clean = _verify(dirs)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "FINDING" not in clean.stdout
    summary = clean.stdout.splitlines()[-1]
    assert summary.startswith("0 findings") and f"{PARTITIONS + 1} partitions compared" in summary, clean.stdout

    # Flip one byte of record data in node 2's copy of partition 0, in a data batch below every HW.
    limit = min(h[TOPIC, 0] for h in hws)
    segment = sorted((dirs[1] / f"{TOPIC}-0").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    position, header = [(p, h) for p, h in iter_batch_headers(data)
                        if not h.is_control and h.last_offset < limit][-1]
    data[position + header.size - 3] ^= 0x01
    segment.write_bytes(bytes(data))

    found = _verify(dirs)
    assert found.returncode == 1, found.stdout + found.stderr
    findings = [line for line in found.stdout.splitlines() if line.startswith("FINDING")]
    where = f"{segment}, partition {TOPIC}-0, offset {header.base_offset}, position {position}"
    assert any(line.startswith(f"FINDING [segment] {where}: CRC mismatch in batch at offset {header.base_offset}")
               for line in findings), found.stdout
    assert any(line.startswith(f"FINDING [replicas] {where}: replicas differ at offset {header.base_offset}, below "
                               f"the high watermark {limit}") for line in findings), found.stdout
    assert len(findings) == 2, found.stdout


# The producer's __del__ retries close() against the killed brokers and raises: noise.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_verify_after_every_node_is_killed_mid_write_has_no_findings(tmp_path):
    """SIGKILL (no clean close: no index files for active segments, no final checkpoint) while an
    acks=all producer runs: what a crash leaves is at most notes, and replicas still agree below
    the HWs checkpointed before the crash."""
    import threading

    from kafka import KafkaProducer

    with KraftdCluster(tmp_path, nodes=3) as cluster:
        wait_cluster_ready(cluster)
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all", linger_ms=2, retries=0,
                                 max_block_ms=2000, request_timeout_ms=2000)
        stop = threading.Event()

        def produce():
            i = 0
            while not stop.is_set():
                try:
                    producer.send(TOPIC, key=b"key-%d" % i, value=b"value-%d" % i * 10)
                except Exception:
                    pass
                i += 1
                if i % 200 == 0:
                    stop.wait(0.01)
        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        dirs = [tmp_path / f"node{i}" for i in (1, 2, 3)]
        wait_until(lambda: all((d / "replication-offset-checkpoint").exists() and
                               read_replication_offsets(d / "replication-offset-checkpoint").get((TOPIC, 0), 0) > 100
                               for d in dirs), 30, "every node to checkpoint an HW past 100")
        for i in cluster.ids:
            cluster.kill(i)
        stop.set()
        thread.join(10)
        try:
            producer.close(0)
        except Exception:  # its brokers are gone: unsent batches time out
            pass
    result = _verify(dirs)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FINDING" not in result.stdout
    assert f"{PARTITIONS + 1} partitions compared" in result.stdout.splitlines()[-1], result.stdout
