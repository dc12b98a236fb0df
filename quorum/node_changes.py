"""What the node's calls changed that the shell must act on: partitions with appends to flush,
and parked requests that are now complete. Also the time of the call being handled (a topic
created in the middle of a request needs it)."""
from __future__ import annotations

from .outcomes import Completion
from .partition import Partition, PartitionKey
from .purgatory import Purgatory


class NodeChanges:
    def __init__(self, purgatory: Purgatory) -> None:
        self._purgatory = purgatory
        self.dirty: dict[PartitionKey, Partition] = {}
        self._completions: list[Completion] = []
        self.now_ms = 0

    def appended(self, partition: Partition) -> None:
        self.dirty[partition.key] = partition

    def wake(self, keys, now_ms: int | None = None) -> None:
        """Parked requests watching `keys` are tried again (at `now_ms`, or the call's time)."""
        self._completions += self._purgatory.notify(keys, self.now_ms if now_ms is None else now_ms)

    def add_completions(self, done: list[Completion]) -> None:
        self._completions += done

    def take_completions(self) -> list[Completion]:
        done, self._completions = self._completions, []
        return done

    def needing_flush(self) -> list[Partition]:
        for key in [k for k, p in self.dirty.items() if not p.needs_flush()]:
            del self.dirty[key]
        return list(self.dirty.values())
