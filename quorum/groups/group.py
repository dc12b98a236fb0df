"""One classic group's membership: members, static instance ids (KIP-345), member ids handed
out but not yet used (KIP-394), the generation and the chosen protocol."""
from __future__ import annotations

from dataclasses import dataclass, field

from .state import GroupState, check_transition


@dataclass(eq=False)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list  # [(name, metadata bytes)], the member's preference order
    assignment: bytes = b""
    awaiting_join: bool = False   # a JoinGroup is parked for it
    awaiting_sync: bool = False   # a SyncGroup is parked for it
    join_answer: object = None    # what its parked JoinGroup returns once the join phase ends
    heartbeat_deadline_ms: int = 0
    timer: object = None          # its session timer (purgatory Timer)

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return bytes(metadata)
        return b""

    def same_protocols(self, protocols: list) -> bool:
        return [(n, bytes(m)) for n, m in self.protocols] == [(n, bytes(m)) for n, m in protocols]


@dataclass(eq=False)
class Group:
    group_id: str
    partition: int                      # its __consumer_offsets partition
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict = field(default_factory=dict)          # member id -> Member
    static_members: dict = field(default_factory=dict)   # instance id -> member id
    pending_members: dict = field(default_factory=dict)  # KIP-394: member id -> its timer
    state_timestamp_ms: int = -1
    join_deadline_ms: int = 0
    join_timer: object = None
    initial_delay_left_ms: int = 0      # group_initial_rebalance_delay_ms budget still usable
    in_initial_delay: bool = False
    sync_write_end: int | None = None   # the leader's assignment record ends here in the log
    pending_assignments: dict | None = None
    rebalances: int = 0

    @property
    def key(self) -> tuple:
        """The purgatory key parked JoinGroup/SyncGroup requests of this group watch."""
        return ("group", self.group_id)

    def transition(self, new: GroupState, now_ms: int) -> None:
        check_transition(self.state, new)
        self.state = new
        self.state_timestamp_ms = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def add(self, member: Member) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        if self.protocol_type is None:
            self.protocol_type = member.protocol_type

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.timer is not None:
            member.timer.cancel()
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def supports(self, protocol_type: str, protocols: list) -> bool:
        """A joining member must share the protocol type and at least one protocol."""
        if not protocols:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _ in protocols}
        return all(names & {n for n, _ in m.protocols} for m in self.members.values())

    def select_protocol(self) -> str:
        """Kafka's rule: protocols every member supports; each member votes for its most
        preferred of those; the most votes wins (ties: the first member's preference)."""
        members = list(self.members.values())
        common = set.intersection(*({n for n, _ in m.protocols} for m in members))
        votes: dict[str, int] = {}
        for m in members:
            choice = next(n for n, _ in m.protocols if n in common)
            votes[choice] = votes.get(choice, 0) + 1
        first = [n for n, _ in members[0].protocols if n in common]
        return max(first, key=lambda n: (votes.get(n, 0), -first.index(n)))

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
