from kraftd.storage import ProducerStateTable, ProducerStatus
from kraftd.storage.producer_state import INT32_MAX, BatchMetadata, last_sequence_of


def table_with(*batches):
    t = ProducerStateTable()
    for pid, epoch, first, last, off in batches:
        t.update(pid, epoch, BatchMetadata(first, last, off, off + last - first))
    return t


def test_non_idempotent_is_ok():
    assert ProducerStateTable().check(-1, -1, -1, -1).status is ProducerStatus.OK


def test_new_producer_must_start_at_zero():
    t = ProducerStateTable()
    assert t.check(7, 0, 0, 4).status is ProducerStatus.OK
    check = t.check(7, 0, 5, 9)
    assert check.status is ProducerStatus.UNKNOWN_PRODUCER_ID
    assert check.error == "UNKNOWN_PRODUCER_ID"


def test_in_sequence_and_out_of_order():
    t = table_with((7, 0, 0, 4, 100))
    assert t.check(7, 0, 5, 9).status is ProducerStatus.OK
    bad = t.check(7, 0, 6, 9)
    assert bad.status is ProducerStatus.OUT_OF_ORDER_SEQUENCE
    assert bad.error == "OUT_OF_ORDER_SEQUENCE_NUMBER" and bad.message


def test_duplicate_of_any_of_last_five_batches_returns_original_offsets():
    t = ProducerStateTable()
    for i in range(7):
        t.update(7, 0, BatchMetadata(i * 10, i * 10 + 9, 1000 + i * 10, 1000 + i * 10 + 9))
    status, dup = t.check(7, 0, 20, 29)
    assert status is ProducerStatus.DUPLICATE and (dup.first_offset, dup.last_offset) == (1020, 1029)
    assert t.check(7, 0, 20, 29).duplicate_first_offset == 1020
    # The 6th-newest batch is forgotten: a retry of it is out of order.
    assert t.check(7, 0, 10, 19).status is ProducerStatus.OUT_OF_ORDER_SEQUENCE


def test_fenced_older_epoch():
    t = table_with((7, 3, 0, 0, 0))
    c = t.check(7, 2, 1, 1)
    assert c.status is ProducerStatus.INVALID_PRODUCER_EPOCH and c.error == "INVALID_PRODUCER_EPOCH"


def test_new_epoch_restarts_sequence_at_zero():
    t = table_with((7, 3, 0, 9, 0))
    assert t.check(7, 4, 0, 0).status is ProducerStatus.OK
    assert t.check(7, 4, 10, 10).status is ProducerStatus.OUT_OF_ORDER_SEQUENCE
    t.update(7, 4, BatchMetadata(0, 0, 50, 50))
    assert t.get(7).producer_epoch == 4 and len(t.get(7).batches) == 1


def test_sequence_wraps_at_int32_max():
    t = table_with((7, 0, INT32_MAX - 4, INT32_MAX, 0))
    assert t.check(7, 0, 0, 3).status is ProducerStatus.OK
    assert last_sequence_of(INT32_MAX - 1, 3) == 1
    assert last_sequence_of(5, 3) == 8


def test_the_state_below_a_log_start():
    live = table_with((1, 0, 0, 0, 5), (1, 0, 1, 1, 50), (2, 0, 7, 7, 60))
    previous = table_with((1, 0, 9, 9, 1), (2, 0, 6, 6, 3), (3, 0, 0, 0, 4))  # 3 expired since
    below = live.below(10, previous)
    assert below.check(1, 0, 0, 0).duplicate_first_offset == 5
    assert below.check(1, 0, 1, 1).status is ProducerStatus.OK  # its batch at 50 is past 10
    assert below.check(2, 0, 6, 6).duplicate_first_offset == 3  # all its live batches are past 10
    assert 3 not in below
    below.update(2, 0, BatchMetadata(7, 7, 60, 60))
    assert previous.check(2, 0, 7, 7).status is ProducerStatus.OK  # no entry is shared


def test_snapshot_round_trip():
    t = table_with((1, 0, 0, 4, 5), (2, 3, 0, 0, 50))
    t2 = ProducerStateTable.from_snapshot(t.snapshot())
    assert t2.check(1, 0, 0, 4).duplicate_first_offset == 5
    assert t2.check(2, 3, 1, 1).status is ProducerStatus.OK
