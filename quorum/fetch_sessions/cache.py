"""The fetch session cache: bounded slots and KIP-227's eviction rules."""
from __future__ import annotations

from typing import Callable

from .journal import ChangeJournal
from .session import FetchSession


class FetchSessionCache:
    def __init__(self, max_slots: int, eviction_ms: int, new_id: Callable[[], int], *,
                 max_partitions: int = 1_000, refusals=None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        # Partitions one client's session may hold, unknown ones included
        # (max_incremental_fetch_session_partitions; a follower's is not capped: only an
        # authenticated node opens one); refusals counted in `refusals`.
        self.max_partitions = max_partitions
        self.refusals = refusals
        self._new_id = new_id  # a CSPRNG in production, a seeded generator in simulations
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self.journal = ChangeJournal()  # partitions record their changes here

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self):
        return iter(self._sessions.values())

    @property
    def partitions_cached(self) -> int:
        return sum(len(s) for s in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def touch(self, session: FetchSession, now_ms: int) -> None:
        # Every use counts, or busy sessions would look idle (KAFKA-9137).
        session.last_used_ms = now_ms

    def too_big(self, partitions: int, privileged: bool = False) -> bool:
        """A client's session of this many partitions is refused (counted)."""
        if partitions <= self.max_partitions or privileged:
            return False
        if self.refusals is not None:
            self.refusals.refuse("fetch_session_partitions")
        return True

    def close(self, session_id: int, principal) -> None:
        """The owner ends its own session; this is not an eviction."""
        session = self._sessions.get(session_id)
        if session is not None and session.principal == principal:
            self._drop(session)

    def create(self, now_ms: int, *, privileged: bool, principal, uses_topic_ids: bool,
               size: int) -> FetchSession | None:
        """A new session, or None when no slot is free and nothing may be evicted."""
        if len(self._sessions) >= self.max_slots:
            victim = self._victim(now_ms, privileged, size)
            if victim is None:
                return None
            self._drop(victim)
            self.evictions += 1
        session_id = self._unique_id()
        session = FetchSession(session_id, privileged=privileged, principal=principal,
                               uses_topic_ids=uses_topic_ids, now_ms=now_ms)
        self._sessions[session_id] = session
        self.journal.recording = True
        session.journal_position = self.journal.end
        return session

    def _victim(self, now_ms: int, privileged: bool, size: int) -> FetchSession | None:
        """KIP-227: evict iff the newcomer is a follower and the old one is not, or the old one
        has idled past the eviction time, or it is older than that and the newcomer is larger.
        Among candidates, the least recently used of the most evictable kind goes first."""
        best, best_rank = None, None
        for session in self._sessions.values():
            if now_ms - session.last_used_ms > self.eviction_ms:
                kind = 0
            elif privileged and not session.privileged:
                kind = 1
            elif now_ms - session.created_ms > self.eviction_ms and size > len(session):
                kind = 2
            else:
                continue
            rank = (kind, session.last_used_ms, session.id)
            if best_rank is None or rank < best_rank:
                best, best_rank = session, rank
        return best

    def _unique_id(self) -> int:
        while True:
            session_id = self._new_id()
            if session_id != 0 and session_id not in self._sessions:
                return session_id

    def _drop(self, session: FetchSession) -> None:
        del self._sessions[session.id]
        self.journal.recording = bool(self._sessions)
