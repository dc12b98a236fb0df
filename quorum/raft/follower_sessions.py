"""The leader side of follower fetches: which groups each follower's one fetch session holds
(a full fetch names them all, an incremental one adds and forgets), and when it last fetched.
A session fetch that does not name a group still counts for it, at O(changes) per request."""
from __future__ import annotations


class FollowerSessions:
    def __init__(self) -> None:
        self.peer_fetch_ms: dict[int, int] = {}  # when each node last fetched from us
        self.fetched_by: dict[int, set] = {}     # the groups each follower's session holds
        self.directories: dict[int, object] = {}  # each follower's directory id, as its fetches say

    def on_fetch(self, replica_id: int, request, version: int, now_ms: int, topic_names: dict) -> None:
        self.peer_fetch_ms[replica_id] = now_ms
        full = request.session_epoch in (0, -1)
        fetched = set() if full else self.fetched_by.setdefault(replica_id, set())
        fetched.update(named(request, version, topic_names))
        for topic in request.topics:
            if topic.partitions and version >= 17:
                directory = topic.partitions[0].replica_directory_id
                self.directories[replica_id] = directory if directory.int else None  # (nil: not said)
        for topic in request.forgotten_topics_data:
            name = topic_names.get(topic.topic_id) if version >= 13 else topic.topic
            fetched.difference_update((name, p) for p in topic.partitions)
        self.fetched_by[replica_id] = fetched

    def refused(self, replica_id: int, request, version: int, topic_names: dict) -> None:
        """The fetch was refused whole (its fetch session was unknown or out of step): none of
        the groups it named was read."""
        self.not_read(replica_id, named(request, version, topic_names))

    def not_read(self, replica_id: int, keys) -> None:
        """Groups of a follower's fetch answered without a read (an error, a snapshot or a
        divergence to resolve): the position it named is not in its progress, so until a fetch
        names them again, one that leaves them out says nothing of them. (Counted as unchanged,
        a deleted copy's progress vouched for a new copy that had been refused: sim seed 5815.)"""
        held = self.fetched_by.get(replica_id)
        if held:
            held.difference_update(keys)

    def fetch_ms(self, replica_id: int, key) -> int:
        """When `replica_id` last fetched group `key` from us, through its session (-1: it does not)."""
        if key in self.fetched_by.get(replica_id, ()):
            return self.peer_fetch_ms.get(replica_id, -1)
        return -1


def named(request, version: int, topic_names: dict) -> list:
    """The groups a Fetch names (topic ids from v13 on)."""
    return [(topic_names.get(t.topic_id) if version >= 13 else t.topic, p.partition)
            for t in request.topics for p in t.partitions]
