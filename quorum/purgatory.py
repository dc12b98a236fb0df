"""Parked requests (long-poll fetches, acks=-1 produces) waiting on partitions or a deadline."""
from __future__ import annotations

import heapq
from typing import Any, Hashable, Iterable, Protocol

from .outcomes import Completion


class DelayedOperation(Protocol):
    deadline_ms: int

    def watch_keys(self) -> Iterable[Hashable]: ...

    def try_complete(self, now_ms: int) -> Any | None:
        """The response if the operation can complete now, else None."""

    def expire(self, now_ms: int) -> Any:
        """The response to send when the deadline passes."""


class Purgatory:
    def __init__(self) -> None:
        self._next_token = 1
        self._ops: dict[int, DelayedOperation] = {}
        self._watchers: dict[Hashable, set[int]] = {}
        self._deadlines: list[tuple[int, int]] = []
        self._notifying = False
        self._queued: list = []

    def __len__(self) -> int:
        return len(self._ops)

    def reserve_token(self) -> int:
        """A token for an answer completed elsewhere (quorum RPCs held until a persist)."""
        token = self._next_token
        self._next_token += 1
        return token

    def watched(self, key: Hashable) -> bool:
        return key in self._watchers

    def park(self, op: DelayedOperation) -> int:
        token = self._next_token
        self._next_token += 1
        self._ops[token] = op
        for key in op.watch_keys():
            self._watchers.setdefault(key, set()).add(token)
        heapq.heappush(self._deadlines, (op.deadline_ms, token))
        return token

    def notify(self, keys: Iterable[Hashable], now_ms: int) -> list[Completion]:
        """Something changed on these partitions: complete whatever now can.

        Completing one request can change other partitions (a follower's fetch moves the HW,
        which wakes parked produces): such nested notifications are queued and handled by the
        outermost call, so no request is tried while it is being tried (the simulation found
        the re-entrant version completing one twice)."""
        if self._notifying:
            self._queued.extend(keys)
            return []
        self._notifying = True
        done: list[Completion] = []
        try:
            keys = list(keys)
            while keys:
                candidates: set[int] = set()
                for key in keys:
                    candidates |= self._watchers.get(key, set())
                for token in sorted(candidates):
                    op = self._ops.get(token)
                    if op is None:
                        continue
                    response = op.try_complete(now_ms)
                    if response is not None and token in self._ops:
                        self._remove(token)
                        done.append(Completion(token, response))
                keys, self._queued = self._queued, []
        finally:
            self._notifying = False
        return done

    def expire(self, now_ms: int) -> list[Completion]:
        done = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, token = heapq.heappop(self._deadlines)
            op = self._ops.get(token)
            if op is not None:
                self._remove(token)
                done.append(Completion(token, op.expire(now_ms)))
        return done

    def expire_all(self, now_ms: int) -> list[Completion]:
        """Answer everything parked as if its deadline had come (shutdown)."""
        done = []
        for token in sorted(self._ops):
            op = self._ops.get(token)
            if op is not None:
                self._remove(token)
                done.append(Completion(token, op.expire(now_ms)))
        self._deadlines.clear()
        return done

    def next_deadline_ms(self) -> int | None:
        while self._deadlines and self._deadlines[0][1] not in self._ops:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def _remove(self, token: int) -> None:
        op = self._ops.pop(token)
        for key in op.watch_keys():
            tokens = self._watchers.get(key)
            if tokens is not None:
                tokens.discard(token)
                if not tokens:
                    del self._watchers[key]
