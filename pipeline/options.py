"""Options of `format("kraftd")`, validated and parsed as Spark's Kafka source does.

Spark's source (KafkaSourceProvider) validates options when the DataFrame is created; the
messages below are its messages, so a job that switches between `kafka` and `kraftd` sees the
same errors. This module has no pyspark import: the driver, the workers and the unit tests
share it.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Mapping

__all__ = ["OptionError", "SourceOptions", "SinkOptions", "OffsetRange", "EARLIEST", "LATEST",
           "source_options", "sink_options", "plan_ranges", "rate_limit"]

EARLIEST = -2   # Spark's KafkaOffsetRangeLimit.EARLIEST
LATEST = -1     # Spark's KafkaOffsetRangeLimit.LATEST
STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")


class OptionError(ValueError):
    """An option Spark's Kafka source rejects (an IllegalArgumentException there)."""


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    strategy: str                     # "subscribe" | "subscribepattern" | "assign"
    topics: tuple = ()                # subscribe
    pattern: str = ""                 # subscribePattern
    assigned: tuple = ()              # assign: ((topic, partition), ...)
    starting: object = "earliest"     # "earliest" | "latest" | {(topic, partition): offset}
    ending: object = "latest"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    include_headers: bool = False
    client: tuple = ()                # other kafka.* options, as (name, value) pairs

    def client_option(self, name: str, default=None):
        return dict(self.client).get(name, default)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None
    client: tuple = ()

    def client_option(self, name: str, default=None):
        return dict(self.client).get(name, default)


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def _lower(options: Mapping[str, str]) -> dict:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _bool(value: str, name: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise OptionError(f"For input string: \"{value}\" ({name} must be true or false)")


def _int(value: str, name: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise OptionError(f"For input string: \"{value}\" ({name} must be a number)") from None


def _client_options(opts: dict) -> tuple:
    return tuple(sorted((k[6:], v) for k, v in opts.items() if k.startswith("kafka.")))


def _validate_general(opts: dict) -> None:
    strategies = [k for k in STRATEGY_KEYS if k in opts]
    names = ", ".join(STRATEGY_KEYS)
    if not strategies:
        raise OptionError(f"One of the following options must be specified for Kafka source: {names}. "
                          "See the docs for more details.")
    if len(strategies) > 1:
        raise OptionError(f"Only one of the following options can be specified for Kafka source: {names}. "
                          "See the docs for more details.")
    key = strategies[0]
    value = opts[key]
    if key == "assign" and not value.strip().startswith("{"):
        raise OptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
    if key == "subscribe" and not [t for t in value.split(",") if t.strip()]:
        raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
    if key == "subscribepattern" and not value.strip():
        raise OptionError("Pattern to subscribe is empty as specified value for option "
                          f"'subscribePattern' is '{value}'")
    if "minpartitions" in opts and _int(opts["minpartitions"], "minPartitions") <= 0:
        raise OptionError("minPartitions must be positive")
    if "kafka.auto.offset.reset" in opts:
        raise OptionError(
            "\nKafka option 'auto.offset.reset' is not supported.\n"
            "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
            "to specify where to start. Structured Streaming manages which offsets are consumed\n"
            "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
            "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
            "'startingoffsets' only applies when a new Streaming query is started, and\n"
            "that resuming will always pick up from where the query left off. See the docs for more\n"
            "details.\n")
    if "kafka.key.deserializer" in opts:
        raise OptionError("Kafka option 'key.deserializer' is not supported as keys are deserialized as "
                          "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
                          "deserialize the keys.")
    if "kafka.value.deserializer" in opts:
        raise OptionError("Kafka option 'value.deserializer' is not supported as values are deserialized as "
                          "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
                          "deserialize the values.")
    for name in ("enable.auto.commit", "interceptor.classes"):
        if f"kafka.{name}" in opts:
            raise OptionError(f"Kafka option '{name}' is not supported")
    if "kafka.bootstrap.servers" not in opts:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    if "maxoffsetspertrigger" in opts and _int(opts["maxoffsetspertrigger"], "maxOffsetsPerTrigger") <= 0:
        raise OptionError("maxOffsetsPerTrigger must be positive")


def parse_partition_offsets(text: str) -> dict:
    """Spark's JsonUtils.partitionOffsets: {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}."""
    try:
        doc = json.loads(text)
        return {(str(topic), int(p)): int(off) for topic, parts in doc.items() for p, off in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":{{\"0\":-2}}}}, "
                          f"got {text}") from None


def parse_partitions(text: str) -> tuple:
    """Spark's JsonUtils.partitions: {"topicA":[0,1],"topicB":[0,1]}."""
    try:
        doc = json.loads(text)
        return tuple(sorted((str(topic), int(p)) for topic, parts in doc.items() for p in parts))
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f"Expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}}, got {text}") from None


def _offset_limit(opts: dict, key: str, default: str):
    if key not in opts:
        return default
    value = opts[key].strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower()
    return parse_partition_offsets(value)


def _tp(tp) -> str:
    return f"{tp[0]}-{tp[1]}"


def source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate and parse, as KafkaSourceProvider's validateBatchOptions/validateStreamOptions."""
    opts = _lower(options)
    if streaming:
        if "endingoffsets" in opts:
            raise OptionError("ending offset not valid in streaming queries")
        _validate_general(opts)
        starting = _offset_limit(opts, "startingoffsets", "latest")
        ending = "latest"
    else:
        starting = _offset_limit(opts, "startingoffsets", "earliest")
        if starting == "latest":
            raise OptionError("starting offset can't be latest for batch queries on Kafka")
        if isinstance(starting, dict):
            for tp, off in starting.items():
                if off == LATEST:
                    raise OptionError(f"startingOffsets for {_tp(tp)} can't be latest for batch queries on Kafka")
        ending = _offset_limit(opts, "endingoffsets", "latest")
        if ending == "earliest":
            raise OptionError("ending offset can't be earliest for batch queries on Kafka")
        if isinstance(ending, dict):
            for tp, off in ending.items():
                if off == EARLIEST:
                    raise OptionError(f"ending offset for {_tp(tp)} can't be earliest for batch queries on Kafka")
        _validate_general(opts)
        if isinstance(starting, dict) and isinstance(ending, dict):
            if set(starting) != set(ending):
                raise OptionError(
                    "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The specified start offset "
                    "and end offset should have the same topic-partitions. Topic-partitions for start offset: "
                    f"{_tp_set(starting)}, topic-partitions for end offset: {_tp_set(ending)}.")
            for tp, start in starting.items():
                end = ending[tp]
                if start > end and start >= 0 and end >= 0:
                    raise OptionError(
                        f"[UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The specified start offset {start} is "
                        f"greater than the end offset {end} for topic {tp[0]} partition {tp[1]}.")
    strategy = next(k for k in STRATEGY_KEYS if k in opts)
    topics, pattern, assigned = (), "", ()
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
    elif strategy == "subscribepattern":
        pattern = opts["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"Invalid subscribePattern '{pattern}': {exc}") from None
    else:
        assigned = parse_partitions(opts["assign"])
    client = _client_options(opts)
    return SourceOptions(
        bootstrap=opts["kafka.bootstrap.servers"], strategy=strategy, topics=topics, pattern=pattern,
        assigned=assigned, starting=starting, ending=ending,
        fail_on_data_loss=_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        min_partitions=_int(opts["minpartitions"], "minPartitions") if "minpartitions" in opts else None,
        max_offsets_per_trigger=(_int(opts["maxoffsetspertrigger"], "maxOffsetsPerTrigger")
                                 if "maxoffsetspertrigger" in opts and streaming else None),
        include_headers=_bool(opts.get("includeheaders", "false"), "includeHeaders"),
        client=client)


def _tp_set(offsets: dict) -> str:
    return "Set(" + ", ".join(_tp(tp) for tp in sorted(offsets)) + ")"


def sink_options(options: Mapping[str, str]) -> SinkOptions:
    """KafkaSourceProvider.kafkaParamsForProducer's checks."""
    opts = _lower(options)
    if "kafka.key.serializer" in opts:
        raise OptionError("Kafka option 'key.serializer' is not supported as keys are serialized with "
                          "ByteArraySerializer.")
    if "kafka.value.serializer" in opts:
        raise OptionError("Kafka option 'value.serializer' is not supported as value are serialized with "
                          "ByteArraySerializer.")
    if "kafka.bootstrap.servers" not in opts:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer")
    topic = opts.get("topic")
    return SinkOptions(bootstrap=opts["kafka.bootstrap.servers"], topic=topic.strip() if topic else None,
                       client=_client_options(opts))


# -- planning -----------------------------------------------------------------------------------

def _part_count(size: int, total: int, min_parts: int) -> int:
    # Scala's math.round(double): half up, never banker's rounding.
    return max(int(math.floor(size / total * min_parts + 0.5)), 1)


def plan_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Spark 4's KafkaOffsetRangeCalculator.getRanges: empty ranges dropped; with minPartitions
    above the number of ranges, each range is split into parts proportional to its share of
    the offsets (ranges that would get one part are kept whole and left out of the share)."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    unsplit = {(r.topic, r.partition) for r in ranges if _part_count(r.size, total, min_partitions) == 1}
    unsplit_total = sum(r.size for r in ranges if (r.topic, r.partition) in unsplit)
    split_total = total - unsplit_total
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for r in ranges:
        parts = 1 if (r.topic, r.partition) in unsplit else _part_count(r.size, split_total, split_min)
        remaining, start = r.size, r.from_offset
        for part in range(parts):
            this = remaining // (parts - part)
            remaining -= this
            end = min(start + this, r.until_offset)
            out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return [r for r in out if r.size > 0]


def rate_limit(start: dict, latest: dict, limit: int) -> dict:
    """End offsets for one micro-batch of at most `limit` offsets in total.

    Spark's KafkaMicroBatchStream.rateLimit prorates `limit` over the partitions by their
    backlog (floor, or ceil below one offset, which can exceed the limit when many partitions
    each get less than one). Here the floors are taken, then the offsets left over go one each
    to the partitions with the largest remainders, so a batch never exceeds the limit and a
    limit of at least one always makes progress."""
    sizes = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: limit * size / total for tp, size in sizes.items()}
    take = {tp: int(math.floor(s)) for tp, s in shares.items()}
    left = limit - sum(take.values())
    for tp in sorted(shares, key=lambda t: (take[t] - shares[t], t)):
        if left <= 0:
            break
        if take[tp] < sizes[tp]:
            take[tp] += 1
            left -= 1
    return {tp: start.get(tp, end) + take[tp] if sizes[tp] else end for tp, end in latest.items()}
