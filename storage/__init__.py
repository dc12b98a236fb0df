"""kraftd.storage: partition logs (segments, indexes, recovery), epoch cache, producer state,
quorum-state and topic-catalog files. Files only: no sockets, no replication, no asyncio."""
from .errors import NonContiguousAppendError, OffsetOutOfRangeError, StorageError
from .file_log import FileLog
from .leader_epoch_cache import EpochEntry, LeaderEpochCache, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from .log_base import AppendResult, PartitionLog, ReadResult, RecoveryReport
from .memory_log import MemoryLog, MemoryRegion
from .producer_state import BatchMetadata, ProducerStateTable, ProducerStatus, SequenceCheck
from .quorum_state import QuorumStateStore
from .segment import FileRegion, LogSegment
from .topic_catalog import TopicCatalog, TopicExistsError, TopicInfo

__all__ = [
    "AppendResult", "BatchMetadata", "EpochEntry", "FileLog", "FileRegion", "LeaderEpochCache",
    "LogSegment", "MemoryLog", "MemoryRegion", "NonContiguousAppendError", "OffsetOutOfRangeError",
    "PartitionLog", "ProducerStateTable", "ProducerStatus", "QuorumStateStore", "ReadResult",
    "RecoveryReport", "SequenceCheck", "StorageError", "TopicCatalog", "TopicExistsError",
    "TopicInfo", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET",
]
