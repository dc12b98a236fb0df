"""Per-topic configuration: the topic's own settings over the node's defaults."""
from __future__ import annotations

from dataclasses import dataclass

from .node_config import NodeConfig

CLEANUP_POLICIES = ("delete", "snapshot", "compact", "compact,delete")
LONG_MAX = 2**63 - 1
# Kafka's topic-level defaults for the log cleaner and for rolling segments by time.
MIN_CLEANABLE_DIRTY_RATIO = 0.5
DELETE_RETENTION_MS = 24 * 3600 * 1000
SEGMENT_MS = 7 * 24 * 3600 * 1000
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


class InvalidTopicConfig(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TopicConfig:
    cleanup_policy: str
    retention_ms: int
    retention_bytes: int
    segment_bytes: int
    message_timestamp_type: str
    max_message_bytes: int
    snapshot_min_changed_records_ratio: float
    snapshot_max_bytes_between: int
    snapshot_start_offset_lag_time_max_ms: int
    min_cleanable_dirty_ratio: float = MIN_CLEANABLE_DIRTY_RATIO
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = DELETE_RETENTION_MS
    segment_ms: int = SEGMENT_MS

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def is_snapshot_policy(self) -> bool:
        return self.cleanup_policy == "snapshot"

    @property
    def is_compacted(self) -> bool:
        """cleanup.policy=compact or compact,delete: the log cleaner keeps the latest record per key."""
        return self.cleanup_policy.startswith("compact")

    @property
    def deletes(self) -> bool:
        """Retention (retention.ms, retention.bytes) applies: delete or compact,delete."""
        return self.cleanup_policy.endswith("delete")

    @classmethod
    def defaults(cls, node: NodeConfig) -> "TopicConfig":
        return cls(
            cleanup_policy="delete",
            retention_ms=node.retention_ms,
            retention_bytes=node.retention_bytes,
            segment_bytes=node.segment_bytes,
            message_timestamp_type="CreateTime",
            max_message_bytes=node.message_max_bytes,
            snapshot_min_changed_records_ratio=node.snapshot_min_changed_records_ratio,
            snapshot_max_bytes_between=node.snapshot_max_bytes_between,
            snapshot_start_offset_lag_time_max_ms=node.snapshot_start_offset_lag_time_max_ms,
        )

    @classmethod
    def resolve(cls, configs: dict[str, str | None], node: NodeConfig) -> "TopicConfig":
        """Apply Kafka-named topic configs over node defaults; raise InvalidTopicConfig."""
        values = {f: getattr(cls.defaults(node), f) for f in cls.__dataclass_fields__}
        for key, raw in configs.items():
            spec = _KNOWN.get(key)
            if spec is None:
                raise InvalidTopicConfig(f"Unknown topic config name: {key}")
            if raw is None:
                continue
            attr, parse = spec
            try:
                values[attr] = parse(raw)
            except ValueError as exc:
                raise InvalidTopicConfig(f"Invalid value {raw!r} for configuration {key}: {exc}") from None
        return cls(**values)

    def to_kafka_configs(self) -> dict[str, str]:
        return {key: _format(getattr(self, attr)) for key, (attr, _) in _KNOWN.items()}

    @staticmethod
    def names() -> tuple[str, ...]:
        """Every topic config kraftd knows, by its Kafka name."""
        return tuple(_KNOWN)


# Kafka's ConfigType of each (DescribeConfigs v3+): BOOLEAN 1, STRING 2, INT 3, LONG 5, DOUBLE 6, LIST 7.
CONFIG_TYPES = {
    "cleanup.policy": 7, "retention.ms": 5, "retention.bytes": 5, "segment.bytes": 3,
    "message.timestamp.type": 2, "max.message.bytes": 3, "metadata.snapshot.min.changed_records.ratio": 6,
    "metadata.log.max.record.bytes.between.snapshots": 5, "metadata.start.offset.lag.time.max.ms": 5,
    "min.cleanable.dirty.ratio": 6, "min.compaction.lag.ms": 5, "max.compaction.lag.ms": 5,
    "delete.retention.ms": 5, "segment.ms": 5,
}
LIST_CONFIGS = frozenset(k for k, t in CONFIG_TYPES.items() if t == 7)


def policy_change_problem(old: "TopicConfig", new: "TopicConfig") -> str | None:
    """A topic's cleanup.policy may move between delete, compact and compact,delete, but never
    to or from snapshot (a KIP-630 topic's log start and state machine are its own)."""
    if old.is_snapshot_policy != new.is_snapshot_policy:
        return "cleanup.policy cannot change to or from snapshot"
    return None


def _format(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _choice(options):
    def parse(raw: str) -> str:
        if raw not in options:
            raise ValueError(f"must be one of {', '.join(options)}")
        return raw
    return parse


def _int_at_least(minimum: int):
    def parse(raw: str) -> int:
        value = int(raw)
        if value < minimum:
            raise ValueError(f"must be at least {minimum}")
        return value
    return parse


def _ratio(raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0 and 1")
    return value


def _cleanup_policy(raw: str) -> str:
    """Kafka's list form: "compact,delete" in either order (spaces allowed) is both."""
    parts = sorted({p.strip() for p in raw.lower().split(",")})
    if parts == ["compact", "delete"]:
        return "compact,delete"
    if len(parts) != 1 or parts[0] not in CLEANUP_POLICIES:
        raise ValueError(f"must be one of {', '.join(CLEANUP_POLICIES)}")
    if parts[0] == "snapshot" and raw.strip().lower() != "snapshot":
        raise ValueError("snapshot cannot be combined with another policy")
    return parts[0]


_KNOWN = {
    "cleanup.policy": ("cleanup_policy", _cleanup_policy),
    "retention.ms": ("retention_ms", _int_at_least(-1)),
    "retention.bytes": ("retention_bytes", _int_at_least(-1)),
    "segment.bytes": ("segment_bytes", _int_at_least(14)),
    "message.timestamp.type": ("message_timestamp_type", _choice(TIMESTAMP_TYPES)),
    "max.message.bytes": ("max_message_bytes", _int_at_least(0)),
    "metadata.snapshot.min.changed_records.ratio": ("snapshot_min_changed_records_ratio", _ratio),
    "metadata.log.max.record.bytes.between.snapshots": ("snapshot_max_bytes_between", _int_at_least(1)),
    "metadata.start.offset.lag.time.max.ms": ("snapshot_start_offset_lag_time_max_ms", _int_at_least(0)),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _ratio),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _int_at_least(0)),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _int_at_least(1)),
    "delete.retention.ms": ("delete_retention_ms", _int_at_least(0)),
    "segment.ms": ("segment_ms", _int_at_least(1)),
}
