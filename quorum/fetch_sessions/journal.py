"""Which partitions changed (high watermark, log start, leadership, or a leader append), in
order, for incremental fetches.

KIP-227 marks a session's partition dirty when it changes. Rather than every partition keeping
a table of the sessions that cache it (~160 B per cached partition), the node appends each
changed partition's key here, and a session reads what is new since its last fetch: work in
proportion to the changes, memory in proportion to the journal, not to sessions × partitions.
"""
from __future__ import annotations


class ChangeJournal:
    def __init__(self, capacity: int = 1 << 16) -> None:
        self._capacity = capacity
        self._keys: list = []
        self._base = 0  # the position of _keys[0]
        self.recording = False  # only while some session exists (the cache switches it)

    @property
    def end(self) -> int:
        return self._base + len(self._keys)

    def record(self, key) -> None:
        if not self.recording:
            return
        self._keys.append(key)
        if len(self._keys) > 2 * self._capacity:
            del self._keys[:self._capacity]
            self._base += self._capacity

    def since(self, position: int) -> list | None:
        """Keys recorded at or after `position`; None if they were trimmed (read everything)."""
        if position < self._base:
            return None
        return self._keys[position - self._base:]
