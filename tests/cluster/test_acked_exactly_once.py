"""The acknowledged-records check of the failover and chaos tests: a record written twice fails
it, except the one duplicate no broker can prevent, a record librdkafka re-sent under the epoch
after one it bumped for a reason of its own (confluentinc/librdkafka#4953); and which bumps count
as the client's own, read from librdkafka's eos debug lines."""
import pytest

from tests.cluster.replica_logs import Ack, LogEntry, assert_acked_exactly_once
from tests.cluster.test_failover import SequenceProducer


def entry(offset: int, key: bytes, epoch: int, seq: int, pid: int = 7) -> LogEntry:
    return LogEntry(offset, key, b"v", 8, producer=(pid, epoch, seq))


LOGS = {4: [entry(0, b"a", 0, 0), entry(1, b"b", 0, 1), entry(2, b"a", 1, 0)]}
ACKS = [Ack(b"a", 4, 2, 1.0), Ack(b"b", 4, 1, 0.5)]


def test_a_record_resent_under_the_epoch_after_a_client_side_bump_is_allowed_and_named():
    assert assert_acked_exactly_once(LOGS, [ACKS[1], ACKS[0]], client_resends={(7, 0)}) == {b"a"}


@pytest.mark.parametrize("resends", [set(), {(7, 1)}, {(8, 0)}])
def test_any_other_duplicate_fails(resends):
    with pytest.raises(AssertionError, match="key 'a' is in the logs 2 times"):
        assert_acked_exactly_once(LOGS, [ACKS[1], ACKS[0]], client_resends=resends)


def test_one_epoch_twice_is_the_brokers_fault_whatever_the_client_bumped():
    logs = {0: [entry(0, b"a", 0, 0), entry(1, b"a", 0, 0)]}
    with pytest.raises(AssertionError, match="the broker appended a retried batch again"):
        assert_acked_exactly_once(logs, [Ack(b"a", 0, 0, 0.0)], client_resends={(7, 0)})


def test_client_side_bumps_are_read_from_the_drain_lines():
    producer = SequenceProducer.__new__(SequenceProducer)
    drain = ("Beginning partition drain in state Assigned for PID{Id:%d,Epoch:%d} epoch bump for 2 partition(s) "
             "with in-flight requests: %s")
    producer.client_log = [(0.0, drain % (3, 0, "skipped sequence numbers")),
                           (1.0, drain % (3, 1, "unknown producer id")),
                           (2.0, "[thrd:main]: Idempotent producer state change Assigned -> DrainBump")]
    assert producer.client_side_bumps() == {(3, 0)}
