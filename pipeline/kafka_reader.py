"""Reading one offset range of one partition over the wire, as Spark's KafkaDataConsumer does.

- Offsets of control batches (and any offset the log does not hold while it is above the log
  start) are invisible and skipped, as Kafka's consumer skips them.
- OFFSET_OUT_OF_RANGE below the log start (retention, DeleteRecords, a snapshot moved it):
  failOnDataLoss=true fails with KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE; false logs a
  warning and goes on from the earliest offset still inside the range (Spark's
  getEarliestAvailableOffsetBetween).
- The range's end beyond the log end (the log was truncated below it): the same data loss.
"""
from __future__ import annotations

import logging

from ..protocol.errors import ErrorCode
from ..protocol.records import iter_batch_headers

from .arrow import RowBuffer
from .errors import report_data_loss
from .wire import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, KafkaWire

__all__ = ["read_range", "DEFAULT_FETCH_BYTES"]

log = logging.getLogger("kraftd.pipeline")
DEFAULT_FETCH_BYTES = 4 << 20


def read_range(wire: KafkaWire, topic: str, partition: int, start: int, until: int, *,
               fail_on_data_loss: bool, include_headers: bool, fetch_bytes: int = DEFAULT_FETCH_BYTES):
    """Yield Arrow RecordBatches of the records in [start, until)."""
    rows = RowBuffer(include_headers=include_headers)
    offset = start
    tp = f"{topic}-{partition}"
    while offset < until:
        answer = wire.fetch(topic, partition, offset, fetch_bytes)
        if answer.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            reason = (f"Could not read records in offset [{offset}, {until}) for topic partition {tp} "
                      f"with consumer group null.")
            report_data_loss(fail_on_data_loss, "COULD_NOT_READ_OFFSET_RANGE", reason)
            earliest = wire.list_offsets([(topic, partition)], EARLIEST_TIMESTAMP)[(topic, partition)][0]
            latest = wire.list_offsets([(topic, partition)], LATEST_TIMESTAMP)[(topic, partition)][0]
            if offset >= latest or earliest >= until:
                log.warning("%s: the available offsets are [%d, %d); records in [%d, %d) are skipped",
                            tp, earliest, latest, offset, until)
                break
            if earliest > offset:
                log.warning("%s: the available offsets are [%d, %d); records in [%d, %d) are skipped",
                            tp, earliest, latest, offset, earliest)
                offset = earliest
            continue
        records = answer.records
        progressed = False
        for pos, header in iter_batch_headers(records):
            if header.last_offset < offset:
                continue
            if header.base_offset >= until:
                offset = until
                progressed = True
                break
            if header.base_offset > offset and answer.log_start_offset > offset:
                # Records aged out between planning and this fetch (Spark: data loss).
                report_data_loss(fail_on_data_loss, "COULD_NOT_READ_OFFSET_RANGE",
                                 f"Could not read records in offset [{offset}, {header.base_offset}) for topic "
                                 f"partition {tp} with consumer group null.")
            if not header.is_control:
                rows.add_batch(topic, partition, memoryview(records)[pos:pos + header.size], header, offset, until)
                if rows.full():
                    yield rows.take()
            offset = header.next_offset
            progressed = True
        if not progressed:
            if answer.high_watermark <= offset:
                # The log ends below the range: it was truncated after the range was planned.
                report_data_loss(fail_on_data_loss, "COULD_NOT_READ_OFFSET_RANGE",
                                 f"Could not read records in offset [{offset}, {until}) for topic partition "
                                 f"{tp} with consumer group null.")
                log.warning("%s: the log ends at %d; records in [%d, %d) are skipped",
                            tp, answer.high_watermark, offset, until)
                break
            raise RuntimeError(f"{tp}: fetch at offset {offset} returned no complete batch "
                               f"(high watermark {answer.high_watermark}); raise kafka.max.partition.fetch.bytes")
    if len(rows):
        yield rows.take()
