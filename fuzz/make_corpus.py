"""Writes the seed corpora of the fuzz targets from real request objects and real batches.

    .venv/bin/python -m fuzz.make_corpus        # rewrites fuzz/corpus/requests, fuzz/corpus/record_batches

fuzz/corpus/requests/<api>-v<version>[-<variant>]: a mode byte (see fuzz/requests.py) and one
request frame body (no size prefix), for every API the codec knows (`KNOWN_API_BY_KEY`: the
advertised ones and the node-to-node ones it does not advertise) at every version it serves:
a request naming the harness's topics (fz0, fz1, fz2), group (fz-group) and member (fuzz-1)
where one is written below, else the schema's defaults. Fields a version cannot carry are
dropped by the encoder. A few variants per API set other mode bits (node peers, CRC repair of
Produce record sets, flush and clock advance).

fuzz/corpus/record_batches/<name>: a mode byte (see fuzz/record_batches.py) and a record set
built with `build_batch`: every codec, keys/values/headers of several shapes, producer ids,
LogAppendTime, control and transactional batches, several batches in a row, and a few raw
compressed payloads for the direct decompress() path.

The files are deterministic (fixed timestamps, no randomness), so rerunning this changes
nothing unless the schemas or the requests below change.
"""
from __future__ import annotations

import os
import shutil
import sys
import uuid

import cramjam

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from kraftd.protocol import messages as m  # noqa: E402
from kraftd.protocol.api import KNOWN_API_BY_KEY  # noqa: E402
from kraftd.protocol.compression import Compression, compress  # noqa: E402
from kraftd.protocol.framing import encode_request, frame_bytes  # noqa: E402
from kraftd.protocol.records import build_batch  # noqa: E402

CORPUS = os.path.join(ROOT, "fuzz", "corpus")
TS = 1_700_000_000_000
GROUP, MEMBER = "fz-group", "fuzz-1"
# Consumer protocol subscription and assignment (as in fuzz/requests.py).
SUBSCRIPTION = bytes.fromhex("0000" "00000002" "0003") + b"fz0" + bytes.fromhex("0003") + b"fz1" + bytes(4)
ASSIGNMENT = (bytes.fromhex("0000" "00000001" "0003") + b"fz0" + bytes.fromhex("00000002" "00000000" "00000001")
              + bytes(4))


def batch(n: int = 2, compression: int = 0, **kw) -> bytes:
    return build_batch([(b"k%d" % i, b"v" * (i + 1), [("h", b"x")], TS + i) for i in range(n)],
                       compression=compression, **kw)


def requests() -> dict[int, list]:
    """Example requests per api key, with a mode byte each: [(mode, variant name, request)]."""
    P, F, L = m.ProduceRequest, m.FetchRequest, m.ListOffsetsRequest
    D, O, S = m.DeleteRecordsRequest, m.OffsetForLeaderEpochRequest, m.FetchSnapshotRequest
    C, OC, OF = m.CreateTopicsRequest, m.OffsetCommitRequest, m.OffsetFetchRequest
    J, SG, LG = m.JoinGroupRequest, m.SyncGroupRequest, m.LeaveGroupRequest
    V, B, E, Q = m.VoteRequest, m.BeginQuorumEpochRequest, m.EndQuorumEpochRequest, m.DescribeQuorumRequest
    AP, BR = m.AlterPartitionRequest, m.BrokerRegistrationRequest
    zero = uuid.UUID(int=0)

    def produce(acks, records, topic="fz0", index=0, producer=None):
        return P(acks=acks, timeout_ms=1000, topic_data=[P.TopicProduceData(name=topic, partition_data=[
            P.PartitionProduceData(index=index, records=records)])])

    def fetch(offset=0, session_id=0, session_epoch=-1, replica_id=-1, wait=0, topic="fz0"):
        return F(replica_id=replica_id, replica_state=F.ReplicaState(replica_id=replica_id, replica_epoch=-1),
                 max_wait_ms=wait, min_bytes=1, max_bytes=65536, session_id=session_id,
                 session_epoch=session_epoch, topics=[F.FetchTopic(topic=topic, topic_id=zero, partitions=[
                     F.FetchPartition(partition=p, fetch_offset=offset, current_leader_epoch=-1,
                                      last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=65536)
                     for p in (0, 1)])])

    idempotent = batch(2, producer_id=0, producer_epoch=0, base_sequence=0)
    return {
        0: [(0x00, "acks1", produce(1, batch(2))), (0x04, "gzip-crcfix", produce(-1, batch(3, Compression.GZIP))),
            (0x08, "snappy-flush", produce(-1, batch(2, Compression.SNAPPY), topic="fz1")),
            (0x04, "lz4", produce(1, batch(2, Compression.LZ4), index=1)),
            (0x0C, "zstd", produce(0, batch(2, Compression.ZSTD), topic="fz2")),
            (0x04, "idempotent", produce(-1, idempotent)), (0x04, "two-batches", produce(1, batch(1) + batch(2))),
            (0x00, "auto-create", produce(1, batch(1), topic="fz-new"))],
        1: [(0x00, "full", fetch()), (0x00, "session", fetch(session_id=0, session_epoch=0)),
            (0x30, "wait", fetch(offset=4, wait=100)), (0x02, "follower", fetch(replica_id=1)),
            (0x03, "replica2", fetch(replica_id=2, topic="fz1"))],
        2: [(0x00, f"ts{ts}", L(replica_id=-1, topics=[L.ListOffsetsTopic(name="fz0", partitions=[
            L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts)])]))
            for ts in (-1, -2, -3, TS)],
        3: [(0x00, "named", m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="fz0"),
                                                      m.MetadataRequest.MetadataRequestTopic(name="fz-auto")],
                                              allow_auto_topic_creation=True)),
            (0x00, "all", m.MetadataRequest(topics=None))],
        8: [(0x00, "commit", OC(group_id=GROUP, generation_id_or_member_epoch=1, member_id=MEMBER, topics=[
            OC.OffsetCommitRequestTopic(name="fz0", partitions=[OC.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=3, committed_metadata="m")])]))],
        9: [(0x00, "fetch", OF(group_id=GROUP, topics=[OF.OffsetFetchRequestTopic(name="fz0", partition_indexes=[0, 1])],
                               groups=[OF.OffsetFetchRequestGroup(group_id=GROUP, topics=[
                                   OF.OffsetFetchRequestTopics(name="fz0", partition_indexes=[0, 1])])])),
            (0x00, "all", OF(group_id=GROUP, topics=None, groups=[OF.OffsetFetchRequestGroup(group_id=GROUP, topics=None)]))],
        10: [(0x00, "group", m.FindCoordinatorRequest(key=GROUP, key_type=0, coordinator_keys=[GROUP, "other"]))],
        11: [(0x00, "new", J(group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                             protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)])),
             (0x30, "rejoin", J(group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=MEMBER,
                                protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)])),
             (0x00, "static", J(group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                                group_instance_id="static-1", protocol_type="consumer",
                                protocols=[J.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)]))],
        12: [(0x00, "beat", m.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=MEMBER))],
        13: [(0x00, "leave", LG(group_id=GROUP, member_id=MEMBER, members=[LG.MemberIdentity(member_id=MEMBER)]))],
        14: [(0x00, "sync", SG(group_id=GROUP, generation_id=1, member_id=MEMBER, protocol_type="consumer",
                               protocol_name="range", assignments=[SG.SyncGroupRequestAssignment(member_id=MEMBER,
                                                                                                 assignment=ASSIGNMENT)]))],
        15: [(0x00, "describe", m.DescribeGroupsRequest(groups=[GROUP, "none"]))],
        16: [(0x00, "list", m.ListGroupsRequest(states_filter=["Stable"], types_filter=["classic"]))],
        17: [(0x80, "scram", m.SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))],
        36: [(0x80, "first", m.SaslAuthenticateRequest(auth_bytes=b"n,,n=kraftd-node-2,r=fuzznonce")),
             (0x00, "final", m.SaslAuthenticateRequest(auth_bytes=b"c=biws,r=fuzznonce,p=dGVzdA=="))],
        18: [(0x00, "hello", m.ApiVersionsRequest(client_software_name="fuzz", client_software_version="1.0"))],
        19: [(0x00, "create", C(timeout_ms=1000, topics=[C.CreatableTopic(
            name="fz-created", num_partitions=2, replication_factor=1, assignments=[], configs=[
                C.CreatableTopicConfig(name="retention.ms", value="1000"),
                C.CreatableTopicConfig(name="cleanup.policy", value="snapshot")])])),
             (0x00, "validate", C(timeout_ms=1000, validate_only=True, topics=[C.CreatableTopic(
                 name="fz0", num_partitions=-1, replication_factor=-1, assignments=[
                     C.CreatableReplicaAssignment(partition_index=0, broker_ids=[1])], configs=[])]))],
        20: [(0x00, "delete", m.DeleteTopicsRequest(topic_names=["fz2"], topics=[
            m.DeleteTopicsRequest.DeleteTopicState(name="fz2", topic_id=zero)], timeout_ms=1000))],
        21: [(0x08, "delete", D(timeout_ms=1000, topics=[D.DeleteRecordsTopic(name="fz0", partitions=[
            D.DeleteRecordsPartition(partition_index=0, offset=2)])]))],
        22: [(0x00, "idempotent", m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                                          producer_id=-1, producer_epoch=-1)),
             (0x00, "bump", m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                                    producer_id=0, producer_epoch=0))],
        23: [(0x00, "client", O(replica_id=-1, topics=[O.OffsetForLeaderTopic(topic="fz0", partitions=[
            O.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=e) for e in (0, 1)])]))],
        42: [(0x00, "delete", m.DeleteGroupsRequest(groups_names=[GROUP, "none"]))],
        47: [(0x00, "delete", m.OffsetDeleteRequest(group_id=GROUP, topics=[
            m.OffsetDeleteRequest.OffsetDeleteRequestTopic(name="fz0", partitions=[
                m.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]))],
        52: [(0x03, f"prevote{int(pre)}", V(cluster_id="fuzz-cluster-00000000", voter_id=1, topics=[V.TopicData(
            topic_name="fz0", partitions=[V.PartitionData(partition_index=0, replica_epoch=5, replica_id=2,
                                                          last_offset_epoch=1, last_offset=10, pre_vote=pre)])]))
             for pre in (False, True)],
        53: [(0x03, "begin", B(cluster_id="fuzz-cluster-00000000", voter_id=1, topics=[B.TopicData(
            topic_name="fz0", partitions=[B.PartitionData(partition_index=0, leader_id=2, leader_epoch=9)])],
            leader_endpoints=[B.LeaderEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9093)]))],
        54: [(0x03, "end", E(cluster_id="fuzz-cluster-00000000", topics=[E.TopicData(topic_name="fz0", partitions=[
            E.PartitionData(partition_index=0, leader_id=1, leader_epoch=1, preferred_successors=[2],
                            preferred_candidates=[E.ReplicaInfo(candidate_id=2)])])]))],
        55: [(0x00, "describe", Q(topics=[Q.TopicData(topic_name="fz0", partitions=[Q.PartitionData(partition_index=0)]),
                                          Q.TopicData(topic_name="__cluster_metadata",
                                                      partitions=[Q.PartitionData(partition_index=0)])]))],
        56: [(0x03, "alter", AP(broker_id=2, broker_epoch=1, topics=[AP.TopicData(topic_name="fz0", partitions=[
            AP.PartitionData(partition_index=0, leader_epoch=1, new_isr=[1, 2], new_isr_with_epochs=[
                AP.BrokerState(broker_id=b, broker_epoch=1) for b in (1, 2)], partition_epoch=0)])]))],
        59: [(0x02, "fz1", S(replica_id=1, max_bytes=65536, topics=[S.TopicSnapshot(name="fz1", partitions=[
            S.PartitionSnapshot(partition=0, current_leader_epoch=-1, snapshot_id=S.SnapshotId(end_offset=1, epoch=1),
                                position=0)])]))],
        62: [(0x03, "register", BR(broker_id=2, cluster_id="fuzz-cluster-00000000", incarnation_id=uuid.UUID(int=2),
                                   listeners=[BR.Listener(name="PLAINTEXT", host="127.0.0.1", port=9093, security_protocol=0)],
                                   features=[BR.Feature(name="metadata.version", min_supported_version=1,
                                                        max_supported_version=20)], rack=None))],
        67: [(0x03, "allocate", m.AllocateProducerIdsRequest(broker_id=2, broker_epoch=1))],
    }


def encode(key: int, version: int, request, correlation_id: int) -> bytes:
    header = m.RequestHeader(request_api_key=key, request_api_version=version, correlation_id=correlation_id,
                             client_id="fuzz")
    parts: list = []
    encode_request(header, request, parts)
    return frame_bytes(parts)[4:]  # the body the server's reader hands to dispatch


def request_seeds() -> dict[str, bytes]:
    seeds: dict[str, bytes] = {}
    examples = requests()
    for key, spec in sorted(KNOWN_API_BY_KEY.items()):
        name = spec.name.lower()
        for version in range(spec.min_version, spec.max_version + 1):
            for mode, variant, request in examples.get(key, [(0x00, "default", spec.request_cls())]):
                try:
                    frame = encode(key, version, request, len(seeds) + 1)
                except Exception:  # noqa: BLE001 — something this version cannot carry
                    frame = encode(key, version, spec.request_cls(), len(seeds) + 1)
                    variant = "default"
                seeds.setdefault(f"{name}-v{version}-{variant}", bytes([mode]) + frame)
    # Outside the codecs: an unknown api key, an unsupported ApiVersions version (KIP-511 fallback).
    seeds["unknown-key"] = b"\x00" + bytes.fromhex("03e7" "0000" "00000001" "0004") + b"fuzz"
    seeds["apiversions-v99"] = b"\x00" + bytes.fromhex("0012" "0063" "00000001" "0004") + b"fuzz"
    return seeds


def record_batch_seeds() -> dict[str, bytes]:
    seeds: dict[str, bytes] = {}
    records = {
        "plain": [(b"k0", b"v0", [], TS)],
        "headers": [(b"k%d" % i, b"v" * i, [("h%d" % i, b"x"), ("n", None)], TS + i) for i in range(3)],
        "nulls": [(None, None, [], TS), (None, b"", [], TS + 1), (b"", None, [], -1)],
        "many": [(None, b"%d" % i, [], TS + i * 1000) for i in range(40)],
        "large": [(b"key", bytes(range(256)) * 8, [("h", bytes(100))], TS)],
    }
    for codec in Compression:
        for name, recs in records.items():
            seeds[f"{codec.name.lower()}-{name}"] = b"\x01" + build_batch(recs, compression=codec)
    plain = records["headers"]
    seeds["idempotent"] = b"\x01" + build_batch(plain, producer_id=7, producer_epoch=1, base_sequence=5)
    seeds["log-append-time"] = b"\x01" + build_batch(plain, timestamp_type=1, compression=Compression.LZ4)
    seeds["transactional"] = b"\x01" + build_batch(plain, producer_id=7, producer_epoch=1, is_transactional=True)
    control = build_batch([(bytes.fromhex("00000000"), bytes.fromhex("000000000001"), [], TS)], is_control=True,
                          producer_id=7, producer_epoch=1, is_transactional=True)
    seeds["control-replicated"] = b"\x03" + control
    seeds["three-batches"] = b"\x01" + batch(1) + batch(2, Compression.GZIP, base_offset=1) + batch(1, base_offset=3)
    seeds["torn-tail"] = b"\x01" + batch(2) + batch(2)[:40]
    seeds["crc-as-is"] = b"\x00" + batch(2, Compression.ZSTD)
    # Mode bits 2-4 pick the codec of the direct decompress() call on the bytes after byte 61,
    # bits 5-6 its max_size (0: 1 MiB, 1: 64 KiB, 2: 1000 bytes, 3: 0).
    body = bytes(range(256)) * 16
    header = bytes(61)
    zeros = bytes(1 << 20)
    unsized = []  # zstd frames that do not declare their content size (streaming compression)
    for size in (1 << 20, 100_000):
        stream = cramjam.zstd.Compressor()
        stream.compress(bytes(size))
        unsized.append(bytes(stream.finish()))
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        seeds[f"direct-{codec.name.lower()}"] = bytes([codec << 2]) + header + compress(codec, body)
        # 1 MiB of zeros (gzip ~1 KiB, zstd ~50 bytes) against a 64 KiB limit: the bomb checks.
        bomb = unsized[0] if codec == Compression.ZSTD else compress(codec, zeros)
        if len(bomb) < 3000:
            seeds[f"direct-{codec.name.lower()}-bomb"] = bytes([codec << 2 | 1 << 5]) + header + bomb
    seeds["direct-lz4-blocks"] = bytes([Compression.LZ4 << 2 | 1 << 5]) + header + compress(Compression.LZ4, bytes(200_000))
    seeds["direct-snappy-chunks"] = bytes([Compression.SNAPPY << 2 | 1 << 5]) + header + compress(Compression.SNAPPY, bytes(70_000))
    seeds["direct-zstd-unsized"] = bytes([Compression.ZSTD << 2]) + header + unsized[1]
    gzip2 = compress(Compression.GZIP, b"first member ") + compress(Compression.GZIP, b"second member")
    seeds["direct-gzip-members"] = bytes([Compression.GZIP << 2 | 2 << 5]) + header + gzip2
    return seeds


def write(directory: str, seeds: dict[str, bytes]) -> int:
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    total = 0
    for name, data in sorted(seeds.items()):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
        total += len(data)
    return total


def main() -> None:
    for name, seeds in (("requests", request_seeds()), ("record_batches", record_batch_seeds())):
        total = write(os.path.join(CORPUS, name), seeds)
        print(f"fuzz/corpus/{name}: {len(seeds)} files, {total} bytes")


if __name__ == "__main__":
    main()
