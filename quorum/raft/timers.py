"""The groups' timers: one heap of (deadline, sequence, group key). An entry counts only while
its group still waits for that deadline (`group.timer_ms`); re-arming leaves the old entry to be
skipped, which is cheaper than removing it."""
from __future__ import annotations

import heapq


class GroupTimers:
    def __init__(self, groups: dict) -> None:
        self.groups = groups  # the driver's table, shared
        self._heap: list = []
        self._seq = 0

    def schedule(self, key, deadline_ms: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def fire(self, now_ms: int) -> None:
        """Poll every group whose deadline has come, including deadlines armed meanwhile."""
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            deadline, _, key = heapq.heappop(heap)
            group = self.groups.get(key)
            if group is not None and group.timer_ms == deadline:
                group.poll(now_ms)

    def next_ms(self) -> int | None:
        """The earliest live deadline (dropping dead entries on the way)."""
        heap = self._heap
        while heap:
            deadline, _, key = heap[0]
            group = self.groups.get(key)
            if group is not None and group.timer_ms == deadline:
                return deadline
            heapq.heappop(heap)
        return None
