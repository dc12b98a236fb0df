"""Preferred leaders (as Kafka's automatic preferred-leader election): a leader that is not its
partition's first replica hands over once that replica is live and caught up."""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)
BALANCE_INTERVAL_MS = 1000
HANDOVER_BACKOFF_MS = 3_000


class LeaderBalancer:
    def __init__(self, node_id: int, replication, plane) -> None:
        self._node_id = node_id
        self._replication = replication
        self._plane = plane
        self._handover_after: dict = {}  # group key -> no hand-over before (ms)
        self._handovers: dict = {}       # group key -> preferred replica, waiting for it to be at the log end

    @property
    def waiting(self) -> bool:
        return bool(self._handovers)

    def balance(self, now_ms: int) -> None:
        image = self._plane.image
        self._handovers.clear()
        for group in list(self._replication.groups.values()):
            partition = group.partition
            if not group.is_leader or not partition.replicas or partition is self._plane.partition:
                continue
            topic = image.topics.get(partition.topic_id)
            info = topic.partitions.get(partition.index) if topic is not None else None
            preferred = info.replicas[0] if info is not None and info.replicas else partition.replicas[0]
            if (preferred == self._node_id or not image.is_live(preferred)
                    or now_ms < self._handover_after.get(group.key, 0)):
                continue
            progress = group.role.progress.by_voter.get(preferred)
            if (progress is None or now_ms - progress.last_fetch_ms > BALANCE_INTERVAL_MS
                    or partition.high_watermark <= group.role.epoch_start_offset):
                continue
            self._handovers[group.key] = preferred
        self.hand_over_caught_up(now_ms)

    def hand_over_caught_up(self, now_ms: int) -> None:
        """Resign where the preferred replica has fetched up to the log end, so that it wins the
        election its turn starts. Checked after every request, not only at the balance interval:
        under steady writes the replica is at the log end only between its fetch and the next
        append, which a check once a second hardly ever saw (a hand-over took 19 s on real
        processes, and some never happened)."""
        for key, preferred in list(self._handovers.items()):
            group = self._replication.groups.get(key)
            if group is None or not group.is_leader:
                del self._handovers[key]
                continue
            progress = group.role.progress.by_voter.get(preferred)
            if progress is None or progress.end_offset < group.partition.log.log_end_offset:
                continue
            del self._handovers[key]
            self._handover_after[key] = now_ms + HANDOVER_BACKOFF_MS
            log.info("%s-%d: handing leadership to preferred replica %d", *key, preferred)
            group.resign(now_ms, [preferred] + [v for v in group.role.progress.successors() if v != preferred])
