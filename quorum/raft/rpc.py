"""Kafka messages for the quorum RPCs: one request per destination carries every group that
needs it (KIP-595's schemas are batched by topic and partition)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...protocol.messages import (BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchSnapshotRequest,
                                      VoteRequest)
from ...protocol.primitives import ZERO_UUID

VOTE_VERSION = 2
BEGIN_QUORUM_EPOCH_VERSION = 1
END_QUORUM_EPOCH_VERSION = 1
FETCH_SNAPSHOT_VERSION = 1


@dataclass(slots=True)
class Send:
    """A request for the shell to send to `destination` (a node id); the answer comes back
    through on_response(destination, correlation_id, response)."""

    destination: int
    api_key: int
    api_version: int
    request: Any
    correlation_id: int


@dataclass(frozen=True, slots=True)
class VoteAsk:
    key: tuple
    pre_vote: bool
    epoch: int
    candidate_id: int
    last_epoch: int
    last_offset: int
    candidate_directory: Any = None  # our directory id (KIP-853)
    voter_directory: Any = None      # the directory our voter set holds for the voter asked


def _by_topic(entries, key_of):
    topics: dict = {}
    for entry in entries:
        topic, index = key_of(entry)
        topics.setdefault(topic, []).append((index, entry))
    return topics


def vote_request(cluster_id: str, voter: int, asks: list[VoteAsk]) -> VoteRequest:
    topics = _by_topic(asks, lambda a: a.key)
    return VoteRequest(cluster_id=cluster_id, voter_id=voter, topics=[
        VoteRequest.TopicData(topic_name=topic, partitions=[
            VoteRequest.PartitionData(partition_index=index, replica_epoch=a.epoch, replica_id=a.candidate_id,
                                      last_offset_epoch=a.last_epoch, last_offset=a.last_offset,
                                      pre_vote=a.pre_vote, replica_directory_id=a.candidate_directory or ZERO_UUID,
                                      voter_directory_id=a.voter_directory or ZERO_UUID)
            for index, a in entries])
        for topic, entries in topics.items()])


def begin_epoch_request(cluster_id: str, voter: int, groups: list) -> BeginQuorumEpochRequest:
    topics = _by_topic(groups, lambda g: g[0])
    return BeginQuorumEpochRequest(cluster_id=cluster_id, voter_id=voter, topics=[
        BeginQuorumEpochRequest.TopicData(topic_name=topic, partitions=[
            BeginQuorumEpochRequest.PartitionData(partition_index=index, leader_id=leader, leader_epoch=epoch)
            for index, (_, leader, epoch) in entries])
        for topic, entries in topics.items()], leader_endpoints=[])


def end_epoch_request(cluster_id: str, groups: list) -> EndQuorumEpochRequest:
    topics = _by_topic(groups, lambda g: g[0])
    Candidate = EndQuorumEpochRequest.ReplicaInfo
    return EndQuorumEpochRequest(cluster_id=cluster_id, topics=[
        EndQuorumEpochRequest.TopicData(topic_name=topic, partitions=[
            EndQuorumEpochRequest.PartitionData(
                partition_index=index, leader_id=leader, leader_epoch=epoch, preferred_successors=list(order),
                preferred_candidates=[Candidate(candidate_id=c) for c in order])
            for index, (_, leader, epoch, order) in entries])
        for topic, entries in topics.items()], leader_endpoints=[])


def fetch_snapshot_request(cluster_id: str, replica_id: int, max_bytes: int, downloads: list) -> FetchSnapshotRequest:
    topics = _by_topic(downloads, lambda d: d.key)
    return FetchSnapshotRequest(cluster_id=cluster_id, replica_id=replica_id, max_bytes=max_bytes, topics=[
        FetchSnapshotRequest.TopicSnapshot(name=topic, partitions=[
            FetchSnapshotRequest.PartitionSnapshot(
                partition=index, current_leader_epoch=d.epoch,
                snapshot_id=FetchSnapshotRequest.SnapshotId(end_offset=d.snapshot_id.end_offset,
                                                            epoch=d.snapshot_id.epoch),
                position=d.position)
            for index, d in entries])
        for topic, entries in topics.items()])

