"""Member liveness: one timer per member (its session) and per KIP-394 pending member id.

A member is alive while it heartbeats within its session timeout, or while a JoinGroup or
SyncGroup of its is parked (Kafka keeps those alive too). A timer that fires early (the member
heartbeated since) re-arms itself at the new deadline, so a heartbeat costs no heap entry.
"""
from __future__ import annotations


def start_session(coordinator, group, member, now_ms: int) -> None:
    member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
    if member.timer is None or member.timer.cancelled:
        _arm(coordinator, group, member, member.heartbeat_deadline_ms)


def touch(member, now_ms: int) -> None:
    """A heartbeat, join or sync: the session restarts."""
    member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms


def _arm(coordinator, group, member, deadline_ms: int) -> None:
    purgatory = coordinator.ctx.purgatory
    member.timer = purgatory.schedule(deadline_ms, lambda now: _expired(coordinator, group, member, now))


def _expired(coordinator, group, member, now_ms: int):
    if coordinator.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
        return None
    if member.awaiting_join or member.awaiting_sync:
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
    if now_ms < member.heartbeat_deadline_ms:
        _arm(coordinator, group, member, member.heartbeat_deadline_ms)
        return None
    from .rebalance import remove_member
    return remove_member(coordinator, group, member.member_id, now_ms, "session timeout")


def add_pending(coordinator, group, member_id: str, session_timeout_ms: int, now_ms: int) -> None:
    """KIP-394: a member id handed out with MEMBER_ID_REQUIRED, valid for one session timeout."""
    def expired(now):
        if group.pending_members.pop(member_id, None) is None:
            return None
        from .rebalance import maybe_complete_join
        return maybe_complete_join(coordinator, group, now)
    old = group.pending_members.pop(member_id, None)
    if old is not None:
        old.cancel()
    group.pending_members[member_id] = coordinator.ctx.purgatory.schedule(now_ms + session_timeout_ms, expired)
