"""AlterPartition on the controller: a partition's Raft leader reports its epoch and ISR.

Leadership here is decided by each partition's own Raft group, not by the controller: the
controller records what leaders report so every node's Metadata can name them. A report of a
newer epoch becomes a full PartitionRecord (new leader, epoch, ISR); an ISR change within the
epoch a PartitionChangeRecord; a report older than the image is stale and answered with the
image's state (FENCED_LEADER_EPOCH). A report whose ISR holds a moving partition's whole target,
and none of the replicas it leaves, ends the move (quorum/metadata/reassignments.py).
"""
from __future__ import annotations

import dataclasses

from ...protocol.errors import ErrorCode
from ...protocol.messages import AlterPartitionResponse, PartitionChangeRecord

from .image import LEADER_UNCHANGED, PartitionInfo, partition_record
from .reassignments import completion

TopicOut = AlterPartitionResponse.TopicData
PartitionOut = AlterPartitionResponse.PartitionData


def alter(controller, request, version: int, now_ms: int):
    image = controller.image
    records, topics_out = [], []
    for topic in request.topics:
        topic_id = topic.topic_id if version >= 2 else image.ids_by_name.get(topic.topic_name)
        info_topic = image.topics.get(topic_id)
        parts_out = []
        for p in topic.partitions:
            info = info_topic.partitions.get(p.partition_index) if info_topic is not None else None
            if info is None:
                parts_out.append(PartitionOut(partition_index=p.partition_index,
                                              error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            isr = sorted(p.new_isr if version < 3 else [b.broker_id for b in p.new_isr_with_epochs])
            error = _change(records, info, request.broker_id, p.leader_epoch, isr)
            done = completion(image, info, isr) if error == ErrorCode.NONE else None
            if done is not None:
                records.append(done)  # the move's target is the voters now: the move ends
            parts_out.append(PartitionOut(partition_index=p.partition_index, error_code=error,
                                          leader_id=info.leader, leader_epoch=info.leader_epoch, isr=list(info.isr),
                                          partition_epoch=info.partition_epoch))
        topics_out.append(TopicOut(topic_name=topic.topic_name, topic_id=topic.topic_id, partitions=parts_out))
    response = AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=topics_out)

    def fail(error):
        response.error_code = error

    # A report the working image already holds may hold it only through a copy of this report
    # that has not committed (and a leader change may truncate): answer once that commits.
    return controller.answer_once_committed(records, response, fail, 5000, now_ms)


def _change(records: list, info: PartitionInfo, leader: int, epoch: int, isr: list[int]) -> ErrorCode:
    if epoch < info.leader_epoch or (epoch == info.leader_epoch and leader != info.leader):
        return ErrorCode.FENCED_LEADER_EPOCH
    if epoch > info.leader_epoch:
        new = dataclasses.replace(info, replicas=list(info.replicas), isr=isr, leader=leader, leader_epoch=epoch,
                                  partition_epoch=info.partition_epoch + 1, directories=list(info.directories),
                                  adding=list(info.adding), removing=list(info.removing))
        records.append(partition_record(new))
    elif sorted(info.isr) != isr:
        records.append(PartitionChangeRecord(partition_id=info.index, topic_id=info.topic_id, isr=isr,
                                             leader=LEADER_UNCHANGED))
    return ErrorCode.NONE
