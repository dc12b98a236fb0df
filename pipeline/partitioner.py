"""The Java producer's default partitioner for keyed records: murmur2 (Kafka's Utils.murmur2,
seed 0x9747b28c) of the key bytes, made positive, modulo the partition count."""
from __future__ import annotations

__all__ = ["murmur2", "partition_for_key"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` as a signed 32-bit int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    base = n4 * 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """`Utils.toPositive(Utils.murmur2(key)) % numPartitions` (BuiltInPartitioner.partitionForKey)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
