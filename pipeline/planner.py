"""Driver-side planning for `format("kraftd")`: which partitions, which offsets.

Batch: start/end limits resolved with Metadata + ListOffsets, one range per topic-partition,
split by minPartitions (options.plan_ranges). Streaming: JSON offsets that carry each
partition's leader epoch, checked with OffsetForLeaderEpoch before every micro-batch.

A streaming offset is a dict (Spark stores it in the checkpoint as JSON):

    {"offsets": {"t": {"0": 23}}, "epochs": {"t": {"0": 4}}, "from": {"t": {"0": 17}}}

`offsets` is the position as in Spark's Kafka source; `epochs` the leader epoch the position
was learned under (KIP-320: a leader of a later epoch whose log ends below the position for
that epoch has truncated it); `from`, only in a micro-batch's end offset, restarts a partition
elsewhere than the previous end (a new partition at its earliest offset, or a truncated one at
the point where its log diverged).
"""
from __future__ import annotations

import logging
import re
import time

from .errors import report_data_loss
from .options import EARLIEST, LATEST, OffsetRange, OptionError, SourceOptions, TimestampLimit, plan_ranges, rate_limit
from .wire import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, KafkaWire

__all__ = ["StreamOffset", "discover", "resolve", "batch_ranges", "StreamPlanner"]

log = logging.getLogger("kraftd.pipeline")


def _tp_str(tp) -> str:
    return f"{tp[0]}-{tp[1]}"


def _tp_set(tps) -> str:
    return "Set(" + ", ".join(_tp_str(tp) for tp in sorted(tps)) + ")"


def discover(wire: KafkaWire, opts: SourceOptions) -> list[tuple[str, int]]:
    """The topic-partitions the strategy names now (Spark's ConsumerStrategy)."""
    if opts.strategy == "assign":
        return list(opts.assigned)
    if opts.strategy == "subscribe":
        return wire.partitions_of(opts.topics)
    pattern = re.compile(opts.pattern)
    counts = wire.metadata(None)
    return sorted((t, p) for t, n in counts.items()
                  if pattern.fullmatch(t) and not t.startswith("__") for p in range(n))


def resolve(wire: KafkaWire, tps, limit, *, start: bool) -> dict:
    """Offsets of `limit` ("earliest" | "latest" | {tp: offset or -2/-1} | TimestampLimit) for `tps`."""
    if isinstance(limit, TimestampLimit):
        return _resolve_timestamps(wire, tps, limit, start=start)
    if isinstance(limit, dict):
        if set(limit) != set(tps):
            raise OptionError(
                "[KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka start offsets don't "
                "match what are assigned. Maybe topic partitions are created or deleted while the query is "
                f"running. Use -1 for latest, -2 for earliest. Specified: {_tp_set(limit)} Assigned: {_tp_set(tps)}")
        earliest = [tp for tp, o in limit.items() if o == EARLIEST]
        latest = [tp for tp, o in limit.items() if o == LATEST]
        out = {tp: o for tp, o in limit.items() if o >= 0}
        out.update({tp: v[0] for tp, v in wire.list_offsets(earliest, EARLIEST_TIMESTAMP).items()})
        out.update({tp: v[0] for tp, v in wire.list_offsets(latest, LATEST_TIMESTAMP).items()})
        return out
    timestamp = EARLIEST_TIMESTAMP if limit == "earliest" else LATEST_TIMESTAMP
    return {tp: v[0] for tp, v in wire.list_offsets(tps, timestamp).items()}


def _resolve_timestamps(wire: KafkaWire, tps, limit: TimestampLimit, *, start: bool) -> dict:
    """ListOffsets by timestamp: the first offset whose timestamp is at or after the partition's
    timestamp. A partition with none resolves to its latest offset, except a start under
    startingOffsetsByTimestampStrategy=error (Spark's default), which fails."""
    timestamps = limit.timestamps(tps)
    if set(timestamps) != set(tps):
        raise OptionError(
            "[KAFKA_TIMESTAMP_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka timestamp based "
            f"{'start' if start else 'end'} offsets don't match what are assigned. Maybe topic partitions are "
            "created or deleted while the query is running, or you didn't specify all the partitions. "
            f"Specified: {_tp_set(timestamps)} Assigned: {_tp_set(tps)}")
    out = {}
    unmatched = []
    for tp, ts in timestamps.items():
        offset = wire.list_offsets([tp], ts)[tp][0]
        if offset >= 0:
            out[tp] = offset
        elif start and limit.on_no_match == "error":
            raise OptionError(f"No offset matched from request of topic-partition {_tp_str(tp)} and timestamp {ts}.")
        else:
            unmatched.append(tp)
    out.update({tp: v[0] for tp, v in wire.list_offsets(unmatched, LATEST_TIMESTAMP).items()})
    return out


def batch_ranges(wire: KafkaWire, opts: SourceOptions) -> list[OffsetRange]:
    tps = discover(wire, opts)
    starts = resolve(wire, tps, opts.starting, start=True)
    ends = resolve(wire, tps, opts.ending, start=False)
    ranges = []
    for tp in tps:
        s, e = starts[tp], ends[tp]
        if s > e:
            raise OptionError(
                f"[RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The resolved start offset {s} is greater than the "
                f"resolved end offset {e} for topic {tp[0]} partition {tp[1]}.")
        ranges.append(OffsetRange(tp[0], tp[1], s, e))
    return plan_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)


# -- streaming --------------------------------------------------------------------------------

class StreamOffset:
    """Positions, epochs and restart points of a streaming offset dict (see the module doc)."""

    def __init__(self, offsets: dict, epochs: dict | None = None, starts: dict | None = None) -> None:
        self.offsets = offsets
        self.epochs = epochs or {}
        self.starts = starts or {}

    @staticmethod
    def _nest(flat: dict) -> dict:
        out: dict = {}
        for (t, p), v in sorted(flat.items()):
            out.setdefault(t, {})[str(p)] = v
        return out

    @staticmethod
    def _flat(nested: dict | None) -> dict:
        return {(t, int(p)): int(v) for t, ps in (nested or {}).items() for p, v in ps.items()}

    def to_json(self) -> dict:
        doc = {"offsets": self._nest(self.offsets), "epochs": self._nest(self.epochs)}
        if self.starts:
            doc["from"] = self._nest(self.starts)
        return doc

    @classmethod
    def from_json(cls, doc: dict) -> "StreamOffset":
        return cls(cls._flat(doc.get("offsets")), cls._flat(doc.get("epochs")), cls._flat(doc.get("from")))


class StreamPlanner:
    """The micro-batch logic of the stream reader (kept free of pyspark to test it alone)."""

    def __init__(self, wire: KafkaWire, opts: SourceOptions, clock=time.time) -> None:
        self.wire = wire
        self.opts = opts
        self.available_now: dict | None = None
        self.clock = clock
        self.last_trigger_ms = 0.0   # minOffsetsPerTrigger: when the last batch was let through

    def initial(self) -> StreamOffset:
        tps = discover(self.wire, self.opts)
        offsets = resolve(self.wire, tps, self.opts.starting, start=True)
        return StreamOffset(offsets, self._epochs(offsets))

    def _epochs(self, offsets: dict) -> dict:
        latest = self.wire.list_offsets(list(offsets), LATEST_TIMESTAMP)
        return {tp: latest[tp][1] for tp in offsets}

    def prepare_available_now(self) -> None:
        tps = discover(self.wire, self.opts)
        self.available_now = {tp: v[0] for tp, v in self.wire.list_offsets(tps, LATEST_TIMESTAMP).items()}

    def latest(self, start: StreamOffset, max_rows: int | None) -> StreamOffset:
        fail = self.opts.fail_on_data_loss
        positions = dict(start.offsets)
        restarts: dict = {}
        # KIP-320: was the log truncated below a position we already read up to?
        for tp, offset in start.offsets.items():
            epoch = start.epochs.get(tp, -1)
            if epoch < 0 or offset <= 0:
                continue
            try:
                _, end = self.wire.end_offset_for_epoch(tp[0], tp[1], epoch)
            except Exception as exc:  # the partition is gone: handled as deleted below
                log.debug("OffsetForLeaderEpoch %s: %s", _tp_str(tp), exc)
                continue
            if 0 <= end < offset or end < 0:
                diverged = max(end, 0)
                report_data_loss(fail, "LOG_TRUNCATED",
                                 f"Partition {_tp_str(tp)} was truncated: leader epoch {epoch} ends at offset "
                                 f"{end} on the leader, below offset {offset} already read; records in "
                                 f"[{diverged}, {offset}) that were read no longer exist.")
                restarts[tp] = diverged
                positions[tp] = diverged
        tps = discover(self.wire, self.opts)
        current = set(tps)
        deleted = set(positions) - current
        if deleted:
            report_data_loss(fail, "PARTITIONS_DELETED", f"Partitions {_tp_set(deleted)} have been deleted.")
            for tp in deleted:
                positions.pop(tp)
        added = [tp for tp in tps if tp not in positions]
        if added:
            for tp, (earliest, _) in self.wire.list_offsets(added, EARLIEST_TIMESTAMP).items():
                if earliest != 0:
                    report_data_loss(fail, "ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO",
                                     f"Added partition {_tp_str(tp)} starts from {earliest} instead of 0.")
                positions[tp] = restarts[tp] = earliest
        latest = self.wire.list_offsets(tps, LATEST_TIMESTAMP)
        ends = {tp: latest[tp][0] for tp in tps}
        epochs = {tp: latest[tp][1] for tp in tps}
        if self.available_now is not None:
            ends = {tp: min(e, self.available_now.get(tp, e)) for tp, e in ends.items()}
        for tp, end in ends.items():
            if end < positions[tp]:
                # The log ends below our position but no epoch told us (an unknown epoch).
                report_data_loss(fail, "PARTITION_OFFSET_CHANGED",
                                 f"Partition {_tp_str(tp)} offset was changed from {positions[tp]} to {end}. "
                                 "This could either be a user error that the start offset is set too high and "
                                 "this is the first batch, or the kafka topic-partition is broken, and some data "
                                 "may have been missed.")
                positions[tp] = restarts[tp] = end
        if not restarts and not deleted and self._delay(positions, ends):
            return start
        if max_rows is not None:
            ends = rate_limit(positions, ends, max_rows)
        restarts = {tp: o for tp, o in restarts.items() if tp in ends}
        return StreamOffset(ends, epochs, restarts)

    def _delay(self, positions: dict, ends: dict) -> bool:
        """minOffsetsPerTrigger, as Spark's KafkaMicroBatchStream.delayBatch: skip this trigger
        (offer the start offset again) while fewer new offsets than the minimum are available
        and maxTriggerDelay has not passed since the last batch. Not under AvailableNow: the
        query has to end."""
        low = self.opts.min_offsets_per_trigger
        if low is None or self.available_now is not None:
            return False
        now = self.clock() * 1000
        if now - self.last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self.last_trigger_ms = now
            return False
        if sum(max(0, end - positions.get(tp, end)) for tp, end in ends.items()) < low:
            return True
        self.last_trigger_ms = now
        return False

    def ranges(self, start: StreamOffset, end: StreamOffset) -> list[OffsetRange]:
        out = []
        for tp, until in sorted(end.offsets.items()):
            begin = end.starts.get(tp, start.offsets.get(tp))
            if begin is None:
                continue
            out.append(OffsetRange(tp[0], tp[1], begin, until))
        return plan_ranges(out, self.opts.min_partitions, self.opts.max_records_per_partition)
