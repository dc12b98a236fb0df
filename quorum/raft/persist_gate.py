"""Persist, then send: a changed ElectionState is written (one write, one fsync, for every group
changed in a step) before anything that step sends goes out, so a vote is never answered, nor a
new role's request sent, before it is durable (KIP-595)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..outcomes import Completion
from .election_state import ElectionState, GroupKey
from .rpc import Send


@dataclass(slots=True)
class Outbox:
    persist: dict | None = None                    # GroupKey -> ElectionState (None: dropped), write first
    sends: list = field(default_factory=list)      # Send
    completions: list = field(default_factory=list)  # answers to parked quorum requests


class PersistGate:
    def __init__(self) -> None:
        self._dirty: dict[GroupKey, ElectionState] = {}   # changed since the last persist began
        self._persisting: dict | None = None              # handed to the shell, not yet durable
        self._pending = Outbox()                          # this step's sends and answers
        self._held = Outbox()                             # what waits for a persist

    def mark(self, key: GroupKey, state: ElectionState) -> None:
        self._dirty[key] = state

    def unmark(self, key: GroupKey) -> None:
        self._dirty.pop(key, None)

    def drop(self, key: GroupKey) -> None:
        """The group is deleted: its state leaves the store with the next write (a topic
        re-created under the name later starts from nothing, not from the old topic's vote)."""
        self._dirty[key] = None

    def send(self, send: Send) -> None:
        self._pending.sends.append(send)

    def complete(self, completion: Completion) -> None:
        self._pending.completions.append(completion)

    def pending(self) -> bool:
        return bool(self._dirty) or self._persisting is not None

    def take(self) -> Outbox:
        """What the shell does next: persist (holding back the sends), or send."""
        pending, self._pending = self._pending, Outbox()
        if self._persisting is not None or self._dirty:
            self._held.sends += pending.sends
            self._held.completions += pending.completions
            if self._persisting is None and self._dirty:
                self._persisting, self._dirty = self._dirty, {}
                return Outbox(persist=dict(self._persisting))
            return Outbox()
        return pending

    def on_persisted(self) -> None:
        self._persisting = None
        if not self._dirty:
            self._pending.sends[:0] = self._held.sends
            self._pending.completions[:0] = self._held.completions
            self._held = Outbox()
