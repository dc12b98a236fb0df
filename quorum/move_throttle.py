"""The replication throttle of partition moves (Kafka's leader.replication.throttled.rate for the
replicas a reassignment adds): what this node, as leader, sends to replicas that are joining a
partition's group (observers of a data partition) is held to `reassignment_throttle_bytes_per_s`
over all of them, so a move cannot take the disk and network the clients use. Voters' fetches,
the metadata log and consumers are never throttled.

A token bucket in virtual time (sans-IO: `now_ms` comes from the fetch): a read may take the
bucket below zero by one batch, the next waits until it refills (at most a second's worth is
saved up). 0 turns it off.
"""
from __future__ import annotations

from .metadata.names import METADATA_TOPIC


class MoveThrottle:
    def __init__(self, bytes_per_s: int) -> None:
        self.rate = bytes_per_s
        self._tokens = float(bytes_per_s)
        self._at_ms = 0
        self.sent_bytes = 0       # to joining replicas (kraftd_reassignment_bytes_total)
        self.throttled = 0        # reads held back (kraftd_reassignment_throttled_total)

    def applies(self, partition, replica_id: int) -> bool:
        """A joining replica's fetch of a data partition (the mover's, not a voter's)."""
        group = partition.raft
        return group is not None and partition.topic != METADATA_TOPIC and group.voter_set.get(replica_id) is None

    def budget(self, now_ms: int, wanted: int) -> int:
        """How many bytes a joining replica may be sent now (0: none until the bucket refills)."""
        if self.rate <= 0:
            return wanted
        elapsed = max(0, now_ms - self._at_ms)
        self._at_ms = max(self._at_ms, now_ms)
        self._tokens = min(float(self.rate), self._tokens + self.rate * elapsed / 1000.0)
        if self._tokens <= 0:
            self.throttled += 1
            return 0
        return max(1, min(wanted, int(self._tokens)))

    def spend(self, size: int) -> None:
        self.sent_bytes += size
        if self.rate > 0:
            self._tokens -= size
