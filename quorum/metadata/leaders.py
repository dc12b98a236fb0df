"""Who leads a partition, as Metadata and FindCoordinator report it."""
from __future__ import annotations


def partition_leader(ctx, image, name: str, info) -> tuple[int, int]:
    """(leader, epoch): the image's, or this node's own view of a group it hosts if newer."""
    leader, epoch = info.leader, info.leader_epoch
    local = ctx.topics.partition(name, info.index)
    if local is not None and local.raft is not None and local.raft.epoch > epoch:
        leader, epoch = local.leader_id, local.raft.epoch  # (-1 while that epoch's election runs)
    if leader >= 0 and not image.is_live(leader) and leader != ctx.node_id:
        leader = -1
    return leader, epoch
