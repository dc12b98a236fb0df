"""Kafka's max.connections and max.connections.per.ip: how many client connections are open, in
total and per client address, and whether one more may be.

Over either cap a new connection is closed as soon as it is accepted (Kafka closes one over
max.connections.per.ip at once; over max.connections it stops accepting until one closes,
which an asyncio listener cannot do: here the newcomer is closed instead).
"""
from __future__ import annotations

CONNECTIONS = "connections"
CONNECTIONS_PER_IP = "connections_per_ip"


class ConnectionLimits:
    def __init__(self, max_connections: int, max_connections_per_ip: int) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.open = 0
        self._per_ip: dict[str, int] = {}

    def admit(self, host: str) -> str | None:
        """Count one more connection from `host`, or say which cap refuses it (not counted)."""
        per_ip = self._per_ip.get(host, 0)
        if per_ip >= self.max_connections_per_ip:
            return CONNECTIONS_PER_IP
        if self.open >= self.max_connections:
            return CONNECTIONS
        self._per_ip[host] = per_ip + 1
        self.open += 1
        return None

    def release(self, host: str) -> None:
        """An admitted connection from `host` closed."""
        left = self._per_ip.get(host, 0) - 1
        if left > 0:
            self._per_ip[host] = left
        else:
            self._per_ip.pop(host, None)  # no entry per address ever seen: the map stays small
        self.open = max(0, self.open - 1)

    def from_ip(self, host: str) -> int:
        return self._per_ip.get(host, 0)


# Descriptors a partition holds: its active segment and its directory (more once it has rolled
# segments, or maps one for reading). The reserve is for listeners, peers, the event loop, the
# fsync machinery and snapshot files.
FDS_PER_PARTITION = 2
FD_RESERVE = 512


def fit_descriptor_limit(max_connections: int, max_partitions: int, nofile: int | None) -> tuple[int, int]:
    """(max_connections, max_partitions), both scaled down by the same factor when together they
    would need more descriptors than RLIMIT_NOFILE allows: a client must meet a cap and its
    refusal, not EMFILE half-way through creating a topic or on every accept."""
    if not nofile or nofile <= 0:
        return max_connections, max_partitions
    need = max_connections + FDS_PER_PARTITION * max_partitions
    available = max(nofile - FD_RESERVE, 2 + FDS_PER_PARTITION)
    if need <= available:
        return max_connections, max_partitions
    factor = available / need
    return max(1, int(max_connections * factor)), max(1, int(max_partitions * factor))


def open_file_limit() -> int | None:
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, ValueError, OSError):
        return None
    return None if soft == resource.RLIM_INFINITY else soft
