"""Fetch (v4–17): sessions (KIP-227), reads, and long polls until min_bytes or max_wait. A
partition of a topic the caller may not READ is TOPIC_AUTHORIZATION_FAILED (in a session too:
an ACL removed while it lasts takes effect at the next fetch)."""
from __future__ import annotations

import uuid

from ...protocol.errors import ErrorCode
from ...protocol.messages import FetchResponse

from ..fetch_sessions.contexts import (ErrorContext, Fetcher, SessionlessContext, forgotten_keys, new_context,
                                      session_key)
from ..fetch_sessions.session import AskedFetch
from ..metadata.acls import Operation, ResourceType
from ..node_claims import fetch_replica_id
from ..outcomes import Park, Respond
from .fetch_read import FetchLimits, PartitionFetch, read_partitions

TopicOut = FetchResponse.FetchableTopicResponse
NO_LIMIT = 0x7FFFFFFF
READ_COMMITTED = 1
FIRST_SESSION_VERSION = 7
_ZERO_UUID = uuid.UUID(int=0)


def handle(ctx, header, request, now_ms, peer):
    version = header.request_api_version
    if request.max_wait_ms < 0:
        return Respond(FetchResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                     session_id=0, responses=[]))
    replica_id = fetch_replica_id(request, version)  # >= 0 only from that node (node_claims)
    limits = FetchLimits(
        version=version, is_consumer=replica_id < 0,
        read_committed=request.isolation_level == READ_COMMITTED,
        response_max_bytes=request.max_bytes if request.max_bytes > 0 else NO_LIMIT,
        leader_id=ctx.node_id, replica_id=replica_id, now_ms=now_ms,
        throttle=ctx.move_throttle if replica_id >= 0 else None,
    )
    if replica_id >= 0 and ctx.replication is not None:
        ctx.replication.on_follower_fetch_request(replica_id, request, version, now_ms)  # check-quorum hears it
    context = _context(ctx, header, request, version, peer, privileged=replica_id >= 0, now_ms=now_ms)
    if isinstance(context, ErrorContext):
        if replica_id >= 0 and ctx.replication is not None:
            ctx.replication.on_follower_fetch_refused(replica_id, request, version)
        return Respond(context.response([], None, now_ms))
    results, total, errors = read_partitions(context.fetches, limits)
    if errors and replica_id >= 0 and ctx.replication is not None:
        ctx.replication.on_follower_fetch_not_read(
            replica_id, [f.partition.key for f in context.fetches if f.must_answer and f.partition is not None])
    if request.max_wait_ms == 0 or total >= request.min_bytes or errors or not context.has_partitions():
        return Respond(context.response(results, _builder(version), now_ms))
    wait = min(request.max_wait_ms, ctx.config.fetch_max_wait_cap_ms)
    return Park(ctx.purgatory.park(DelayedFetch(context, limits, request.min_bytes, now_ms + wait)))


def _context(ctx, header, request, version: int, peer, privileged: bool, now_ms: int):
    partitions = _Resolver(ctx.topics, version, _readable(ctx, peer))
    if version < FIRST_SESSION_VERSION:
        return SessionlessContext(partitions.requested(request))
    fetcher = Fetcher((peer.principal, header.client_id, peer.host), privileged)
    return new_context(ctx.fetch_sessions, request, version, fetcher, now_ms, partitions)


def _readable(ctx, peer):
    """Whether the caller may READ a topic (None: every topic), remembered per request."""
    authorizer = ctx.authorizer
    if not authorizer.enabled or peer.is_node:
        return None
    seen: dict = {}

    def readable(name: str) -> bool:
        allowed = seen.get(name)
        if allowed is None:
            allowed = seen[name] = authorizer.allows(peer, Operation.READ, ResourceType.TOPIC, name)
        return allowed
    return readable


class _Resolver:
    """Request partitions and session slots as PartitionFetches, against our topics."""

    __slots__ = ("topics", "version", "readable")

    def __init__(self, topics, version: int, readable=None) -> None:
        self.topics, self.version, self.readable = topics, version, readable

    def requested(self, request) -> list[PartitionFetch]:
        return resolve(self.topics, request, self.version, self.readable)

    def cached(self, session, slot: int) -> PartitionFetch:
        asked = session.fetch_state(slot)
        fetch = _partition_fetch(self.topics, self.version, asked, self.readable)
        if asked.partition is None and fetch.partition is not None:
            session.attach(slot, fetch.session_key, fetch.partition)  # its topic was created since
        fetch.slot = slot
        return fetch

    def forgotten(self, request):
        return forgotten_keys(request, self.version, self.topics)


def resolve(topics, request, version: int, readable=None) -> list[PartitionFetch]:
    fetches = []
    for wanted in request.topics:
        topic_key = wanted.topic_id if version >= 13 else wanted.topic
        for p in wanted.partitions:
            fetches.append(_partition_fetch(topics, version, AskedFetch(
                topic_key, p.partition, p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch,
                p.partition_max_bytes, p.log_start_offset), readable))
    return fetches


def _partition_fetch(topics, version: int, asked: AskedFetch, readable=None) -> PartitionFetch:
    topic_key, index, partition = asked.topic_key, asked.partition_index, asked.partition
    topic = topics.get_by_id(topic_key) if version >= 13 else topics.get(topic_key)
    if partition is None and topic is not None and 0 <= index < len(topic.partitions):
        partition = topic.partitions[index]
    name = topic.name if topic is not None else (topic_key if version < 13 else None)
    if readable is not None and name is not None and not readable(name):
        partition, error = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif partition is not None:
        error = ErrorCode.NONE
    elif topic is not None and 0 <= index < len(topic.partitions):
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER  # the cluster's partition, held by other brokers
    else:
        error = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return PartitionFetch(
        topic=topic.name if topic else (topic_key if version < 13 else ""),
        topic_id=topic.topic_id if topic else (topic_key if version >= 13 else _ZERO_UUID),
        partition_index=index, partition=partition, fetch_offset=asked.fetch_offset,
        current_leader_epoch=asked.current_leader_epoch, last_fetched_epoch=asked.last_fetched_epoch,
        max_bytes=asked.max_bytes, fetcher_log_start_offset=asked.fetcher_log_start_offset, resolve_error=error,
        topic_key=topic_key,
        session_key=session_key(topic, topic_key, index))


def _builder(version: int):
    def build(fetches, results, session_id):
        return build_response(fetches, results, version, session_id)
    return build


def build_response(fetches: list[PartitionFetch], results: list, version: int, session_id: int = 0):
    """Group consecutive partitions of one topic, as Kafka does."""
    topics: list = []
    for fetch, data in zip(fetches, results):
        last = topics[-1] if topics else None
        same = last is not None and (last.topic_id == fetch.topic_id if version >= 13 else last.topic == fetch.topic)
        if not same:
            last = TopicOut(topic=fetch.topic if version < 13 else "", topic_id=fetch.topic_id, partitions=[])
            topics.append(last)
        last.partitions.append(data)
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=session_id, responses=topics)


class DelayedFetch:
    """A fetch below min_bytes, woken when a watched partition's high watermark moves."""

    cancel_on_disconnect = True  # (a full fetch's session is only opened when it is answered)

    def __init__(self, context, limits, min_bytes: int, deadline_ms: int) -> None:
        self.context = context
        self.limits = limits
        self.min_bytes = min_bytes
        self.deadline_ms = deadline_ms
        # Fixed at park time: the purgatory unregisters exactly what it registered.
        self._watch_keys = context.watch_keys()

    def watch_keys(self):
        return self._watch_keys

    def try_complete(self, now_ms: int):
        self.limits.now_ms = now_ms
        self.context.refresh()
        results, total, errors = read_partitions(self.context.fetches, self.limits)
        # A follower also hears at once when only the HW moved (as KRaft's leader completes its
        # parked fetches on an HW change), so it learns what is committed without a long poll.
        if total >= self.min_bytes or errors or (not self.limits.is_consumer and self.context.has_news(results)):
            return self.context.response(results, _builder(self.limits.version), now_ms)
        return None

    def expire(self, now_ms: int):
        self.limits.now_ms = now_ms
        self.context.refresh()
        results, _, _ = read_partitions(self.context.fetches, self.limits)
        return self.context.response(results, _builder(self.limits.version), now_ms)


