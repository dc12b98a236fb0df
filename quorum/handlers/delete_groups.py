"""DeleteGroups (v0-2): an empty group and its offsets go (tombstones); answered once the
tombstones are committed. A group with members is NON_EMPTY_GROUP; one the caller may not
DELETE is GROUP_AUTHORIZATION_FAILED."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import DeleteGroupsResponse as R

from ..groups.state import GroupState as S
from ..groups.writes import append_records
from ..metadata.acls import Operation
from ..outcomes import Park, Respond
from .group_common import OUTCOME_ERRORS, checked_group, coordinator_of


def handle(ctx, header, request, now_ms, peer):
    coordinator = coordinator_of(ctx)
    results: dict[str, ErrorCode] = {}
    waits = []  # (partition, end offset, group ids)
    by_partition: dict = {}
    for group_id in request.groups_names:
        error = checked_group(ctx, coordinator, peer, Operation.DELETE, group_id, now_ms)
        if error:
            results[group_id] = error
            continue
        group = coordinator.group(group_id)
        if group is None and group_id not in coordinator.offsets:
            results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
        elif group is not None and not group.is_(S.EMPTY):
            results[group_id] = ErrorCode.NON_EMPTY_GROUP
        else:
            partition = coordinator.partition_of(group_id)
            records, ids = by_partition.setdefault(partition.index, ([], []))
            records.extend(coordinator.delete_group(group_id, now_ms))
            ids.append(group_id)
    for index, (records, ids) in by_partition.items():
        partition = coordinator.partition_of(ids[0])
        waits.append((partition, append_records(ctx, partition, records, now_ms), partition.leader_epoch, ids))

    def response():
        return R(throttle_time_ms=0, results=[R.DeletableGroupResult(group_id=g, error_code=results[g])
                                              for g in request.groups_names])
    if not waits:
        return Respond(response())
    op = _TombstonesCommitted(waits, results, response, now_ms + coordinator.settings.offset_commit_timeout_ms)
    answer = op.try_complete(now_ms)
    return Respond(answer) if answer is not None else Park(ctx.purgatory.park(op))


class _TombstonesCommitted:
    """Answered once every partition's tombstones are committed (or leadership moved)."""

    def __init__(self, waits, results, response, deadline_ms):
        self.pending = list(waits)
        self.results, self.response, self.deadline_ms = results, response, deadline_ms

    def watch_keys(self):
        return [w[0].key for w in self.pending]

    def try_complete(self, now_ms):
        for wait in list(self.pending):
            partition, end, epoch, ids = wait
            moved = partition.raft is None or not partition.is_leader or partition.leader_epoch != epoch
            if moved or partition.high_watermark >= end:
                for g in ids:
                    self.results[g] = OUTCOME_ERRORS["moved" if moved else "committed"]
                self.pending.remove(wait)
        return None if self.pending else self.response()

    def expire(self, now_ms):
        for _, _, _, ids in self.pending:
            for g in ids:
                self.results[g] = OUTCOME_ERRORS["timeout"]
        return self.response()
