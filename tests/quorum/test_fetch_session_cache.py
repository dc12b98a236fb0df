"""KIP-227 FetchSessionCache on its own: slots, the three eviction rules, LRU, ids."""
import itertools

import pytest

from kraftd.quorum.fetch_sessions import FetchSessionCache
from kraftd.quorum.node_config import NodeConfig
from tests.quorum.fetch_helpers import fetched

EVICTION_MS = 120_000
T0 = 1_000_000
CONSUMER, FOLLOWER = ("consumer", "10.0.0.1"), ("follower", "10.0.0.2")


def cache(slots: int, ids=None) -> FetchSessionCache:
    return FetchSessionCache(slots, EVICTION_MS, (ids or itertools.count(1)).__next__)


def new(c: FetchSessionCache, now: int, *, privileged: bool = False, partitions: int = 1):
    """Create a session as FullContext does: with `partitions` cached partitions."""
    session = c.create(now, privileged=privileged, principal=FOLLOWER if privileged else CONSUMER,
                       uses_topic_ids=False, size=partitions)
    if session is not None:
        for i in range(partitions):
            session.upsert(fetched(("t", i), "t", i))
    return session


def test_defaults_are_kips():
    config = NodeConfig()
    assert config.max_incremental_fetch_session_cache_slots == 1000
    assert config.min_incremental_fetch_session_eviction_ms == 120_000


def test_a_full_cache_with_nothing_evictable_creates_nothing():
    c = cache(2)
    first, second = new(c, T0), new(c, T0)
    assert new(c, T0 + 1) is None
    assert new(c, T0 + 1, partitions=5) is None  # larger, but the old ones are young
    assert {s.id for s in c} == {first.id, second.id}
    assert c.evictions == 0


def test_zero_slots_disables_sessions():
    assert new(cache(0), T0, privileged=True) is None


def test_a_follower_evicts_a_consumer_session_but_not_a_follower_one():
    c = cache(1)
    consumer = new(c, T0)
    follower = new(c, T0 + 1, privileged=True)
    assert follower is not None and c.get(consumer.id) is None and c.evictions == 1
    assert new(c, T0 + 2, privileged=True) is None  # rule 1 needs an unprivileged victim
    assert new(c, T0 + 2) is None                     # and a consumer never outranks a follower
    assert c.get(follower.id) is follower and c.evictions == 1


def test_a_consumer_does_not_evict_a_young_consumer():
    c = cache(1)
    old = new(c, T0)
    assert new(c, T0 + EVICTION_MS) is None
    assert c.get(old.id) is old


@pytest.mark.parametrize("privileged_victim", [False, True])
def test_a_session_idle_longer_than_the_eviction_time_is_evicted_by_anyone(privileged_victim):
    c = cache(1)
    old = new(c, T0, privileged=privileged_victim, partitions=10)
    assert new(c, T0 + EVICTION_MS) is None  # idle exactly the eviction time: not yet
    fresh = new(c, T0 + EVICTION_MS + 1, partitions=1)  # smaller and unprivileged, still wins
    assert fresh is not None and c.get(old.id) is None and c.evictions == 1


def test_an_old_session_is_evicted_only_by_a_larger_one():
    c = cache(1)
    old = new(c, T0, partitions=3)
    c.touch(old, T0 + EVICTION_MS)  # busy: never idle
    now = T0 + EVICTION_MS + 1      # older than the eviction time
    assert new(c, now, partitions=3) is None  # not more partitions
    c.touch(old, now)
    assert new(c, T0 + EVICTION_MS, partitions=4) is None  # not older than the eviction time yet
    larger = new(c, now, partitions=4)
    assert larger is not None and c.get(old.id) is None and c.evictions == 1


@pytest.mark.parametrize("used_in_between", [False, True])
def test_every_use_refreshes_last_used_time(used_in_between):
    """KAFKA-9137: a busy session must not look idle."""
    c = cache(1)
    old = new(c, T0)
    if used_in_between:
        c.touch(old, T0 + 100_000)
    newcomer = new(c, T0 + 150_000)  # same size: only the idle rule could evict
    if used_in_between:
        assert newcomer is None and c.get(old.id) is old
        assert old.last_used_ms == T0 + 100_000
    else:
        assert newcomer is not None and c.get(old.id) is None


def test_the_least_recently_used_candidate_goes_first():
    c = cache(2)
    a, b = new(c, T0), new(c, T0)
    c.touch(a, T0 + 10)
    now = T0 + EVICTION_MS + 50  # both idle
    assert new(c, now) is not None
    assert c.get(a.id) is a and c.get(b.id) is None
    # Idle sessions go before merely unprivileged ones, even if used less recently.
    c2 = cache(2)
    busy = new(c2, T0)
    idle = new(c2, T0 + 5)
    c2.touch(busy, T0 + EVICTION_MS + 10)
    assert new(c2, T0 + EVICTION_MS + 20, privileged=True) is not None
    assert c2.get(busy.id) is busy and c2.get(idle.id) is None


def test_closing_ones_own_session_is_not_an_eviction_and_others_cannot_close_it():
    c = cache(2)
    s = new(c, T0)
    c.close(s.id, FOLLOWER)
    assert c.get(s.id) is s
    c.close(s.id, CONSUMER)
    assert c.get(s.id) is None and c.evictions == 0 and len(c) == 0


def test_ids_are_non_zero_and_unique_on_the_node():
    c = cache(3, ids=iter([0, 5, 5, 0, 7, 9]))
    ids = [new(c, T0).id for _ in range(3)]
    assert ids == [5, 7, 9]


def test_production_ids_are_random_positive_int32s():
    from kraftd.server.node_files import secure_runtime

    new_session_id = secure_runtime().new_session_id
    draws = {new_session_id() for _ in range(2000)}
    assert all(1 <= d <= 0x7FFFFFFF for d in draws)
    assert len(draws) > 1990  # a CSPRNG, not a counter or a small range
    assert max(draws) > 1 << 30


def test_partitions_cached_counts_every_session():
    c = cache(3)
    new(c, T0, partitions=2)
    new(c, T0, partitions=3)
    assert c.partitions_cached == 5
