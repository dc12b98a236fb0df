"""Producer id allocation that never reuses an id across restarts."""
from __future__ import annotations

BLOCK_SIZE = 1000


class ProducerIdAllocator:
    """Hands out ids from blocks; the end of the current block is persisted before use."""

    def __init__(self, store) -> None:
        self._store = store
        state = store.read() or {}
        self._next = int(state.get("nextBlockStart", 0))
        self._block_end = self._next

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            self._store.write({"nextBlockStart": self._block_end})
        pid = self._next
        self._next += 1
        return pid
