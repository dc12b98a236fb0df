"""Completing a parked request may notify the purgatory again (a follower's fetch moves the HW,
which wakes parked produces). The nested notification is handled once, by the outer call."""
from kraftd.quorum.purgatory import Purgatory


class Op:
    def __init__(self, purgatory, keys, then_notify=None):
        self.purgatory, self.keys, self.then_notify = purgatory, keys, then_notify
        self.deadline_ms = 1000
        self.tries = 0
        self.nested = None

    def watch_keys(self):
        return self.keys

    def try_complete(self, now_ms):
        self.tries += 1
        if self.then_notify is not None:
            # Nested: must not try this op again while it is being tried.
            self.nested = self.purgatory.notify(self.then_notify, now_ms)
        return f"done {self.keys}"

    def expire(self, now_ms):
        return "expired"


def test_a_nested_notify_is_queued_and_completed_by_the_outer_call():
    purgatory = Purgatory()
    first = Op(purgatory, ["a"], then_notify=["a", "b"])
    second = Op(purgatory, ["b"])
    t1, t2 = purgatory.park(first), purgatory.park(second)
    done = purgatory.notify(["a"], 0)
    assert first.nested == []            # the nested call did nothing itself ...
    assert sorted(c.token for c in done) == [t1, t2]   # ... the outer one completed both, once each
    assert first.tries == 1 and second.tries == 1
    assert len(purgatory) == 0
    assert purgatory.notify(["a", "b"], 0) == []
