"""A fetched partition as a fetch session sees it (FetchSession.upsert's argument)."""
from __future__ import annotations

from types import SimpleNamespace


def fetched(key, topic, index: int, *, fetch_offset: int = 0, max_bytes: int = 1000, partition=None):
    return SimpleNamespace(session_key=key, topic_key=topic, partition_index=index, partition=partition,
                           fetch_offset=fetch_offset, max_bytes=max_bytes, fetcher_log_start_offset=-1,
                           current_leader_epoch=-1, last_fetched_epoch=-1)
