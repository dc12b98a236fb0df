"""The one table of legal role changes (h11 style): an illegal transition raises where it happens.

Epoch rule per edge: SAME (the epoch does not change), HIGHER (it must grow), ANY (same or
higher), NEXT (exactly +1: a candidate bumps the epoch). Never lower.
"""
from __future__ import annotations

SAME, HIGHER, ANY, NEXT = "same", "higher", "any", "next"

U, V, P, C, L, F, R = "Unattached", "Voted", "Prospective", "Candidate", "Leader", "Follower", "Resigned"

ALLOWED: dict[tuple[str, str], str] = {
    (U, U): HIGHER, (U, V): ANY, (U, P): SAME, (U, F): ANY,
    (V, U): HIGHER, (V, V): HIGHER, (V, P): SAME, (V, F): ANY,
    # A prospective that cannot win goes back to waiting, at its epoch or a newer one it learned.
    # (It keeps a vote it cast in this epoch: back to Voted, not Unattached.)
    (P, U): ANY, (P, V): ANY, (P, P): SAME, (P, C): NEXT, (P, F): ANY,
    (C, U): HIGHER, (C, V): ANY, (C, P): SAME, (C, L): SAME, (C, F): ANY,
    (L, R): SAME, (L, U): HIGHER, (L, V): HIGHER, (L, F): HIGHER,
    # A follower told the leader resigned (EndQuorumEpoch) forgets it within the epoch.
    (F, U): ANY, (F, V): ANY, (F, P): SAME, (F, F): HIGHER,
    # A leader removed from the voters (KIP-853) waits within its epoch, as an observer, for the
    # next leader (it keeps its vote for itself: Voted, which grants nobody else this epoch).
    (R, U): ANY, (R, V): ANY, (R, F): HIGHER, (R, P): SAME,
}


class IllegalTransition(RuntimeError):
    pass


def check(old_role: str, old_epoch: int, new_role: str, new_epoch: int) -> None:
    rule = ALLOWED.get((old_role, new_role))
    ok = rule is not None and (
        (rule == SAME and new_epoch == old_epoch) or (rule == HIGHER and new_epoch > old_epoch)
        or (rule == ANY and new_epoch >= old_epoch) or (rule == NEXT and new_epoch == old_epoch + 1))
    if not ok:
        raise IllegalTransition(f"{old_role}@{old_epoch} -> {new_role}@{new_epoch} ({rule or 'not allowed'})")
