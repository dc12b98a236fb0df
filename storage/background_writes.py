"""Small durable writes that must not block the event loop, done in order on one thread.

The topic catalog's rewrite, a partition's log-start file, a deleted partition's directory
removal and producer-id block reservations are queued here by the code that decides them (on
the loop) and carried out in the order they were queued. A log's flush first waits for every
write queued before it (`barrier()`), so data acknowledged as durable never depends on a
catalog entry or a log start that is not: a crash loses only what nothing was told is durable.
"""
from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Callable

log = logging.getLogger(__name__)


class BackgroundWrites:
    def __init__(self, name: str = "kraftd-durable-writes") -> None:
        self._name = name
        self._queue: deque[tuple[int, Callable[[], None]]] = deque()
        self._cond = threading.Condition()
        self._queued = 0     # writes ever queued
        self._done = 0       # writes ever finished (in queue order)
        self._thread: threading.Thread | None = None
        self.errors: list[BaseException] = []
        # The deterministic simulation runs each write at once, in the caller's thread: a
        # thread would make what a crash leaves behind depend on scheduling.
        self.inline = False

    def submit(self, write: Callable[[], None]) -> int:
        """Queue `write`; returns its sequence number (for `wait_for`)."""
        if self.inline:
            write()
            return self._done  # (done at once)
        with self._cond:
            self._queued += 1
            self._queue.append((self._queued, write))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()
            return self._queued

    @property
    def pending(self) -> int:
        return self._queued - self._done

    def done(self, seq: int) -> bool:
        """Whether write `seq` (and every one before it) is done; False if one failed."""
        return self._done >= seq and not self.errors

    def wait_for(self, seq: int) -> None:
        """Block until write `seq` and every write queued before it are done."""
        with self._cond:
            while self._done < seq:
                self._cond.wait()

    def barrier(self) -> None:
        """Block until every write queued so far is done (cheap when none is pending). Raises if
        any write failed: what depends on it must not be called durable (the flush fails, and
        the server stops, as on a failed fsync)."""
        if self._queued != self._done:
            self.wait_for(self._queued)
        if self.errors:
            raise OSError(f"a background durable write failed: {self.errors[0]!r}") from self.errors[0]

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                seq, write = self._queue[0]
            try:
                write()
            except BaseException as e:  # noqa: BLE001 - kept for the flush that waits on it
                log.exception("a background durable write failed")
                self.errors.append(e)
            with self._cond:
                self._queue.popleft()
                self._done = seq
                self._cond.notify_all()


_writes = BackgroundWrites()


def background_writes() -> BackgroundWrites:
    """The process's queue (one thread for every data dir: these writes are small and rare)."""
    return _writes
