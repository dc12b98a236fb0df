"""What a reassignment (KIP-455) changes of what this node hosts, and the image's topic configs.

A partition the image now lists this node for is hosted at once, its group joining as an
observer that may not vote until it follows a leader (this node may have voted in a copy it
deleted since: ElectionState.joining) and starting from the replicas before the move; the
partition's leader adds it once it has caught up (quorum/metadata/replica_moves.py). A hosted
partition the image no longer lists this node for is dropped once this node's removal from the
group's voters has committed (the voters that stay hold everything committed): its group stops,
its election state and files go, and the topic's catalog entry once nothing of it is hosted
here.

"Has committed" is judged on a log the leader answered after the move away was seen here, and
only once the leader's HW has passed what that answer brought: a copy that had not fetched the
VotersRecord adding it (a move cancelled while the leader added it) would otherwise drop a
voter the newest set still counts, leaving that set short of a majority (sim seed 6007).
"""
from __future__ import annotations

import logging

from .metadata.names import METADATA_TOPIC
from .topic_config import InvalidTopicConfig, TopicConfig, policy_change_problem
from .topics import Topic

log = logging.getLogger(__name__)


def starting_voters(info) -> list[int]:
    """The voters a new replica of partition `info` starts from: its replicas before the move
    under way (the group adds this node once it has caught up), else its replicas. Once the
    replica has fetched the log's VotersRecords, they say who the voters are."""
    return info.original() if info.reassigning else list(info.replicas)


class PartitionMoves:
    def __init__(self, node_id: int, topics, replication, stored_states: dict, election_store, changes,
                 snapshots, epoch_floor_fixed) -> None:
        self._node_id = node_id
        self._topics = topics
        self._replication = replication
        self._stored_states = stored_states
        self._election_store = election_store
        self._changes = changes
        self._snapshots = snapshots
        self._epoch_floor_fixed = epoch_floor_fixed  # Hosting's: the new groups' epoch floor, once
        # Partitions with a history hosted here anew: no vote until they follow a leader
        # (Hosting makes their groups and takes the mark).
        self.joining: set = set()
        # hosted partitions moved away -> [when seen, our log end after the leader's first answer
        # since then (None until it came)]: dropped once our removal has committed
        self._departing: dict = {}

    def reconcile(self, topic: Topic, info, now_ms: int, indexes=None) -> bool:
        """A hosted topic whose partitions (`indexes`, None: all) changed in the image: host
        those that list this node now, mark those that no longer do. True if what we host
        changed."""
        me = self._node_id
        changed = False
        for index in sorted(info.partitions if indexes is None else indexes):
            p = info.partitions.get(index)
            if p is None or not 0 <= index < len(topic.partitions):
                continue
            key = (topic.name, index)
            hosted = topic.partitions[index] is not None
            if me in p.replicas and not hosted:
                self._departing.pop(key, None)
                self.joining.add(key)
                with self._epoch_floor_fixed():
                    self._topics.host_partition(topic, index, starting_voters(p))
                log.info("%s-%d: hosted here from now on (replicas %s), as an observer until added",
                         topic.name, index, p.replicas)
                changed = True
            elif me not in p.replicas and hosted:
                self._departing.setdefault(key, [now_ms, None])
            elif me in p.replicas:
                self._departing.pop(key, None)
        if changed:
            self._replication.poll(now_ms)
        return changed

    @property
    def departing(self) -> bool:
        return bool(self._departing)

    def drop_departed(self, image, now_ms: int, image_offset: int) -> bool:
        """Drop the partitions that moved away whose removal from the voters has committed.
        Called at every step while some are departing: the leader's answer is fresh only just
        after it came (checked once a second, an idle stream's answers, every fetch wait plus a
        round trip, kept missing the window and a copy stayed for good: sim seed 9460).
        `image_offset`: the metadata offset `image` is at. True if it dropped one."""
        dropped = False
        for key in sorted(self._departing):
            name, index = key
            topic = self._topics.get(name)
            partition = topic.partitions[index] if topic is not None and index < len(topic.partitions) else None
            info = image.topic(name)
            p = info.partitions.get(index) if partition is not None and info is not None \
                and info.topic_id == topic.topic_id else None
            if p is None:
                self._departing.pop(key, None)
                continue
            group = partition.raft
            mark = self._departing[key]
            if mark[1] is not None and mark[1] > partition.log.log_end_offset:
                # Truncated since (a new leader had less): what the old one held may never
                # commit. Take the mark again from the next answer (sim seed 5111: an idle
                # partition's HW stayed below the old mark, and the copy stayed for good).
                mark[0], mark[1] = now_ms, None
            stream = self._replication.streams.of(group) if not group.is_leader else None
            if mark[1] is None and stream is not None and stream.answered_since(key, mark[0]):
                mark[1] = partition.log.log_end_offset  # at least what the leader held when it answered
            # ...and still in touch: a leader that had not seen the move yet may have added us
            # since, in a record we would have fetched by now (seed 6007: dropped 550 ms after
            # the leader's last answer, which had missed the add)
            fresh = stream is not None and stream.answered_since(key, now_ms - self._replication.config.fetch_max_wait_ms)
            if (self._node_id in p.replicas or group.is_voter or mark[1] is None or not fresh
                    or partition.high_watermark < mark[1] or group.log_voters.offset() >= partition.high_watermark):
                continue  # still wanted, or our removal has not committed yet
            self._departing.pop(key, None)
            self._drop(topic, index, p.replicas, image_offset)
            dropped = True
            log.info("%s-%d: moved away (replicas %s); its copy here is deleted", name, index, p.replicas)
        return dropped

    def _drop(self, topic: Topic, index: int, replicas, image_offset: int) -> None:
        partition = self._topics.drop_partition(topic, index, replicas, image_offset)
        key = partition.key
        self._replication.remove_group(key)
        if self._stored_states.pop(key, None) is not None:
            self._election_store.write({key: None})  # (hosted again later, it starts afresh)
        self._changes.dirty.pop(key, None)
        self._snapshots.forget(key)
        partition.log.discard(remove=False)
        partition.log.remove_discarded()
        if all(p is None for p in topic.partitions):
            self._topics.delete(topic.name)  # none of it is hosted here now (back if a move returns)
        self._changes.wake([key])


def apply_config_change(topics, node_config, name: str, image) -> None:
    """IncrementalAlterConfigs changed a topic's configs in the image: the hosted topic takes
    them. Only the topic the image holds under that name (not an older one of the name still
    being deleted here; never the metadata partition, whose configs are its own), and never a
    change the controller would have refused (to or from snapshot). Also called when a topic's
    logs have opened: reconciliation skips a topic until then."""
    topic = topics.get(name)
    info = image.topic(name)
    if topic is None or name == METADATA_TOPIC or info is None or info.topic_id != topic.topic_id:
        return
    configs = dict(image.configs.get(name, {}))
    if topics.explicit_configs(name) == configs:
        return
    try:
        config = TopicConfig.resolve(configs, node_config)
    except InvalidTopicConfig as exc:
        log.error("topic %s: the image's configs are invalid here, not applied: %s", name, exc)
        return
    problem = policy_change_problem(topic.config, config)
    if problem:
        log.error("topic %s: %s; the image's configs are not applied", name, problem)
        return
    topics.reconfigure(name, configs)
