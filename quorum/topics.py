"""Topics and their partitions on this node: lookup by name or id, creation, validation."""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator

from .node_config import NodeConfig
from .partition import Partition
from .topic_config import InvalidTopicConfig, TopicConfig

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_PARTITIONS = 10_000
# Every node of a cluster holds the metadata partition, as a voter or as an observer.
ALWAYS_HOSTED = "__cluster_metadata"


class TopicError(Exception):
    """A creation problem, named by its Kafka error (the handler maps it to a code)."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


class TopicCreating(TopicError):
    """A topic is reserved and its logs are being opened off the loop (log_opening.py): to an
    auto-creating request, LEADER_NOT_AVAILABLE; to CreateTopics, a creation to wait for."""

    def __init__(self, pending) -> None:
        super().__init__("LEADER_NOT_AVAILABLE", f"Topic '{pending.name}' is being created.")
        self.pending = pending


@dataclass(slots=True, eq=False)
class Topic:
    name: str
    topic_id: uuid.UUID
    config: TopicConfig
    partitions: list[Partition | None]  # None: a partition this node holds no replica of
    num: int = 0  # a small node-local number (fetch sessions key partitions by it)


def topic_name_problem(name: str) -> str | None:
    if not name:
        return "Topic name is empty"
    if name in (".", ".."):
        return f"Topic name cannot be '{name}'"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_NAME.fullmatch(name):
        return f"Topic name '{name}' has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


# Opens (recovering if needed) the log of one partition.
LogOpener = Callable[[str, int, TopicConfig], object]


@dataclass(slots=True, eq=False)
class PendingTopic:
    """A topic in the catalog whose logs are being opened off the loop (quorum/log_opening.py):
    not served yet, but its name is taken."""
    name: str
    topic_id: uuid.UUID
    config: TopicConfig
    count: int
    assignments: list | None
    hosted: list[int]  # the partitions with a replica here: the logs to open
    joined: tuple = ()  # hosted here though not among their voters (catalog TopicInfo.joined)


class TopicRegistry:
    def __init__(self, config: NodeConfig, catalog, open_log: LogOpener, make_partition) -> None:
        self._config = config
        self._catalog = catalog
        self._open_log = open_log
        self._make_partition = make_partition  # (topic, index, topic_id, log, config, topic_num)
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._pending: dict[str, PendingTopic] = {}
        self._num = 0
        self.compacted_topics = 0  # topics with cleanup.policy=compact[,delete] (the cleaner's schedule)

    def load(self) -> None:
        for entry in self._catalog.all():
            config = TopicConfig.resolve(entry.configs, self._config)
            self._add(entry.name, entry.topic_id, config, entry.partitions, entry.assignments, joined=entry.joined)

    def __iter__(self) -> Iterator[Topic]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, index: int) -> Partition | None:
        topic = self._by_name.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def partitions(self) -> Iterator[Partition]:
        for topic in self._by_name.values():
            for partition in topic.partitions:
                if partition is not None:
                    yield partition

    def delete(self, name: str) -> Topic | None:
        """Forget a topic and drop it from the catalog; the caller closes and removes its logs."""
        topic = self._by_name.pop(name, None)
        if topic is None:
            return None
        self.compacted_topics -= topic.config.is_compacted
        self._by_id.pop(topic.topic_id, None)
        self._catalog.delete(name)
        return topic

    # -- a reassignment adds or drops one partition here -----------------------------------------
    def host_partition(self, topic: Topic, index: int, voters) -> Partition:
        """Host partition `index` of `topic` from now on, its group starting from `voters` (this
        node joins as an observer when they do not list it). Its log is new and empty."""
        entry = self._catalog.set_hosted(topic.name, index, voters, joined=self._config.node_id not in voters)
        partition = self._make_partition(topic.name, index, topic.topic_id,
                                         self._open_log(topic.name, index, topic.config), topic.config, topic.num,
                                         list(entry.assignments[index]))
        topic.partitions[index] = partition
        return partition

    def drop_partition(self, topic: Topic, index: int, replicas, image_offset: int) -> Partition | None:
        """No longer host partition `index`, which the image at metadata offset `image_offset`
        moved away; the caller closes and removes its log. The catalog records that offset
        in the same write: restarted, a node hosts nothing new until its image has replayed that far (an
        older image, still listing this node, brought a dropped copy back as a fresh voter that
        had forgotten its vote and voted again in the same epoch: two leaders, sim seed 4034)."""
        partition = topic.partitions[index]
        if partition is None:
            return None
        self._catalog.set_hosted(topic.name, index, replicas, joined=False, metadata_offset=image_offset)
        topic.partitions[index] = None
        return partition

    def explicit_configs(self, name: str) -> dict[str, str]:
        """The configs a topic was given (created with or altered to), without the defaults."""
        entry = self._catalog.get(name)
        return dict(entry.configs) if entry is not None else {}

    def reconfigure(self, name: str, configs: dict[str, str]) -> TopicConfig | None:
        """The topic's explicit configs are now `configs` (validated by the caller): the
        catalog, the topic, its partitions and their logs take them. None: no such topic."""
        topic = self._by_name.get(name)
        if topic is None:
            return None
        config = TopicConfig.resolve(configs, self._config)
        self._catalog.update(name, configs=configs)
        self.compacted_topics += config.is_compacted - topic.config.is_compacted
        topic.config = config
        for partition in topic.partitions:
            if partition is not None:
                partition.config = config
                partition.log.reconfigure(segment_bytes=config.segment_bytes, segment_ms=config.segment_ms,
                                          compacted=config.is_compacted)
        return config

    def validate(self, name: str, num_partitions: int, configs: dict) -> TopicConfig:
        problem = topic_name_problem(name)
        if problem:
            raise TopicError("INVALID_TOPIC_EXCEPTION", problem)
        if name in self._by_name or name in self._pending:
            raise TopicError("TOPIC_ALREADY_EXISTS", f"Topic '{name}' already exists.")
        if not 1 <= num_partitions <= MAX_PARTITIONS:
            raise TopicError("INVALID_PARTITIONS", f"Number of partitions must be between 1 and {MAX_PARTITIONS}.")
        try:
            return TopicConfig.resolve(configs, self._config)
        except InvalidTopicConfig as exc:
            raise TopicError("INVALID_CONFIG", str(exc)) from None

    def create(self, name: str, num_partitions: int, configs: dict, *, topic_id: uuid.UUID | None = None,
               assignments: list | None = None, joined=()) -> Topic:
        """`assignments[i]`: the voters of partition i (default: this node alone); `joined`:
        partitions hosted here though this node is not among their voters."""
        config = self.validate(name, num_partitions, configs)
        entry = self._catalog.create(name, num_partitions, {k: v for k, v in configs.items() if v is not None},
                                     topic_id=topic_id, assignments=assignments, joined=joined)
        return self._add(name, entry.topic_id, config, num_partitions, entry.assignments, joined=entry.joined)

    # -- creation with the logs opened off the loop ----------------------------------------------
    def reserve(self, name: str, num_partitions: int, configs: dict, *, topic_id: uuid.UUID | None = None,
                assignments: list | None = None, joined=()) -> PendingTopic:
        """`create`'s first half: validated and in the catalog; `complete` adds it once the
        logs of `hosted` are open."""
        config = self.validate(name, num_partitions, configs)
        entry = self._catalog.create(name, num_partitions, {k: v for k, v in configs.items() if v is not None},
                                     topic_id=topic_id, assignments=assignments, joined=joined)
        hosted = [i for i in range(num_partitions) if self._hosts(name, entry.assignments, i, entry.joined)]
        pending = PendingTopic(name, entry.topic_id, config, num_partitions, entry.assignments, hosted,
                               entry.joined)
        self._pending[name] = pending
        return pending

    def pending(self, name: str) -> PendingTopic | None:
        return self._pending.get(name)

    def pending_by_id(self, topic_id: uuid.UUID) -> PendingTopic | None:
        return next((p for p in self._pending.values() if p.topic_id == topic_id), None)

    def pending_partition_count(self) -> int:
        return sum(p.count for p in self._pending.values())

    def complete(self, pending: PendingTopic, logs: dict) -> Topic:
        """`logs`: partition index -> its opened log, for each of `pending.hosted`."""
        del self._pending[pending.name]
        return self._add(pending.name, pending.topic_id, pending.config, pending.count, pending.assignments, logs,
                         joined=pending.joined)

    def drop_pending(self, name: str) -> PendingTopic | None:
        """Deleted before its logs were open (or they failed to open): out of the catalog."""
        pending = self._pending.pop(name, None)
        if pending is not None:
            self._catalog.delete(name)
        return pending

    def _hosts(self, name: str, assignments, index: int, joined=()) -> bool:
        return index in joined or not (assignments and self._config.clustered and self._config.node_id not in assignments[index]
                    and name != ALWAYS_HOSTED)

    def _add(self, name: str, topic_id: uuid.UUID, config: TopicConfig, count: int, assignments=None,
             logs: dict | None = None, *, joined=()) -> Topic:
        self._num += 1
        num = self._num
        partitions = [
            self._make_partition(name, i, topic_id, logs[i] if logs is not None else self._open_log(name, i, config),
                                 config, num, assignments[i] if assignments else None)
            if self._hosts(name, assignments, i, joined) else None
            for i in range(count)
        ]
        topic = Topic(name, topic_id, config, partitions, num=num)
        self.compacted_topics += config.is_compacted
        self._by_name[name] = topic
        self._by_id[topic_id] = topic
        return topic
