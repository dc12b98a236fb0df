"""`meta.properties`: who a data dir belongs to, and which directory it is (KIP-853, KIP-858).

Like Kafka's file of that name (version 1), a Java properties file:

    version=1
    node.id=1
    directory.id=<22 characters: a random UUID in Kafka's base64url form>

The directory id is drawn when the dir is first written, and a dir written by an older kraftd
gets one on its first start under this version. A voter is (node id, directory id): a node
restarted on a new, empty dir has a new directory id, so the quorum can tell it from the
voter whose disk it replaced (README, "Directory ids"). The file is written atomically (tmp,
fsync, rename) before anything else in a new dir, and never rewritten after.

A dir whose `node.id` is not the node's is refused, as Kafka refuses it: the wrong dir passed
to the wrong node would make it act on another node's votes and log.
"""
from __future__ import annotations

import base64
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from .atomic_file import atomic_write

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
VERSION = 1


class MetaPropertiesError(RuntimeError):
    """The data dir's meta.properties is unreadable, or belongs to another node."""


@dataclass(frozen=True)
class MetaProperties:
    node_id: int
    directory_id: uuid.UUID
    created: bool = False  # written by this start (a new dir, or an older kraftd's dir)


def uuid_to_kafka(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: base64url of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def uuid_from_kafka(text: str) -> uuid.UUID:
    text = text.strip()
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{text!r} is not a base64url UUID") from exc
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a base64url UUID ({len(raw)} bytes)")
    return uuid.UUID(bytes=raw)


def new_directory_id() -> uuid.UUID:
    """A random directory id (a version 4 UUID: never one of Kafka's reserved "unknown" and
    "unassigned" ids, the few smallest values)."""
    return uuid.uuid4()


def _parse(text: str) -> dict[str, str]:
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        props[key.strip()] = value.strip()
    return props


def read_meta_properties(data_dir: str | os.PathLike) -> MetaProperties | None:
    path = Path(data_dir) / META_PROPERTIES
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    props = _parse(text)
    try:
        if int(props.get("version", "-1")) != VERSION:
            raise ValueError(f"version {props.get('version')!r} (this kraftd reads version {VERSION})")
        return MetaProperties(int(props["node.id"]), uuid_from_kafka(props["directory.id"]))
    except (KeyError, ValueError) as exc:
        raise MetaPropertiesError(f"{path}: cannot be read: {exc}") from None


def ensure_meta_properties(data_dir: str | os.PathLike, node_id: int) -> MetaProperties:
    """The dir's identity: read, or created with a new directory id when the dir has none."""
    found = read_meta_properties(data_dir)
    path = Path(data_dir) / META_PROPERTIES
    if found is not None:
        if found.node_id != node_id:
            raise MetaPropertiesError(
                f"{path} says this data dir belongs to node {found.node_id}, and this is node {node_id}: "
                "refusing to start on another node's data dir")
        return found
    directory_id = new_directory_id()
    text = (f"# kraftd data dir identity (like Kafka's meta.properties); never edit\n"
            f"version={VERSION}\nnode.id={node_id}\ndirectory.id={uuid_to_kafka(directory_id)}\n")
    atomic_write(path, text.encode())
    log.info("data dir %s: directory id %s", data_dir, uuid_to_kafka(directory_id))
    return MetaProperties(node_id, directory_id, created=True)
