"""Issue 25 items 1 and 2 on real processes: the metadata quorum's voters change online
(`kraftd quorum add-voter` / `remove-voter`, AddRaftVoter and RemoveRaftVoter), the committed
VotersRecord outlives restarts with the original command lines, and a voter whose disk was
replaced (same node id, empty dir, no flag) is not a voter until removed and added again."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftd.storage.meta_properties import read_meta_properties, uuid_to_kafka
from tests.cluster.support import describe_json, gauge, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.clients


def _quorum(*args: str, timeout: float = 90.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftd", "quorum", *args], capture_output=True, text=True,
                          timeout=timeout)


def _directory(cluster: KraftdCluster, i: int) -> str:
    return uuid_to_kafka(read_meta_properties(Path(cluster.process(i).data_dir)).directory_id)


def _voters(cluster: KraftdCluster) -> dict:
    """{voter id: directory id} as the metadata leader's DescribeQuorum says (through any node)."""
    bootstrap = ",".join(cluster.node(i) for i in cluster.running())
    try:
        d = describe_json(bootstrap)
    except AssertionError:  # no leader right now (an election after a change)
        return None
    return {v["replicaId"]: v["directoryId"] for v in d["voters"]}


def _leader(cluster: KraftdCluster, i: int) -> int:
    try:
        return int(gauge(cluster, i, "kraftd_metadata_leader_id"))
    except Exception:  # noqa: BLE001 - a node between elections may not answer
        return -2


def test_add_and_remove_voters_online_and_restart_with_the_original_command_lines(tmp_path):
    with KraftdCluster(tmp_path, nodes=4, voter_ids=[1, 2, 3]) as cluster:
        wait_cluster_ready(cluster, 30)
        dirs = {i: _directory(cluster, i) for i in cluster.ids}
        # The quorum recorded its voters with their directories on its own.
        wait_until(lambda: _voters(cluster) == {i: dirs[i] for i in (1, 2, 3)}, 20,
                   "the voters with their directory ids")

        out = _quorum("add-voter", "--bootstrap-server", cluster.node(2), "--node-id", "4")
        assert out.returncode == 0, out.stderr
        assert f"node 4 (directory {dirs[4]}) is a voter" in out.stdout
        assert wait_until(lambda: _voters(cluster), 10, "a description") == dirs
        again = _quorum("add-voter", "--bootstrap-server", cluster.node(2), "--node-id", "4")
        assert again.returncode == 1 and "is a voter already" in again.stderr

        out = _quorum("remove-voter", "--bootstrap-server", cluster.node(3), "--node-id", "1")
        assert out.returncode == 0, out.stderr
        wait_until(lambda: _voters(cluster) == {i: dirs[i] for i in (2, 3, 4)}, 20, "voters 2, 3, 4")
        wait_until(lambda: _leader(cluster, 2) in (2, 3, 4), 20, "a leader among the voters")

        # Every node restarts with its original command line (--voters 1,2,3): the log's set wins.
        for i in cluster.ids:
            cluster.restart(i)
        wait_cluster_ready(cluster, 60)
        assert wait_until(lambda: _voters(cluster), 10, "a description") == {i: dirs[i] for i in (2, 3, 4)}
        # Node 1 is no voter: with it and one voter down, the other two still elect.
        cluster.kill(1)
        cluster.kill(2)
        wait_until(lambda: _leader(cluster, 3) in (3, 4), 30, "a leader among 3 and 4")


def test_a_replaced_disk_is_no_voter_until_removed_and_added_again(tmp_path):
    with KraftdCluster(tmp_path, nodes=3) as cluster:
        wait_cluster_ready(cluster, 30)
        dirs = {i: _directory(cluster, i) for i in cluster.ids}
        wait_until(lambda: _voters(cluster) == dirs, 20, "the voters with their directory ids")
        leader = _leader(cluster, 1)
        victim = next(i for i in cluster.ids if i != leader)
        other = next(i for i in cluster.ids if i not in (leader, victim))

        cluster.kill(victim)
        shutil.rmtree(cluster.process(victim).data_dir)
        cluster.start(victim)  # same node id, empty dir, no flag
        new = wait_until(lambda: (Path(cluster.process(victim).data_dir) / "meta.properties").exists()
                         and _directory(cluster, victim), 20, "the new dir's identity")
        assert new != dirs[victim]
        wait_until(lambda: any(o["replicaId"] == victim and o["directoryId"] == new
                               for o in describe_json(cluster.node(leader))["observers"]), 20,
                   "the replaced node fetching as an observer")
        assert wait_until(lambda: _voters(cluster), 10, "a description") == dirs  # the old directory votes

        # With the leader gone, the replaced node and the other voter cannot elect anyone:
        # the replaced node is no voter, and one voter of three is no majority.
        cluster.kill(leader)
        for _ in range(12):
            assert _leader(cluster, other) not in (other, victim), cluster.logs(other, tail=20)
            time.sleep(0.5)
        cluster.start(leader)
        wait_cluster_ready(cluster, 60)

        out = _quorum("remove-voter", "--bootstrap-server", cluster.node(other), "--node-id", str(victim),
                      "--directory-id", dirs[victim])
        assert out.returncode == 0, out.stderr
        out = _quorum("add-voter", "--bootstrap-server", cluster.node(other), "--node-id", str(victim))
        assert out.returncode == 0, out.stderr
        wait_until(lambda: _voters(cluster) == {**dirs, victim: new}, 20, "the new directory as the voter")


def test_the_java_admin_describes_adds_and_removes_voters(tmp_path):
    """Java kafka-clients 3.9.1: describeMetadataQuorum (DescribeQuorum v2, directory ids and
    nodes), addRaftVoter and removeRaftVoter, through a broker that is not the controller."""
    from tests.support.java_client import compile_driver, java_command

    classes = compile_driver("RaftVoters", tmp_path / "java")
    with KraftdCluster(tmp_path / "c", nodes=4, voter_ids=[1, 2, 3]) as cluster:
        wait_cluster_ready(cluster, 30)
        dirs = {i: _directory(cluster, i) for i in cluster.ids}
        wait_until(lambda: _voters(cluster) == {i: dirs[i] for i in (1, 2, 3)}, 20, "the recorded voters")
        leader = _leader(cluster, 1)
        through = next(i for i in (1, 2, 3) if i != leader)

        def java(*args):
            out = subprocess.run(java_command("RaftVoters", classes, cluster.node(through), *args),
                                 capture_output=True, text=True, timeout=120)
            assert out.returncode == 0 and out.stdout.rstrip().endswith("done"), out.stdout + out.stderr
            return out.stdout.splitlines()

        lines = java("describe")
        assert f"leader {leader}" in " ".join(lines)
        assert {tuple(line.split()[1:]) for line in lines if line.startswith("voter")} == \
            {(str(i), dirs[i]) for i in (1, 2, 3)}
        assert (f"observer 4 {dirs[4]}") in lines
        assert {line for line in lines if line.startswith("node")} >= {f"node {i} {cluster.node(i)}" for i in (1, 2, 3)}

        host, port = cluster.node(4).rsplit(":", 1)
        assert java("add", "4", dirs[4], host, port)[0] == "added"
        wait_until(lambda: _voters(cluster) == dirs, 20, "node 4 a voter")
        assert java("remove", "4", dirs[4])[0] == "removed"
        wait_until(lambda: _voters(cluster) == {i: dirs[i] for i in (1, 2, 3)}, 20, "node 4 removed")
        # A voter that does not exist: Kafka's VOTER_NOT_FOUND, as the Java client reports it.
        out = subprocess.run(java_command("RaftVoters", classes, cluster.node(through), "remove", "4", dirs[4]),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1 and "VoterNotFoundException" in out.stdout, out.stdout + out.stderr


def test_raw_frames_and_their_errors(tmp_path):
    """AddRaftVoter/RemoveRaftVoter v0 as raw frames on a one-voter cluster: Kafka's errors for
    a wrong cluster id, the last voter, a voter already there, a voter that does not exist, and a
    node that is not fetching (retry: REQUEST_TIMED_OUT)."""
    import uuid

    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m
    from kraftd.protocol.errors import ErrorCode
    from kraftd.storage.meta_properties import uuid_from_kafka

    with KraftdCluster(tmp_path, nodes=1) as cluster:
        wait_cluster_ready(cluster, 30)
        mine = uuid_from_kafka(_directory(cluster, 1))
        wait_until(lambda: _voters(cluster) == {1: _directory(cluster, 1)}, 20, "the recorded voter")
        client = WireClient(cluster.node(1), client_id="raw-voters", timeout=10)
        try:
            versions = {k.api_key: (k.min_version, k.max_version)
                        for k in client.request(api.API_VERSIONS, 0, m.ApiVersionsRequest()).api_keys}
            assert versions[api.ADD_RAFT_VOTER] == (0, 0) and versions[api.REMOVE_RAFT_VOTER] == (0, 0)

            def add(voter, directory, cluster_id=None):
                return client.request(api.ADD_RAFT_VOTER, 0, m.AddRaftVoterRequest(
                    cluster_id=cluster_id, timeout_ms=1000, voter_id=voter, voter_directory_id=directory,
                    listeners=[m.AddRaftVoterRequest.Listener(name="PLAINTEXT", host="127.0.0.1", port=1)]))

            def remove(voter, directory, cluster_id=None):
                return client.request(api.REMOVE_RAFT_VOTER, 0, m.RemoveRaftVoterRequest(
                    cluster_id=cluster_id, voter_id=voter, voter_directory_id=directory))

            assert add(1, mine, cluster_id="not-this-cluster").error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
            assert add(1, mine).error_code == ErrorCode.DUPLICATE_VOTER
            assert add(7, uuid.uuid4()).error_code == ErrorCode.REQUEST_TIMED_OUT  # not fetching: never caught up
            assert remove(7, uuid.uuid4()).error_code == ErrorCode.VOTER_NOT_FOUND
            assert remove(1, uuid.uuid4()).error_code == ErrorCode.VOTER_NOT_FOUND  # another directory
            out = remove(1, mine)
            assert out.error_code == ErrorCode.INVALID_REQUEST and "last voter" in out.error_message
        finally:
            client.close()
