"""`kraftd quorum describe` against a real single-node server, compared with a raw DescribeQuorum;
the description's arithmetic (lag, MaxFollowerLagTimeMs) on a hand-made three-voter answer; and
(no network) the way to the leader: Metadata from any bootstrap server names it and its
advertised address, NOT_LEADER_OR_FOLLOWER answers are followed a few hops, and an unknown or
unreachable leader is a clear error."""
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
from kraftd.storage.meta_properties import read_meta_properties, uuid_to_kafka
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
    assert header == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                      "Status"]
    directory = uuid_to_kafka(read_meta_properties(kraftd.data_dir).directory_id)
    assert row[:4] == ["1", directory, str(raw.high_watermark), "0"] and row[-1] == "Leader"
    assert voter["directoryId"] == directory


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
    assert to_json(d)["voters"][0] == {"replicaId": 1, "directoryId": None, "logEndOffset": 90, "lag": 10,
                                       "lastFetchTimestamp": 5_000, "lastCaughtUpTimestamp": 4_000}

    caught_up = description_from(p.__class__(
        partition_index=0, error_code=0, leader_id=2, leader_epoch=7, high_watermark=90,
        current_voters=p.current_voters[:2], observers=[]), "__cluster_metadata", "cid")
    assert caught_up.max_follower_lag == 10 and caught_up.max_follower_lag_time_ms == 6_000


class _FakeCluster:
    """No network: `_metadata_at` answers from `routes` (or raises), `_describe_at` from `answers`
    (or raises); every call is recorded in `calls`."""

    def __init__(self, monkeypatch, routes: dict, answers: dict) -> None:
        from kraftd.commands import quorum

        self.routes, self.answers, self.calls = routes, answers, []

        def answer(table, kind, server):
            self.calls.append((kind, server))
            out = table[server]
            if isinstance(out, list):  # successive answers
                out = out.pop(0) if len(out) > 1 else out[0]
            if isinstance(out, Exception):
                raise out
            return out

        monkeypatch.setattr(quorum, "_metadata_at",
                            lambda server, topic, partition, timeout: answer(self.routes, "metadata", server))
        monkeypatch.setattr(quorum, "_describe_at",
                            lambda server, topic, partition, timeout, cluster_id=None:
                            answer(self.answers, "describe", server))


BROKERS = {1: "n1:9", 2: "n2:9", 3: "n3:9"}  # advertised addresses, unlike the bootstrap addresses
REFUSED = ConnectionRefusedError(111, "Connection refused")


def _not_leader(server: str, leader_id: int, epoch: int):
    from kraftd.commands import quorum
    return quorum._Refusal(server, "NOT_LEADER_OR_FOLLOWER", leader_id, epoch)


def test_the_leader_metadata_names_is_asked_at_its_advertised_address(monkeypatch):
    """The first bootstrap server that answers Metadata names the leader; the leader is asked at
    the address the broker list advertises, not at a bootstrap address; a NOT_LEADER_OR_FOLLOWER
    answer (the leadership moved meanwhile) is followed to the leader it names."""
    from kraftd.commands import quorum

    leader = quorum.QuorumDescription("cid", "t", 0, 3, 5, 10, (), ())
    fake = _FakeCluster(monkeypatch, routes={"a:1": REFUSED, "b:2": quorum._Route("b:2", "cid", BROKERS, 2)},
                        answers={"n2:9": _not_leader("n2:9", 3, 5), "n3:9": leader})
    assert quorum.describe("a:1,b:2,c:3", "t", 0) is leader
    assert fake.calls == [("metadata", "a:1"), ("metadata", "b:2"), ("describe", "n2:9"), ("describe", "n3:9")]

    # The leader named first answers at once: one Metadata, one DescribeQuorum.
    fake = _FakeCluster(monkeypatch, routes={"b:2": quorum._Route("b:2", "cid", BROKERS, 3)},
                        answers={"n3:9": leader})
    assert quorum.describe("b:2", "t", 0) is leader
    assert fake.calls == [("metadata", "b:2"), ("describe", "n3:9")]

    # A leader that registered after the Metadata was answered: the same server is asked again.
    fake = _FakeCluster(monkeypatch, routes={"b:2": [quorum._Route("b:2", "cid", {2: "n2:9"}, 3),
                                                     quorum._Route("b:2", "cid", BROKERS, 3)]},
                        answers={"n3:9": leader})
    assert quorum.describe("b:2", "t", 0) is leader
    assert fake.calls == [("metadata", "b:2"), ("metadata", "b:2"), ("describe", "n3:9")]


def test_a_leadership_that_keeps_moving_is_followed_a_few_hops_only(monkeypatch):
    from kraftd.commands import quorum

    fake = _FakeCluster(monkeypatch, routes={"b:2": quorum._Route("b:2", "cid", BROKERS, 2)},
                        answers={"n2:9": _not_leader("n2:9", 3, 6), "n3:9": _not_leader("n3:9", 2, 6)})
    with pytest.raises(quorum.DescribeError) as e:
        quorum.describe("b:2", "t", 0)
    assert len([c for c in fake.calls if c[0] == "describe"]) == 1 + quorum.MAX_HOPS
    assert str(e.value).startswith("NOT_LEADER_OR_FOLLOWER: the leadership of t:0 kept moving")
    assert "node 2 at n2:9, then node 3 at n3:9" in str(e.value)


def test_an_unknown_leader_is_a_clear_error(monkeypatch):
    from kraftd.commands import quorum

    # Metadata knows no leader (an election under way): nobody is asked DescribeQuorum.
    fake = _FakeCluster(monkeypatch, routes={"b:2": quorum._Route("b:2", "cid", BROKERS, -1)}, answers={})
    with pytest.raises(quorum.DescribeError) as e:
        quorum.describe("b:2", "t", 0)
    assert str(e.value).startswith("LEADER_NOT_AVAILABLE: no leader of t:0 is known")
    assert "b:2's Metadata" in str(e.value) and fake.calls == [("metadata", "b:2")]

    # The leader answers that it no longer leads, and knows no leader yet.
    _FakeCluster(monkeypatch, routes={"b:2": quorum._Route("b:2", "cid", BROKERS, 2)},
                 answers={"n2:9": _not_leader("n2:9", -1, 7)})
    with pytest.raises(quorum.DescribeError) as e:
        quorum.describe("b:2", "t", 0)
    assert "no leader of t:0 is known" in str(e.value)
    assert "node 2's NOT_LEADER_OR_FOLLOWER answer, at epoch 7" in str(e.value)

    # A leader whose address no broker list has, even when asked again.
    fake = _FakeCluster(monkeypatch, routes={"b:2": quorum._Route("b:2", "cid", {2: "n2:9"}, 3)}, answers={})
    with pytest.raises(quorum.DescribeError) as e:
        quorum.describe("b:2", "t", 0)
    assert "the leader of t:0, node 3" in str(e.value) and "its address is unknown" in str(e.value)
    assert fake.calls == [("metadata", "b:2"), ("metadata", "b:2")]

    # An unknown partition.
    _FakeCluster(monkeypatch, routes={"b:2": quorum._Route("b:2", "cid", BROKERS, -1,
                                                           "UNKNOWN_TOPIC_OR_PARTITION")}, answers={})
    with pytest.raises(quorum.DescribeError) as e:
        quorum.describe("b:2", "t", 0)
    assert str(e.value) == "UNKNOWN_TOPIC_OR_PARTITION: b:2 knows no partition t:0"


def test_an_unreachable_leader_is_an_error_naming_the_address_tried(monkeypatch):
    from kraftd.commands import quorum

    _FakeCluster(monkeypatch, routes={"b:2": quorum._Route("b:2", "cid", BROKERS, 2)}, answers={"n2:9": REFUSED})
    with pytest.raises(quorum.DescribeError) as e:
        quorum.describe("b:2", "t", 0)
    assert "t:0: cannot connect to the leader, node 2, at n2:9: Connection refused" in str(e.value)
    assert "b:2's Metadata" in str(e.value)

    # No bootstrap server answers at all: each one is named.
    _FakeCluster(monkeypatch, routes={"a:1": REFUSED, "b:2": TimeoutError("timed out")}, answers={})
    with pytest.raises(quorum.DescribeError) as e:
        quorum.describe("a:1,b:2", "t", 0)
    assert str(e.value) == "cannot connect to a:1: Connection refused; b:2: timed out"
