"""`kraftd quorum describe`: a partition's Raft quorum as its leader sees it, in the manner of
Kafka's `kafka-metadata-quorum describe --status` / `--replication`, over DescribeQuorum (api 55).

    kraftd quorum describe --bootstrap-server HOST:PORT[,HOST:PORT…] [--partition TOPIC:P]
                           [--status | --replication] [--json]

Any node will do as a bootstrap server, as with `kafka-metadata-quorum`. Only the leader answers
DescribeQuorum, so the command asks the first bootstrap server that answers for Metadata, which
names the leader (for `__cluster_metadata:0` its ControllerId; for a topic partition the leader in
that topic's partition metadata) and the address the leader advertises (in the broker list), and
asks the leader there; through a TCP proxy or NAT, that advertised address must be reachable
from here. If the leadership moved meanwhile (NOT_LEADER_OR_FOLLOWER), the leader that answer
names is asked, for at most a few hops. It fails, naming what it tried, when no bootstrap server answers, when the
partition is unknown, when no leader is known, and when the leader cannot be reached at its
advertised address. The default partition is the metadata quorum's, `__cluster_metadata:0`.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from dataclasses import dataclass

from ..storage.meta_properties import uuid_to_kafka

METADATA_PARTITION = ("__cluster_metadata", 0)
PROG = "kraftd quorum describe"


def register(subparsers) -> None:
    p = subparsers.add_parser("quorum", help="describe a Raft quorum (kafka-metadata-quorum)",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="quorum_command", metavar="ACTION", required=True)
    d = sub.add_parser("describe", help="leader, epoch, high watermark and replica progress of a quorum")
    d.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    d.add_argument("--partition", type=_topic_partition, default=None, metavar="TOPIC:P",
                   help="the partition whose quorum to describe (default: __cluster_metadata:0)")
    what = d.add_mutually_exclusive_group()
    what.add_argument("--status", action="store_true", help="leader, epoch, lag summary, voters (the default)")
    what.add_argument("--replication", action="store_true", help="one row per replica")
    d.add_argument("--json", action="store_true", help="print the whole description as one JSON object")
    d.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="per connection (default 30)")
    d.set_defaults(run=run_describe)
    from .force_leader import register as register_force_leader
    register_force_leader(sub)
    # add-voter/remove-voter build on this module's describe(): loaded by name, as kraftd/cli.py
    # loads the commands (a static import both ways would be a cycle).
    importlib.import_module("kraftd.commands.quorum_voters").register(sub)


def _topic_partition(value: str) -> tuple[str, int]:
    topic, sep, index = value.rpartition(":")
    if not sep or not topic or not index.isdigit():
        raise argparse.ArgumentTypeError(f"expected TOPIC:PARTITION, got {value!r}")
    return topic, int(index)


# -- the description (no I/O) ------------------------------------------------------------------
@dataclass(frozen=True)
class ReplicaProgress:
    replica_id: int
    log_end_offset: int  # -1: unknown to the leader
    lag: int
    last_fetch_timestamp: int  # -1: unknown
    last_caught_up_timestamp: int  # -1: unknown
    directory_id: str = ""  # Kafka's text form; "" before DescribeQuorum v2 or when unknown


@dataclass(frozen=True)
class QuorumDescription:
    cluster_id: str | None
    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaProgress, ...]
    observers: tuple[ReplicaProgress, ...]

    @property
    def leader(self) -> ReplicaProgress | None:
        return next((v for v in self.voters if v.replica_id == self.leader_id), None)

    @property
    def max_follower_lag(self) -> int:
        return max((v.lag for v in self.voters), default=0)

    @property
    def max_follower_lag_time_ms(self) -> int:
        """How long ago the most lagging voter was last caught up, on the leader's clock (as
        kafka-metadata-quorum: 0 when no voter lags, -1 when a timestamp is unknown)."""
        leader = self.leader
        laggard = max(self.voters, key=lambda v: v.lag, default=None)
        if laggard is None or laggard.lag == 0:
            return 0
        if leader is None or leader.last_caught_up_timestamp < 0 or laggard.last_caught_up_timestamp < 0:
            return -1
        return leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp


def description_from(partition_data, topic: str, cluster_id: str | None) -> QuorumDescription:
    """A successful DescribeQuorumResponse.PartitionData -> QuorumDescription.

    Lag is the leader's log end offset minus the replica's. A replica whose log end the leader
    does not know yet (-1) is counted as holding nothing: its lag is the leader's whole log.
    """
    p = partition_data
    leader_end = next((r.log_end_offset for r in p.current_voters if r.replica_id == p.leader_id),
                      max((r.log_end_offset for r in (*p.current_voters, *p.observers)), default=0))

    def progress(r) -> ReplicaProgress:
        lag = 0 if r.replica_id == p.leader_id else max(0, leader_end - max(r.log_end_offset, 0))
        directory = getattr(r, "replica_directory_id", None)
        return ReplicaProgress(r.replica_id, r.log_end_offset, lag, r.last_fetch_timestamp,
                               r.last_caught_up_timestamp,
                               uuid_to_kafka(directory) if directory is not None and directory.int else "")

    return QuorumDescription(cluster_id, topic, p.partition_index, p.leader_id, p.leader_epoch, p.high_watermark,
                             tuple(map(progress, p.current_voters)), tuple(map(progress, p.observers)))


def format_status(d: QuorumDescription) -> str:
    rows = [("ClusterId", d.cluster_id), ("LeaderId", d.leader_id), ("LeaderEpoch", d.leader_epoch),
            ("HighWatermark", d.high_watermark), ("MaxFollowerLag", d.max_follower_lag),
            ("MaxFollowerLagTimeMs", d.max_follower_lag_time_ms),
            ("CurrentVoters", _id_list(d.voters)), ("CurrentObservers", _id_list(d.observers))]
    return "".join(f"{name + ':':<24}{value}\n" for name, value in rows)


def _id_list(replicas) -> str:
    return "[" + ",".join(str(r.replica_id) for r in replicas) + "]"


def format_replication(d: QuorumDescription) -> str:
    """One row per replica: the leader, the other voters, then the observers (Kafka's order)."""
    ordered = ([(r, "Leader") for r in d.voters if r.replica_id == d.leader_id]
               + [(r, "Follower") for r in d.voters if r.replica_id != d.leader_id]
               + [(r, "Observer") for r in d.observers])
    table = [("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
              "Status")]
    table += [(str(r.replica_id), r.directory_id or "-", str(r.log_end_offset), str(r.lag),
               str(r.last_fetch_timestamp), str(r.last_caught_up_timestamp), status) for r, status in ordered]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() + "\n" for row in table)


def to_json(d: QuorumDescription) -> dict:
    def replica(r: ReplicaProgress) -> dict:
        return {"replicaId": r.replica_id, "directoryId": r.directory_id or None, "logEndOffset": r.log_end_offset,
                "lag": r.lag,
                "lastFetchTimestamp": r.last_fetch_timestamp, "lastCaughtUpTimestamp": r.last_caught_up_timestamp}

    return {"clusterId": d.cluster_id, "topic": d.topic, "partition": d.partition, "leaderId": d.leader_id,
            "leaderEpoch": d.leader_epoch, "highWatermark": d.high_watermark,
            "voters": [replica(r) for r in d.voters], "observers": [replica(r) for r in d.observers]}


# -- asking the servers ------------------------------------------------------------------------
MAX_HOPS = 3  # NOT_LEADER_OR_FOLLOWER answers followed to the leader they name, after the first ask


class DescribeError(Exception):
    """Why no server described the quorum; str() is the message for the user."""


@dataclass(frozen=True)
class _Refusal:
    """A server that answered but does not lead the partition (or does not know it)."""
    server: str
    error: str  # the Kafka error name
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True)
class _Route:
    """Where one bootstrap server's Metadata says to ask."""
    server: str  # the bootstrap server that answered
    cluster_id: str | None
    brokers: dict[int, str]  # node id -> its advertised "host:port"
    leader_id: int  # -1: no leader known
    error: str | None = None  # a Kafka error name: the topic or partition is unknown, ...


def describe(bootstrap: str, topic: str, partition: int, *, timeout: float = 30.0) -> QuorumDescription:
    """Ask the leader of the partition, found through any bootstrap server's Metadata.

    The first bootstrap server that answers Metadata names the leader (the metadata partition's
    is Metadata's ControllerId; a topic partition's is in that topic's partition metadata) and
    its advertised address (the broker list). The leader is asked DescribeQuorum; if it no longer
    leads, the leader its NOT_LEADER_OR_FOLLOWER answer names is asked, at most MAX_HOPS times."""
    from kraftd.protocol.errors import KafkaProtocolError

    servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
    if not servers:
        raise DescribeError("no bootstrap server given")
    where = f"{topic}:{partition}"
    route = _route(servers, topic, partition, timeout)
    if route.error == "UNKNOWN_TOPIC_OR_PARTITION":
        raise DescribeError(f"UNKNOWN_TOPIC_OR_PARTITION: {route.server} knows no partition {where}")
    if route.error is not None:
        raise DescribeError(f"{route.error} from {route.server} for {where}")
    leader_id, source = route.leader_id, f"{route.server}'s Metadata"
    asked: list[str] = []
    for _ in range(1 + MAX_HOPS):
        if leader_id < 0:
            raise DescribeError(f"LEADER_NOT_AVAILABLE: no leader of {where} is known (according to {source}); "
                                "an election may be under way: try again")
        address = route.brokers.get(leader_id)
        if address is None:  # perhaps registered since that Metadata was answered: ask again
            route = _fresh_route(route, topic, partition, timeout)
            address = route.brokers.get(leader_id)
        if address is None:
            raise DescribeError(f"the leader of {where}, node {leader_id} (according to {source}), is not among "
                                f"the brokers {route.server}'s Metadata lists: its address is unknown")
        try:
            answer = _describe_at(address, topic, partition, timeout, route.cluster_id)
        except OSError as e:  # refused, timed out, reset, closed by the server
            raise DescribeError(f"{where}: cannot connect to the leader, node {leader_id}, at {address}: "
                                f"{e.strerror or e} (its advertised address; the leader according to {source})"
                                ) from None
        except KafkaProtocolError as e:
            raise DescribeError(f"{address} sent a response that does not decode: {e}") from None
        if isinstance(answer, QuorumDescription):
            return answer
        asked.append(f"node {leader_id} at {address}")
        if answer.error != "NOT_LEADER_OR_FOLLOWER":
            raise DescribeError(f"{answer.error}: node {leader_id} at {address} has no partition {where}")
        # Leadership moved since the Metadata was answered: the leader this node knows.
        source = f"node {leader_id}'s NOT_LEADER_OR_FOLLOWER answer, at epoch {answer.leader_epoch}"
        leader_id = answer.leader_id if answer.leader_id != leader_id else -1  # (itself: not settled yet)
    raise DescribeError(f"NOT_LEADER_OR_FOLLOWER: the leadership of {where} kept moving: asked "
                        + ", then ".join(asked) + "; try again")


def _route(servers: list[str], topic: str, partition: int, timeout: float) -> _Route:
    """Metadata from the first bootstrap server that answers."""
    from kraftd.protocol.errors import KafkaProtocolError

    unreachable: list[str] = []
    for server in servers:
        try:
            return _metadata_at(server, topic, partition, timeout)
        except OSError as e:
            unreachable.append(f"{server}: {e.strerror or e}")
        except KafkaProtocolError as e:
            raise DescribeError(f"{server} sent a response that does not decode: {e}") from None
    raise DescribeError("cannot connect to " + "; ".join(unreachable))


def _fresh_route(route: _Route, topic: str, partition: int, timeout: float) -> _Route:
    """The same server's Metadata again (it may list a broker that registered since); the old
    route if that fails."""
    from kraftd.protocol.errors import KafkaProtocolError

    try:
        return _metadata_at(route.server, topic, partition, timeout)
    except (OSError, KafkaProtocolError, DescribeError):
        return route


def _error_name(code: int) -> str:
    from kraftd.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


def _metadata_at(server: str, topic: str, partition: int, timeout: float) -> _Route:
    """One server's Metadata: the brokers' advertised addresses and the partition's leader.
    Raises OSError when the server cannot be reached."""
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m
    from kraftd.protocol.errors import ErrorCode

    client = WireClient(server, client_id="kraftd-quorum-describe", timeout=timeout)
    try:
        offered = {k.api_key: k.max_version for k in client.request(api.API_VERSIONS, 0,
                                                                    m.ApiVersionsRequest()).api_keys}
        if offered.get(api.METADATA, -1) < 1:  # v1 is the first that names the controller
            raise DescribeError(f"{server} does not serve Metadata v1 or later (api key {api.METADATA})")
        version = min(offered[api.METADATA], api.API_BY_KEY[api.METADATA].max_version)
        metadata = (topic, partition) == METADATA_PARTITION
        response = client.request(api.METADATA, version, m.MetadataRequest(
            topics=[] if metadata else [m.MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    finally:
        client.close()
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
    cluster_id = getattr(response, "cluster_id", None)
    if metadata:
        return _Route(server, cluster_id, brokers, response.controller_id)
    found = [t for t in response.topics if t.name == topic]
    if found and found[0].error_code:
        return _Route(server, cluster_id, brokers, -1, _error_name(found[0].error_code))
    parts = [p for t in found for p in t.partitions if p.partition_index == partition]
    if not parts:
        return _Route(server, cluster_id, brokers, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.name)
    return _Route(server, cluster_id, brokers, parts[0].leader_id)


def _describe_at(server: str, topic: str, partition: int, timeout: float, cluster_id: str | None = None):
    """QuorumDescription, or a _Refusal (not the leader / unknown partition). Raises DescribeError
    for any other error code, OSError when the server cannot be reached."""
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m
    from kraftd.protocol.errors import ErrorCode

    client = WireClient(server, client_id="kraftd-quorum-describe", timeout=timeout)
    try:
        offered = client.request(api.API_VERSIONS, 0, m.ApiVersionsRequest()).api_keys
        versions = {k.api_key: k.max_version for k in offered}
        if api.DESCRIBE_QUORUM not in versions:
            raise DescribeError(f"{server} does not serve DescribeQuorum (api key {api.DESCRIBE_QUORUM})")
        version = min(versions[api.DESCRIBE_QUORUM], api.API_BY_KEY[api.DESCRIBE_QUORUM].max_version)
        response = client.request(api.DESCRIBE_QUORUM, version, m.DescribeQuorumRequest(topics=[
            m.DescribeQuorumRequest.TopicData(topic_name=topic, partitions=[
                m.DescribeQuorumRequest.PartitionData(partition_index=partition)])]))
    finally:
        client.close()
    if response.error_code:
        message = getattr(response, "error_message", None)
        raise DescribeError(f"{_error_name(response.error_code)} from {server}" + (f": {message}" if message else ""))
    found = [p for t in response.topics if t.topic_name == topic for p in t.partitions
             if p.partition_index == partition]
    if not found:
        return _Refusal(server, "UNKNOWN_TOPIC_OR_PARTITION", -1, -1)
    p = found[0]
    if p.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return _Refusal(server, ErrorCode(p.error_code).name, p.leader_id, p.leader_epoch)
    if p.error_code:
        message = getattr(p, "error_message", None)
        raise DescribeError(f"{_error_name(p.error_code)} from {server} for {topic}:{partition}"
                            + (f": {message}" if message else ""))
    return description_from(p, topic, cluster_id)


def run_describe(args: argparse.Namespace) -> int:
    topic, partition = args.partition or METADATA_PARTITION
    try:
        d = describe(args.bootstrap_server, topic, partition, timeout=args.timeout)
    except DescribeError as e:
        message = str(e)
        if args.partition is None and message.startswith("UNKNOWN_TOPIC_OR_PARTITION"):
            message += ("; there is no metadata quorum (a single-node server has none): "
                        "name a partition with --partition TOPIC:P")
        print(f"{PROG}: {message}", file=sys.stderr)
        return 1
    if args.json:
        out = json.dumps(to_json(d), indent=2) + "\n"
    elif args.replication:
        out = format_replication(d)
    else:
        out = format_status(d)
    sys.stdout.write(out)
    return 0
