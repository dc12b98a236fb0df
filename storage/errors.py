"""Exceptions raised by the storage layer (quorum maps them to protocol error codes)."""
from __future__ import annotations

__all__ = ["StorageError", "OffsetOutOfRangeError", "NonContiguousAppendError"]


class StorageError(Exception):
    """Base of the storage layer's own exceptions."""


class OffsetOutOfRangeError(StorageError):
    """A read below the log start offset or above the log end offset (OFFSET_OUT_OF_RANGE)."""


class NonContiguousAppendError(StorageError, ValueError):
    """A follower append whose offsets do not continue the log exactly."""
