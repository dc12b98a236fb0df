"""A follower of a compacted topic (KIP-320 across compacted ranges): it truncates at the
divergence its leader names, then takes the leader's next batch even where the leader's cleaner
removed the offsets between (a gap), and its leader-epoch cache starts the new epoch there. A
log that is not compacted refuses such a batch."""
from __future__ import annotations

from .raft_context import data_batch
from .test_follower import follower


def truncated_then_sent_a_gap(compacted: bool):
    """The follower's epoch 2 diverges from its leader's log, whose epoch 1 ends at 5 (the
    follower truncates there); the leader (epoch 5) cleaned offsets 5-7 away, so its first
    batch from 5 on starts at 8."""
    ctx = follower()  # offsets 0-4 of epoch 1, 5-9 of epoch 2, none committed
    ctx.log.gaps_allowed = compacted  # (FileLog(compacted=True) in the server)
    fetch = ctx.assert_sent_fetch(offset=10, last_fetched_epoch=2)
    ctx.respond(fetch, ctx.fetch_response(diverging_epoch=(1, 5), high_watermark=0))
    ctx.poll()
    assert ctx.log.log_end_offset == 5 and ctx.log.epoch_cache.latest_epoch == 1
    fetch = ctx.assert_sent_fetch(offset=5, last_fetched_epoch=1)
    ctx.respond(fetch, ctx.fetch_response(records=data_batch(5, ["a", "b"], base_offset=8), high_watermark=10))
    ctx.poll()
    return ctx


def test_a_compacted_follower_truncates_at_the_divergence_and_takes_a_batch_past_a_gap():
    ctx = truncated_then_sent_a_gap(compacted=True)
    assert ctx.log.log_end_offset == 10 and ctx.partition.high_watermark == 10
    assert ctx.log.epoch_cache.end_offset_for(1, 10) == (1, 8)  # epoch 1 ends where epoch 5 begins: 8
    assert ctx.log.epoch_cache.end_offset_for(5, 10) == (5, 10)
    ctx.assert_sent_fetch(offset=10, last_fetched_epoch=5)


def test_a_log_that_is_not_compacted_refuses_a_batch_past_its_end():
    ctx = truncated_then_sent_a_gap(compacted=False)
    assert ctx.log.log_end_offset == 5  # not appended: a gap is a bug here
    ctx.assert_sent_fetch(offset=5, last_fetched_epoch=1)
