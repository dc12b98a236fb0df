"""Topics (id, partition count, configs) and the cluster id, persisted as atomic JSON files.

A change is made in memory at once and written in the background (storage/background_writes.py):
a log's next flush waits for it, so no data is acknowledged as durable in a topic the catalog on
disk does not have yet. Writes queued while one waits coalesce into one.
"""
from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import dataclass, field

import threading

from .atomic_file import atomic_write
from .background_writes import background_writes

__all__ = ["TopicInfo", "TopicCatalog", "TopicExistsError", "CATALOG_FILE", "META_FILE", "hosted"]

CATALOG_FILE = "topics.json"
META_FILE = "meta.properties"


class TopicExistsError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict = field(default_factory=dict)
    assignments: tuple | None = None  # per partition, its replicas (Raft voters); None: this node alone
    # Partitions this node hosts though it is not among their assignment's voters: it joined
    # them in a reassignment, as an observer until the group adds it (its log then says so).
    joined: tuple = ()


class TopicCatalog:
    def __init__(self, data_dir: str | os.PathLike):
        self.data_dir = os.fspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        self._path = os.path.join(self.data_dir, CATALOG_FILE)
        self._topics: dict[str, TopicInfo] = {}
        self._save_lock = threading.Lock()
        self._latest: tuple[dict, int] | None = None  # what the queued write will write
        # In a cluster: the metadata offset the hosted topics were last reconciled with.
        self.metadata_offset = 0
        if os.path.exists(self._path):
            with open(self._path, "rb") as f:
                doc = json.loads(f.read())
                self.metadata_offset = int(doc.get("metadata_offset", 0))
                for name, t in doc["topics"].items():
                    assignments = t.get("assignments")
                    self._topics[name] = TopicInfo(
                        name, uuid.UUID(t["topic_id"]), int(t["partitions"]), dict(t["configs"]),
                        tuple(tuple(a) for a in assignments) if assignments else None,
                        tuple(t.get("joined", ())),
                    )

    def create(
        self, name: str, partitions: int, configs: dict | None = None, topic_id: uuid.UUID | None = None,
        assignments=None, joined=(),
    ) -> TopicInfo:
        if name in self._topics:
            raise TopicExistsError(name)
        if partitions < 1:
            raise ValueError("partitions must be ≥ 1")
        if assignments is not None and len(assignments) != partitions:
            raise ValueError("one replica list per partition")
        info = TopicInfo(name, topic_id or _random_topic_id(), partitions, dict(configs or {}),
                         tuple(tuple(a) for a in assignments) if assignments else None, tuple(sorted(joined)))
        self._topics[name] = info
        self._save()
        return info

    def update(self, name: str, *, partitions: int | None = None, configs: dict | None = None) -> TopicInfo:
        old = self._topics[name]
        info = TopicInfo(
            name,
            old.topic_id,
            old.partitions if partitions is None else partitions,
            old.configs if configs is None else dict(configs),
            old.assignments,
            old.joined,
        )
        self._topics[name] = info
        self._save()
        return info

    def set_assignments(self, name: str, assignments) -> TopicInfo:
        """Replace a topic's per-partition replica lists (an unclean recovery shrinks them)."""
        old = self._topics[name]
        if len(assignments) != old.partitions:
            raise ValueError("one replica list per partition")
        info = TopicInfo(name, old.topic_id, old.partitions, old.configs, tuple(tuple(a) for a in assignments),
                         old.joined)
        self._topics[name] = info
        self._save()
        return info

    def set_hosted(self, name: str, index: int, voters, joined: bool, metadata_offset: int = -1) -> TopicInfo:
        """Partition `index` of a cluster topic changed here in a reassignment (see `hosted`),
        as the image at `metadata_offset` says (raised in the same write)."""
        info = hosted(self._topics[name], index, voters, joined)
        self._topics[name] = info
        self.metadata_offset = max(self.metadata_offset, metadata_offset)
        self._save()
        return info

    def delete(self, name: str) -> TopicInfo:
        info = self._topics.pop(name)
        self._save()
        return info

    def set_metadata_offset(self, offset: int) -> None:
        if offset != self.metadata_offset:
            self.metadata_offset = offset
            self._save()

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for t in self._topics.values():
            if t.topic_id == topic_id:
                return t
        return None

    def all(self) -> list[TopicInfo]:
        return list(self._topics.values())

    def __contains__(self, name: str) -> bool:
        return name in self._topics

    def cluster_id(self) -> str:
        """The cluster id, generated (22-char base64url UUID, like kafka-storage) on first use."""
        path = os.path.join(self.data_dir, META_FILE)
        props = _read_properties(path)
        if "cluster.id" in props:
            return props["cluster.id"]
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        props.setdefault("version", "1")
        props["cluster.id"] = cid
        atomic_write(path, "".join(f"{k}={v}\n" for k, v in props.items()).encode())
        return cid

    def flush(self) -> None:
        """Until every change made so far is on disk."""
        background_writes().barrier()

    def _save(self) -> None:
        with self._save_lock:
            queued = self._latest is not None
            self._latest = (dict(self._topics), self.metadata_offset)  # a shallow copy: infos are frozen
        if not queued:
            background_writes().submit(self._write_latest)

    def _write_latest(self) -> None:
        with self._save_lock:
            topics, metadata_offset = self._latest
            self._latest = None
        doc = {
            "version": 1,
            **({"metadata_offset": metadata_offset} if metadata_offset else {}),
            "topics": {
                t.name: {"topic_id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs,
                         **({"assignments": [list(a) for a in t.assignments]} if t.assignments else {}),
                         **({"joined": list(t.joined)} if t.joined else {})}
                for t in topics.values()
            },
        }
        # Compact: with `indent` json uses its pure-Python encoder, ~11 ms of GIL-holding Python
        # per write at 1,000 topics that the event loop waits behind (bench/README.md, (v)).
        atomic_write(self._path, json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())


def hosted(old: TopicInfo, index: int, voters, joined: bool) -> TopicInfo:
    """`old` after partition `index` changed here in a reassignment: `voters` are the Raft
    voters its group starts from, `joined` that this node hosts it without being one of them
    (it hosts it when either says so)."""
    assignments = list(old.assignments)
    assignments[index] = tuple(voters)
    joined_now = set(old.joined) - {index}
    if joined:
        joined_now.add(index)
    return TopicInfo(old.name, old.topic_id, old.partitions, old.configs, tuple(assignments), tuple(sorted(joined_now)))


def _random_topic_id() -> uuid.UUID:
    # Kafka reserves the zero UUID and ids whose base64 starts with '-' (CLI ambiguity).
    while True:
        u = uuid.uuid4()
        if u.int and not base64.urlsafe_b64encode(u.bytes).startswith(b"-"):
            return u


def _read_properties(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    props = {}
    for line in lines:
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            props[k.strip()] = v.strip()
    return props
