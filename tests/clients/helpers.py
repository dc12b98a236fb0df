"""Real-client helpers for the acceptance tests: data generation, per-client produce/consume,
and a tiny raw-protocol client for what the libraries do not expose (leader epochs, batch headers).

Every wait is bounded by a deadline so a server bug fails a test instead of hanging the suite.
A record is `Rec(key: bytes, value: bytes, headers: tuple[tuple[str, bytes], ...])`; consumers
return `Got(offset, key, value, headers, timestamp)` so tests can compare content, order and offsets.
"""
from __future__ import annotations

import asyncio
import random
import socket
import string
import struct
import subprocess
import time
from typing import NamedTuple
from tests.support.waiting import WaitTimeout, wait_until  # noqa: F401

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

# kcat -P is line oriented (key<TAB>value<NEWLINE>): values must avoid both characters.
_PRINTABLE = string.ascii_letters + string.digits + " -_.:/+=!?@#%&*()[]{}<>,;'\"~^|$"


class Rec(NamedTuple):
    key: bytes
    value: bytes
    headers: tuple


class Got(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int | None = None


ClientTimeout = WaitTimeout


def _headers(raw) -> tuple:
    """Normalise client header representations (None / list / tuple) to a tuple of pairs."""
    if not raw:
        return ()
    return tuple((k, None if v is None else bytes(v)) for k, v in raw)


def _value_size(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.05:
        return 0                              # empty (not null) values
    if roll < 0.08:
        return rng.randint(1024, 6 * 1024)    # a few KiB
    if roll < 0.30:
        return rng.randint(200, 1024)
    return rng.randint(1, 200)


_HEADER_SETS = [
    (),
    (("trace-id", None),),                    # value filled per record
    (("content-type", b"application/octet-stream"), ("empty", b"")),
    (("dup", b"first"), ("dup", b"second"), ("n\u00e4me", "v\u00e4lue".encode())),
]


def _random_value(rng: random.Random, size: int) -> bytes:
    """Random bytes; longer values repeat a random chunk with random mutations so that batches
    stay compressible (clients send a batch uncompressed when compression does not help)."""
    if size <= 64:
        return rng.randbytes(size)
    chunk = rng.randbytes(rng.randint(8, 64))
    value = bytearray((chunk * (size // len(chunk) + 1))[:size])
    for _ in range(size // 20):
        value[rng.randrange(size)] = rng.randrange(256)
    return bytes(value)


def _text_value(rng: random.Random, size: int) -> bytes:
    """Like _random_value, in printable characters (kcat -P reads TAB/NEWLINE-delimited text)."""
    if size <= 64:
        return "".join(rng.choices(_PRINTABLE, k=size)).encode()
    chunk = rng.choices(_PRINTABLE, k=rng.randint(8, 64))
    value = (chunk * (size // len(chunk) + 1))[:size]
    for _ in range(size // 20):
        value[rng.randrange(size)] = rng.choice(_PRINTABLE)
    return "".join(value).encode()


def make_records(n: int, seed: int) -> list[Rec]:
    """Unique keys, random binary values (empty .. few KiB), 0-3 headers incl. empty and duplicates."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = b"key-%05d-%08x" % (i, rng.getrandbits(32))
        value = _random_value(rng, _value_size(rng))
        hs = _HEADER_SETS[i % len(_HEADER_SETS)]
        hs = tuple((k, rng.randbytes(16) if v is None else v) for k, v in hs)
        out.append(Rec(key, value, hs))
    return out


def make_text_records(n: int, seed: int, headers: tuple) -> list[Rec]:
    """kcat flavour: printable keys/values (no TAB/NEWLINE); headers are static per invocation."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = b"key-%05d-%08x" % (i, rng.getrandbits(32))
        value = _text_value(rng, _value_size(rng))
        out.append(Rec(key, value, headers))
    return out


def assert_same(got: list[Got], want: list[Rec], *, first_offset: int | None = None) -> None:
    """Same keys, values, headers and order; offsets strictly increasing (contiguous if asked)."""
    assert len(got) == len(want), f"got {len(got)} records, produced {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if (g.key, g.value, g.headers) != tuple(w):
            raise AssertionError(f"record #{i} (offset {g.offset}) differs:\n got  {g[1:4]!r:.300}\n"
                                 f" want {tuple(w)!r:.300}")
    offsets = [g.offset for g in got]
    assert all(a < b for a, b in zip(offsets, offsets[1:])), "offsets not strictly increasing"
    if first_offset is not None:
        assert offsets == list(range(first_offset, first_offset + len(want))), \
            f"offsets not contiguous from {first_offset}: {offsets[:3]}..{offsets[-3:]}"


# --------------------------------------------------------------------------------------------
# kafka-python
# --------------------------------------------------------------------------------------------

def kafka_python_produce(bootstrap: str, topic: str, records: list[Rec], *, codec: str = "none",
                         timeout: float = 60.0, partition: int | None = 0, timestamps=None,
                         **config) -> tuple[list[int], dict]:
    """Produce with KafkaProducer's *default* settings (3.x: idempotent, acks=all).

    Returns (offsets of the acknowledged records in order, facts about the producer).
    """
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap,
                             compression_type=None if codec == "none" else codec,
                             max_block_ms=int(timeout * 1000), **config)
    try:
        futures = [producer.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                                 partition=partition,
                                 timestamp_ms=None if timestamps is None else timestamps[i])
                   for i, r in enumerate(records)]
        producer.flush(timeout=timeout)
        pending = sum(1 for f in futures if not f.is_done)
        if pending:
            raise ClientTimeout(f"kafka-python producer: {pending} records unacknowledged after {timeout}s")
        failed = [f.exception for f in futures if f.failed()]
        assert not failed, f"kafka-python delivery errors: {failed[:5]}"
        offsets = [f.value.offset for f in futures]
        tm = producer._transaction_manager
        facts = {
            "enable_idempotence": producer.config["enable_idempotence"],
            "acks": producer.config["acks"],
            "producer_id": tm.producer_id_and_epoch.producer_id if tm else -1,
            "producer_epoch": tm.producer_id_and_epoch.epoch if tm else -1,
        }
        return offsets, facts
    finally:
        producer.close(timeout=5)


def kafka_python_consume(bootstrap: str, topic: str, n: int, *, partition: int = 0, start: int = 0,
                         timeout: float = 60.0, linger: float = 0.5, **config) -> list[Got]:
    """assign + seek (no group); read until n records, then `linger` seconds more for extras."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", fetch_max_wait_ms=200, **config)
    tp = TopicPartition(topic, partition)
    got: list[Got] = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        deadline = time.monotonic() + timeout
        extra_until = None
        while True:
            now = time.monotonic()
            if len(got) >= n and extra_until is None:
                extra_until = now + linger
            if extra_until is not None and now >= extra_until:
                break
            if now > deadline:
                raise ClientTimeout(f"kafka-python consumer got {len(got)}/{n} records from {topic}")
            for recs in consumer.poll(timeout_ms=200, max_records=5000).values():
                got.extend(Got(r.offset, r.key, r.value, _headers(r.headers), r.timestamp) for r in recs)
        return got
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------------
# confluent-kafka
# --------------------------------------------------------------------------------------------

def confluent_produce(bootstrap: str, topic: str, records: list[Rec], *, codec: str = "none",
                      timeout: float = 60.0, partition: int = 0, timestamps=None,
                      **config) -> list[int]:
    """acks=all; returns the acknowledged offsets in produce order (raises on any delivery error)."""
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "acks": "all", "compression.type": codec,
            "linger.ms": 5, "message.timeout.ms": int(timeout * 1000)}
    conf.update(config)
    producer = Producer(conf)
    offsets: list[int | None] = [None] * len(records)
    errors = []

    def delivered(i):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                offsets[i] = msg.offset()
        return cb

    deadline = time.monotonic() + timeout
    for i, r in enumerate(records):
        kwargs = {"timestamp": timestamps[i]} if timestamps is not None else {}
        while True:
            try:
                producer.produce(topic, key=r.key, value=r.value, headers=list(r.headers),
                                 partition=partition, on_delivery=delivered(i), **kwargs)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise ClientTimeout("confluent producer queue stayed full")
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(max(0.1, deadline - time.monotonic()))
    assert remaining == 0, f"confluent producer: {remaining} records not delivered in time"
    assert not errors, f"confluent delivery errors: {errors[:5]}"
    return offsets


def confluent_consume(bootstrap: str, topic: str, n: int, *, partition: int = 0, start: int = 0,
                      timeout: float = 60.0, **config) -> list[Got]:
    """assign() at an explicit offset (no subscribe, no commits); read to partition EOF after n."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kraftd-tests-unused",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "error", "enable.partition.eof": True,
                         "fetch.wait.max.ms": 200, **config})
    got: list[Got] = []
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() > deadline:
                raise ClientTimeout(f"confluent consumer got {len(got)}/{n} records from {topic}")
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                err = msg.error()
                if err is None:
                    got.append(Got(msg.offset(), msg.key(), msg.value(), _headers(msg.headers()),
                                   msg.timestamp()[1]))
                elif err.code() == KafkaError._PARTITION_EOF:
                    if len(got) >= n:
                        return got
                else:
                    raise AssertionError(f"confluent consumer error: {err}")
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------------
# aiokafka
# --------------------------------------------------------------------------------------------

def aiokafka_produce(bootstrap: str, topic: str, records: list[Rec], *, codec: str = "none",
                     timeout: float = 60.0, partition: int = 0, **config) -> list[int]:
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                    compression_type=None if codec == "none" else codec,
                                    linger_ms=5, request_timeout_ms=int(timeout * 1000), **config)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=r.key, value=r.value,
                                           headers=list(r.headers), partition=partition)
                       for r in records]
            return [md.offset for md in await asyncio.gather(*futures)]
        finally:
            await producer.stop()

    return asyncio.run(asyncio.wait_for(run(), timeout))


def aiokafka_consume(bootstrap: str, topic: str, n: int, *, partition: int = 0, start: int = 0,
                     timeout: float = 60.0, linger: float = 0.5, **config) -> list[Got]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run(got):
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="none",
                                    fetch_max_wait_ms=200, **config)
        await consumer.start()
        try:
            tp = TopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, start)
            extra_until = None
            while extra_until is None or time.monotonic() < extra_until:
                batch = await consumer.getmany(tp, timeout_ms=200, max_records=5000)
                got.extend(Got(r.offset, r.key, r.value, _headers(r.headers), r.timestamp)
                           for r in batch.get(tp, []))
                if len(got) >= n and extra_until is None:
                    extra_until = time.monotonic() + linger
        finally:
            await consumer.stop()

    got: list[Got] = []
    try:
        asyncio.run(asyncio.wait_for(run(got), timeout))
    except asyncio.TimeoutError:
        raise ClientTimeout(f"aiokafka consumer got {len(got)}/{n} records from {topic}") from None
    return got


# --------------------------------------------------------------------------------------------
# kcat (librdkafka 2.0 CLI)
# --------------------------------------------------------------------------------------------

def kcat_produce(bootstrap: str, topic: str, records: list[Rec], *, codec: str = "none",
                 timeout: float = 60.0, partition: int = 0, extra: list[str] = ()) -> None:
    """`kcat -P -K<TAB>`; headers must be identical for all records (kcat -H is per invocation).
    `extra`: more arguments (-X settings)."""
    headers = {r.headers for r in records}
    assert len(headers) == 1, "kcat headers are static per invocation"
    cmd = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", str(partition), "-K", "\t",
           "-z", codec, "-X", "acks=all", *extra]
    for k, v in next(iter(headers)):
        cmd += ["-H", f"{k}={v.decode()}"]
    data = b"".join(r.key + b"\t" + r.value + b"\n" for r in records)
    assert all(b"\t" not in r.key + r.value and b"\n" not in r.key + r.value for r in records)
    proc = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"kcat -P failed ({proc.returncode}): {proc.stderr[-2000:]!r}"
    assert b"Delivery failed" not in proc.stderr and b"ERROR" not in proc.stderr, proc.stderr[-2000:]


# Length-prefixed output: parsed by byte counts, so it is unambiguous for any key/value bytes.
_KCAT_FORMAT = "%o %T %K %S %k%s %h\n"


def kcat_consume(bootstrap: str, topic: str, *, partition: int = 0, start: int | str = "beginning",
                 timeout: float = 60.0, extra: list[str] = ()) -> list[Got]:
    """`kcat -C -e -o beginning` (or an offset): reads to the end of the partition and exits."""
    cmd = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(partition), "-o", str(start),
           "-e", "-f", _KCAT_FORMAT, *extra]
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"kcat -C failed ({proc.returncode}): {proc.stderr[-2000:]!r}"
    return parse_kcat(proc.stdout)


def parse_kcat(out: bytes) -> list[Got]:
    got, pos = [], 0
    while pos < len(out):
        fields = []
        for _ in range(4):
            sp = out.index(b" ", pos)
            fields.append(int(out[pos:sp]))
            pos = sp + 1
        offset, timestamp, klen, vlen = fields
        key = None if klen < 0 else out[pos:pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else out[pos:pos + vlen]
        pos += max(vlen, 0)
        assert out[pos:pos + 1] == b" ", f"kcat output misparsed at byte {pos}"
        nl = out.index(b"\n", pos + 1)
        hs = out[pos + 1:nl]
        pos = nl + 1
        headers = tuple((k.decode(), v) for k, _, v in (h.partition(b"=") for h in hs.split(b",")
                                                         if h)) if hs else ()
        got.append(Got(offset, key, value, headers, timestamp))
    return got


# --------------------------------------------------------------------------------------------
# Raw protocol (Metadata v12 leader epochs, Fetch batch headers): synchronous socket.
# --------------------------------------------------------------------------------------------

class RawClient:
    """One blocking connection; requests encoded with kraftd's codec, batch headers parsed here."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.settimeout(timeout)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("server closed the connection")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body):
        from kraftd.protocol import framing
        from kraftd.protocol import messages as m

        self.correlation += 1
        header = m.RequestHeader(request_api_key=api_key, request_api_version=version,
                                 correlation_id=self.correlation, client_id="clients-tests")
        parts: list = []
        framing.encode_request(header, body, parts)
        self.sock.sendall(framing.frame_bytes(parts))
        size, = struct.unpack(">i", self._recv_exact(4))
        rheader, rbody = framing.decode_response(self._recv_exact(size), api_key, version)
        assert rheader.correlation_id == self.correlation
        return rbody

    def leader_epochs(self, topic: str) -> dict[int, tuple[int, int]]:
        """Metadata v12 -> {partition: (leader_id, leader_epoch)}."""
        from kraftd.protocol import messages as m

        resp = self.request(3, 12, m.MetadataRequest(
            topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False))
        (t,) = resp.topics
        assert t.error_code == 0, f"metadata error {t.error_code} for {topic}"
        return {p.partition_index: (p.leader_id, p.leader_epoch) for p in t.partitions}

    def fetch_batches(self, topic: str, partition: int = 0, offset: int = 0,
                      max_bytes: int = 64 * 1024 * 1024) -> list["BatchHeader"]:
        """Every batch header from `offset` to the high watermark (Fetch v12, by topic name)."""
        from kraftd.protocol import messages as m

        out: list[BatchHeader] = []
        while True:
            req = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes,
                                 isolation_level=0, session_id=0, session_epoch=-1,
                                 topics=[m.FetchRequest.FetchTopic(topic=topic, partitions=[
                                     m.FetchRequest.FetchPartition(partition=partition,
                                                                   fetch_offset=offset,
                                                                   current_leader_epoch=-1,
                                                                   log_start_offset=-1,
                                                                   partition_max_bytes=max_bytes)])])
            resp = self.request(1, 12, req)
            assert resp.error_code == 0, resp
            (pd,) = resp.responses[0].partitions
            assert pd.error_code == 0, f"fetch error {pd.error_code}"
            batches = parse_batch_headers(bytes(pd.records or b""))
            if not batches:
                return out
            out.extend(batches)
            offset = batches[-1].last_offset + 1
            if offset >= pd.high_watermark:
                return out


class BatchHeader(NamedTuple):
    base_offset: int
    length: int
    leader_epoch: int
    magic: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def codec(self) -> int:
        return self.attributes & 0x7

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)


_BATCH = struct.Struct(">qiibIhiqqqhii")  # v2 record batch header, 61 bytes


def parse_batch_headers(buf: bytes) -> list[BatchHeader]:
    out, pos = [], 0
    while pos + _BATCH.size <= len(buf):
        (base, length, epoch, magic, _crc, attrs, lod, bts, mts, pid, pep, bseq,
         count) = _BATCH.unpack_from(buf, pos)
        if pos + 12 + length > len(buf):
            break  # partial trailing batch
        out.append(BatchHeader(base, length, epoch, magic, attrs, lod, bts, mts, pid, pep, bseq, count))
        pos += 12 + length
    return out


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}



# --------------------------------------------------------------------------------------------
# the Java client and kafkajs: tests/java/RoundTrip.java and tests/js/roundtrip.js
# --------------------------------------------------------------------------------------------

def java_properties(path, props: dict):
    """A .properties file (backslashes escaped, as java.util.Properties reads them)."""
    path.write_text("".join(f"{k}={v}\n".replace("\\", "\\\\") for k, v in props.items()))
    return path


def java_round_trip(bootstrap: str, topic: str, n: int, security, workdir) -> list[str]:
    """RoundTrip.java's lines: produce n records to partition 0, read them back. `security`: a
    tests.support.certs.ClientSecurity."""
    from tests.support.java_client import compile_driver, java_command

    classes = compile_driver("RoundTrip", workdir / "java")
    props = java_properties(workdir / "client.properties", security.java())
    done = subprocess.run(java_command("RoundTrip", classes, bootstrap, topic, str(n), str(props)),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, (done.stdout[-1000:], done.stderr[-2000:])
    return done.stdout.splitlines()


def kafkajs_round_trip(bootstrap: str, topic: str, n: int, security) -> list[str]:
    """roundtrip.js's lines: produce n records to partition 0, read them back in a group."""
    from tests.support.node_client import install_js_clients, node_command

    install_js_clients()
    done = subprocess.run(node_command("roundtrip.js", bootstrap, topic, str(n), *security.kafkajs_args()),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, (done.stdout[-1000:], done.stderr[-2000:])
    return done.stdout.splitlines()


def round_trip_lines(n: int, first: int) -> list[str]:
    """The `record <offset> k<i> v<i>` lines both drivers print for n records from `first`."""
    return [f"record {first + i} k{i} v{i}" for i in range(n)]
