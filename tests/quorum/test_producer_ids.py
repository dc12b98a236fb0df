"""Producer ids: never reused across restarts, reserved ahead so a request rarely writes."""
from __future__ import annotations

from kraftd.quorum.producer_ids import BLOCK_SIZE, ProducerIdAllocator


class SlowStore:
    """Background writes complete only when the test says so."""

    def __init__(self) -> None:
        self.durable: dict | None = None
        self.queued: list[dict] = []
        self.sync_writes = 0

    def read(self):
        return self.durable

    def write(self, state):
        self.complete()
        self.durable = dict(state)
        self.sync_writes += 1

    def write_later(self, state):
        self.queued.append(dict(state))
        target = dict(state)
        return lambda: self.durable == target or (self.durable or {}).get("nextBlockStart", 0) >= target["nextBlockStart"]

    def complete(self):
        for state in self.queued:
            self.durable = state
        self.queued.clear()


def test_ids_are_handed_out_only_below_the_durable_reservation():
    store = SlowStore()
    allocator = ProducerIdAllocator(store)
    assert store.durable == {"nextBlockStart": BLOCK_SIZE} and store.sync_writes == 1
    ids = [allocator.allocate() for _ in range(BLOCK_SIZE // 2 + 1)]
    assert ids == list(range(BLOCK_SIZE // 2 + 1))
    assert store.queued == [{"nextBlockStart": 2 * BLOCK_SIZE}] and store.sync_writes == 1
    store.complete()
    more = [allocator.allocate() for _ in range(BLOCK_SIZE)]  # crosses into the reserved block
    assert more[-1] == BLOCK_SIZE * 3 // 2 and store.sync_writes == 1
    assert all(pid < store.durable["nextBlockStart"] for pid in ids + more)


def test_a_reservation_that_has_not_landed_is_waited_for():
    store = SlowStore()
    allocator = ProducerIdAllocator(store)
    for _ in range(BLOCK_SIZE):
        allocator.allocate()  # the background write never completes meanwhile
    pid = allocator.allocate()
    assert pid == BLOCK_SIZE and store.sync_writes == 2
    assert store.durable["nextBlockStart"] > pid


def test_a_restart_continues_past_everything_reserved():
    store = SlowStore()
    allocator = ProducerIdAllocator(store)
    handed = [allocator.allocate() for _ in range(700)]
    store.complete()
    again = ProducerIdAllocator(store)
    assert again.allocate() > max(handed)
