"""`format("kraftd")`: PySpark Python data source over the Kafka wire protocol (batch and
streaming reads, batch and streaming writes). See README.md, "Spark pipeline"."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamArrowWriter,
                                    DataSourceStreamReader, InputPartition, WriterCommitMessage)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from .arrow import kafka_ddl
from .kafka_reader import DEFAULT_FETCH_BYTES, read_range
from .options import OptionError, flag, sink_options, source_options
from .planner import StreamOffset, StreamPlanner, batch_ranges
from .wire import KafkaWire
from .writer import RowProducer, check_sink_schema

__all__ = ["KraftdDataSource"]


class RangePartition(InputPartition):
    """One offset range of one topic-partition: one Spark task."""

    def __init__(self, topic, partition, from_offset, until_offset) -> None:
        super().__init__((topic, partition, from_offset, until_offset))
        self.topic, self.partition, self.from_offset, self.until_offset = topic, partition, from_offset, until_offset


def _fetch_bytes(opts) -> int:
    return int(opts.client_option("max.partition.fetch.bytes", DEFAULT_FETCH_BYTES))


def _read(opts, split: RangePartition):
    if not isinstance(split, RangePartition):
        return  # no ranges planned (nothing to read): PySpark then hands one empty InputPartition
    with KafkaWire.for_options(opts, "kraftd-spark") as wire:
        yield from read_range(wire, split.topic, split.partition, split.from_offset, split.until_offset,
                              fail_on_data_loss=opts.fail_on_data_loss, include_headers=opts.include_headers,
                              fetch_bytes=_fetch_bytes(opts))


class KraftdBatchReader(DataSourceReader):
    def __init__(self, options) -> None:
        self.opts = source_options(options, streaming=False)

    def partitions(self):
        with KafkaWire.for_options(self.opts, "kraftd-spark") as wire:
            ranges = batch_ranges(wire, self.opts)
        return [RangePartition(r.topic, r.partition, r.from_offset, r.until_offset) for r in ranges]

    def read(self, partition):
        yield from _read(self.opts, partition)


class KraftdStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options) -> None:
        self.opts = source_options(options, streaming=True)
        self._wire: KafkaWire | None = None
        self._planner: StreamPlanner | None = None

    @property
    def planner(self) -> StreamPlanner:
        if self._planner is None:
            self._wire = KafkaWire.for_options(self.opts, "kraftd-spark")
            self._planner = StreamPlanner(self._wire, self.opts)
        return self._planner

    def initialOffset(self) -> dict:
        return self.planner.initial().to_json()

    def getDefaultReadLimit(self):
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepare_available_now()

    def latestOffset(self, start: dict, limit) -> dict:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return self.planner.latest(StreamOffset.from_json(start), max_rows).to_json()

    def partitions(self, start: dict, end: dict):
        ranges = self.planner.ranges(StreamOffset.from_json(start), StreamOffset.from_json(end))
        return [RangePartition(r.topic, r.partition, r.from_offset, r.until_offset) for r in ranges]

    def read(self, partition):
        yield from _read(self.opts, partition)

    def commit(self, end: dict) -> None:
        pass

    def stop(self) -> None:
        if self._wire is not None:
            self._wire.close()


@dataclass
class ProducedCount(WriterCommitMessage):
    records: int


class _ArrowRowsProducer:
    """What both writers do on a worker: produce every Arrow batch of the task's rows."""

    def __init__(self, options, schema) -> None:
        self.opts = sink_options(options)
        self.columns = check_sink_schema(schema, self.opts.topic)

    def write(self, iterator) -> ProducedCount:
        with RowProducer(self.opts, self.columns) as producer:
            for batch in iterator:
                producer.add(batch)
        return ProducedCount(producer.records)


class KraftdBatchWriter(_ArrowRowsProducer, DataSourceArrowWriter):
    pass


class KraftdStreamWriter(_ArrowRowsProducer, DataSourceStreamArrowWriter):
    def commit(self, messages, batchId) -> None:
        pass

    def abort(self, messages, batchId) -> None:
        pass


class KraftdDataSource(DataSource):
    """Spark's Kafka source and sink, over the wire protocol, with kraftd's decoder."""

    @classmethod
    def name(cls) -> str:
        return "kraftd"

    def schema(self) -> str:
        return kafka_ddl(flag(self.options, "includeHeaders"))

    def reader(self, schema):
        return KraftdBatchReader(self.options)

    def streamReader(self, schema):
        return KraftdStreamReader(self.options)

    def writer(self, schema, overwrite: bool):
        if overwrite:
            raise OptionError("Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and "
                              "ErrorIfExists (default).")
        return KraftdBatchWriter(self.options, schema)

    def streamWriter(self, schema, overwrite: bool):
        return KraftdStreamWriter(self.options, schema)
