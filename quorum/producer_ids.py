"""Producer id allocation that never reuses an id across restarts (a single node; a cluster's
blocks come from the controller, quorum/metadata/producer_id_blocks.py).

Ids are handed out only below the durable end of the reserved range. The next block is reserved
in the background (`store.write_later`) once half of the current one is used, so a request
almost never waits for the disk; if it does (ids used faster than a write completes), the
reservation is written before the id is handed out (`store.write`, which first waits for any
write still queued, so a smaller reservation can never land after it).
"""
from __future__ import annotations

from typing import Callable, Protocol

BLOCK_SIZE = 1000


class ReservationStore(Protocol):
    def read(self) -> dict | None: ...

    def write(self, state: dict) -> None: ...

    def write_later(self, state: dict) -> Callable[[], bool]:
        """Queue the write; the returned function says whether it is durable yet."""


class ProducerIdAllocator:
    def __init__(self, store: ReservationStore) -> None:
        self._store = store
        state = store.read() or {}
        self._next = int(state.get("nextBlockStart", 0))
        self._reserving: tuple[int, Callable[[], bool]] | None = None  # (end, durable yet?)
        # The first block is reserved now (the server builds the node before it serves).
        self._durable_end = self._next + BLOCK_SIZE
        store.write({"nextBlockStart": self._durable_end})

    def allocate(self) -> int:
        if self._reserving is not None and self._reserving[1]():
            self._durable_end = max(self._durable_end, self._reserving[0])
            self._reserving = None
        if self._next >= self._durable_end:
            self._durable_end = self._next + BLOCK_SIZE
            self._reserving = None  # (write() waits for it, and reserves further)
            self._store.write({"nextBlockStart": self._durable_end})
        pid = self._next
        self._next += 1
        if self._reserving is None and self._durable_end - self._next < BLOCK_SIZE // 2:
            end = self._durable_end + BLOCK_SIZE
            self._reserving = (end, self._store.write_later({"nextBlockStart": end}))
        return pid
