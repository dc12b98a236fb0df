"""Where a new topic's replicas go: round-robin over the live brokers, the first replica of each
partition (its preferred leader) spread evenly, as Kafka's rack-unaware assignment does."""
from __future__ import annotations


class PlacementError(Exception):
    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


def place_replicas(brokers: list[int], partitions: int, replication_factor: int, start: int) -> list[list[int]]:
    """`brokers` sorted; partition p's replicas start at broker (start + p) and continue in order."""
    n = len(brokers)
    if replication_factor < 1 or replication_factor > n:
        raise PlacementError("INVALID_REPLICATION_FACTOR",
                             f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    return [[brokers[(start + p + k) % n] for k in range(replication_factor)] for p in range(partitions)]


def check_assignment(assignments: list[list[int]], registered: set[int]) -> None:
    """Manual assignments (CreateTopics' Assignments): same size, distinct, registered brokers."""
    sizes = {len(a) for a in assignments}
    if len(sizes) != 1 or 0 in sizes:
        raise PlacementError("INVALID_REPLICA_ASSIGNMENT", "All partitions must have the same, non-zero number of replicas.")
    for replicas in assignments:
        if len(set(replicas)) != len(replicas):
            raise PlacementError("INVALID_REPLICA_ASSIGNMENT", f"Duplicate brokers in assignment {replicas}.")
        unknown = [b for b in replicas if b not in registered]
        if unknown:
            raise PlacementError("INVALID_REPLICA_ASSIGNMENT", f"Unknown brokers {unknown} in the assignment.")
