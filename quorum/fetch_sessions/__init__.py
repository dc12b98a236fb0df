"""KIP-227 incremental fetch sessions."""
from .cache import FetchSessionCache
from .session import FetchSession, next_epoch

__all__ = ["FetchSessionCache", "FetchSession", "next_epoch"]
