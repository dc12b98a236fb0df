"""What every RPC handler may use: the node's identity, topics, epoch and parked requests."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from ...protocol.errors import ErrorCode

from ..authorizer import AllowEveryone
from ..fetch_sessions import FetchSessionCache
from ..limits import AutoCreateLimiter, Refusals
from ..move_throttle import MoveThrottle
from ..node_config import NodeConfig
from ..purgatory import Purgatory
from ..topics import Topic, TopicRegistry
from ..wall_clock import WallClock


LATENCY_SAMPLES_KEPT = 10_000  # between two /metrics scrapes; older samples are dropped


@dataclass(slots=True, eq=False)
class HandlerContext:
    config: NodeConfig
    cluster_id: str
    topics: TopicRegistry
    purgatory: Purgatory
    allocate_producer_id: Callable[[], int]
    # Creates a topic and gives each partition its epoch start (LeaderChange batch).
    create_topic: Callable[..., Topic]  # Hosting.create_topic
    fetch_sessions: FetchSessionCache
    replication: object = None  # quorum.raft.replication.Replication
    plane: object = None        # quorum.metadata.plane.MetadataPlane in a cluster, else None
    delete_topic: Callable[[str], None] | None = None
    # acks=all produce latencies (append to HW), drained by /metrics.
    commit_latencies: deque = field(default_factory=lambda: deque(maxlen=LATENCY_SAMPLES_KEPT))
    # Partitions appended to while handling; the node hands them to the flusher.
    appended: dict = field(default_factory=dict)
    # The group coordinator (quorum.groups.coordinator.GroupCoordinator), made on first use.
    groups: object = None
    clock: Callable[[], float] | None = None  # monotonic seconds, only to measure load times
    # What the caps refused (kraftd_refused_total{what}) and the auto-creation limiter.
    refusals: Refusals = field(default_factory=Refusals)
    auto_creates: AutoCreateLimiter | None = None
    wall: WallClock = field(default_factory=WallClock)  # timestamps; timers use now_ms
    # Who may do what (quorum/authorizer.py): AclAuthorizer with authorizer = "acl".
    authorizer: object = field(default_factory=AllowEveryone)
    # What this node sends replicas a partition move adds (reassignment_throttle_bytes_per_s).
    move_throttle: MoveThrottle | None = None

    def __post_init__(self) -> None:
        if self.move_throttle is None:
            self.move_throttle = MoveThrottle(self.config.reassignment_throttle_bytes_per_s)
        if self.auto_creates is None:
            c = self.config
            self.auto_creates = AutoCreateLimiter(c.auto_create_topics_rate, c.auto_create_topics_burst,
                                                  c.auto_create_topics_max, self.refusals)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    def partition_count(self) -> int:
        """Partitions in the cluster (the metadata image), or on this lone node."""
        plane = self.plane
        if plane is not None:
            return sum(len(t.partitions) for t in plane.image.topics.values())
        return sum(len(t.partitions) for t in self.topics) + self.topics.pending_partition_count()

    def admit_auto_create(self, name: str, now_ms: int) -> ErrorCode:
        """May a client's Metadata or Produce auto-create topic `name` now? NONE, or
        UNKNOWN_TOPIC_OR_PARTITION (auto_create_topics_rate/_burst/_max, max_partitions).
        A topic the cluster has, or is already creating for an earlier request, costs nothing."""
        plane = self.plane
        if plane is not None and (plane.image.topic(name) is not None or plane.auto_create_pending(name, now_ms)):
            return ErrorCode.NONE
        if self.topics.pending(name) is not None:
            return ErrorCode.NONE
        topics = len(plane.image.topics) if plane is not None else len(self.topics)
        return self.auto_creates.admit(now_ms, topics, self.partition_count, self.config.max_partitions,
                                       self.config.default_partitions)


def leader_epoch_error(requested: int, ours: int) -> ErrorCode:
    """KIP-320: -1 skips the check; older → FENCED_LEADER_EPOCH; newer → UNKNOWN_LEADER_EPOCH."""
    if requested == -1 or requested == ours:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if requested < ours else ErrorCode.UNKNOWN_LEADER_EPOCH


def missing_partition_error(ctx: HandlerContext, topic: str, index: int) -> ErrorCode:
    """A partition this node holds no replica of: NOT_LEADER_OR_FOLLOWER if the cluster has it
    (the client refreshes its metadata and goes to the leader), else UNKNOWN_TOPIC_OR_PARTITION."""
    plane = ctx.plane
    if plane is not None:
        info = plane.image.topic(topic)
        if info is not None and index in info.partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def leadership_error(partition, current_leader_epoch: int = -1) -> ErrorCode:
    """The one check every client-facing partition API makes before it reads or changes a
    partition (Kafka's Partition.getLocalLog with requireLeader): the KIP-320 epoch check first,
    then leadership. A follower's answer would be stale (ListOffsets, OffsetForLeaderEpoch: a
    consumer validating against it would see a truncation that never happened) or wrong (a
    DeleteRecords or Produce the leader never made)."""
    epoch_error = leader_epoch_error(current_leader_epoch, partition.leader_epoch)
    if epoch_error:
        return epoch_error
    return ErrorCode.NONE if partition.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER


def find_partition(ctx: HandlerContext, topic: str, index: int, current_leader_epoch: int = -1, *,
                   require_leader: bool = True):
    """(partition or None, error): unknown partition, else `leadership_error` (or only the epoch
    check where a follower may answer: ListOffsets from a debugging consumer, replica id -2).
    The partition comes back with its error too, so an answer can say who leads."""
    partition = ctx.topics.partition(topic, index)
    if partition is None:
        return None, missing_partition_error(ctx, topic, index)
    if not require_leader:
        return partition, leader_epoch_error(current_leader_epoch, partition.leader_epoch)
    return partition, leadership_error(partition, current_leader_epoch)
