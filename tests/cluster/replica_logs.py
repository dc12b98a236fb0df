"""Each replica's log of a partition, read record by record from its segment files, and the checks
the failover tests make on them: replicas identical below the high watermark, every acknowledged
record present exactly once where its delivery report put it.

    logs = read_replica_logs({1: tmp_path / "node1", ...}, "events", 0)
    hw = high_watermark(cluster.bootstrap(), "events", 0)          # ListOffsets latest at the leader
    entries = assert_replicas_identical_below_hw(dirs, "events", 0, hw)

Segments are read with plain file reads (never through `LogSegment`, which opens read-write), so
a running node's files can be read too: segments are only appended to, and a truncation replaces
a file by a renamed copy, so what is below the HW does not change under the reader. Read after
the producer has stopped, or the HW you pass may be older than what a replica has.
"""
from __future__ import annotations

from pathlib import Path
from typing import Collection, Iterable, Mapping, NamedTuple

from kraftd.protocol.records import decode_records
from kraftd.storage.segment_files import list_segments, scan_segment


class LogEntry(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    leader_epoch: int        # partitionLeaderEpoch of the batch holding the record
    control: bool = False    # a control batch's offset: kept so offsets add up, key/value are None
    producer: tuple[int, int, int] = (-1, -1, -1)  # (producer id, producer epoch, sequence) if idempotent

    def describe(self) -> str:
        if self.control:
            return f"control record (leader epoch {self.leader_epoch})"
        pid, epoch, seq = self.producer
        idempotent = f" producer {pid} epoch {epoch} seq {seq}" if pid >= 0 else ""
        return f"key={_short(self.key)} value={_short(self.value)} leader epoch {self.leader_epoch}{idempotent}"


class ReplicaLog(NamedTuple):
    node: object             # whatever named the replica in the caller's mapping (node id or path)
    entries: list[LogEntry]  # in log order, control offsets included
    end_offset: int          # the offset after the last readable batch (0 for an empty log)
    problems: list[tuple[int, str]]  # (offset, what): torn or corrupt batches, offsets going backwards

    def records(self) -> list[LogEntry]:
        """The data records (control batches skipped)."""
        return [e for e in self.entries if not e.control]

    def below(self, offset: int) -> list[LogEntry]:
        return [e for e in self.entries if e.offset < offset]


def _short(b: bytes | None, limit: int = 48) -> str:
    if b is None:
        return "null"
    text = bytes(b).decode("utf-8", errors="backslashreplace")
    return repr(text if len(text) <= limit else text[:limit] + "...")


def partition_dir(data_dir, topic: str, partition: int) -> Path:
    return Path(data_dir) / f"{topic}-{partition}"


def read_replica_log(data_dir, topic: str, partition: int, *, node=None) -> ReplicaLog:
    """Every record of `topic`-`partition` in one node's data dir, in offset order.

    A batch whose CRC fails or that is cut short ends the reading of its segment (what a restart's
    recovery would truncate) and is noted in `problems`, as is a batch starting below the offset
    where the previous one ended."""
    directory = partition_dir(data_dir, topic, partition)
    entries: list[LogEntry] = []
    problems: list[tuple[int, str]] = []
    end = 0
    for segment in list_segments(directory) if directory.is_dir() else []:
        path = Path(segment.path)
        try:
            buf = path.read_bytes()  # a copy, not a mapping: the node may still be running
        except FileNotFoundError:  # replaced by a truncation's rename between listing and read
            continue
        # The shared offline scanner (kraftd verify's): framing, CRCs, offsets against `end`.
        scan = scan_segment(buf, path=path.name, base_offset=segment.base_offset, expected_offset=end)
        backwards = {p.position: p.message for p in scan.problems if p.kind == "backwards"}
        for b in scan.batches:
            h, pos = b.header, b.position
            if not b.crc_ok:  # what a restart's recovery would truncate: stop reading this segment
                problems.append((h.base_offset, f"{path.name}: CRC mismatch in batch at offset "
                                                f"{h.base_offset} (position {pos})"))
                break
            if pos in backwards:
                problems.append((h.base_offset, f"{path.name}: {backwards[pos]}"))
            records = decode_records(memoryview(buf)[pos:pos + h.size], h)
            epoch = h.partition_leader_epoch
            if h.is_control:
                entries += [LogEntry(r.offset, None, None, epoch, True) for r in records]
            elif h.producer_id >= 0 and h.base_sequence >= 0:
                entries += [LogEntry(r.offset, r.key, r.value, epoch, False,
                                     (h.producer_id, h.producer_epoch, h.base_sequence + r.offset - h.base_offset))
                            for r in records]
            else:
                entries += [LogEntry(r.offset, r.key, r.value, epoch) for r in records]
            end = h.next_offset
        else:
            stopped = [p for p in scan.problems if p.position == scan.end_position]
            if stopped:  # a torn tail or a header the walk cannot get past
                problems.append((end, f"{path.name}: {stopped[0].message}"))
    return ReplicaLog(node if node is not None else str(data_dir), entries, end, problems)


def read_replica_logs(dirs: Mapping | Iterable, topic: str, partition: int) -> list[ReplicaLog]:
    """One ReplicaLog per data dir; `dirs` maps node ids to data dirs, or lists data dirs."""
    items = dirs.items() if isinstance(dirs, Mapping) else ((str(d), d) for d in dirs)
    return [read_replica_log(d, topic, partition, node=node) for node, d in items]


def log_end_offset(data_dir, topic: str, partition: int) -> int:
    """The offset after the last complete batch of one node's log (headers only: cheap)."""
    directory = partition_dir(data_dir, topic, partition)
    for segment in reversed(list_segments(directory) if directory.is_dir() else []):
        try:
            buf = Path(segment.path).read_bytes()
        except FileNotFoundError:
            continue
        scan = scan_segment(buf, path=segment.path, base_offset=segment.base_offset)
        if scan.batches:
            return scan.end_offset
    return 0


def first_difference(logs: list[ReplicaLog], hw: int) -> str | None:
    """None when every replica holds the same entries at the same offsets below `hw`; else a
    description of the first offset where they differ (or where one replica stops short)."""
    views = [{e.offset: e for e in log.entries if e.offset < hw} for log in logs]
    for offset in sorted(set().union(*views)):
        seen = [view.get(offset) for view in views]
        if all(s == seen[0] for s in seen):
            continue
        lines = [f"replicas differ at offset {offset} (HW {hw}):"]
        for log, entry in zip(logs, seen):
            where = "present" if entry is not None else f"missing (log ends at {log.end_offset})"
            lines.append(f"  node {log.node}: {entry.describe() if entry else where}")
        return "\n".join(lines)
    short = [log for log in logs if log.end_offset < hw]
    if short:  # identical as far as they go, but a replica ending below the HW lost committed data
        return "\n".join([f"replicas end below the HW {hw}:"]
                         + [f"  node {log.node}: log ends at {log.end_offset}" for log in short])
    return None


def assert_replicas_identical_below_hw(dirs, topic: str, partition: int, hw: int) -> list[LogEntry]:
    """Every replica's log of `topic`-`partition` is the same below `hw` (offsets, keys, values,
    batch leader epochs, control offsets) and readable there; returns those entries. Problems at
    or past the HW (a crashed node's torn tail) are not errors."""
    logs = read_replica_logs(dirs, topic, partition)
    problems = [f"node {log.node}: {what}" for log in logs for offset, what in log.problems if offset < hw]
    difference = first_difference(logs, hw)
    assert difference is None and not problems, \
        f"{topic}-{partition}: " + "\n".join(filter(None, [difference, *problems]))
    return logs[0].below(hw)


# -- acknowledged records ------------------------------------------------------------------------

class Ack(NamedTuple):
    """A successful delivery report: where the leader said the record went."""
    key: bytes
    partition: int
    offset: int | None  # None: librdkafka acknowledged it without an offset (see below)
    at: float  # time.monotonic() when the report was served


def assert_acked_exactly_once(logs: Mapping[int, list[LogEntry]], acks: list[Ack], *, nothing_else: bool = False,
                              client_resends: Collection[tuple[int, int]] = ()) -> set[bytes]:
    """Every acknowledged record is in its partition's log at the offset its delivery report gave,
    no key appears twice in any log (a retried batch written again), and each partition's
    reports came in offset order (the order acknowledged is the log's order). nothing_else: the
    logs hold no data record that was not acknowledged (when every record sent was).

    `logs` maps partition -> entries (e.g. what assert_replicas_identical_below_hw returned);
    `acks` are in the order the reports were served.

    client_resends: the (producer id, epoch) pairs whose epoch the client bumped for a reason of
    its own (librdkafka's log says why: SequenceProducer.client_side_bumps). A record written
    under such an epoch and again, by the same producer, under a later epoch is not an error: the
    new epoch restarts the sequences, so no broker (Kafka's neither) can tell the second copy is
    a re-send (confluentinc/librdkafka#4953). Those keys are printed and returned; every other
    duplicate still fails."""
    errors: list[str] = []
    resent: set[bytes] = set()
    where: dict[bytes, list[tuple[int, int]]] = {}
    entry_at: dict[tuple[int, int], LogEntry] = {}
    for partition, entries in logs.items():
        for e in entries:
            if not e.control:
                where.setdefault(e.key, []).append((partition, e.offset))
                entry_at[partition, e.offset] = e
    twice = {k: v for k, v in where.items() if len(v) > 1}
    for key, places in list(twice.items()):
        if client_resend([entry_at[x] for x in places], client_resends):
            resent.add(key)
            del twice[key]
            print(f"key {_short(key)} written twice, re-sent by the client under a bumped epoch: "
                  + "; ".join(f"partition {p} offset {o}: {entry_at[p, o].describe()}" for p, o in places))
    errors += [f"key {_short(k)} is in the logs {len(v)} times ({_why_twice([entry_at[x] for x in v])}): "
               + "; ".join(f"partition {p} offset {o}: {entry_at[p, o].describe()}" for p, o in v)
               for k, v in sorted(twice.items())[:10]]
    reported: dict[bytes, Ack] = {}
    last: dict[int, Ack] = {}
    for ack in acks:
        if ack.key in reported:
            errors.append(f"key {_short(ack.key)} acknowledged twice: {reported[ack.key]} and {ack}")
        reported[ack.key] = ack
        found = where.get(ack.key, [])
        if ack.offset is None:
            # librdkafka's idempotent producer acknowledges a batch whose answer it lost once the
            # broker has written a later one (the sequences prove it), without an offset.
            if ack.partition not in {p for p, _ in found}:
                errors.append(f"key {_short(ack.key)} acknowledged (no offset) in partition {ack.partition} but "
                              + (f"found at {found}" if found else "missing from the log"))
            continue
        if (ack.partition, ack.offset) not in found:
            errors.append(f"key {_short(ack.key)} acknowledged at {ack.partition}/{ack.offset} but "
                          + (f"found at {found}" if found else "missing from the log"))
        prev = last.get(ack.partition)
        if prev is not None and ack.offset <= prev.offset:
            errors.append(f"partition {ack.partition}: {_short(ack.key)} acknowledged at offset {ack.offset} "
                          f"after {_short(prev.key)} at {prev.offset}")
        last[ack.partition] = ack
    if nothing_else:
        extra = sorted(set(where) - set(reported))
        errors += [f"key {_short(k)} at (partition, offset) {where[k]} was never acknowledged" for k in extra[:10]]
    assert not errors, f"{len(errors)} problems with acknowledged records, the first ones:\n" + \
        "\n".join(errors[:20])
    return resent


def client_resend(copies: list[LogEntry], client_resends: Collection[tuple[int, int]]) -> bool:
    """Two copies of one record by one producer id, the first under an epoch the client bumped
    for a reason of its own, the second under a later epoch."""
    if len(copies) != 2 or len({pid for pid, _, _ in (e.producer for e in copies)}) != 1:
        return False
    (pid, first_epoch, _), (_, second_epoch, _) = sorted(e.producer for e in copies)
    return pid >= 0 and second_epoch > first_epoch and (pid, first_epoch) in client_resends


def _why_twice(copies: list[LogEntry]) -> str:
    """Who wrote a record twice, judged from its copies' producer ids, epochs and sequences."""
    producers = {e.producer for e in copies}
    if any(pid < 0 for pid, _, _ in producers):
        return "written by a non-idempotent producer"
    if len(producers) == 1:
        return "the same producer epoch and sequence twice: the broker appended a retried batch again"
    if len({(pid, epoch) for pid, epoch, _ in producers}) > 1:
        return ("re-sent under a new producer epoch, which restarts the sequences, so no broker can tell it is "
                "a retry: the client bumped its epoch while it believed the record not persisted (librdkafka "
                "does after 'skipped sequence numbers', confluentinc/librdkafka#4953)")
    return "one producer epoch, different sequences: the client sent the record twice"


# -- reading the leader -------------------------------------------------------------------------

class PartitionState(NamedTuple):
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class MetadataView(NamedTuple):
    brokers: dict[int, str]                  # node id -> "host:port"
    controller_id: int
    topic_error: int | None                  # None: the topic is not in the answer
    partitions: dict[int, PartitionState]


def metadata(address: str, topic: str, timeout: float = 5.0) -> MetadataView:
    """One node's Metadata v12 for `topic` (raw protocol through tests.cluster.support, so nothing
    is cached or merged by a client library; never auto-creates), as this module's view."""
    from tests.cluster.support import metadata as cluster_metadata

    view = cluster_metadata(address, [topic], timeout=timeout)
    error, partitions = view.topics.get(topic, (None, {}))
    return MetadataView(
        brokers=view.brokers, controller_id=view.controller_id, topic_error=error,
        partitions={i: PartitionState(p.leader, p.leader_epoch, p.replicas, p.isr) for i, p in partitions.items()})


def list_offset(address: str, topic: str, partition: int, timestamp: int = -1, timeout: float = 5.0) -> tuple[int, int]:
    """ListOffsets v7 at one node: (error code, offset); timestamp -1 is the latest (the HW)."""
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    request = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        m.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            m.ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                      timestamp=timestamp)])])
    client = WireClient(address, client_id="replica-logs", timeout=timeout)
    try:
        (t,) = client.request(api.LIST_OFFSETS, 7, request).topics
    finally:
        client.close()
    (p,) = t.partitions
    return p.error_code, p.offset


def consumer_fetch(address: str, topic: str, partition: int, offset: int, timeout: float = 2.0) -> tuple[int, int]:
    """One Fetch v12 at `offset` as a consumer (no session, no epochs, no wait): (error code,
    high watermark), the HW being -1 in an error answer."""
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    request = m.FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 16, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[m.FetchRequest.FetchTopic(topic=topic, partitions=[m.FetchRequest.FetchPartition(
            partition=partition, fetch_offset=offset, current_leader_epoch=-1, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 16)])])
    client = WireClient(address, client_id="replica-logs", timeout=timeout)
    try:
        (t,) = client.request(api.FETCH, 12, request).responses
    finally:
        client.close()
    (p,) = t.partitions
    return p.error_code, p.high_watermark


def high_watermark(addresses: Iterable[str], topic: str, partition: int) -> tuple[int, int] | None:
    """(leader id, HW) from the node that leads `topic`-`partition` and says so: Metadata from
    each address in turn names the leader, whose ListOffsets latest answers the HW. None when no
    reachable node leads it now."""
    for address in addresses:
        try:
            view = metadata(address, topic)
            state = view.partitions.get(partition)
            if state is None or state.leader < 0 or state.leader not in view.brokers:
                continue
            error, hw = list_offset(view.brokers[state.leader], topic, partition)
        except (OSError, ConnectionError):
            continue
        if error == 0:
            return state.leader, hw
    return None


def end_offsets(dirs: Mapping, topic: str, partition: int) -> dict:
    """{node: end offset of its log, read from the files}."""
    return {node: read_replica_log(d, topic, partition, node=node).end_offset for node, d in dirs.items()}
