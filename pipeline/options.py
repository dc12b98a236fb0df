"""Options of `format("kraftd")`, validated and parsed as Spark's Kafka source does.

Spark's source (KafkaSourceProvider) validates options when the DataFrame is created; the
messages below are its messages, so a job that switches between `kafka` and `kraftd` sees the
same errors. This module has no pyspark import: the driver, the workers and the unit tests
share it.
"""
from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from typing import Mapping

__all__ = ["OptionError", "SourceOptions", "SinkOptions", "OffsetRange", "TimestampLimit", "EARLIEST", "LATEST",
           "source_options", "sink_options", "plan_ranges", "rate_limit", "time_string_ms", "option", "flag"]

EARLIEST = -2   # Spark's KafkaOffsetRangeLimit.EARLIEST
LATEST = -1     # Spark's KafkaOffsetRangeLimit.LATEST
STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000   # Spark's "15m"

log = logging.getLogger("kraftd.pipeline")


class OptionError(ValueError):
    """An option Spark's Kafka source rejects (an IllegalArgumentException there)."""


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    strategy: str                     # "subscribe" | "subscribepattern" | "assign"
    topics: tuple = ()                # subscribe
    pattern: str = ""                 # subscribePattern
    assigned: tuple = ()              # assign: ((topic, partition), ...)
    starting: object = "earliest"     # "earliest" | "latest" | {(topic, partition): offset} | TimestampLimit
    ending: object = "latest"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    include_headers: bool = False
    client: tuple = ()                # other kafka.* options, as (name, value) pairs

    def client_option(self, name: str, default=None):
        return dict(self.client).get(name, default)


@dataclass(frozen=True)
class TimestampLimit:
    """startingTimestamp / endingTimestamp (`every`, one timestamp for every partition) or
    startingOffsetsByTimestamp / endingOffsetsByTimestamp (`by_partition`); resolved with
    ListOffsets by timestamp. `on_no_match`: startingOffsetsByTimestampStrategy ("error" or
    "latest"), what a start does when a partition has no record at or after its timestamp."""
    every: int | None = None
    by_partition: tuple = ()          # ((topic, partition), timestamp) pairs
    on_no_match: str = "error"

    def timestamps(self, tps) -> dict:
        if self.every is not None:
            return {tp: self.every for tp in tps}
        return dict(self.by_partition)


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


def option(options: Mapping, name: str, default=None):
    """One option by name, case-insensitively (Spark's options are case-insensitive)."""
    return _lower(options).get(name.lower(), default)


def flag(options: Mapping, name: str, default: bool = False) -> bool:
    """A true/false option (anything else is refused, as Spark refuses it)."""
    value = option(options, name)
    return default if value is None else _bool(value, name)


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
    if "maxrecordsperpartition" in opts and _int(opts["maxrecordsperpartition"], "maxRecordsPerPartition") <= 0:
        raise OptionError("maxrecordsperpartition must be positive")
    if "kafka.group.id" in opts:
        # Spark warns (a shared group id is unsafe there); here it has no effect at all.
        log.warning("Kafka option 'kafka.group.id' has been set; format(\"kraftd\") joins no consumer group and "
                    "commits no offsets, so it has no effect")
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
    if "minoffsetspertrigger" in opts and "maxoffsetspertrigger" in opts:
        low = _int(opts["minoffsetspertrigger"], "minOffsetsPerTrigger")
        high = _int(opts["maxoffsetspertrigger"], "maxOffsetsPerTrigger")
        if low > high:
            raise OptionError(f"The value of minOffsetPerTrigger({low}) is higher than the "
                              f"maxOffsetsPerTrigger({high}).")
    if "maxtriggerdelay" in opts:
        time_string_ms(opts["maxtriggerdelay"])


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


def parse_partition_timestamps(text: str) -> tuple:
    """Spark's JsonUtils.partitionTimestamps: {"topicA":{"0":1700000000000,"1":...}}."""
    try:
        doc = json.loads(text)
        return tuple(sorted(((str(topic), int(p)), int(ts)) for topic, parts in doc.items() for p, ts in parts.items()))
    except (ValueError, AttributeError, TypeError):
        raise OptionError('Expected e.g. {"topicA": {"0": 123456789, "1": 123456789},\n'
                          f'"topicB": {{"0": 123456789, "1": 123456789}}}}, got {text}') from None


def _offset_limit(opts: dict, key: str, default: str, timestamp_key: str = "", by_timestamp_key: str = ""):
    """Spark's getKafkaOffsetRangeLimit: a global timestamp wins over timestamps by partition,
    which win over offsets."""
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"No value found for '{strategy.upper()}' (startingOffsetsByTimestampStrategy is "
                          "error or latest)")
    if timestamp_key and timestamp_key in opts:
        text = opts[timestamp_key].strip()
        try:
            return TimestampLimit(every=int(text), on_no_match=strategy)
        except ValueError:
            raise OptionError(f"Expected a single long value, got {text}") from None
    if by_timestamp_key and by_timestamp_key in opts:
        return TimestampLimit(by_partition=parse_partition_timestamps(opts[by_timestamp_key].strip()),
                              on_no_match=strategy)
    if key not in opts:
        return default
    value = opts[key].strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower()
    return parse_partition_offsets(value)


_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def time_string_ms(text: str) -> int:
    """Spark's JavaUtils.timeStringAsMs: "15m", "10s", "500ms", "2h"; a bare number is ms."""
    m = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", text.strip().lower())
    if m is None or (m.group(2) and m.group(2) not in _TIME_UNITS_MS):
        raise OptionError("Time must be specified as seconds (s), milliseconds (ms), microseconds (us), minutes "
                          "(m or min), hour (h), or day (d). E.g. 50s, 100ms, or 250us.")
    return int(int(m.group(1)) * _TIME_UNITS_MS[m.group(2) or "ms"])


def _tp(tp) -> str:
    return f"{tp[0]}-{tp[1]}"


def source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate and parse, as KafkaSourceProvider's validateBatchOptions/validateStreamOptions."""
    opts = _lower(options)
    if streaming:
        if "endingoffsets" in opts:
            raise OptionError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts:
            raise OptionError("ending timestamp not valid in streaming queries")
        _validate_general(opts)
        starting = _offset_limit(opts, "startingoffsets", "latest", "startingtimestamp", "startingoffsetsbytimestamp")
        ending = "latest"
        if "endingtimestamp" in opts:
            log.warning("endingTimestamp is ignored in streaming queries (as Spark's Kafka source ignores it)")
    else:
        starting = _offset_limit(opts, "startingoffsets", "earliest", "startingtimestamp", "startingoffsetsbytimestamp")
        if starting == "latest":
            raise OptionError("starting offset can't be latest for batch queries on Kafka")
        if isinstance(starting, dict):
            for tp, off in starting.items():
                if off == LATEST:
                    raise OptionError(f"startingOffsets for {_tp(tp)} can't be latest for batch queries on Kafka")
        ending = _offset_limit(opts, "endingoffsets", "latest", "endingtimestamp", "endingoffsetsbytimestamp")
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
        if (isinstance(starting, TimestampLimit) and isinstance(ending, TimestampLimit)
                and starting.by_partition and ending.by_partition):
            start_ts, end_ts = dict(starting.by_partition), dict(ending.by_partition)
            if set(start_ts) != set(end_ts):
                raise OptionError(
                    "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The specified start offset "
                    "and end offset should have the same topic-partitions. Topic-partitions for start offset: "
                    f"{_tp_set(start_ts)}, topic-partitions for end offset: {_tp_set(end_ts)}.")
            for tp, start in start_ts.items():
                end = end_ts[tp]
                if start > end and start >= 0 and end >= 0:
                    raise OptionError(
                        f"[UNRESOLVED_START_TIMESTAMP_GREATER_THAN_END_TIMESTAMP] The specified start timestamp "
                        f"{start} is greater than the end timestamp {end} for topic {tp[0]} partition {tp[1]}.")
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if name.lower() in opts:
                log.warning("%s option ignored in batch queries", name)
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
        max_records_per_partition=(_int(opts["maxrecordsperpartition"], "maxRecordsPerPartition")
                                   if "maxrecordsperpartition" in opts else None),
        max_offsets_per_trigger=(_int(opts["maxoffsetspertrigger"], "maxOffsetsPerTrigger")
                                 if "maxoffsetspertrigger" in opts and streaming else None),
        min_offsets_per_trigger=(_int(opts["minoffsetspertrigger"], "minOffsetsPerTrigger")
                                 if "minoffsetspertrigger" in opts and streaming else None),
        max_trigger_delay_ms=time_string_ms(opts.get("maxtriggerdelay", "15m")),
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


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`parts` contiguous pieces; integer division, the last pieces take the remainder."""
    out = []
    remaining, start = r.size, r.from_offset
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.until_offset)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def plan_ranges(ranges: list[OffsetRange], min_partitions: int | None,
                max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """Spark 4's KafkaOffsetRangeCalculator.getRanges: empty ranges dropped. With
    maxRecordsPerPartition, a range is first cut into ceil(size / max) even pieces. Then, with
    minPartitions above the number of ranges, each range is split into parts proportional to its
    share of the offsets (ranges that would get one part are kept whole and left out of the
    share; as in Spark, that is decided per topic-partition)."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        ranges = [piece for r in ranges for piece in _divide(r, -(-r.size // max_records_per_partition))
                  if piece.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    unsplit_ranges = [r for r in ranges if _part_count(r.size, total, min_partitions) == 1]
    unsplit = {(r.topic, r.partition) for r in unsplit_ranges}
    split_total = total - sum(r.size for r in unsplit_ranges)
    split_min = max(min_partitions - len(unsplit_ranges), 1)
    out = []
    for r in ranges:
        parts = 1 if (r.topic, r.partition) in unsplit else _part_count(r.size, split_total, split_min)
        out += _divide(r, parts)
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
