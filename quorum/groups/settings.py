"""The coordinator's settings, read from the node config (Kafka's names, snake_case)."""
from __future__ import annotations

from dataclasses import dataclass

MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class GroupSettings:
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = -1      # -1: the cluster default
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 1_000                     # Kafka's group.max.size (unbounded there)
    max_groups: int = 10_000                        # groups one coordinator holds
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    offset_commit_timeout_ms: int = 5000

    @classmethod
    def from_node_config(cls, config) -> "GroupSettings":
        """Fields the node config has (a NodeConfig, or its `extra` dict) override the defaults."""
        extra = getattr(config, "extra", None) or {}
        values = {}
        for name in cls.__dataclass_fields__:
            if hasattr(config, name):
                values[name] = getattr(config, name)
            elif name in extra:
                values[name] = extra[name]
        return cls(**values)

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * MINUTE_MS
