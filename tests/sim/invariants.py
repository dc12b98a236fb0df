"""What must hold after every event of a simulation run (and, fully, at the end of it)."""
from __future__ import annotations

from kraftd.protocol.metadata_records import decode_metadata_record, encode_metadata_record
from kraftd.protocol.records import crc_ok, decode_records, iter_batch_headers
from kraftd.quorum.metadata.image import MetadataImage
from kraftd.quorum.metadata.names import METADATA_TOPIC
from kraftd.storage import MemoryLog


def _header_at(log, offset: int):
    """The header of the batch holding `offset` (None if absent): by bisection in a MemoryLog,
    by a read in a FileLog."""
    if offset < log.log_start_offset or offset >= log.log_end_offset:
        return None
    if not isinstance(log, MemoryLog):
        result = log.read(offset, 1, min_one_batch=True)
        for region in result.regions:
            for _, h in iter_batch_headers(region.view()):
                if h.base_offset <= offset <= h.last_offset:
                    return h
        return None
    for seg in reversed(log._segments):
        if seg.base_offset <= offset and seg.headers:
            headers = seg.headers
            lo, hi = 0, len(headers)
            while lo < hi:
                mid = (lo + hi) // 2
                if headers[mid].last_offset < offset:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < len(headers) and headers[lo].base_offset <= offset:
                return headers[lo]
            return None
    return None


def _replayed(key, records, end_offset: int) -> dict:
    """The state a snapshot at `end_offset` must hold: a key/value map of the committed records,
    or for the metadata partition the image as records (one per entity)."""
    if key[0] == METADATA_TOPIC:
        image = MetadataImage()
        touched: set = set()
        for offset, _, v in records:
            if offset >= end_offset:
                break
            if v is not None:
                touched.update(image.replay(decode_metadata_record(bytes(v))))
        out = {}
        for entity in touched:
            record = image.entity_record(entity)
            if record is not None:
                out[entity] = encode_metadata_record(record)
        return out
    expected: dict = {}
    for offset, k, v in records:
        if offset >= end_offset:
            break
        if k is None:
            continue
        if v is None:
            expected.pop(bytes(k), None)
        else:
            expected[bytes(k)] = bytes(v)
    return expected


def _same_batch(h, batch) -> bool:
    return h is not None and (h.base_offset, h.last_offset, h.crc) == batch[:3]


def _cleaned_or_same(h, batch) -> bool:
    """In a compacted log: the committed batch `batch` (base, last, ...) as the cleaner may have
    left it: gone (no batch holds its base offset), or a batch over the same offsets (a cleaned
    batch keeps its base offset, last offset delta and epoch, not its records or CRC). Its
    records are checked by value: Invariants.compacted_state_matches."""
    return h is None or (h.base_offset, h.last_offset) == batch[:2]


def _latest_values(log, end: int) -> dict:
    """Key -> value of the last record per key below `end` (a tombstone removes the key)."""
    out: dict = {}
    if end <= log.log_start_offset:
        return out
    for region in log.read(log.log_start_offset, 1 << 40, max_offset=end).regions:
        view = region.view()
        for pos, h in iter_batch_headers(view):
            if h.is_control:
                continue
            for r in decode_records(view[pos:pos + h.size], h):
                if r.offset >= end or r.key is None:
                    continue
                if r.value is None:
                    out.pop(bytes(r.key), None)
                else:
                    out[bytes(r.key)] = bytes(r.value)
    return out


class Violation(AssertionError):
    pass


def _batches(log, start: int, end: int):
    """(base offset, last offset, crc, epoch, producer id, base sequence) of batches in [start, end)."""
    if end <= max(start, log.log_start_offset):
        return []
    result = log.read(max(start, log.log_start_offset), 1 << 40, max_offset=end)
    out = []
    for region in result.regions:
        for _, h in iter_batch_headers(region.view()):
            out.append((h.base_offset, h.last_offset, h.crc, h.partition_leader_epoch, h.producer_id,
                        h.base_sequence, h.records_count, h.producer_epoch))
    return out


def _corrupt_batch(log, start: int, end: int):
    """The base offset of the first batch in [start, end) whose CRC fails, or None."""
    if end <= max(start, log.log_start_offset):
        return None
    for region in log.read(max(start, log.log_start_offset), 1 << 40, max_offset=end).regions:
        view = region.view()
        for pos, h in iter_batch_headers(view):
            if not crc_ok(view, pos, h):
                return h.base_offset
    return None


def _incarnation(key, group) -> tuple:
    """A group as the checks key it: (topic, partition, topic id). A topic deleted and created
    again under its name is another topic, with other committed data and epochs from 0."""
    return (*key, group.partition.topic_id)


def _log_of(disk, g):
    """The log of group `g` on this disk; None if the disk does not hold that topic (not yet,
    no more, or another topic of that name)."""
    info = disk.catalog.get(g[0])
    if info is None or info.topic_id != g[2]:
        return None
    return disk.logs.get(g[:2])


def _abstains(sn, g) -> bool:
    """A replica that may not vote (it replaced a lost disk and has not caught up): no leader
    can be elected without a voter that holds the committed data, so it counts as holding it.
    (The rejoin marker may be gone already: the simulation places its data topics out of band,
    so the node's rejoin check, which reads the image, does not wait for them.)"""
    key = g[:2]
    if sn.node is not None and key in sn.node.replication.groups:
        group = sn.node.replication.groups[key]
        return group.partition.topic_id == g[2] and not group.state.may_vote
    info = sn.disk.catalog.get(key[0])
    if info is not None and info.topic_id != g[2]:
        return False  # it holds another topic of that name
    state = sn.disk.elections.states.get(key)
    if state is None:
        return sn.disk.lost
    return not state.may_vote


def _describe(sn, g) -> str:
    key = g[:2]
    log = _log_of(sn.disk, g)
    state = sn.disk.elections.states.get(key)
    group = sn.node.replication.groups.get(key) if sn.node is not None else None
    text = f"node {sn.id} {'up' if sn.node else 'down'}{' (lost disk)' if sn.disk.lost else ''}"
    if group is not None:
        text += f" {group.role.name}@{group.epoch} may_vote={group.state.may_vote}"
    if state is not None:
        text += f" persisted e{state.epoch} vote {state.voted_id} may_vote={state.may_vote}"
    if log is not None:
        text += f" log [{log.log_start_offset}, {log.log_end_offset}) flushed {log.flushed_offset}"
    return text


class Invariants:
    """Cheap checks after every event; the full log comparisons every `full_every` events.

    An event changes the state of the nodes it stepped or crashed only (`sim.touched`), so the
    per-event checks look at those; everything else is as the last check left it. Every
    `full_every` events, and when `sim.touched` is None, every node is looked at.

    A group is keyed by (topic, partition, topic id) (`_incarnation`): a topic deleted and
    created again under its name is another group."""

    def __init__(self, full_every: int = 500) -> None:
        self.leaders: dict = {}          # (group, epoch) -> node id
        self.persisted_epoch: dict = {}  # disk -> {group: highest persisted epoch seen}
        self.leader_hw: dict = {}        # (node, group, epoch) -> HW seen while leading
        self.committed: dict = {}        # group -> (HW, last committed batch) seen on a leader
        self.full_every = full_every
        self.checked = 0
        # The committed records of each group, read from leaders as their HW passes them: the
        # oracle that every snapshot's state is compared with.
        self.records: dict = {}          # group -> [(offset, key, value)]
        self.records_upto: dict = {}     # group -> offset the list is complete to
        self.snapshots_checked: set = set()
        self._holding: dict = {}         # (group, voter) -> (batch, log id, LEO, flushed) when last seen holding
        # The history oracle: every batch ever committed, as leaders' HWs passed it.
        self.history: dict = {}          # group -> {base offset: (last offset, crc, leader epoch)}
        self.history_upto: dict = {}     # group -> offset the history is complete to (None: a gap)
        self.max_leader_hw: dict = {}    # group -> the highest HW any leader announced
        self.leadership_start_hw: dict = {}  # (node, group, epoch) -> the HW it led with at first
        self._majority: dict = {}        # group -> (last committed batch, voters, {voter: holds it})
        self._admin_seen: dict | None = None
        self._voters: dict = {}          # topic -> voters, while the admin topics stay the same
        self._ids: dict = {}             # topic -> its topic id, likewise
        self.compacted_checks = 0        # replicas whose latest values were compared (coverage)
        self.cleaned_to: dict = {}       # compacted group -> the furthest any replica's cleaner reached
        self.committed_sets: dict = {}  # group -> (HW, the voter sets its leader moved it under)
        from .membership import MembershipChecks  # (it imports this module)
        self.membership = MembershipChecks()      # groups whose voters are dynamic (KIP-853)

    def __call__(self, sim) -> None:
        self.checked += 1
        full = self.checked % self.full_every == 0
        touched = None if full else getattr(sim, "touched", None)
        nodes = sim.nodes.values() if touched is None else [sim.nodes[i] for i in touched]
        for sn in nodes:
            self._persisted_epochs_grow(sn)
            if sn.node is None:
                continue
            self._snapshots_sit_at_log_start(sn)
            for key, group in sn.node.replication.groups.items():
                if not group.is_leader:
                    continue
                g = _incarnation(key, group)
                holder = self.leaders.setdefault((g, group.epoch), sn.id)
                if holder != sn.id:
                    raise Violation(f"{g}: two leaders in epoch {group.epoch}: nodes {holder} and {sn.id}")
                hw = group.partition.high_watermark
                seen = self.leader_hw.get((sn.id, g, group.epoch), -1)
                if hw < seen:
                    raise Violation(f"{g}: leader {sn.id} HW went back from {seen} to {hw}")
                self.leader_hw[(sn.id, g, group.epoch)] = hw
                self._commit_rule(sn, g, group, hw)
                self._note_commit(sim, g, group)
                if group.log_voters.offset() >= 0:
                    self.membership.check(sim, sn, g, group)
            self._followers_behind_leaders(sn)
            if sim.compacted:
                self._note_cleaning(sn, sim.compacted)
        self._committed_on_majority(sim, touched)
        if full:
            self.replicas_agree(sim)
            self.replicas_match_history(sim)
            self.history_on_majority(sim)
            if sim.compacted:
                self.compacted_state_matches(sim)

    def _persisted_epochs_grow(self, sn) -> None:
        """A persisted epoch never goes back (per disk: a node that lost its disk starts again
        from nothing; per topic: a deleted topic's state is dropped from the store)."""
        seen = self.persisted_epoch.setdefault(id(sn.disk), {})
        states = sn.disk.elections.states
        for key in [k for k in seen if k[:2] not in states]:
            del seen[key]  # a deleted topic's state, removed
        for key, state in states.items():
            info = sn.disk.catalog.get(key[0])
            g = (*key, None if info is None else info.topic_id)
            before = seen.get(g, -1)
            if state.epoch < before:
                raise Violation(f"node {sn.id} {g}: persisted epoch went back from {before} to {state.epoch}")
            seen[g] = state.epoch

    def _commit_rule(self, sn, key, group, hw: int) -> None:
        """Raft's commit rule, checked itself: a leader moves the HW it inherited only to an
        offset past the start of its own epoch (only an entry of its own term commits)."""
        start = self.leadership_start_hw.setdefault((sn.id, key, group.epoch), hw)
        # (a HW raised to the log start is no commit: the log starts at a snapshot of committed data)
        if start < hw <= group.role.epoch_start_offset and hw != group.partition.log.log_start_offset:
            raise Violation(f"{key}: leader {sn.id} of epoch {group.epoch} moved its HW from {start} to {hw}, not "
                            f"past its epoch's start offset {group.role.epoch_start_offset} (the commit rule)")
        self.max_leader_hw[key] = max(self.max_leader_hw.get(key, 0), hw)

    def _followers_behind_leaders(self, sn) -> None:
        """A follower learns its HW from a leader: it never passes the highest a leader announced."""
        for key, group in sn.node.replication.groups.items():
            hw = group.partition.high_watermark
            if group.is_leader:
                continue
            g = _incarnation(key, group)
            if group.role.name == "Resigned":
                # It led this epoch: its HW may have moved in the event that ended its leadership.
                self.max_leader_hw[g] = max(self.max_leader_hw.get(g, 0), hw)
                continue
            if hw > self.max_leader_hw.get(g, 0) and not self._restored(sn, key, hw):
                raise Violation(f"{g}: node {sn.id}'s HW {hw} is past every leader's "
                                f"({self.max_leader_hw.get(g, 0)})")

    def _restored(self, sn, key, hw: int) -> bool:
        """A HW at a snapshot's end (an installed snapshot, or a node's own from before a disk
        loss never happens: snapshots hold committed data only) is below what leaders announced
        unless the invariant joined the run late; the snapshot check covers its content."""
        snapshots = sn.node.snapshots.get(key)
        return snapshots is not None and any(sid.end_offset == hw for sid in snapshots.store.ids())

    def _note_commit(self, sim, key, group) -> None:
        hw = group.partition.high_watermark
        known = self.committed.get(key)
        if known is not None and known[0] >= hw:
            return
        log = group.partition.log
        self._extend_history(key, log, hw, key[0] in sim.compacted)
        upto = self.records_upto.get(key, 0)
        if upto is not None and hw > upto:
            if log.log_start_offset > upto:
                self.records_upto[key] = None  # a gap we never saw: stop comparing this group
            else:
                out = self.records.setdefault(key, [])
                for region in log.read(upto, 1 << 40, max_offset=hw).regions:
                    view = region.view()
                    for pos, h in iter_batch_headers(view):
                        if not h.is_control:
                            out.extend((r.offset, r.key, r.value) for r in decode_records(view[pos:pos + h.size], h))
                self.records_upto[key] = hw
        h = _header_at(log, hw - 1)
        if h is not None:
            self.committed[key] = (hw, (h.base_offset, h.last_offset, h.crc))
            if group.log_voters.offset() >= 0:
                # The sets this leader moved the HW under (KIP-853: the newest in its log counts
                # at once; a later leader may never have received it).
                value = log.voter_sets.value_at(hw - 1)
                at_hw = sim._voter_ids(value) if value is not None else group.log_voters.static.ids
                self.committed_sets[key] = (hw, {group.voters, at_hw})

    def _extend_history(self, key, log, hw: int, compacted: bool = False) -> None:
        """Record every batch below a leader's new HW; a committed batch never changes (in a
        compacted log, its offsets and epoch never change: the cleaner rewrites its records)."""
        upto = self.history_upto.get(key, 0)
        if upto is None or hw <= upto:
            return
        if log.log_start_offset > upto:
            self.history_upto[key] = None  # committed while we were not looking (a snapshot): no gapless history
            return
        history = self.history.setdefault(key, {})
        for b in _batches(log, upto, hw):
            base, last, crc, epoch = b[0], b[1], b[2], b[3]
            known = history.get(base)
            if known is not None and (known[0::2] != (last, epoch) if compacted else known != (last, crc, epoch)):
                raise Violation(f"{key}: the committed batch at {base} was {known}, a leader now has "
                                f"{(last, crc, epoch)} there")
            history[base] = (last, crc, epoch)
            upto = max(upto, last + 1)
        self.history_upto[key] = max(upto, self.history_upto.get(key) or 0)

    def replicas_match_history(self, sim) -> None:
        """Every live replica's batches below its own HW are the committed ones, batch by batch."""
        for sn in sim.nodes.values():
            if sn.node is None:
                continue
            for key, group in sn.node.replication.groups.items():
                g = _incarnation(key, group)
                history = self.history.get(g) or {}
                upto = self.history_upto.get(g) or 0
                p = group.partition
                corrupt = _corrupt_batch(p.log, p.log.log_start_offset, p.high_watermark)
                if corrupt is not None:
                    raise Violation(f"node {sn.id} {key}: the batch at {corrupt}, below its HW {p.high_watermark}, "
                                    f"fails its CRC")
                compacted = key[0] in sim.compacted
                for b in _batches(p.log, p.log.log_start_offset, min(p.high_watermark, upto)):
                    known = history.get(b[0])
                    if known is not None and (known[0::2] != (b[1], b[3]) if compacted else known != (b[1], b[2], b[3])):
                        raise Violation(f"node {sn.id} {key}: batch at {b[0]} below its HW {p.high_watermark} is "
                                        f"{(b[1], b[2], b[3])}, the committed one is {known}")

    def history_on_majority(self, sim) -> None:
        """Every committed batch (not only the last) is durably on enough voters that every vote
        majority meets one: a majority of an odd set, half of an even one."""
        for g, history in self.history.items():
            voters = sim.voters_of(g[0])
            if not voters or self.history_upto.get(g) is None or sim.topic_id_of(g[0]) != g[2]:
                continue  # (a deleted topic)
            sets = sim.voter_sets(g[0])
            if sets:  # a majority of one of the sets the HW may be under (KIP-853)
                errors = [self._history_on(sim, g, history, c) for c in sets]
                if all(errors):
                    raise Violation(errors[0])
                continue
            error = self._history_on(sim, g, history, voters)
            if error:
                raise Violation(error)

    def _history_on(self, sim, g, history, voters) -> str | None:
        """What in `history` is not durable on a majority of `voters` (None: all of it is)."""
        logs = []
        abstaining = 0
        compacted = g[0] in sim.compacted
        for v in voters:
            if _abstains(sim.nodes[v], g):
                abstaining += 1
                continue
            log = _log_of(sim.nodes[v].disk, g)
            if log is not None:
                durable = min(log.flushed_offset, log.log_end_offset)
                start = log.log_start_offset
                held = {b[0]: (b[1], b[2], b[3]) for b in _batches(log, start, durable)}
                # (compacted: which batch holds each offset, to tell a batch cleaned away
                # from one another batch replaced)
                at = {o: base for base, b in held.items() for o in range(base, b[0] + 1)} if compacted else None
                logs.append((start, held, durable, at))
        for base, batch in history.items():
            if compacted:  # held as the cleaner left it: same offsets and epoch, or cleaned away
                holding = abstaining + sum(1 for start, held, durable, at in logs if start > base or (
                    durable > batch[0] and at.get(base, base) == base
                    and (base not in held or held[base][0::2] == batch[0::2])))
            else:
                holding = abstaining + sum(1 for start, held, _, _ in logs if start > base or held.get(base) == batch)
            # Every vote majority must meet a voter that holds it: at least half of an even set
            # (a batch committed under one set, later durable on two of four: sim seed 6164).
            if holding * 2 < len(voters):  # (for an odd set, the same as a majority)
                return (f"{g}: committed batch {base}..{batch[0]} (epoch {batch[2]}) is durable on only "
                        f"{holding} of {len(voters)} voters {tuple(voters)}")
        return None

    def _snapshots_sit_at_log_start(self, sn) -> None:
        """KIP-630: once the log start has moved, the earliest snapshot sits exactly there; and
        every snapshot holds the state of replaying the committed log to its end offset."""
        for key, snapshots in sn.node.snapshots.items():
            ids = snapshots.store.ids()
            log = snapshots.partition.log
            g = (*key, snapshots.partition.topic_id)
            if log.log_start_offset > 0 and (not ids or ids[0].end_offset != log.log_start_offset):
                raise Violation(f"node {sn.id} {key}: log starts at {log.log_start_offset} but the snapshots are {ids}")
            for sid in ids:
                seen = (id(sn.disk), g, sid)
                if seen in self.snapshots_checked:
                    continue
                upto = self.records_upto.get(g, 0)
                if upto is None or upto < sid.end_offset:
                    continue  # the oracle does not reach it (yet)
                self.snapshots_checked.add(seen)
                expected = _replayed(key, self.records.get(g, []), sid.end_offset)
                actual = {bytes(k): bytes(v) for k, v in snapshots.store.reader(sid).items()}
                if actual != expected:
                    raise Violation(f"node {sn.id} {key}: snapshot {sid} holds {len(actual)} keys, replaying the "
                                    f"committed log to {sid.end_offset} gives {len(expected)}")

    def _voters_of(self, sim, topic: str) -> tuple:
        voters = self._voters.get(topic)
        if voters is None:
            voters = self._voters[topic] = sim.voters_of(topic)
        return voters

    def _committed_on_majority(self, sim, touched: set | None = None) -> None:
        """The last batch below every HW a leader announced is durably on a majority of voters.
        Who holds it is remembered per group: only a new batch, new voters or a touched voter
        change the count."""
        if touched is not None and not touched:
            return  # nothing changed: no node stepped, none crashed
        admin = sim.admin_topics()
        if admin != self._admin_seen:
            self._admin_seen, self._voters, self._ids = admin, {}, {}
        for g, (hw, batch) in self.committed.items():
            sets = sim.voter_sets(g[0], hw)
            noted = self.committed_sets.get(g)
            if sets and noted is not None and noted[0] == hw:
                sets = list({*sets, *noted[1]})
            voters = tuple(sorted({v for c in sets for v in c})) if sets else self._voters_of(sim, g[0])
            if not voters or self._ids.setdefault(g[0], sim.topic_id_of(g[0])) != g[2]:
                continue  # a deleted topic
            known = self._majority.get(g)
            if touched is None or known is None or known[0] != batch or known[1] != voters:
                holds = {v: self._holds(sim, g, v, batch) for v in voters}
                self._majority[g] = (batch, voters, holds)
            else:
                holds = known[2]
                changed = False
                for v in touched:
                    if v in holds:
                        holds[v] = self._holds(sim, g, v, batch)
                        changed = True
                if not changed:
                    continue
            if sets:  # on a majority of one of the sets it may have committed under
                if any(sum(holds.get(v, False) for v in c) * 2 > len(c) for c in sets):
                    continue
            holding = sum(holds.values())
            if sets or holding * 2 <= len(voters):
                raise Violation(f"{g}: committed batch {batch[:2]} (HW {hw}) is durable on only {holding} of "
                                f"{len(voters)} voters: " + "; ".join(_describe(sim.nodes[v], g) for v in voters))

    def _holds(self, sim, g, v: int, batch) -> bool:
        if _abstains(sim.nodes[v], g):
            return True  # lost its disk and may not vote yet: it cannot elect a leader without it
        log = _log_of(sim.nodes[v].disk, g)
        if log is None:
            return False
        # Unchanged since we saw it hold the batch, unless its end or flushed offset went back
        # (only a truncation or a crash removes a batch): no need to read it again.
        seen = self._holding.get((g, v))
        if (seen is not None and seen[0] == batch and seen[1] == id(log)
                and log.log_end_offset >= seen[2] and log.flushed_offset >= seen[3]):
            return True
        durable = min(log.flushed_offset, log.log_end_offset)
        same = _cleaned_or_same if g[0] in sim.compacted else _same_batch
        if log.log_start_offset > batch[0] or (durable > batch[1] and same(_header_at(log, batch[0]), batch)):
            self._holding[(g, v)] = (batch, id(log), log.log_end_offset, log.flushed_offset)
            return True
        return False

    def replicas_agree(self, sim) -> None:
        """Replicas hold identical batches below the smallest HW among the live ones."""
        for topic, voters in [(t, a[0]) for t, _, a in sim.topics] + sim.metadata_groups():
            key = (topic, 0)
            topic_id = sim.topic_id_of(topic)
            # (a log opened by a job the node has not heard back from yet is not served)
            live = [sim.nodes[v] for v in voters if sim.nodes[v].node is not None and key in sim.nodes[v].disk.logs
                    and sim.nodes[v].node.topics.partition(*key) is not None
                    and sim.nodes[v].node.topics.partition(*key).topic_id == topic_id]
            if len(live) < 2:
                continue
            parts = [sn.node.topics.partition(*key) for sn in live]
            low = min(p.high_watermark for p in parts)
            start = max(p.log.log_start_offset for p in parts)
            if topic in sim.compacted:
                self._compacted_replicas_agree(key, live, parts, start, low)
                continue
            reference = None
            for sn, p in zip(live, parts):
                batches = _batches(p.log, start, low)
                if reference is None:
                    reference = (sn.id, batches)
                elif batches != reference[1]:
                    raise Violation(f"{key}: nodes {reference[0]} and {sn.id} differ below HW {low}")

    @staticmethod
    def _compacted_replicas_agree(key, live, parts, start: int, low: int) -> None:
        """Replicas of a compacted group clean on their own: below the smallest HW, a batch that
        two of them hold has the same offsets, epoch and producer fields (its records may
        differ: one replica cleaned it, the other not yet)."""
        reference = None
        for sn, p in zip(live, parts):
            batches = {b[0]: (b[1], b[3], b[4], b[5], b[7]) for b in _batches(p.log, start, low)}
            if reference is None:
                reference = (sn.id, batches)
                continue
            for base in batches.keys() & reference[1].keys():
                if batches[base] != reference[1][base]:
                    raise Violation(f"{key}: nodes {reference[0]} and {sn.id} hold different batches at {base} "
                                    f"below HW {low}: {reference[1][base]} and {batches[base]}")

    def _note_cleaning(self, sn, compacted) -> None:
        for key, group in sn.node.replication.groups.items():
            if key[0] in compacted:
                g = _incarnation(key, group)
                self.cleaned_to[g] = max(self.cleaned_to.get(g, 0), _cleaned_to(group.partition.log))

    def compacted_state_matches(self, sim) -> None:
        """Every live replica of a compacted group holds, below its HW, the latest value per key
        of the committed log (the records oracle) to that HW: cleaning removes only records a
        later one for the same key replaced, and tombstones. Checked where the HW is at or past
        the furthest any replica cleaned: below it, a replica may hold a prefix of a cleaned log
        (fetched from a leader that cleaned further), whose intermediate states never were."""
        for sn in sim.nodes.values():
            if sn.node is None:
                continue
            for key, group in sn.node.replication.groups.items():
                if key[0] not in sim.compacted:
                    continue
                g = _incarnation(key, group)
                p = group.partition
                upto = self.records_upto.get(g)
                hw = p.high_watermark
                self.cleaned_to[g] = max(self.cleaned_to.get(g, 0), _cleaned_to(p.log))
                if upto is None or hw > upto:
                    continue
                if hw < self.cleaned_to[g]:
                    continue
                self.compacted_checks += 1
                actual = _latest_values(p.log, hw)
                expected = _replayed(key, self.records.get(g, []), hw)
                if actual != expected:
                    self._forgive_missed_tombstones(sim, actual, expected, self.records.get(g, []), hw)
                if actual != expected:
                    missing = sorted(expected.keys() - actual.keys())[:3]
                    wrong = sorted(k for k in expected.keys() & actual.keys() if expected[k] != actual[k])[:3]
                    extra = sorted(actual.keys() - expected.keys())[:3]
                    raise Violation(f"node {sn.id} {key}: the latest values below HW {hw} (cleaned to "
                                    f"{p.log.cleaner_checkpoint}) differ from the committed log's: missing {missing}, "
                                    f"different {[(k, actual[k], expected[k]) for k in wrong]}, extra {extra}")

    @staticmethod
    def _forgive_missed_tombstones(sim, actual: dict, expected: dict, records, hw: int) -> None:
        """Kafka's one known way for compacted replicas to differ: a replica that held a key's
        value and fell behind by more than delete.retention.ms fetches the leader's log after
        the cleaner removed the key's tombstone, and keeps the old value (consumers have the
        same limit: the delete horizon). Such keys are dropped from `actual`: a key deleted in
        the committed log whose value here is one it had before."""
        extra = actual.keys() - expected.keys()
        if not extra:
            return
        values: dict = {}
        for offset, k, v in records:
            if offset >= hw:
                break
            if k is not None and bytes(k) in extra:
                values.setdefault(bytes(k), []).append(None if v is None else bytes(v))
        for k in extra:
            seen = values.get(k, [])
            if seen and seen[-1] is None and actual[k] in seen:
                del actual[k]
                sim.coverage["deleted keys a lagging replica kept"] += 1

    def consumer_read_committed(self, sim, consumer) -> None:
        """What the KIP-320 consumer read is the committed log, offset by offset."""
        if consumer.problems:
            raise Violation("consumer: " + "; ".join(consumer.problems[:3]))
        for key, consumed in consumer.consumed.items():
            g = (*key, sim.topic_id_of(key[0]))
            if self.records_upto.get(g) is None:
                continue
            committed = {o: (None if k is None else bytes(k), None if v is None else bytes(v))
                         for o, k, v in self.records.get(g, [])}
            for offset, record in consumed.items():
                if offset < self.records_upto[g] and committed.get(offset) != record:
                    raise Violation(f"consumer {key}: read {record} at {offset}, the committed log has "
                                    f"{committed.get(offset)}")

    def acknowledged_survive(self, sim, producers) -> None:
        """Every acks=all batch acknowledged is in the committed log exactly once, at its offset."""
        for key in {(t, 0) for t, _, _ in sim.topics}:
            leader = next((sn for sn in sim.nodes.values() if sn.node is not None
                           and sn.node.replication.groups.get(key) is not None
                           and sn.node.replication.groups[key].is_leader), None)
            if leader is None:
                raise Violation(f"{key}: no leader at the end of the liveness phase")
            p = leader.node.topics.partition(*key)
            batches = _batches(p.log, 0, p.high_watermark)
            seen: dict = {}
            for b in batches:
                if b[4] >= 0:
                    seen.setdefault((b[4], b[7], b[5]), []).append(b[0])
            for producer in producers:
                for topic, index, seq, count, offset in producer.acked:
                    if (topic, index) != key:
                        continue
                    epoch, seq = seq
                    if offset < p.log.log_start_offset:
                        continue  # now inside a snapshot (its state is checked against the log)
                    where = seen.get((producer.producer_id, epoch, seq), [])
                    if not where and key[0] in sim.compacted:
                        continue  # cleaned away: its records are checked by value (compacted_state_matches)
                    if where != [offset]:
                        raise Violation(f"{key}: acknowledged batch pid {producer.producer_id} seq {seq} at "
                                        f"{offset} is at {where} in the committed log")


def _cleaned_to(log) -> int:
    """How far a replica's log may have been cleaned (a swap a crash cut wrote no checkpoint)."""
    return getattr(log, "cleaned_to", log.cleaner_checkpoint)
