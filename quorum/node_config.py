"""Plain settings the core needs; the server fills this from pydantic Settings."""
from __future__ import annotations

from dataclasses import dataclass, field

GIB = 1024 * 1024 * 1024
MIB = 1024 * 1024
DAY_MS = 24 * 3600 * 1000


class VoterSetMismatch(RuntimeError):
    """--voters names another metadata quorum than the data dir remembers."""


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: int = 1
    data_dir: str = "./data"
    # Where clients are told to connect (Metadata brokers list).
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    auto_create_topics: bool = True
    default_partitions: int = 1
    auto_create_topics_rate: float = 10.0   # tokens per second ...
    auto_create_topics_burst: int = 100     # ... into a bucket this big; one per auto-created topic
    auto_create_topics_max: int = 1_000     # no auto-creation once the cluster holds this many topics
    max_partitions: int = 10_000            # CreateTopics past this many partitions: POLICY_VIOLATION
    producer_id_expiration_ms: int = DAY_MS
    producer_id_expiration_check_interval_ms: int = 600_000
    request_timeout_cap_ms: int = 60_000    # a parked Produce/CreateTopics/DeleteTopics waits at most this
    segment_bytes: int = GIB
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    retention_check_interval_ms: int = 300_000
    # The log cleaner (cleanup.policy=compact; quorum/compaction.py), Kafka's log.cleaner.* names.
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000
    log_cleaner_io_max_bytes_per_second: float = float("inf")
    log_cleaner_dedupe_max_keys: int = 1_000_000
    message_max_bytes: int = 1_048_588
    # "acks_all": acks=-1 is answered after fsync, the rest is fsynced by group commit.
    # "always": every produce waits for fsync. "never": leave it to the OS (HW = LEO at once).
    fsync_policy: str = "acks_all"
    rejoin: bool = False  # no longer used: directory ids (storage/meta_properties.py) replace it
    flush_interval_ms: int = 100
    replica_fetch_response_max_bytes: int = 10 * MIB
    fetch_max_wait_cap_ms: int = 30_000
    max_incremental_fetch_session_cache_slots: int = 1000
    min_incremental_fetch_session_eviction_ms: int = 120_000
    max_incremental_fetch_session_partitions: int = 1_000  # a client's session (followers': no cap)
    snapshot_min_changed_records_ratio: float = 0.5
    snapshot_max_bytes_between: int = 20 * MIB
    snapshot_start_offset_lag_time_max_ms: int = 7 * DAY_MS
    # {node id: (host, port)} where this node reaches each voter; None: a one-node cluster.
    voters: dict | None = None
    replica_lag_time_max_ms: int = 30_000
    # What a leader sends the replicas a partition move adds, in bytes/s over all of them (Kafka's
    # leader.replication.throttled.rate); 0: unthrottled (quorum/move_throttle.py).
    reassignment_throttle_bytes_per_s: int = 0
    default_replication_factor: int | None = None
    broker_session_timeout_ms: int = 9_000
    # Consumer groups (quorum/groups/settings.py has the rest at Kafka's defaults).
    offsets_topic_num_partitions: int = 50
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    max_groups: int = 10_000
    group_max_size: int = 1_000
    # "name:password": the controller gives this user SCRAM credentials if it has none
    # (quorum/metadata/bootstrap_user.py). Never printed.
    bootstrap_user: str | None = field(default=None, repr=False)
    # Kafka's authorizer.class.name, super.users ("User:a;User:b") and
    # allow.everyone.if.no.acl.found (quorum/authorizer.py).
    authorizer: str = "none"
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def clustered(self) -> bool:
        return self.voters is not None

    @property
    def super_user_set(self) -> frozenset:
        return frozenset(p.strip() for p in self.super_users.split(";") if p.strip())
