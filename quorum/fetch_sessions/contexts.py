"""Interpreting a Fetch's (SessionId, SessionEpoch) — KIP-227's table — and shaping the answer.

| id  | epoch | meaning                                                        |
|-----|-------|----------------------------------------------------------------|
| 0   | -1    | full fetch, no session                                         |
| 0   | 0     | full fetch; create a session if a slot can be had              |
| ID  | 0     | close ID, then as (0, 0)                                       |
| ID  | -1    | close ID, then as (0, -1)                                      |
| ID  | n > 0 | incremental fetch if n is the epoch ID expects                 |
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

from ...protocol.errors import ErrorCode
from ...protocol.messages import FetchResponse

from .cache import FetchSessionCache
from .session import FetchSession, next_epoch

INITIAL_EPOCH, FINAL_EPOCH = 0, -1


class SessionlessContext:
    """Answers every partition; the response's session id is 0."""

    def __init__(self, fetches: list) -> None:
        self.fetches = fetches

    def has_partitions(self) -> bool:
        return bool(self.fetches)

    def watch_keys(self) -> list:
        return [f.partition.key for f in self.fetches if f.partition is not None]

    def refresh(self) -> None:
        """Before a parked fetch reads again: the partitions asked for do not change."""

    def has_news(self, results: list) -> bool:
        """Without a session there is no record of what the fetcher knows."""
        return False

    def response(self, results: list, build, now_ms: int) -> FetchResponse:
        return build(self.fetches, results, 0)


class FullContext(SessionlessContext):
    """A full fetch that opens a session when it is answered (if a slot can be had)."""

    def __init__(self, fetches: list, cache: FetchSessionCache, *, privileged: bool, principal,
                 uses_topic_ids: bool) -> None:
        super().__init__(fetches)
        self._cache = cache
        self._privileged = privileged
        self._principal = principal
        self._uses_topic_ids = uses_topic_ids

    def response(self, results: list, build, now_ms: int) -> FetchResponse:
        if not self.fetches or self._cache.too_big(len(self.fetches), self._privileged):
            # Over max_incremental_fetch_session_partitions: answered in full, no session (the
            # client goes on with full fetches, as when no slot is free).
            return build(self.fetches, results, 0)
        # The time of answering, as Kafka: a long poll may have let another session go idle.
        session = self._cache.create(now_ms, privileged=self._privileged, principal=self._principal,
                                     uses_topic_ids=self._uses_topic_ids, size=len(self.fetches))
        if session is None:
            return build(self.fetches, results, 0)
        for fetch in self.fetches:
            fetch.slot = session.upsert(fetch)
        # Only once every partition has its place: those that returned records go to the end.
        for fetch, data in zip(self.fetches, results):
            session.record_sent(fetch.slot, data)
            session.settle(fetch.slot, data, fetch.must_answer)
        session.shrink()
        return build(self.fetches, results, session.id)


class IncrementalContext:
    """Reads the session's active partitions; answers only those with something new.

    A consumer reads up to the high watermark, a follower up to the log end; every HW,
    log-start or leadership move and every leader append is in the node's ChangeJournal (read
    into the session's active set), and a slot stays active while it has something to read, so
    only active slots need reading, for followers too (Kafka reads every partition of a follower
    session; that made an incremental round as dear as a full one)."""

    def __init__(self, session: FetchSession, resolve_slot, journal) -> None:
        self.session = session
        self._resolve_slot = resolve_slot
        self._journal = journal
        self.fetches: list = []
        self.refresh()

    def has_partitions(self) -> bool:
        # A session with nothing active still long-polls on all its partitions (Kafka parks on
        # every partition of the session), rather than answering an empty response at once.
        return len(self.session) > 0

    def watch_keys(self) -> list:
        session = self.session
        return [p.key for p in (session.partition_at(slot) for slot in session.all_slots_in_order())
                if p is not None]

    def refresh(self) -> None:
        """Re-pick the slots to read: while parked, more of them may have become active."""
        session = self.session
        session.catch_up(self._journal)
        self.fetches = [self._resolve_slot(session, slot) for slot in session.active_slots_in_order()]

    def has_news(self, results: list) -> bool:
        """Would an answer now carry any partition (new data, HW, log start, an error)?"""
        session = self.session
        return any(session.must_send(f.slot, data, f.must_answer) for f, data in zip(self.fetches, results))

    def response(self, results: list, build, now_ms: int) -> FetchResponse:
        session = self.session
        sent_fetches, sent_results = [], []
        for fetch, data in zip(self.fetches, results):
            if session.must_send(fetch.slot, data, fetch.must_answer):
                sent_fetches.append(fetch)
                sent_results.append(data)
                session.record_sent(fetch.slot, data)
            session.settle(fetch.slot, data, fetch.must_answer)
        return build(sent_fetches, sent_results, session.id)


class ErrorContext:
    def __init__(self, error: ErrorCode) -> None:
        self.error = error
        self.fetches: list = []

    def has_partitions(self) -> bool:
        return False

    def response(self, results: list, build, now_ms: int) -> FetchResponse:
        return FetchResponse(throttle_time_ms=0, error_code=self.error, session_id=0, responses=[])


class Fetcher(NamedTuple):
    """Who fetches: sessions are bound to `principal` (the connection's principal, client id,
    host): another principal naming a session id gets FETCH_SESSION_ID_NOT_FOUND; `privileged` is an
    authenticated node's follower fetch (its session reads every partition, as Kafka's)."""
    principal: tuple
    privileged: bool


class PartitionResolver(Protocol):
    """The handler's view of our topics: request partitions and cached slots as fetches."""

    def requested(self, request) -> list: ...

    def cached(self, session: FetchSession, slot: int): ...

    def forgotten(self, request): ...


def new_context(cache: FetchSessionCache, request, version: int, fetcher: Fetcher, now_ms: int,
                partitions: PartitionResolver):
    """Pick the context for this request, applying its changes to the session first."""
    principal, privileged = fetcher
    session_id, epoch = request.session_id, request.session_epoch
    uses_topic_ids = version >= 13
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != 0:
            cache.close(session_id, principal)
        fetches = partitions.requested(request)
        if epoch == FINAL_EPOCH:
            return SessionlessContext(fetches)
        return FullContext(fetches, cache, privileged=privileged, principal=principal,
                           uses_topic_ids=uses_topic_ids)
    session = cache.get(session_id)
    if session is None or session.principal != principal:
        return ErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    # Kafka's order: the epoch first, then whether the request names topics the session's way.
    if epoch != session.epoch:
        return ErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_topic_ids:
        return ErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    cache.touch(session, now_ms)
    for fetch in partitions.requested(request):
        session.upsert(fetch)
    for key in partitions.forgotten(request):
        session.remove(key)
    if cache.too_big(len(session), session.privileged):
        # Grown past max_incremental_fetch_session_partitions: the session ends, and the client
        # starts over with a full fetch (which then opens no session).
        cache.close(session.id, principal)
        return ErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if len(session) == 0:
        # Removing every partition ends the session.
        cache.close(session.id, principal)
        return SessionlessContext([])
    session.epoch = next_epoch(epoch)
    return IncrementalContext(session, partitions.cached, cache.journal)


def forgotten_keys(request, version: int, topics):
    for forgotten in request.forgotten_topics_data:
        if version >= 13:
            topic = topics.get_by_id(forgotten.topic_id)
            topic_key = forgotten.topic_id
        else:
            topic = topics.get(forgotten.topic)
            topic_key = forgotten.topic
        for index in forgotten.partitions:
            yield session_key(topic, topic_key, index)
            if topic is not None:
                yield (topic_key, index)  # cached before the topic existed and not re-sent since


def session_key(topic, topic_key, index: int):
    """Known topics key by an int (small, cheap to hash); unknown ones by (topic, index)."""
    if topic is not None:
        return partition_key_int(topic.num, index)
    return (topic_key, index)


def partition_key_int(topic_num: int, index: int) -> int:
    """The int a known partition is known by, in sessions and in the ChangeJournal."""
    return (topic_num << 32) | (index & 0xFFFFFFFF)
