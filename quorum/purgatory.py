"""Parked requests (long-poll fetches, acks=-1 produces) waiting on partitions or a deadline,
and timers (group sessions, rebalance deadlines) that fire at a deadline and may wake keys."""
from __future__ import annotations

import heapq
from typing import Any, Callable, Hashable, Iterable, Protocol

from .outcomes import Completion


class DelayedOperation(Protocol):
    deadline_ms: int
    # Optional: `cancel_on_disconnect = True` lets cancel() drop the operation when its client's
    # connection closes (nothing else waits on it), and `cancelled()` is then called.

    def watch_keys(self) -> Iterable[Hashable]: ...

    def try_complete(self, now_ms: int) -> Any | None:
        """The response if the operation can complete now, else None."""

    def expire(self, now_ms: int) -> Any:
        """The response to send when the deadline passes."""


class Timer:
    """A scheduled callback; `cancel()` stops it from firing (it stays in the heap until due)."""

    __slots__ = ("deadline_ms", "fire", "cancelled")

    def __init__(self, deadline_ms: int, fire: Callable[[int], Iterable[Hashable] | None]) -> None:
        self.deadline_ms = deadline_ms
        self.fire = fire
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Purgatory:
    def __init__(self) -> None:
        self._next_token = 1
        self._ops: dict[int, DelayedOperation] = {}
        self._watchers: dict[Hashable, set[int]] = {}
        self._deadlines: list[tuple[int, int]] = []
        self._notifying = False
        self._queued: list = []
        self._timers: list[tuple[int, int, Timer]] = []
        self._timer_seq = 0
        self._woken: list = []

    def schedule(self, deadline_ms: int, fire: Callable[[int], Iterable[Hashable] | None]) -> Timer:
        """Call `fire(now_ms)` at the first expire() at or after the deadline; the keys it
        returns are notified, so parked operations waiting on them can complete."""
        timer = Timer(deadline_ms, fire)
        self._timer_seq += 1
        heapq.heappush(self._timers, (deadline_ms, self._timer_seq, timer))
        return timer

    def wake(self, keys: Iterable[Hashable]) -> None:
        """Notify these keys at the next expire() or take_woken() (a handler's side effects)."""
        self._woken.extend(keys)

    def take_woken(self, now_ms: int) -> list[Completion]:
        if not self._woken:
            return []
        keys, self._woken = self._woken, []
        return self.notify(keys, now_ms)

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

    def cancel(self, tokens: Iterable[int]) -> int:
        """The connection these parked requests came on has closed: drop those that allow it
        (`cancel_on_disconnect`); the others (group and metadata writes, whose completion
        changes state) run to their end and their answers are dropped. Returns how many went."""
        dropped = 0
        for token in tokens:
            op = self._ops.get(token)
            if op is None or not getattr(op, "cancel_on_disconnect", False):
                continue
            self._remove(token)  # its deadline stays in the heap until due, then is skipped
            hook = getattr(op, "cancelled", None)
            if hook is not None:
                hook()
            dropped += 1
        return dropped

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
        done = self._fire_timers(now_ms)
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

    def _fire_timers(self, now_ms: int) -> list[Completion]:
        keys = self._woken
        self._woken = []
        timers = self._timers
        while timers and timers[0][0] <= now_ms:
            _, _, timer = heapq.heappop(timers)
            if not timer.cancelled:
                timer.cancelled = True
                woken = timer.fire(now_ms)
                if woken:
                    keys.extend(woken)
        return self.notify(keys, now_ms) if keys else []

    def next_deadline_ms(self) -> int | None:
        while self._deadlines and self._deadlines[0][1] not in self._ops:
            heapq.heappop(self._deadlines)
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        deadlines = [d[0] for d in (self._deadlines[:1] + self._timers[:1])]
        if self._woken:
            deadlines.append(0)
        return min(deadlines) if deadlines else None

    def _remove(self, token: int) -> None:
        op = self._ops.pop(token)
        for key in op.watch_keys():
            tokens = self._watchers.get(key)
            if tokens is not None:
                tokens.discard(token)
                if not tokens:
                    del self._watchers[key]
