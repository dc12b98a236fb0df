"""Offset planning and option validation as Spark's Kafka source does them."""
import random

import pytest

from kraftd.pipeline.options import OffsetRange, OptionError, plan_ranges, rate_limit, sink_options, source_options

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
