"""The metadata image: brokers, topics, partitions, topic configs, the producer-id counter,
users' SCRAM credentials and ACLs, as replayed from the committed records of `__cluster_metadata`.

Every entity has a key (`broker_key`, `topic_key`, ...). `replay(record)` returns the keys a
record changed and `entity_record(key)` re-encodes an entity's current state as one record: a
KIP-630 snapshot of the image is those records, one per key, so loading a snapshot is replaying
it. Deleted topics stay as a RemoveTopicRecord (a few bytes each): a node that missed the
deletion learns from a snapshot that its copy is gone, and deletes it.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ...protocol import messages as m
from ...protocol.primitives import ZERO_UUID
from .acls import AclBinding

TOPIC_RESOURCE = 2   # ConfigRecord.resource_type for a topic (Kafka's ConfigResource.Type.TOPIC)
NO_LEADER = -1
LEADER_UNCHANGED = -2  # PartitionChangeRecord.leader default
PRODUCER_IDS_KEY = b"pid"


def broker_key(node_id: int) -> bytes:
    return b"b/%d" % node_id


def topic_key(topic_id: uuid.UUID) -> bytes:
    return b"t/" + topic_id.hex.encode()


def partition_key(topic_id: uuid.UUID, index: int) -> bytes:
    return b"p/%s/%d" % (topic_id.hex.encode(), index)


def config_key(topic: str, name: str) -> bytes:
    return b"c/%s/%s" % (topic.encode(), name.encode())


def scram_key(user: str, mechanism: int) -> bytes:
    return b"s/%d/%s" % (mechanism, user.encode())


def acl_key(acl_id: uuid.UUID) -> bytes:
    return b"a/" + acl_id.hex.encode()


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a server keeps of a SCRAM password (RFC 5802): never the password itself."""
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    fenced: bool = False
    rack: str | None = None
    directory_id: uuid.UUID | None = None  # its data dir (KIP-858 LogDirs); None: registered before ids


@dataclass(slots=True)
class PartitionInfo:
    topic_id: uuid.UUID
    index: int
    replicas: list[int]
    isr: list[int]
    leader: int = NO_LEADER
    leader_epoch: int = -1
    partition_epoch: int = 0
    # Each replica's directory id, in the order of `replicas` (KIP-858's Directories): the
    # directory the replica was placed on. A node on another directory is not that replica's
    # voter. Empty: written before directory ids (every replica's directory is unknown).
    directories: list = field(default_factory=list)
    # A reassignment in progress (KIP-455): `replicas` is the target's, then the replicas
    # being removed; `adding` are in the target and not in the original set.
    adding: list = field(default_factory=list)
    removing: list = field(default_factory=list)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def target(self) -> list[int]:
        """The replicas the partition moves to (its replicas when it does not move)."""
        return [r for r in self.replicas if r not in self.removing]

    def original(self) -> list[int]:
        """The replicas it had before the move (its replicas when it does not move)."""
        return [r for r in self.replicas if r not in self.adding]

    def directory_of(self, node_id: int):
        """The directory id the image holds for `node_id`'s replica, or None if unknown."""
        try:
            directory = self.directories[self.replicas.index(node_id)]
        except (ValueError, IndexError):
            return None
        return directory if directory.int != 0 else None


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)


class MetadataImage:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[uuid.UUID, TopicInfo] = {}
        self.ids_by_name: dict[str, uuid.UUID] = {}
        self.configs: dict[str, dict[str, str]] = {}   # topic name -> explicit configs
        self.removed: set[uuid.UUID] = set()
        self.next_producer_id = 0
        self.scram: dict[str, dict[int, ScramCredential]] = {}  # user -> mechanism -> credential
        self.acls: dict[uuid.UUID, AclBinding] = {}
        self.acls_version = 0  # moves with every ACL change (what the authorizer's index is of)
        # A PartitionRecord replayed before its TopicRecord (snapshot order is by key).
        self._orphans: dict[uuid.UUID, dict[int, PartitionInfo]] = {}

    # -- reading -------------------------------------------------------------------------------
    def topic(self, name: str) -> TopicInfo | None:
        topic_id = self.ids_by_name.get(name)
        return self.topics.get(topic_id) if topic_id is not None else None

    def live_brokers(self) -> list[BrokerInfo]:
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def directories_of(self, replicas) -> list:
        """Each replica's registered directory id, for a PartitionRecord placing them (KIP-858);
        Kafka's "unassigned" (the nil UUID) for a broker registered without one."""
        dirs = []
        for r in replicas:
            b = self.brokers.get(r)
            dirs.append(b.directory_id if b is not None and b.directory_id is not None else _UNKNOWN_DIRECTORY)
        return dirs

    def is_live(self, node_id: int) -> bool:
        b = self.brokers.get(node_id)
        return b is not None and not b.fenced

    # -- replay ----------------------------------------------------------------------------------
    def replay(self, record) -> list[bytes]:
        """Apply one committed record; returns the keys of the entities it changed."""
        kind = type(record)
        if kind is m.PartitionChangeRecord:
            return self._partition_change(record)
        if kind is m.PartitionRecord:
            return self._partition(record)
        if kind is m.TopicRecord:
            return self._topic(record)
        if kind is m.ConfigRecord:
            return self._config(record)
        if kind is m.RegisterBrokerRecord:
            return self._broker(record)
        if kind is m.RemoveTopicRecord:
            return self._remove_topic(record.topic_id)
        if kind is m.ProducerIdsRecord:
            self.next_producer_id = max(self.next_producer_id, record.next_producer_id)
            return [PRODUCER_IDS_KEY]
        if kind is m.UserScramCredentialRecord:
            self.scram.setdefault(record.name, {})[record.mechanism] = ScramCredential(
                bytes(record.salt), bytes(record.stored_key), bytes(record.server_key), record.iterations)
            return [scram_key(record.name, record.mechanism)]
        if kind is m.RemoveUserScramCredentialRecord:
            mechanisms = self.scram.get(record.name, {})
            mechanisms.pop(record.mechanism, None)
            if not mechanisms:
                self.scram.pop(record.name, None)
            return [scram_key(record.name, record.mechanism)]
        if kind is m.AccessControlEntryRecord:
            self.acls[record.id] = AclBinding(record.resource_type, record.resource_name, record.pattern_type,
                                              record.principal_name, record.host, record.operation,
                                              record.permission_type)
            self.acls_version += 1
            return [acl_key(record.id)]
        if kind is m.RemoveAccessControlEntryRecord:
            if self.acls.pop(record.id, None) is not None:
                self.acls_version += 1
            return [acl_key(record.id)]
        return []  # a record type this version does not use: nothing in the image depends on it

    def _topic(self, record) -> list[bytes]:
        topic = TopicInfo(record.name, record.topic_id, self._orphans.pop(record.topic_id, {}))
        self.topics[record.topic_id] = topic
        self.ids_by_name[record.name] = record.topic_id
        self.removed.discard(record.topic_id)
        return [topic_key(record.topic_id)]

    def _partition(self, record) -> list[bytes]:
        info = PartitionInfo(record.topic_id, record.partition_id, list(record.replicas), list(record.isr),
                             record.leader, record.leader_epoch, record.partition_epoch,
                             _directories(record.directories, len(record.replicas)),
                             list(record.adding_replicas or ()), list(record.removing_replicas or ()))
        topic = self.topics.get(record.topic_id)
        target = topic.partitions if topic is not None else self._orphans.setdefault(record.topic_id, {})
        target[record.partition_id] = info
        return [partition_key(record.topic_id, record.partition_id)]

    def _partition_change(self, record) -> list[bytes]:
        topic = self.topics.get(record.topic_id)
        info = topic.partitions.get(record.partition_id) if topic is not None else None
        if info is None:
            return []
        if record.isr is not None:
            info.isr = list(record.isr)
        directories = record.directories
        if record.replicas is not None:
            replicas = list(record.replicas)
            if directories is None and info.directories:  # each kept replica keeps its directory
                directories = [info.directory_of(r) or _UNKNOWN_DIRECTORY for r in replicas]
            info.replicas = replicas
        if directories is not None:
            info.directories = _directories(directories, len(info.replicas))
        if record.adding_replicas is not None:
            info.adding = list(record.adding_replicas)
        if record.removing_replicas is not None:
            info.removing = list(record.removing_replicas)
        if record.leader != LEADER_UNCHANGED:
            info.leader = record.leader
            info.leader_epoch += 1
        info.partition_epoch += 1
        return [partition_key(record.topic_id, record.partition_id)]

    def _config(self, record) -> list[bytes]:
        if record.resource_type != TOPIC_RESOURCE:
            return []
        configs = self.configs.setdefault(record.resource_name, {})
        if record.value is None:
            configs.pop(record.name, None)
            if not configs:
                del self.configs[record.resource_name]
        else:
            configs[record.name] = record.value
        return [config_key(record.resource_name, record.name)]

    def _broker(self, record) -> list[bytes]:
        endpoint = record.end_points[0] if record.end_points else None
        self.brokers[record.broker_id] = BrokerInfo(
            record.broker_id, endpoint.host if endpoint else "", endpoint.port if endpoint else 0,
            record.incarnation_id, record.broker_epoch, bool(record.fenced), record.rack,
            record.log_dirs[0] if record.log_dirs else None)
        return [broker_key(record.broker_id)]

    def _remove_topic(self, topic_id: uuid.UUID) -> list[bytes]:
        topic = self.topics.pop(topic_id, None)
        self._orphans.pop(topic_id, None)
        self.removed.add(topic_id)
        keys = [topic_key(topic_id)]
        if topic is None:
            return keys
        if self.ids_by_name.get(topic.name) == topic_id:
            del self.ids_by_name[topic.name]
            for name in self.configs.pop(topic.name, {}):
                keys.append(config_key(topic.name, name))
        keys += [partition_key(topic_id, i) for i in topic.partitions]
        return keys

    # -- the image as records (snapshots) --------------------------------------------------------
    def entity_record(self, key: bytes):
        """The one record that recreates entity `key` as it is now, or None if it is gone."""
        kind, _, rest = key.partition(b"/")
        if kind == b"b":
            b = self.brokers.get(int(rest))
            return None if b is None else register_broker_record(b)
        if kind == b"t":
            topic_id = uuid.UUID(hex=rest.decode())
            if topic_id in self.removed:
                return m.RemoveTopicRecord(topic_id=topic_id)
            topic = self.topics.get(topic_id)
            return None if topic is None else m.TopicRecord(name=topic.name, topic_id=topic_id)
        if kind == b"p":
            hex_id, _, index = rest.partition(b"/")
            topic = self.topics.get(uuid.UUID(hex=hex_id.decode()))
            info = topic.partitions.get(int(index)) if topic is not None else None
            return None if info is None else partition_record(info)
        if kind == b"c":
            topic, _, name = rest.decode().partition("/")
            value = self.configs.get(topic, {}).get(name)
            return None if value is None else m.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=topic,
                                                             name=name, value=value)
        if kind == b"s":
            mechanism, _, user = rest.partition(b"/")
            credential = self.scram.get(user.decode(), {}).get(int(mechanism))
            return None if credential is None else m.UserScramCredentialRecord(
                name=user.decode(), mechanism=int(mechanism), salt=credential.salt,
                stored_key=credential.stored_key, server_key=credential.server_key,
                iterations=credential.iterations)
        if kind == b"a":
            acl_id = uuid.UUID(hex=rest.decode())
            acl = self.acls.get(acl_id)
            return None if acl is None else access_control_entry_record(acl_id, acl)
        if key == PRODUCER_IDS_KEY:
            return m.ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=self.next_producer_id)
        return None


def partition_record(info: PartitionInfo):
    return m.PartitionRecord(partition_id=info.index, topic_id=info.topic_id, replicas=list(info.replicas),
                             isr=list(info.isr), removing_replicas=list(info.removing),
                             adding_replicas=list(info.adding), leader=info.leader,
                             leader_epoch=info.leader_epoch, partition_epoch=info.partition_epoch,
                             directories=list(info.directories))


_UNKNOWN_DIRECTORY = ZERO_UUID  # Kafka's DirectoryId.UNASSIGNED


def _directories(directories, replicas: int) -> list:
    """A record's Directories as the image keeps them: one per replica, or none at all (a
    record from before directory ids, or a malformed list, which no replica is judged by)."""
    directories = list(directories or ())
    return directories if len(directories) == replicas else []


def register_broker_record(b: BrokerInfo):
    Endpoint = m.RegisterBrokerRecord.BrokerEndpoint
    return m.RegisterBrokerRecord(
        broker_id=b.node_id, incarnation_id=b.incarnation_id, broker_epoch=b.broker_epoch,
        end_points=[Endpoint(name="PLAINTEXT", host=b.host, port=b.port, security_protocol=0)],
        features=[], rack=b.rack, fenced=b.fenced, log_dirs=[b.directory_id] if b.directory_id else [])


def access_control_entry_record(acl_id: uuid.UUID, acl: AclBinding):
    return m.AccessControlEntryRecord(id=acl_id, resource_type=acl.resource_type, resource_name=acl.resource_name,
                                      pattern_type=acl.pattern_type, principal_name=acl.principal, host=acl.host,
                                      operation=acl.operation, permission_type=acl.permission)
