"""Partition reassignment on the controller (KIP-455): what the image records of a move.

A move is recorded as Kafka writes it: one PartitionChangeRecord whose `replicas` are the
target's followed by the original replicas not in the target, with `adding` (in the target, not
in the original) and `removing` (in the original, not in the target). The partition's Raft
leader then changes its group's voters toward the target one at a time
(quorum/metadata/replica_moves.py), and reports the caught-up voters as its ISR. The controller ends the
move once the ISR holds the whole target and none of the replicas being removed: `replicas`
becomes the target and the lists empty. A cancel (null target) records the original replicas
again, and the leader changes the voters back.
"""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import PartitionChangeRecord

from .image import LEADER_UNCHANGED, MetadataImage, PartitionInfo


def reassign(image: MetadataImage, info: PartitionInfo | None, target) -> tuple[int, str | None, object]:
    """(error, message, record or None) for moving `info` to `target` (None: cancel)."""
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None
    if target is None:
        if not info.reassigning:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment of this partition is in progress", None
        original = info.original()
        isr = [r for r in info.isr if r in original] or original
        return ErrorCode.NONE, None, _replicas_record(image, info, original, isr=isr)
    problem = _target_problem(image, list(target))
    if problem:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem, None
    original = info.original()
    adding = [r for r in target if r not in original]
    removing = [r for r in original if r not in target]
    replicas = list(target) + removing
    if replicas == info.replicas and adding == info.adding and removing == info.removing:
        return ErrorCode.NONE, None, None  # already recorded
    return ErrorCode.NONE, None, _replicas_record(image, info, replicas, adding=adding, removing=removing)


def completion(image: MetadataImage, info: PartitionInfo, isr) -> PartitionChangeRecord | None:
    """The record that ends `info`'s move, once its leader reports `isr` holding the whole
    target and no replica being removed; None while it is not done (or does not move)."""
    if not info.reassigning:
        return None
    target = info.target()
    reported = set(isr)
    if not set(target) <= reported or reported & set(info.removing):
        return None
    return _replicas_record(image, info, target, isr=[r for r in isr if r in target])


def _replicas_record(image, info: PartitionInfo, replicas: list, *, adding=(), removing=(), isr=None):
    directories = []
    registered = image.directories_of(replicas)
    for r, fallback in zip(replicas, registered):
        directories.append(info.directory_of(r) or fallback)
    return PartitionChangeRecord(partition_id=info.index, topic_id=info.topic_id, replicas=list(replicas),
                                 isr=list(isr) if isr is not None else None, leader=LEADER_UNCHANGED,
                                 adding_replicas=list(adding), removing_replicas=list(removing),
                                 directories=directories)


def _target_problem(image: MetadataImage, target: list) -> str | None:
    if not target:
        return "The target replica list is empty"
    if len(set(target)) != len(target):
        return f"Duplicate brokers in the target {target}"
    unknown = [b for b in target if b not in image.brokers]
    if unknown:
        return f"Unknown brokers {unknown} in the target"
    fenced = [b for b in target if not image.is_live(b)]
    if fenced:
        return f"Brokers {fenced} in the target are fenced (not heard from)"
    return None


def ongoing(image: MetadataImage, wanted) -> list[tuple[str, list[PartitionInfo]]]:
    """[(topic name, its moving partitions)]: of `wanted` [(name, indexes)], or of every topic
    when `wanted` is None. Partitions asked for that do not move (or do not exist) are left out,
    as Kafka's controller does."""
    out = []
    if wanted is None:
        for topic in sorted(image.topics.values(), key=lambda t: t.name):
            moving = [p for _, p in sorted(topic.partitions.items()) if p.reassigning]
            if moving:
                out.append((topic.name, moving))
        return out
    for name, indexes in wanted:
        topic = image.topic(name)
        if topic is None:
            continue
        moving = [topic.partitions[i] for i in indexes if i in topic.partitions and topic.partitions[i].reassigning]
        if moving:
            out.append((name, moving))
    return out
