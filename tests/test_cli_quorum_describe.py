"""`kraftd quorum describe` against a real single-node server, compared with a raw DescribeQuorum;
the description's arithmetic (lag, MaxFollowerLagTimeMs) on a hand-made three-voter answer; and
the walk over bootstrap servers until the leader answers."""
import json
import re
import socket
import subprocess
import sys

import pytest

from kraftd.client import WireClient
from kraftd.commands.quorum import description_from, format_replication, format_status, to_json
from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.records import build_batch

TOPIC = "quorum-described"
RECORDS = 5


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftd", "quorum", "describe", *args],
                          capture_output=True, text=True, timeout=60)


def _raw_describe(client: WireClient, topic: str, partition: int = 0):
    response = client.request(api.DESCRIBE_QUORUM, 2, m.DescribeQuorumRequest(topics=[
        m.DescribeQuorumRequest.TopicData(topic_name=topic, partitions=[
            m.DescribeQuorumRequest.PartitionData(partition_index=partition)])]))
    assert response.error_code == 0
    p = response.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p


def _create_and_produce(client: WireClient) -> tuple[int, int]:
    """Auto-create TOPIC through Metadata, produce RECORDS records (acks=all): (the leader's log end
    before the produce, the batch's base offset)."""
    metadata = client.request(api.METADATA, 12, m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True,
        include_topic_authorized_operations=False))
    assert metadata.topics[0].error_code == 0
    before = _raw_describe(client, TOPIC).current_voters[0].log_end_offset
    batch = build_batch([(b"k%d" % i, b"v%d" % i, [], 1_000 + i) for i in range(RECORDS)])
    out = client.request(api.PRODUCE, 9, m.ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30_000,
                                                          topic_data=[m.ProduceRequest.TopicProduceData(
            name=TOPIC, partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
    result = out.responses[0].partition_responses[0]
    assert result.error_code == 0, result
    return before, result.base_offset


def test_describe_a_partition_plain_json_and_replication(kraftd):
    client = WireClient(kraftd.bootstrap)
    try:
        end_before, base_offset = _create_and_produce(client)
        raw = _raw_describe(client, TOPIC)
    finally:
        client.close()
    # Everything before our batch is control records (the leader's LeaderChange); an acks=all
    # produce is answered once the high watermark covers it.
    assert end_before == base_offset >= 1
    assert raw.high_watermark == base_offset + RECORDS

    plain = _cli("--bootstrap-server", kraftd.bootstrap, "--partition", f"{TOPIC}:0")
    assert plain.returncode == 0, plain.stderr
    fields = dict(re.match(r"^(\w+):\s+(.*)$", line).groups() for line in plain.stdout.splitlines())
    assert list(fields) == ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
                            "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"]
    assert fields["ClusterId"] not in ("", "None")
    assert fields["LeaderId"] == "1"  # the default node id
    assert int(fields["LeaderEpoch"]) >= 1
    assert int(fields["HighWatermark"]) == raw.high_watermark
    assert fields["MaxFollowerLag"] == "0" and fields["MaxFollowerLagTimeMs"] == "0"
    assert fields["CurrentVoters"] == "[1]" and fields["CurrentObservers"] == "[]"

    as_json = _cli("--bootstrap-server", kraftd.bootstrap, "--partition", f"{TOPIC}:0", "--json")
    assert as_json.returncode == 0, as_json.stderr
    d = json.loads(as_json.stdout)
    assert d["clusterId"] == fields["ClusterId"]
    assert (d["topic"], d["partition"], d["leaderId"]) == (TOPIC, 0, 1)
    assert d["leaderEpoch"] == raw.leader_epoch >= 1
    assert d["highWatermark"] == raw.high_watermark
    assert [v["replicaId"] for v in d["voters"]] == [1] and d["observers"] == []
    voter = d["voters"][0]
    assert voter["lag"] == 0 and voter["logEndOffset"] == raw.high_watermark
    assert voter["lastFetchTimestamp"] > 0 and voter["lastCaughtUpTimestamp"] > 0

    table = _cli("--bootstrap-server", kraftd.bootstrap, "--partition", f"{TOPIC}:0", "--replication")
    assert table.returncode == 0, table.stderr
    header, row = (line.split() for line in table.stdout.splitlines())
    assert header == ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    assert row[:3] == ["1", str(raw.high_watermark), "0"] and row[-1] == "Leader"


def test_no_metadata_quorum_is_a_clear_error(kraftd):
    result = _cli("--bootstrap-server", kraftd.bootstrap)
    assert result.returncode == 1 and result.stdout == ""
    assert "UNKNOWN_TOPIC_OR_PARTITION" in result.stderr and "__cluster_metadata:0" in result.stderr
    assert "--partition" in result.stderr

    named = _cli("--bootstrap-server", kraftd.bootstrap, "--partition", "no-such-topic:3")
    assert named.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in named.stderr and "no-such-topic:3" in named.stderr


def test_connection_refused_is_a_clear_error():
    with socket.socket() as s:  # a port nothing listens on (once closed)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = _cli("--bootstrap-server", f"127.0.0.1:{port}", "--partition", "t:0")
    assert result.returncode == 1 and result.stdout == ""
    assert f"cannot connect to 127.0.0.1:{port}" in result.stderr and "refused" in result.stderr.lower()


def test_a_bad_partition_argument_is_a_usage_error():
    result = _cli("--bootstrap-server", "127.0.0.1:9", "--partition", "no-index")
    assert result.returncode == 2 and "TOPIC:PARTITION" in result.stderr


def test_lag_and_lag_time_of_a_three_voter_answer():
    R = m.DescribeQuorumResponse.ReplicaState
    p = m.DescribeQuorumResponse.PartitionData(
        partition_index=0, error_code=0, leader_id=2, leader_epoch=7, high_watermark=90, current_voters=[
            R(replica_id=1, log_end_offset=90, last_fetch_timestamp=5_000, last_caught_up_timestamp=4_000),
            R(replica_id=2, log_end_offset=100, last_fetch_timestamp=10_000, last_caught_up_timestamp=10_000),
            R(replica_id=3, log_end_offset=-1, last_fetch_timestamp=-1, last_caught_up_timestamp=-1)],
        observers=[R(replica_id=9, log_end_offset=99, last_fetch_timestamp=9_000, last_caught_up_timestamp=8_000)])
    d = description_from(p, "__cluster_metadata", "cid")
    assert [v.lag for v in d.voters] == [10, 0, 100]  # an unknown log end counts as holding nothing
    assert d.observers[0].lag == 1
    assert d.max_follower_lag == 100
    assert d.max_follower_lag_time_ms == -1  # the laggard's catch-up time is unknown
    assert "CurrentVoters:          [1,2,3]\n" in format_status(d)
    assert "CurrentObservers:       [9]\n" in format_status(d)
    rows = [line.split() for line in format_replication(d).splitlines()[1:]]
    assert [(r[0], r[-1]) for r in rows] == [("2", "Leader"), ("1", "Follower"), ("3", "Follower"), ("9", "Observer")]
    assert to_json(d)["voters"][0] == {"replicaId": 1, "logEndOffset": 90, "lag": 10,
                                       "lastFetchTimestamp": 5_000, "lastCaughtUpTimestamp": 4_000}

    caught_up = description_from(p.__class__(
        partition_index=0, error_code=0, leader_id=2, leader_epoch=7, high_watermark=90,
        current_voters=p.current_voters[:2], observers=[]), "__cluster_metadata", "cid")
    assert caught_up.max_follower_lag == 10 and caught_up.max_follower_lag_time_ms == 6_000


def test_every_bootstrap_server_is_asked_until_the_leader_answers(monkeypatch):
    from kraftd.commands import quorum

    leader = quorum.QuorumDescription("cid", "t", 0, 3, 5, 10, (), ())
    answers = {"a:1": quorum._Refusal("a:1", "NOT_LEADER_OR_FOLLOWER", -1, -1),
               "b:2": quorum._Refusal("b:2", "NOT_LEADER_OR_FOLLOWER", 3, 5),
               "c:3": ConnectionRefusedError(111, "Connection refused"), "d:4": leader}

    def fake(server, topic, partition, timeout):
        if isinstance(answers[server], Exception):
            raise answers[server]
        return answers[server]

    monkeypatch.setattr(quorum, "_describe_at", fake)
    assert quorum.describe("a:1,b:2,c:3,d:4", "t", 0) is leader
    with pytest.raises(quorum.DescribeError) as e:
        quorum.describe("a:1,b:2,c:3", "t", 0)
    assert str(e.value).startswith("NOT_LEADER_OR_FOLLOWER") and "leader is node 3 at epoch 5" in str(e.value)
    assert "cannot connect to c:3: Connection refused" in str(e.value)
