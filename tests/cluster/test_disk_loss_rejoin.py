"""Issue "Recovery", item 1, without `--rejoin` since issue 25 (directory ids): a voter restarted
on an empty data dir (same node id, no flag) catches up every partition it hosts (a
snapshot-policy one through FetchSnapshot, the metadata log from its snapshot, the others from
the log start) and votes in none of them until it has: the image placed them on another
directory of this node. So when a second node dies meanwhile, a lagging survivor cannot be
elected with its vote, and no acknowledged record is lost. In the metadata quorum the new
directory is no voter until `kraftd quorum remove-voter` / `add-voter` re-key it."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster.replica_logs import assert_replicas_identical_below_hw, high_watermark, read_replica_log
from tests.cluster.support import metadata, wait_cluster_ready
from tests.cluster.test_failover import tails
from tests.support.cluster import KraftdCluster
from tests.support.waiting import poll_until, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

# Small snapshot thresholds: a few hundred records make the snapshot-policy partitions snapshot
# and move their log start, so a replica starting from nothing needs FetchSnapshot.
ENV = {"KRAFTD_SNAPSHOT_MAX_BYTES_BETWEEN": "4000", "KRAFTD_SNAPSHOT_MIN_CHANGED_RECORDS_RATIO": "0.01",
       "KRAFTD_SNAPSHOT_START_OFFSET_LAG_TIME_MAX_MS": "2000"}


def _create(cluster: KraftdCluster, name: str, count: int, configs: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    futures = admin.create_topics([NewTopic(name, count, 3, config=configs or {})], operation_timeout=20)
    futures[name].result(30)
    def ready():
        error, partitions = metadata(cluster.node(cluster.running()[0]), [name]).topics[name]
        return error == 0 and len(partitions) == count and all(p.leader >= 0 and len(p.isr) == 3
                                                               for p in partitions.values())

    wait_until(ready, 30, f"{name}: leaders and a full ISR")


def _produce(cluster: KraftdCluster, topic: str, count: int, *, keys: int | None = None, partition=None,
             idempotent: bool = True) -> int:
    acked, failed = [], []
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "linger.ms": 2,
                  "enable.idempotence": idempotent})

    def on_delivery(err, msg):
        (failed if err is not None else acked).append(msg)

    for i in range(count):
        key = b"k%d" % (i % keys if keys else i)
        kwargs = {} if partition is None else {"partition": partition}
        p.produce(topic, key=key, value=b"v%d" % i, on_delivery=on_delivery, **kwargs)
        if i % 200 == 0:
            p.poll(0)
    left = p.flush(60)
    if left:  # (what each node saw, so that a produce that stalls says why)
        raise AssertionError(f"{left} of {count} records not delivered in 60 s; {_views(cluster, topic)}\n"
                             + tails(cluster))
    assert not failed, failed[:3]
    return len(acked)


def _views(cluster: KraftdCluster, topic: str) -> str:
    """What each running node's Metadata says of the topic and the controller, for a failure."""
    out = []
    for i in cluster.running():
        try:
            view = metadata(cluster.node(i), [topic], timeout=2.0)
            out.append(f"node {i}: controller {view.controller_id}, {view.topics.get(topic)}")
        except OSError as e:
            out.append(f"node {i}: {e!r}")
    return "; ".join(out)


def _directory(data_dir) -> str:
    from kraftd.storage.meta_properties import read_meta_properties, uuid_to_kafka

    return uuid_to_kafka(read_meta_properties(Path(data_dir)).directory_id)


def _election_states(data_dir: Path) -> dict:
    doc = json.loads((data_dir / "quorum-state").read_text())
    return doc.get("groups", doc)


def _may_vote(data_dir: Path, group: str) -> bool | None:
    for key, state in _election_states(data_dir).items():
        if key == group:
            return state.get("mayVote", True)
    return None


def _leader(cluster: KraftdCluster, node: int, topic: str, partition: int = 0) -> int:
    try:
        return metadata(cluster.node(node), [topic], timeout=2).partitions(topic)[partition].leader
    except Exception:  # noqa: BLE001 - a node busy electing may not answer in time
        return -2


def _settled_leader(cluster: KraftdCluster, topic: str, partition: int = 0) -> int:
    """The partition's leader once it is its preferred replica and every node names it: a new
    topic's first leader may hand over to the preferred replica (quorum/leader_balance.py) once
    records commit, and a test that picks the roles of the nodes must not pick them from the
    leader before that."""
    def settled():
        try:
            views = [metadata(cluster.node(i), [topic], timeout=2).partitions(topic)[partition] for i in cluster.ids]
        except (OSError, AssertionError, KeyError):  # a node busy electing, or without the topic yet
            return None
        leaders = {v.leader for v in views}
        return leaders == {views[0].replicas[0]} and views[0].replicas[0]

    return wait_until(settled, 30, f"{topic}-{partition}: every node names the preferred replica as leader")


def _log_start(data_dir, topic: str) -> int:
    path = Path(data_dir) / f"{topic}-0" / "log-start-offset"
    return int(path.read_text()) if path.exists() else 0


def _wipe(cluster: KraftdCluster, node: int) -> Path:
    data_dir = cluster.process(node).data_dir
    shutil.rmtree(data_dir)  # same node id, an empty dir, no flag
    return Path(data_dir)


REPLACED = "placed on another directory of this node"


def _rekey_metadata_voter(cluster: KraftdCluster, node: int, old_directory: str) -> None:
    """The operator's step after a disk replacement (KIP-853): the old directory out, the new in."""
    bootstrap = ",".join(cluster.node(i) for i in cluster.running())
    for action in (["remove-voter", "--node-id", str(node), "--directory-id", old_directory],
                   ["add-voter", "--node-id", str(node)]):
        out = subprocess.run([sys.executable, "-m", "kraftd", "quorum", action[0], "--bootstrap-server", bootstrap,
                              *action[1:]], capture_output=True, text=True, timeout=90)
        assert out.returncode == 0, (action, out.stderr)


def test_an_empty_data_dir_catches_up_every_partition_before_it_votes(tmp_path):
    with KraftdCluster(tmp_path, nodes=3, env=ENV) as cluster:
        wait_cluster_ready(cluster, 30)
        _create(cluster, "data", 2)
        _create(cluster, "kv", 1, {"cleanup.policy": "snapshot"})
        _produce(cluster, "data", 2000)
        _produce(cluster, "kv", 3000, keys=50)
        # Enough metadata records that the metadata log snapshots itself and moves its log start.
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        for name, future in admin.create_topics([NewTopic(f"m{i}", 1, 1) for i in range(40)],
                                                operation_timeout=20).items():
            future.result(30)
        wait_until(lambda: any(_log_start(cluster.process(i).data_dir, "__cluster_metadata") > 0
                               for i in cluster.ids), 30, "the metadata log start to move")
        # The snapshot-policy partition's leader moves its log start past offset 0.
        kv_leader = wait_until(lambda: next((i for i in cluster.ids
                                             if _log_start(cluster.process(i).data_dir, "kv") > 0), None),
                               30, "kv-0's log start to move")
        lost = next(i for i in cluster.ids if i != kv_leader)

        old_directory = _directory(cluster.process(lost).data_dir)
        cluster.kill(lost)
        data_dir = _wipe(cluster, lost)
        cluster.start(lost)
        assert not (data_dir / "rejoined-after-disk-loss").exists()
        wait_until(lambda: REPLACED in cluster.logs(lost), 30, "the replaced partitions noticed")

        # Every group catches up, then may vote again (persisted in quorum-state).
        groups = ["__cluster_metadata-0", "data-0", "data-1", "kv-0"]
        try:
            wait_until(lambda: (data_dir / "quorum-state").exists()
                       and all(_may_vote(data_dir, g) is True for g in groups), 60,
                       "every group on the rejoined node to catch up and vote again")
        except AssertionError as e:
            state = (data_dir / "quorum-state").read_text() if (data_dir / "quorum-state").exists() else "-"
            raise AssertionError(f"{e}: {state}\n{cluster.logs(lost, tail=30)}") from None
        text = cluster.logs(lost)
        assert "fetching snapshot" in text and "kv" in text, cluster.logs(lost, tail=40)
        assert list((data_dir / "kv-0").glob("*.checkpoint")), "kv-0 caught up without a snapshot"
        assert list((data_dir / "__cluster_metadata-0").glob("*.checkpoint")), "no metadata snapshot installed"
        # The plain topic came from log start 0 and is identical below the HW.
        dirs = {i: cluster.process(i).data_dir for i in cluster.ids}
        records = 0
        for partition in (0, 1):
            # A leader answers once it leads (a new one answers OFFSET_NOT_AVAILABLE until its HW
            # reaches its epoch: KIP-207), so the HW is read when some node leads and says so.
            _, hw = wait_until(lambda p=partition: high_watermark([cluster.node(i) for i in cluster.ids],
                                                                  "data", p), 30, f"data-{partition}'s HW")
            wait_until(lambda p=partition, h=hw: read_replica_log(dirs[lost], "data", p).end_offset >= h, 30,
                       f"data-{partition} on the rejoined node to reach the HW")
            entries = assert_replicas_identical_below_hw(dirs, "data", partition, hw)
            records += len([e for e in entries if not e.control])
        assert records == 2000
        # After the rejoin the node votes in every partition again; the operator re-keys its
        # metadata voter. With the kv leader gone, it helps elect one.
        _rekey_metadata_voter(cluster, lost, old_directory)
        cluster.kill(kv_leader)
        other = next(i for i in cluster.ids if i not in (kv_leader, lost))
        wait_until(lambda: _leader(cluster, other, "kv") in (other, lost), 30, "kv-0 to elect a new leader")


def test_a_lagging_survivor_is_not_elected_with_a_rejoining_nodes_vote(tmp_path):
    """Nodes L (leader) and V hold the committed records, G lags (cut off). V loses its disk and
    rejoins, unable to reach L; then L dies. G alone has fewer records than were acknowledged:
    if V voted for it, those records would be gone. V holds its vote, so the partition stays
    leaderless until L is back, and nothing acknowledged is lost."""
    with KraftdCluster(tmp_path, nodes=3, proxies=True, env=ENV) as cluster:
        wait_cluster_ready(cluster, 30)
        _create(cluster, "t", 1)
        _produce(cluster, "t", 300, partition=0)
        leader = _settled_leader(cluster, "t")
        lagger, victim = [i for i in cluster.ids if i != leader]
        cluster.partition(lagger, leader)
        cluster.partition(lagger, victim)
        # Committed on leader + victim only. Not idempotent: a producer whose InitProducerId went
        # to the cut-off node would wait for a producer-id block from the controller forever.
        acked = 300 + _produce(cluster, "t", 500, partition=0, idempotent=False)
        hw_before = high_watermark([cluster.node(leader)], "t", 0)[1]
        assert read_replica_log(cluster.process(lagger).data_dir, "t", 0).end_offset < hw_before

        cluster.kill(victim)
        _wipe(cluster, victim)
        cluster.heal_all()
        cluster.partition(victim, leader)  # the rejoining node cannot catch up from the leader...
        cluster.start(victim)
        cluster.kill(leader)               # ...and then the leader dies.
        # The lagger asks the rejoining node for its vote and is refused: no leader for t-0.
        # (It hosts t-0, refusing its vote, once it has the image: from a metadata leader other
        # than the one it is cut off from. Either way the lagger gets no vote from it.)
        poll_until(lambda: REPLACED in cluster.logs(victim), 10)
        for _ in range(16):
            assert _leader(cluster, lagger, "t") not in (lagger, victim), \
                "a leader was elected without the committed records:\n" + cluster.logs(lagger, tail=30)
            time.sleep(0.5)

        cluster.heal_all()
        cluster.start(leader)
        wait_until(lambda: _leader(cluster, lagger, "t") in cluster.ids, 30, "t-0 to elect a leader again")
        dirs = {i: cluster.process(i).data_dir for i in cluster.ids}
        hw = wait_until(lambda: (h := high_watermark([cluster.node(i) for i in cluster.ids], "t", 0))
                        and h[1] >= hw_before and h[1], 30, "the HW to come back")
        wait_until(lambda: all(read_replica_log(d, "t", 0).end_offset >= hw for d in dirs.values()), 30,
                   "every replica to reach the HW")
        entries = assert_replicas_identical_below_hw(dirs, "t", 0, hw)
        assert len([e for e in entries if not e.control]) >= acked
