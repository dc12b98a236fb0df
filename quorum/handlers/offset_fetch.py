"""OffsetFetch (v0-9; several groups per request from v8): committed offsets with their
leader epoch (KIP-320, v5+); -1 where nothing is committed. Authorization (Kafka's): DESCRIBE
on the group, else GROUP_AUTHORIZATION_FAILED; a topic named that the caller may not DESCRIBE
is TOPIC_AUTHORIZATION_FAILED, and a fetch of every topic leaves such topics out."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import OffsetFetchResponse as R

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .group_common import checked_group, coordinator_of


def handle(ctx, header, request, now_ms, peer):
    coordinator = coordinator_of(ctx)
    version = header.request_api_version
    if version >= 8:
        groups = []
        for g in request.groups:
            wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
            error, topics = _group(ctx, coordinator, peer, g.group_id, wanted, now_ms)
            groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=error, topics=[
                R.OffsetFetchResponseTopics(name=name, partitions=[
                    R.OffsetFetchResponsePartitions(partition_index=i, committed_offset=o, committed_leader_epoch=e,
                                                    metadata=m, error_code=c) for i, o, e, m, c in parts])
                for name, parts in topics]))
        return Respond(R(throttle_time_ms=0, groups=groups))
    wanted = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
    error, topics = _group(ctx, coordinator, peer, request.group_id, wanted, now_ms)
    if error and version < 2:
        # No group-level error before v2: each partition carries it.
        topics = [(name, [(i, -1, -1, "", error) for i in indexes]) for name, indexes in (wanted or [])]
    return Respond(R(throttle_time_ms=0, error_code=error if version >= 2 else 0, topics=[
        R.OffsetFetchResponseTopic(name=name, partitions=[
            R.OffsetFetchResponsePartition(partition_index=i, committed_offset=o, committed_leader_epoch=e,
                                           metadata=m, error_code=c) for i, o, e, m, c in parts])
        for name, parts in topics]))


def _group(ctx, coordinator, peer, group_id, wanted, now_ms):
    """(group error, [(topic, [(partition, offset, epoch, metadata, error)])])."""
    error = checked_group(ctx, coordinator, peer, Operation.DESCRIBE, group_id, now_ms)
    if error:
        return error, []

    def described(name: str) -> bool:
        return ctx.authorizer.allows(peer, Operation.DESCRIBE, ResourceType.TOPIC, name)
    if wanted is None:
        by_topic: dict[str, list] = {}
        for (topic, index), entry in sorted(coordinator.offsets.get(group_id, {}).items()):
            by_topic.setdefault(topic, []).append(index)
        wanted = [(name, indexes) for name, indexes in by_topic.items() if described(name)]
    topics = []
    for name, indexes in wanted:
        if not described(name):
            topics.append((name, [(i, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED) for i in indexes]))
            continue
        parts = []
        for index in indexes:
            entry = coordinator.committed(group_id, name, index)
            if entry is None:
                parts.append((index, -1, -1, "", ErrorCode.NONE))
            else:
                parts.append((index, entry.offset, entry.leader_epoch, entry.metadata, ErrorCode.NONE))
        topics.append((name, parts))
    return ErrorCode.NONE, topics
