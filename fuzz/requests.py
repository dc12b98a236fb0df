"""Coverage-guided fuzzing of request decoding and dispatch on an in-memory node (atheris).

One input is one mode byte followed by one request frame body (what the server's reader hands
to `Broker.dispatch`: the frame without its 4-byte size prefix). Per input, what the shell does
with a frame, minus the sockets:

    decode_request(frame)  -> a KafkaProtocolError is an answer (the connection is closed);
                              anything else raised is a finding; what decodes must re-encode
                              (encode_request) and decode to the same message
    body None              -> ApiVersions gets the KIP-511 v0 fallback, the rest a closed connection
    SaslHandshake/-Auth.   -> the connection's SaslServerSession (server/sasl.py), as the broker does
    everything else        -> Node.handle(header, body, now_ms, Peer(...)), then encode_response
                              of its answer; parked requests are encoded when they complete;
                              every answer must decode again (decode_response, as a client does)

Nothing raised by Node.handle, Node.poll, the flush/persist cycle, the SASL session or the
response encoder is expected: each one is a finding (atheris reports the traceback and saves
the input as crash-<sha1>).

The node is a real `Node` on the simulation's memory disk (tests/sim/stores.py: MemoryLog,
in-memory catalog and election store, snapshot files on tmpfs), a cluster of one with topics
fz0 (2 partitions), fz1 (snapshot policy) and fz2 (LogAppendTime, 1 h retention), each holding a batch, the group
coordinator's __consumer_offsets (2 partitions) and a stable consumer group fz-group whose
member fuzz-1 committed an offset. It keeps its state across inputs (fetch sessions, groups,
producer ids, topics created or deleted: the fuzzer builds on earlier requests). Every
RESET_EVERY inputs it restarts: cleanly or after a crash over the same disk, so it reloads what
the inputs wrote, or on a fresh disk, which bounds memory; each fresh disk switches between a
plain single node and a one-voter cluster, whose controller and metadata quorum serve the
node-to-node APIs (see Harness.restart).

The mode byte (bits, low first):
    0-1  who sends it: 0, 1 a client; 2 an authenticated node 1 (itself); 3 node 2
    2    recompute the CRC of every complete batch in a Produce request's record sets, so
         mutated batches get past the CRC check to the record walk and the log append
    3    after the request, run the shell's flush cycle (persist election states, flush logs,
         on_flushed) before polling
    4-6  then advance the clock by ADVANCE_MS[bits] and poll (timers, purgatory, sessions)
    7    start a new connection first (a fresh SASL session); for SaslAuthenticate, one that
         has done its SaslHandshake (SCRAM-SHA-512), so one input reaches the SCRAM exchange

Run it (libFuzzer flags pass through; new inputs go to the first directory, the committed
seeds in fuzz/corpus/requests are only read):

    .venv/bin/python -m fuzz.requests -runs=100000 build/fuzz/requests fuzz/corpus/requests

or `make fuzz`. A crash file replays with `.venv/bin/python -m fuzz.requests crash-<sha1>`; since
the node keeps state across inputs, a failure also writes every input since the node's last
fresh start to build/fuzz/requests-history-<pid> (or $KRAFTD_FUZZ_HISTORY), replayed in order
on a node started the same way by `.venv/bin/python -m fuzz.requests --history <file>`.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == os.path.join(ROOT, "fuzz"):
    sys.path[0] = ROOT  # `python fuzz/requests.py`: this file must not shadow the `requests` distribution
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import atheris  # noqa: E402

_log = io.StringIO()  # atheris writes a line per instrumented module; keep the summary
with contextlib.redirect_stderr(_log), atheris.instrument_imports(include=["kraftd", "scramp"]):
    from kraftd.protocol import messages as m
    from kraftd.protocol.errors import KafkaProtocolError
    from kraftd.protocol.framing import (decode_request, decode_response, encode_api_versions_fallback,
                                         encode_request, encode_response, frame_bytes)
    from kraftd.protocol.generator import GeneratedStruct
    from kraftd.protocol.records import BATCH_HEADER_SIZE, build_batch
    from kraftd.quorum.node import Node
    from kraftd.quorum.node_wiring import NodeRuntime
    from kraftd.quorum.groups.coordinator import coordinator_of
    from kraftd.quorum.node_config import NodeConfig
    from kraftd.quorum.outcomes import NoResponse, Park, Respond
    from kraftd.quorum.peer import Peer
    from kraftd.server.node_auth import NodeCredentials
    from kraftd.server.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslServerSession
    # The simulation's memory disk: memory logs, catalog and election store; snapshots on tmpfs.
    from tests.sim.stores import Disk
from fuzz import refuse_seeds_as_output  # noqa: E402
sys.stderr.write(f"INFO: instrumented {_log.getvalue().count('Instrumenting')} modules\n")

import atexit
import itertools
import json
import logging
import random
import shutil
import struct
import tempfile

from google_crc32c import value as _crc32c

START_MS = 1_700_000_000_000
CLUSTER_ID = "fuzz-cluster-00000000"
RESET_EVERY = 2000
# The node's partition cap (kraftd's default is 10,000). Creating a topic costs about 1 ms per
# partition under atheris (0.35 ms without); at the default cap one CreateTopics takes 8 s here,
# too close to the 10 s per-input timeout on a loaded machine, and every later request would
# pay for thousands of partitions. 1,000 keeps both the cap's refusal and inputs fast.
MAX_PARTITIONS = 1_000
ADVANCE_MS = (0, 0, 1, 50, 1_000, 10_000, 60_000, 3_600_000)
SECRET = b"fuzz-cluster-secret"
TOPICS = {"fz0": (2, {}), "fz1": (1, {"cleanup.policy": "snapshot"}),
          "fz2": (1, {"message.timestamp.type": "LogAppendTime", "retention.ms": "3600000", "segment.bytes": "65536"})}
GROUP = "fz-group"
MEMBER = "fuzz-1"
# ConsumerProtocol subscription v0 (topics fz0, fz1) and assignment v0 (fz0 partitions 0 and 1).
CONSUMER_METADATA = bytes.fromhex("0000" "00000002" "0003") + b"fz0" + bytes.fromhex("0003") + b"fz1" + bytes(4)
CONSUMER_ASSIGNMENT = (bytes.fromhex("0000" "00000001" "0003") + b"fz0" + bytes.fromhex("00000002" "00000000" "00000001")
                       + bytes(4))


class Harness:
    """One node on a memory disk, and one client connection's state (its SASL session, its
    parked requests)."""

    def __init__(self, *, clustered: bool = False, now: int = START_MS, inputs: int = 0, restarts: int = 0) -> None:
        self.now = now
        self.inputs = inputs
        self.restarts = restarts
        self.parked: dict[int, object] = {}
        self.sasl: SaslServerSession | None = None
        self.node_id: int | None = None
        self.credentials = NodeCredentials(SECRET)
        self.setup_outcomes: list = []
        # The inputs since the last fresh disk (what the node's state depends on), written out
        # when one fails, so a finding that needed earlier inputs replays (`--history FILE`).
        self.history: list[bytes] = []
        self.history_start: dict = {}
        self.tmp = _tmp_root()
        self.disk = self._new_disk()
        self.member_ids = itertools.count(1)
        self.clustered = clustered
        self.node = self._open(fresh=True)

    def _new_disk(self) -> Disk:
        disk = Disk(CLUSTER_ID)
        os.rmdir(disk.snapshot_root)  # snapshot files go under this process's own directory
        disk.snapshot_root = tempfile.mkdtemp(dir=self.tmp)
        return disk

    # -- the node ------------------------------------------------------------------------
    def _open(self, fresh: bool) -> Node:
        if fresh:
            self.setup_outcomes = []
            self.history = []
            self.history_start = {"clustered": self.clustered, "now": self.now, "inputs": self.inputs,
                                  "restarts": self.restarts}
        config = NodeConfig(node_id=1, data_dir=self.disk.snapshot_root, fsync_policy="acks_all",
                            offsets_topic_num_partitions=2, group_initial_rebalance_delay_ms=0,
                            retention_check_interval_ms=60_000, fetch_max_wait_cap_ms=500,
                            max_partitions=MAX_PARTITIONS, auto_create_topics_max=200,
                            voters={1: ("127.0.0.1", 9092)} if self.clustered else None)
        session_rng = random.Random(7)
        node = Node(config, self.disk.storage(),
                    NodeRuntime(rng=random.Random(1), new_session_id=lambda: session_rng.randrange(1, 0x7FFFFFFF),
                                cluster_id=CLUSTER_ID))
        self.node = node
        node.start(self.now)
        node.settle_startup(self.now)
        # Member ids are "<client id>-<n>" instead of random uuids, so inputs can name them
        # (the seed corpus uses MEMBER, the member _setup joins).
        ids = self.member_ids
        coordinator_of(node._ctx)._new_member_id = lambda prefix: f"{prefix}-{next(ids)}"
        self._settle()  # a clustered node: its controller is active once its first epoch commits
        if fresh:
            self._setup()
        return node

    def _setup(self) -> None:
        """Topics with data and a consumer group, so requests reach more than 'unknown topic'."""
        C = m.CreateTopicsRequest
        self._must(19, 7, C(timeout_ms=1000, topics=[
            C.CreatableTopic(name=name, num_partitions=n, replication_factor=1, assignments=[],
                             configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in cfg.items()])
            for name, (n, cfg) in TOPICS.items()]))
        self._settle()  # a clustered node creates topics through its metadata log, then elects
        P = m.ProduceRequest
        for name, (n, _) in TOPICS.items():
            for index in range(n):
                batch = build_batch([(b"k%d" % i, b"v%d" % i, [("h", b"x")], START_MS + i) for i in range(3)])
                self._must(0, 9, P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(
                    name=name, partition_data=[P.PartitionProduceData(index=index, records=batch)])]))
        self._settle()
        self._must(10, 4, m.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]))
        self._settle()
        J = m.JoinGroupRequest
        self._must(11, 3, J(group_id=GROUP, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
                            protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(
                                name="range", metadata=CONSUMER_METADATA)]), client_id="fuzz")
        self._settle()
        S = m.SyncGroupRequest
        self._must(14, 3, S(group_id=GROUP, generation_id=1, member_id=MEMBER, assignments=[
            S.SyncGroupRequestAssignment(member_id=MEMBER, assignment=CONSUMER_ASSIGNMENT)]))
        self._settle()
        O = m.OffsetCommitRequest
        self._must(8, 7, O(group_id=GROUP, generation_id_or_member_epoch=1, member_id=MEMBER, topics=[
            O.OffsetCommitRequestTopic(name="fz0", partitions=[O.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=2, committed_metadata="m")])]))
        self._settle()

    def _settle(self, rounds: int = 5) -> None:
        for _ in range(rounds):
            self.now += 100
            self.flush()

    def _must(self, key: int, version: int, request, client_id: str = "fuzz-setup") -> None:
        header = m.RequestHeader(request_api_key=key, request_api_version=version, correlation_id=0,
                                 client_id=client_id)
        outcome = self.node.handle(header, request, self.now, Peer("127.0.0.1:1"))
        self.setup_outcomes.append((key, outcome))

    def flush(self) -> None:
        """The server's flush cycle: election states first, then logs, then what became durable."""
        node = self.node
        out = node.take_outbox(self.now)
        if out.persist:
            node.persist_election_states(out.persist)
        self._encode_completions(out.completions)
        for key, log in node.logs_to_flush():
            self._encode_completions(node.on_flushed(key, log.flush(), self.now))
        self._encode_completions(node.poll(self.now))

    def restart(self) -> None:
        """Every RESET_EVERY inputs, in turn: a clean restart over the same disk (the node
        reloads what the inputs wrote: logs, group metadata and offsets, producer ids,
        snapshots), a crash (only what was flushed survives), another clean restart, and a
        fresh disk (memory stays bounded), where the node switches between a plain single node
        and a one-voter cluster (--voters: the metadata quorum, the controller APIs)."""
        kind = self.restarts % 4
        self.restarts += 1
        if kind == 1:
            self.disk.crash()
        else:
            self.node.close()
        if kind == 3:
            self.disk.discard()
            self.disk = self._new_disk()
            self.member_ids = itertools.count(1)
            self.clustered = not self.clustered
        self.parked.clear()
        self.sasl, self.node_id = None, None
        self.now += 1000
        self.node = self._open(fresh=kind == 3)

    # -- one input -----------------------------------------------------------------------
    def run(self, data: bytes) -> None:
        if len(data) < 1:
            return
        self.inputs += 1
        self.history.append(data)
        self._run(data)
        if self.inputs % RESET_EVERY == 0:
            self.restart()

    def _run(self, data: bytes) -> None:
        mode = data[0]
        if mode & 0x80:
            self.sasl, self.node_id = None, None
        try:
            header, body = decode_request(memoryview(data)[1:])
        except KafkaProtocolError:
            return  # the broker closes the connection
        if body is None:
            if header.request_api_key == 18:
                parts: list = []
                encode_api_versions_fallback(header, parts)
                decode_response(memoryview(frame_bytes(parts))[4:], 18, 0)
            return  # otherwise: closed, "unsupported api"
        check_round_trip(header, body)
        key = header.request_api_key
        if key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            if self.sasl is None:
                self.sasl = SaslServerSession(self.credentials)
                if key == SASL_AUTHENTICATE and mode & 0x80:  # a new connection, past the handshake
                    self.sasl.handle(SASL_HANDSHAKE, m.SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
            step = self.sasl.handle(key, body)
            answer(header, step.response)
            if step.close_reason:
                self.sasl, self.node_id = None, None
            elif self.sasl.node_id is not None:
                self.node_id = self.sasl.node_id
            return
        if mode & 0x04 and key == 0:
            fix_produce_crcs(body)
        node_id = self.node_id if self.node_id is not None else (None, None, 1, 2)[mode & 0x03]
        outcome = self.node.handle(header, body, self.now, Peer("127.0.0.1:50000", node_id))
        if type(outcome) is Respond:
            answer(header, outcome.response)
        elif type(outcome) is Park:
            self.parked[outcome.token] = header
        elif type(outcome) is not NoResponse:
            raise TypeError(f"node.handle returned {outcome!r}")
        if mode & 0x08:
            self.flush()
        self.now += ADVANCE_MS[(mode >> 4) & 0x07]
        self._encode_completions(self.node.poll(self.now))

    def _encode_completions(self, completions) -> None:
        for c in completions:
            header = self.parked.pop(c.token, None)
            if header is not None and c.response is not None:
                answer(header, c.response)


def answer(header, response) -> None:
    """Encode the answer as the broker does; a client (our own decoder) must be able to read it."""
    parts: list = []
    encode_response(header, response, parts)
    decode_response(memoryview(frame_bytes(parts))[4:], header.request_api_key, header.request_api_version)


class Finding(AssertionError):
    """An outcome the codec's contract rules out (not an exception it raised)."""


def check_round_trip(header, body) -> None:
    """What decodes re-encodes (encode_request, as clients and peers do) and decodes the same."""
    parts: list = []
    encode_request(header, body, parts)
    header2, body2 = decode_request(memoryview(frame_bytes(parts))[4:])
    if _canon(header2) != _canon(header) or _canon(body2) != _canon(body):
        raise Finding(f"decode(encode(decoded)) differs:\n  {body!r}\n  {body2!r}")


def _canon(x):
    if isinstance(x, GeneratedStruct):
        return type(x).__qualname__, tuple(_canon(getattr(x, name)) for name in x._fields)
    if isinstance(x, list):
        return [_canon(i) for i in x]
    if isinstance(x, (memoryview, bytearray)):
        return bytes(x)
    if hasattr(x, "view"):  # a zero-copy bytes value
        return bytes(x.view())
    return x


def fix_produce_crcs(request) -> None:
    """Recompute each complete batch's CRC32C in the request's record sets (mode bit 2)."""
    for topic in request.topic_data or ():
        for data in topic.partition_data or ():
            records = data.records
            if records is None:
                continue
            buf = bytearray(records.view() if hasattr(records, "view") else records)
            pos, end = 0, len(buf)
            while end - pos >= BATCH_HEADER_SIZE:
                length, = struct.unpack_from(">i", buf, pos + 8)
                size = length + 12
                if length < 49 or pos + size > end:
                    break
                struct.pack_into(">I", buf, pos + 17, _crc32c(bytes(buf[pos + 21:pos + size])))
                pos += size
            data.records = memoryview(buf)


def _tmp_root() -> str:
    """kraftd-fuzz-<pid>-* on tmpfs. libFuzzer exits without running atexit handlers, so each
    run removes what runs that are no longer alive left behind."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    for name in os.listdir(base):
        parts = name.split("-")
        if name.startswith("kraftd-fuzz-") and len(parts) > 2 and parts[2].isdigit():
            try:
                os.kill(int(parts[2]), 0)
            except ProcessLookupError:
                shutil.rmtree(os.path.join(base, name), ignore_errors=True)
            except OSError:
                pass
    return tempfile.mkdtemp(prefix=f"kraftd-fuzz-{os.getpid()}-", dir=base)


_harness: Harness | None = None


def harness() -> Harness:
    global _harness
    if _harness is None:
        _harness = Harness()
        atexit.register(shutil.rmtree, _harness.tmp, True)  # when imported (tests, replays)
    return _harness


def test_one_input(data: bytes) -> None:
    h = harness()
    try:
        h.run(data)
    except BaseException:
        path = os.environ.get("KRAFTD_FUZZ_HISTORY") or os.path.join(ROOT, "build", "fuzz",
                                                                      f"requests-history-{os.getpid()}")
        write_history(path, h.history_start, h.history)
        sys.stderr.write(f"\nINFO: the {len(h.history)} inputs since the node's fresh start are in {path}; "
                         f"replay: .venv/bin/python -m fuzz.requests --history {path}\n")
        raise


def write_history(path: str, start: dict, inputs: list) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(json.dumps(start).encode() + b"\n")
        for data in inputs:
            f.write(struct.pack(">I", len(data)) + data)


def replay_history(path: str) -> None:
    """Feed a written history to a node started as that one was; raises what it raised."""
    with open(path, "rb") as f:
        start = json.loads(f.readline())
        raw = f.read()
    inputs, pos = [], 0
    while pos < len(raw):
        n, = struct.unpack_from(">I", raw, pos)
        inputs.append(raw[pos + 4:pos + 4 + n])
        pos += 4 + n
    h = Harness(**start)
    for i, data in enumerate(inputs):
        try:
            h.run(data)
        except BaseException:
            sys.stderr.write(f"input {i + 1} of {len(inputs)} failed: {data!r}\n")
            raise
    print(f"{len(inputs)} inputs replayed, no failure")


def main() -> None:
    logging.disable(logging.CRITICAL)
    _quiet_structlog()
    if len(sys.argv) == 3 and sys.argv[1] == "--history":
        replay_history(sys.argv[2])
        return
    refuse_seeds_as_output(sys.argv)
    atheris.Setup(sys.argv, test_one_input)
    harness()  # build the node before the first input (not counted against -timeout)
    atheris.Fuzz()


def _quiet_structlog() -> None:
    try:
        import structlog
        structlog.configure(logger_factory=lambda *a: structlog.PrintLogger(open(os.devnull, "w")),
                            cache_logger_on_first_use=True)
    except Exception:  # noqa: BLE001 — logging is cosmetic here
        pass


if __name__ == "__main__":
    main()
