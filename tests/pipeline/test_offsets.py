"""Offset planning and option validation as Spark's Kafka source does them."""
import logging
import random
import time

import pytest

from kraftd.pipeline.options import (OffsetRange, OptionError, TimestampLimit, plan_ranges, rate_limit, sink_options,
                                     source_options, time_string_ms)

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def R(topic, p, a, b):
    return OffsetRange(topic, p, a, b)


def test_no_split_without_min_partitions_or_with_enough_ranges():
    ranges = [R("t", 0, 1, 2), R("t", 1, 1, 3), R("t", 2, 5, 5)]
    assert plan_ranges(ranges, None) == ranges[:2]          # empty ranges dropped
    assert plan_ranges(ranges, 2) == ranges[:2]


def test_one_range_split_evenly():
    assert plan_ranges([R("t", 0, 1, 5)], 4) == [R("t", 0, 1, 2), R("t", 0, 2, 3), R("t", 0, 3, 4), R("t", 0, 4, 5)]
    # the last part takes the rounding: 10 offsets in 4 parts are 2, 2, 3, 3
    assert plan_ranges([R("t", 0, 1, 11)], 4) == [R("t", 0, 1, 3), R("t", 0, 3, 5), R("t", 0, 5, 8), R("t", 0, 8, 11)]


def test_small_ranges_stay_whole_and_leave_the_share_to_the_large():
    # tp1: 10000 offsets, tp2: 20 (round(20/10020*3) = 0 -> one part, unsplit); tp1 gets 3 - 1 = 2 parts
    assert plan_ranges([R("t", 0, 1, 10001), R("t", 1, 1, 21)], 3) == [
        R("t", 0, 1, 5001), R("t", 0, 5001, 10001), R("t", 1, 1, 21)]


def test_parts_round_half_up_like_scala():
    # 5/8*4 = 2.5 -> 3 parts (Python's round() would give 2); 3/8*4 = 1.5 -> 2 parts
    assert plan_ranges([R("a", 0, 0, 5), R("b", 0, 0, 3)], 4) == [
        R("a", 0, 0, 1), R("a", 0, 1, 3), R("a", 0, 3, 5), R("b", 0, 0, 1), R("b", 0, 1, 3)]


def test_ranges_are_contiguous_and_cover_exactly():
    rng = random.Random(7)
    for _ in range(500):
        ranges = [R(f"t{i % 3}", i, s, s + rng.choice([0, 1, 2, 7, 100, 5000]))
                  for i, s in enumerate(rng.randrange(0, 10**6) for _ in range(rng.randint(1, 6)))]
        planned = plan_ranges(ranges, rng.choice([None, 1, 2, 5, 17, 64]))
        for r in ranges:
            parts = [p for p in planned if (p.topic, p.partition) == (r.topic, r.partition)]
            if r.size == 0:
                assert parts == []
                continue
            assert parts[0].from_offset == r.from_offset and parts[-1].until_offset == r.until_offset
            assert all(a.until_offset == b.from_offset for a, b in zip(parts, parts[1:]))
            assert all(p.size > 0 for p in parts)


def test_rate_limit_never_exceeds_the_limit_and_always_progresses():
    rng = random.Random(3)
    for _ in range(500):
        tps = [("t", p) for p in range(rng.randint(1, 30))]
        start = {tp: rng.randrange(0, 1000) for tp in tps}
        latest = {tp: start[tp] + rng.choice([0, 1, 3, 50, 10**4]) for tp in tps}
        limit = rng.choice([1, 2, 7, 100, 10**5])
        end = rate_limit(start, latest, limit)
        taken = sum(end[tp] - start[tp] for tp in tps)
        backlog = sum(latest[tp] - start[tp] for tp in tps)
        assert taken == min(limit, backlog)
        assert all(start[tp] <= end[tp] <= latest[tp] for tp in tps)


SPARK_ERRORS = [
    ({"subscribe": "a", "assign": '{"a":[0]}'},
     "Only one of the following options can be specified for Kafka source: subscribe, subscribepattern, assign."),
    ({}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern, assign."),
    ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe' is ' , '"),
    ({"assign": "a"}, "No topicpartitions to assign as specified value for option 'assign' is 'a'"),
    ({"subscribePattern": " "}, "Pattern to subscribe is empty as specified value for option 'subscribePattern' is ' '"),
    ({"subscribe": "a", "startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}', "endingOffsets": '{"a":{"0":-1}}'},
     "startingOffsets for a-0 can't be latest for batch queries on Kafka"),
    ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "ending offset for a-0 can't be earliest"),
    ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported."),
    ({"subscribe": "a", "kafka.key.deserializer": "x"}, "Kafka option 'key.deserializer' is not supported as keys"),
    ({"subscribe": "a", "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported as values"),
    ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, "Kafka option 'enable.auto.commit' is not supported"),
    ({"subscribe": "a", "kafka.interceptor.classes": "x"}, "Kafka option 'interceptor.classes' is not supported"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":9}}', "endingOffsets": '{"a":{"0":3}}'},
     "The specified start offset 9 is greater than the end offset 3 for topic a partition 0."),
    ({"subscribe": "a", "maxRecordsPerPartition": "0"}, "maxrecordsperpartition must be positive"),
    ({"subscribe": "a", "minOffsetsPerTrigger": "11", "maxOffsetsPerTrigger": "10"},
     "The value of minOffsetPerTrigger(11) is higher than the maxOffsetsPerTrigger(10)."),
    ({"subscribe": "a", "maxTriggerDelay": "5 parsecs"}, "Time must be specified as seconds (s)"),
    ({"subscribe": "a", "startingTimestamp": "yesterday"}, "Expected a single long value, got yesterday"),
    ({"subscribe": "a", "startingOffsetsByTimestamp": "[1]"}, 'Expected e.g. {"topicA": {"0": 123456789'),
    ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "nearest", "startingTimestamp": "1"},
     "No value found for 'NEAREST'"),
    ({"subscribe": "a", "startingOffsetsByTimestamp": '{"a":{"0":9}}', "endingOffsetsByTimestamp": '{"a":{"1":9}}'},
     "MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET"),
    ({"subscribe": "a", "startingOffsetsByTimestamp": '{"a":{"0":9}}', "endingOffsetsByTimestamp": '{"a":{"0":3}}'},
     "The specified start timestamp 9 is greater than the end timestamp 3 for topic a partition 0."),
]


@pytest.mark.parametrize("options,message", SPARK_ERRORS)
def test_batch_option_errors_are_sparks(options, message):
    with pytest.raises(OptionError) as info:
        source_options({**BOOT, **options}, streaming=False)
    assert message in str(info.value)


def test_bootstrap_servers_required_and_streaming_rules():
    with pytest.raises(OptionError, match="Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"):
        source_options({"subscribe": "a"}, streaming=False)
    with pytest.raises(OptionError, match="ending offset not valid in streaming queries"):
        source_options({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    opts = source_options({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "10"}, streaming=True)
    assert opts.starting == "latest" and opts.max_offsets_per_trigger == 10
    assert source_options({**BOOT, "subscribe": "a"}, streaming=False).starting == "earliest"


def test_timestamp_options_and_their_precedence():
    """Spark's getKafkaOffsetRangeLimit: startingTimestamp over startingOffsetsByTimestamp over
    startingOffsets (the same for the ending options); the strategy applies to starts."""
    both = {**BOOT, "subscribe": "a", "startingOffsets": '{"a":{"0":5}}',
            "startingOffsetsByTimestamp": '{"a":{"0":1000}}'}
    assert source_options(both, streaming=False).starting == TimestampLimit(by_partition=((("a", 0), 1000),))
    opts = source_options({**both, "startingTimestamp": "77", "startingOffsetsByTimestampStrategy": "LATEST",
                           "endingTimestamp": "99"}, streaming=False)
    assert opts.starting == TimestampLimit(every=77, on_no_match="latest")
    assert opts.ending == TimestampLimit(every=99, on_no_match="latest")
    streaming = source_options({**BOOT, "subscribe": "a", "startingTimestamp": "5", "endingTimestamp": "6"},
                               streaming=True)
    assert streaming.starting == TimestampLimit(every=5) and streaming.ending == "latest"  # ignored, as Spark does
    with pytest.raises(OptionError, match="ending timestamp not valid in streaming queries"):
        source_options({**BOOT, "subscribe": "a", "endingOffsetsByTimestamp": '{"a":{"0":1}}'}, streaming=True)


class _Warnings(logging.Handler):
    """The kraftd.pipeline logger's warnings (not caplog: some runs use -p no:logging)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.text = ""

    def emit(self, record) -> None:
        self.text += record.getMessage() + "\n"

    def __enter__(self) -> "_Warnings":
        logging.getLogger("kraftd.pipeline").addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger("kraftd.pipeline").removeHandler(self)


def test_trigger_options():
    with _Warnings() as caplog:
        _trigger_options(caplog)


def _trigger_options(caplog):
    opts = source_options({**BOOT, "subscribe": "a", "minOffsetsPerTrigger": "5", "maxTriggerDelay": "2s",
                           "groupIdPrefix": "mine", "kafka.group.id": "g"}, streaming=True)
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (5, 2000)
    assert "Kafka option 'kafka.group.id' has been set" in caplog.text and "no effect" in caplog.text
    assert source_options({**BOOT, "subscribe": "a"}, streaming=True).max_trigger_delay_ms == 15 * 60 * 1000
    assert [time_string_ms(t) for t in ("250", "250ms", "3s", "2m", "2min", "1h", "1d", "4000us")] == [
        250, 250, 3000, 120_000, 120_000, 3_600_000, 86_400_000, 4]
    batch = source_options({**BOOT, "subscribe": "a", "minOffsetsPerTrigger": "5"}, streaming=False)
    assert batch.min_offsets_per_trigger is None   # ignored in batch queries, with Spark's warning
    assert "minOffsetsPerTrigger option ignored in batch queries" in caplog.text


def test_max_records_per_partition_splits_like_spark():
    # ceil(size / max) even pieces first: 10 offsets, max 4 -> 3 pieces (3, 3, 4)
    assert plan_ranges([R("t", 0, 0, 10)], None, 4) == [R("t", 0, 0, 3), R("t", 0, 3, 6), R("t", 0, 6, 10)]
    assert plan_ranges([R("t", 0, 0, 8)], None, 4) == [R("t", 0, 0, 4), R("t", 0, 4, 8)]
    assert plan_ranges([R("t", 0, 0, 3), R("t", 1, 5, 5)], None, 4) == [R("t", 0, 0, 3)]
    # then minPartitions over the pieces: 2 pieces < 4 -> each piece split in two
    assert plan_ranges([R("t", 0, 0, 8)], 4, 4) == [R("t", 0, 0, 2), R("t", 0, 2, 4), R("t", 0, 4, 6),
                                                     R("t", 0, 6, 8)]
    rng = random.Random(11)
    for _ in range(300):
        ranges = [R("t", i, s, s + rng.choice([0, 1, 5, 99, 1000])) for i, s in enumerate(range(rng.randint(1, 5)))]
        limit = rng.choice([1, 3, 50, 10**6])
        planned = plan_ranges(ranges, rng.choice([None, 2, 9]), limit)
        for r in ranges:
            parts = [p for p in planned if p.partition == r.partition]
            assert sum(p.size for p in parts) == r.size
            assert all(a.until_offset == b.from_offset for a, b in zip(parts, parts[1:]))
        assert all(p.size <= limit for p in planned)


class _FakeWire:
    """The calls StreamPlanner makes, over fixed log ends (assign strategy: no Metadata)."""

    def __init__(self, ends: dict) -> None:
        self.ends = ends

    def list_offsets(self, tps, timestamp):
        return {tp: (0 if timestamp == -2 else self.ends[tp], 1) for tp in tps}

    def end_offset_for_epoch(self, topic, partition, epoch):
        return epoch, self.ends[(topic, partition)]


def test_min_offsets_per_trigger_waits_for_enough_records_or_the_delay():
    from kraftd.pipeline.planner import StreamOffset, StreamPlanner

    tp = ("t", 0)
    opts = source_options({**BOOT, "assign": '{"t":[0]}', "minOffsetsPerTrigger": "100", "maxTriggerDelay": "10s",
                           "maxOffsetsPerTrigger": "150"}, streaming=True)
    wire = _FakeWire({tp: 30})
    now = [1000.0]
    planner = StreamPlanner(wire, opts, clock=lambda: now[0])
    start = StreamOffset({tp: 0}, {tp: 1})
    assert planner.latest(start, 150).offsets == {tp: 30}           # the first trigger always runs
    start = StreamOffset({tp: 30}, {tp: 1})
    wire.ends[tp] = 90
    now[0] += 5
    assert planner.latest(start, 150) is start                        # 60 new < 100, 5 s < 10 s: skipped
    wire.ends[tp] = 400
    assert planner.latest(start, 150).offsets == {tp: 180}           # 370 >= 100: runs, capped by the max
    start = StreamOffset({tp: 180}, {tp: 1})
    now[0] += 1
    wire.ends[tp] = 200
    assert planner.latest(start, 150) is start
    now[0] += 10
    assert planner.latest(start, 150).offsets == {tp: 200}           # the delay passed: runs with 20
    planner.available_now = {tp: 210}
    wire.ends[tp] = 210
    start = StreamOffset({tp: 200}, {tp: 1})
    assert planner.latest(start, 150).offsets == {tp: 210}           # AvailableNow: never held back


def test_sink_rejects_serializers():
    with pytest.raises(OptionError, match="Kafka option 'key.serializer' is not supported"):
        sink_options({**BOOT, "kafka.key.serializer": "x"})
    with pytest.raises(OptionError, match="Kafka option 'value.serializer' is not supported"):
        sink_options({**BOOT, "kafka.value.serializer": "x"})


def test_errors_surface_through_spark(spark):
    reader = (spark.read.format("kraftd").option("kafka.bootstrap.servers", "127.0.0.1:1")
              .option("subscribe", "a").option("assign", '{"a":[0]}'))
    with pytest.raises(Exception) as info:
        reader.load().collect()
    assert "Only one of the following options can be specified for Kafka source" in str(info.value)


def test_planned_ranges_cover_the_log(spark, server, topics):
    from kraftd.pipeline.planner import batch_ranges
    from kraftd.pipeline.wire import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, KafkaWire

    from .helpers import produce_raw

    topics({"plan": 3})
    produce_raw(server.bootstrap, "plan", 0, [(None, b"x")] * 50, batch_records=10)
    produce_raw(server.bootstrap, "plan", 1, [(None, b"y")] * 7, batch_records=3)
    opts = source_options({"kafka.bootstrap.servers": server.bootstrap, "subscribe": "plan", "minPartitions": "7"},
                          streaming=False)
    with KafkaWire(server.bootstrap) as wire:
        ranges = batch_ranges(wire, opts)
        tps = [("plan", p) for p in range(3)]
        lo = wire.list_offsets(tps, EARLIEST_TIMESTAMP)
        hi = wire.list_offsets(tps, LATEST_TIMESTAMP)
    for p in range(3):
        parts = [r for r in ranges if r.partition == p]
        assert parts[0].from_offset == lo[("plan", p)][0] and parts[-1].until_offset == hi[("plan", p)][0]
        assert all(a.until_offset == b.from_offset for a, b in zip(parts, parts[1:]))
    assert len(ranges) >= 6
    df = (spark.read.format("kraftd").option("kafka.bootstrap.servers", server.bootstrap)
          .option("subscribe", "plan").option("minPartitions", "7").load())
    assert df.rdd.getNumPartitions() == len(ranges)
    assert sorted(r.value for r in df.select("value").collect()) == [b"x"] * 50 + [b"y"] * 7


def test_timestamp_offsets_and_max_records_through_spark(spark, server, topics):
    """startingTimestamp / ...ByTimestamp / endingTimestamp resolved with ListOffsets by time
    against a real kraftd; a start with no record at or after its timestamp fails under the
    default strategy and is the latest offset under startingOffsetsByTimestampStrategy=latest;
    maxRecordsPerPartition cuts the ranges."""
    from kraftd.pipeline.wire import KafkaWire
    from kraftd.protocol.records import build_batch

    topics({"ts": 2})
    # Timestamps after the LeaderChange control batch that opens each partition (its timestamp
    # is the server's clock, and ListOffsets by time counts control batches, as Kafka does).
    base = int(time.time() * 1000) + 3_600_000
    with KafkaWire(server.bootstrap) as wire:
        for p in range(2):
            batches = [build_batch([(None, b"%d-%d" % (p, i), None, base + 10 * i + p) for i in range(b, b + 10)])
                       for b in range(0, 100, 10)]
            wire.produce({("ts", p): batches})

    def read(**options):
        reader = (spark.read.format("kraftd").option("kafka.bootstrap.servers", server.bootstrap)
                  .option("subscribe", "ts"))
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load()

    every = [(r.partition, r.offset, int(r.timestamp.timestamp() * 1000)) for r in read().collect()]
    assert len(every) == 200

    def offsets(df):
        return sorted((r.partition, r.offset) for r in df.collect())

    def expected(lo: dict, hi: dict):
        return sorted((p, o) for p, o, t in every if lo[p] <= t and (hi[p] is None or t < hi[p]))

    t = base - 1000   # offsets are relative to `base` below
    assert offsets(read(startingTimestamp=str(t + 1500))) == expected({0: t + 1500, 1: t + 1500}, {0: None, 1: None})
    assert offsets(read(startingOffsetsByTimestamp=f'{{"ts":{{"0":{t + 1200},"1":{t + 1851}}}}}',
                        endingOffsetsByTimestamp=f'{{"ts":{{"0":{t + 1300},"1":{t + 1991}}}}}')) == expected(
        {0: t + 1200, 1: t + 1851}, {0: t + 1300, 1: t + 1991})
    assert offsets(read(startingOffsets="earliest", endingTimestamp=str(t + 1100))) == expected(
        {0: 0, 1: 0}, {0: t + 1100, 1: t + 1100})
    assert offsets(read(startingTimestamp=str(t), endingTimestamp=str(10**14))) == sorted((p, o) for p, o, _ in every)
    with pytest.raises(Exception) as info:
        read(startingTimestamp=str(10**14)).collect()
    assert "No offset matched from request of topic-partition ts-0 and timestamp 100000000000000." in str(info.value)
    assert read(startingTimestamp=str(10**14), startingOffsetsByTimestampStrategy="latest").count() == 0
    with pytest.raises(Exception) as info:
        read(startingOffsetsByTimestamp='{"ts":{"0":1000}}').collect()
    assert "KAFKA_TIMESTAMP_OFFSET_DOES_NOT_MATCH_ASSIGNED" in str(info.value)

    df = read(maxRecordsPerPartition="30")
    with KafkaWire(server.bootstrap) as wire:
        from kraftd.pipeline.planner import batch_ranges
        ranges = batch_ranges(wire, source_options({"kafka.bootstrap.servers": server.bootstrap, "subscribe": "ts",
                                                    "maxRecordsPerPartition": "30"}, streaming=False))
    assert df.rdd.getNumPartitions() == len(ranges) == sum(-(-(r.until_offset - r.from_offset) // 30)
                                                           for r in plan_ranges(ranges, None))
    assert all(r.size <= 30 for r in ranges) and df.count() == 200
