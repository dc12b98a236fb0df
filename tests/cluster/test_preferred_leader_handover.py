"""Automatic preferred-leader election under steady writes: once a restarted preferred replica
is back in the ISR, leadership moves back to it at the first fetch that reaches the log end, and
the hand-over is one election won by that replica.

Found by `bench.cluster` (bench/README.md, (g)). Two bugs made hand-overs fail or wait while a
producer wrote every few milliseconds:
- the leader checked once a second whether the preferred replica's fetch offset equalled its log
  end, which under steady writes held only in the instant between that replica's fetch and the
  next append: hand-overs came 19 s late or never;
- the preferred replica could hear of the resignation from the resigned leader's answer to its
  fetch before the EndQuorumEpoch naming it first successor came, and then ignored its turn: the
  second successor stood first and the hand-over failed, three seconds later again, and so on.
The second has a unit test too (tests/quorum/raft/test_follower.py).
"""
from __future__ import annotations

import time

import pytest

from tests.cluster.support import metadata
from tests.cluster.test_failover import SequenceProducer, create_topic, tails, wait_brokers_registered, \
    wait_leaders_agreed
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.clients, pytest.mark.timeout(180)]

TOPIC = "handover"


def test_a_restarted_preferred_replica_takes_leadership_back_under_steady_writes(tmp_path):
    with KraftdCluster(tmp_path, nodes=3) as cluster:
        wait_brokers_registered(cluster, TOPIC)
        create_topic(cluster, TOPIC, 1, 3)
        view = metadata(cluster.node(cluster.running()[0]), [TOPIC]).partitions(TOPIC)[0]
        preferred = view.replicas[0]
        wait_until(lambda: metadata(cluster.node(preferred), [TOPIC]).partitions(TOPIC)[0].leader == preferred,
                   30, "the preferred replica to lead the new partition", interval=0.1)
        producer = SequenceProducer(cluster.bootstrap(), TOPIC, rate=500).start()
        try:
            wait_until(lambda: len(producer.acks) >= 200, 30, "the producer's first acknowledgements")
            cluster.kill(preferred)
            survivor = next(i for i in cluster.running())
            wait_until(lambda: metadata(cluster.node(survivor), [TOPIC]).partitions(TOPIC)[0].leader
                       not in (-1, preferred), 30, "a new leader", interval=0.05)
            epoch_then = metadata(cluster.node(survivor), [TOPIC]).partitions(TOPIC)[0].leader_epoch
            cluster.start(preferred)
            wait_leaders_agreed(cluster, TOPIC, 1, 3, 60)  # back in the ISR (perhaps leading already)
            back_in_isr = time.monotonic()

            def led_by_preferred():
                views = [metadata(cluster.node(i), [TOPIC]).partitions(TOPIC)[0] for i in cluster.running()]
                return all(v.leader == preferred for v in views) and views[0]

            # The balance check runs every second; the hand-over itself takes one election.
            moved = wait_until(led_by_preferred, 10, "leadership back on the preferred replica", interval=0.05)
            took = time.monotonic() - back_in_isr
            assert moved.leader_epoch == epoch_then + 1, \
                f"from the failover to the hand-over: {moved.leader_epoch - epoch_then} elections, not one"
            time.sleep(1)  # it stays there: no election follows
            after = metadata(cluster.node(preferred), [TOPIC]).partitions(TOPIC)[0]
            assert (after.leader, after.leader_epoch) == (preferred, moved.leader_epoch)
            print(f"\nleadership back on node {preferred} {took:.2f} s after it rejoined the ISR")
        except AssertionError:
            print(tails(cluster))
            raise
        finally:
            left = producer.stop()
        assert left == 0 and not producer.failures, producer.summary()
