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
        for topic in request.topics:
            name = topic_names.get(topic.topic_id) if version >= 13 else topic.topic
            fetched.update((name, p.partition) for p in topic.partitions)
            if topic.partitions and version >= 17:
                directory = topic.partitions[0].replica_directory_id
                self.directories[replica_id] = directory if directory.int else None  # (nil: not said)
        for topic in request.forgotten_topics_data:
            name = topic_names.get(topic.topic_id) if version >= 13 else topic.topic
            fetched.difference_update((name, p) for p in topic.partitions)
        self.fetched_by[replica_id] = fetched

    def fetch_ms(self, replica_id: int, key) -> int:
        """When `replica_id` last fetched group `key` from us, through its session (-1: it does not)."""
        if key in self.fetched_by.get(replica_id, ()):
            return self.peer_fetch_ms.get(replica_id, -1)
        return -1
