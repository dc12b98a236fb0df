"""The move throttle (quorum/move_throttle.py): a token bucket in the fetches' virtual time."""
from __future__ import annotations

from kraftd.quorum.move_throttle import MoveThrottle


def test_unthrottled_gives_what_is_asked():
    t = MoveThrottle(0)
    assert t.budget(0, 5 << 20) == 5 << 20
    t.spend(5 << 20)
    assert t.budget(1, 5 << 20) == 5 << 20 and t.sent_bytes == 5 << 20 and t.throttled == 0


def test_the_rate_holds_over_time_with_one_batch_of_debt():
    t = MoveThrottle(1000)
    sent = 0
    for now in range(0, 10_000, 50):  # a fetch every 50 ms asking for far more than the rate
        budget = t.budget(now, 1 << 20)
        if budget:
            batch = max(budget, 300)  # a read may return one batch more than its budget
            t.spend(batch)
            sent += batch
    assert 9_000 <= sent <= 11_300  # ~10 s at 1000 B/s, plus the first second's bucket and one batch
    assert t.throttled > 0


def test_a_full_bucket_saves_at_most_a_second():
    t = MoveThrottle(1000)
    assert t.budget(0, 10_000) == 1000
    t.spend(1000)
    assert t.budget(60_000, 10_000) == 1000  # a minute idle: still one second's worth
