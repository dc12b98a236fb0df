"""KIP-320 across a server restart between two consumer polls, with kafka-python and with
confluent-kafka (librdkafka), both via assign + seek and no group.  (Acceptance item 2.)

Each start of kraftd raises its leader epoch.  A consumer that polled before the restart still
holds the old epoch; its first Fetch (or ListOffsets / OffsetForLeaderEpoch) after the restart
must be fenced with FENCED_LEADER_EPOCH (74), or the consumer must already have learned the new
epoch from Metadata.  Either way it must go on reading from exactly where it stopped: no record
lost, none repeated.  The recording proxy shows which of the two happened, and that the server
never served an old-epoch request after the restart.
"""
from __future__ import annotations

import time

import pytest

from kraftd.protocol import api
from tests.clients.helpers import RawClient

from .wire import RecordingProxy, describe_fetches, epoch_checks, wait_until

pytestmark = pytest.mark.clients

FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75
N = 300          # records before the restart, and again after it
BEFORE = 120     # records the consumer reads before the restart


@pytest.fixture
def proxy():
    p = RecordingProxy()
    yield p
    p.close()


def _start(kraftd_factory, proxy):
    # Default fsync policy (acks_all): an acknowledged record survives kill -9.
    server = kraftd_factory("--advertised-listener", f"127.0.0.1:{proxy.port}",
                            env={"KRAFTD_DEFAULT_PARTITIONS": "1"})
    proxy.upstream_port = server.port
    return server


def _leader_epoch(server, topic) -> int:
    with RawClient(server.bootstrap) as raw:
        return raw.leader_epochs(topic)[0][1]


def _produce(bootstrap, topic, values):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="restart-producer", linger_ms=2,
                             batch_size=2048, max_block_ms=30_000, reconnect_backoff_max_ms=500)
    try:
        futures = [producer.send(topic, value=v, key=b"k", partition=0) for v in values]
        producer.flush(timeout=30)
        assert all(f.is_done and f.succeeded() for f in futures), "produce failed"
    finally:
        producer.close(timeout=5)


def _values(prefix, n):
    return [b"%s-%05d" % (prefix, i) for i in range(n)]


class KafkaPythonReader:
    client_id = "kp-restart"

    def __init__(self, bootstrap, topic):
        from kafka import KafkaConsumer, TopicPartition

        self.tp = TopicPartition(topic, 0)
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=self.client_id, group_id=None,
                                      enable_auto_commit=False, auto_offset_reset="none",
                                      fetch_max_wait_ms=100, max_partition_fetch_bytes=1024,
                                      request_timeout_ms=5000, reconnect_backoff_max_ms=500,
                                      retry_backoff_ms=50)
        self.consumer.assign([self.tp])
        self.consumer.seek(self.tp, 0)

    def poll(self, max_records):
        out = []
        for recs in self.consumer.poll(timeout_ms=100, max_records=max_records).values():
            out.extend((r.offset, r.value) for r in recs)
        return out

    def leader_epoch(self):
        return self.consumer._client.cluster.leader_epoch_for_partition(self.tp)

    def close(self):
        self.consumer.close()


class ConfluentReader:
    client_id = "ck-restart"

    def __init__(self, bootstrap, topic):
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "client.id": self.client_id,
            "group.id": "kraftd-sessions-e2e-unused", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "auto.offset.reset": "error",
            "fetch.wait.max.ms": 100, "max.partition.fetch.bytes": 1024,
            "queued.min.messages": 20, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
            "topic.metadata.refresh.interval.ms": 60_000,
        })
        self.consumer.assign([TopicPartition(topic, 0, 0)])

    def poll(self, max_records):
        out = []
        for msg in self.consumer.consume(num_messages=max_records, timeout=0.1):
            err = msg.error()
            if err is not None:
                # Transport errors while the broker is down are expected and retried.
                if err.fatal() or not (err.retriable() or err.code() < 0):
                    raise AssertionError(f"confluent consumer error: {err}")
                continue
            out.append((msg.offset(), msg.value()))
        return out

    def leader_epoch(self):
        return None  # librdkafka does not expose its metadata leader epoch

    def close(self):
        self.consumer.close()


READERS = {"kafka-python": KafkaPythonReader, "confluent": ConfluentReader}


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "kill9"])
@pytest.mark.parametrize("client", list(READERS))
def test_restart_between_polls_fences_and_resumes_exactly(kraftd_factory, proxy, client, crash):
    server = _start(kraftd_factory, proxy)
    topic = f"restart-{client}-{'kill' if crash else 'term'}"
    first, second = _values(b"before", N), _values(b"after", N)
    _produce(proxy.bootstrap, topic, first)
    epoch1 = _leader_epoch(server, topic)

    reader = READERS[client](proxy.bootstrap, topic)
    got: list = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < BEFORE:
            assert time.monotonic() < deadline, f"read only {len(got)} records before the restart"
            got.extend(reader.poll(min(20, BEFORE - len(got))))
        client_epoch1 = reader.leader_epoch()

        restart_seq = proxy.mark()
        server.restart(crash=crash)
        epoch2 = _leader_epoch(server, topic)
        assert epoch2 > epoch1, f"restart did not raise the leader epoch ({epoch1} -> {epoch2})"
        _produce(proxy.bootstrap, topic, second)

        want = first + second
        deadline = time.monotonic() + 60
        while len(got) < len(want):
            assert time.monotonic() < deadline, (
                f"{client} stalled after the restart at {len(got)}/{len(want)} records\n"
                + "\n".join(server.log_lines[-20:]))
            got.extend(reader.poll(100))
        linger = time.monotonic() + 0.5  # anything extra would be a repeat
        while time.monotonic() < linger:
            got.extend(reader.poll(100))
        client_epoch2 = reader.leader_epoch()
    finally:
        reader.close()

    values = [v for _, v in got]
    offsets = [o for o, _ in got]
    if values != want:
        dups = len(values) - len(set(values))
        missing = [v for v in want if v not in set(values)]
        first_diff = next((i for i, (a, b) in enumerate(zip(values, want)) if a != b), None)
        raise AssertionError(f"{client}: {len(values)} records read, {len(want)} produced; "
                             f"{dups} repeated, {len(missing)} missing (e.g. {missing[:3]}); "
                             f"first difference at #{first_diff}")
    assert all(a < b for a, b in zip(offsets, offsets[1:])), "offsets not increasing"

    # -- KIP-320 on the wire ---------------------------------------------------------------
    assert not proxy.errors, proxy.errors[:5]
    names = proxy.topic_names()
    exchanges = [ex for ex in proxy.snapshot(client_id=reader.client_id)
                 if ex.api_key in (api.FETCH, api.LIST_OFFSETS, api.OFFSET_FOR_LEADER_EPOCH)]
    before = [c for ex in exchanges if ex.seq < restart_seq for c in epoch_checks(ex, topic, names)]
    after = [(ex, c) for ex in exchanges if ex.seq >= restart_seq for c in epoch_checks(ex, topic, names)]
    dump = describe_fetches([ex for ex in exchanges if ex.api_key == api.FETCH and ex.seq >= restart_seq - 3], names)
    assert any(k == api.FETCH and e == epoch1 and err == 0 for k, _, e, err in before), \
        f"before the restart the client did not fetch with epoch {epoch1}: {before[:5]}"
    fenced = []
    for ex, (key, _, epoch, err) in after:
        if epoch == -1:
            continue  # no epoch sent: nothing to check
        if epoch < epoch2:
            assert err == FENCED_LEADER_EPOCH, (
                f"after the restart api {key} with the old epoch {epoch} (now {epoch2}) was answered "
                f"{err}, not FENCED_LEADER_EPOCH\n{dump}")
            fenced.append(key)
        elif epoch > epoch2:
            assert err == UNKNOWN_LEADER_EPOCH, (key, epoch, err)
        else:
            assert err not in (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), (key, epoch, err)
    # The consumer moved on to the new epoch: fetches with it succeeded after the restart.
    assert any(key == api.FETCH and epoch == epoch2 and err == 0 for _, (key, _, epoch, err) in after), \
        f"{client} never fetched with the new epoch {epoch2}\n{dump}"
    # Proof of one of the two paths: fenced with 74, or the new epoch learned from Metadata.
    learned = [ep for seq, ep in proxy.metadata_epochs(topic, reader.client_id) if seq >= restart_seq and ep.get(0) == epoch2]
    assert fenced or learned, f"{client}: neither fenced nor a Metadata with epoch {epoch2}\n{dump}"
    # Fetch sessions do not survive a restart: an incremental fetch in a session opened before
    # it gets FETCH_SESSION_ID_NOT_FOUND, and the client starts over with a full fetch.
    fetches = [ex for ex in exchanges if ex.api_key == api.FETCH]
    old_sessions = {ex.response.session_id for ex in fetches if ex.seq < restart_seq} - {0}
    for i, ex in enumerate(fetches):
        if ex.seq >= restart_seq and ex.request.session_id in old_sessions and ex.request.session_epoch > 0:
            assert ex.response.error_code == 70, f"a pre-restart session answered after the restart\n{dump}"
            if i + 1 < len(fetches):
                assert fetches[i + 1].request.session_epoch in (0, -1), dump
    # KIP-320 position validation (both clients do it once they see the new epoch): the old
    # epoch ends exactly where the log ended before the restart, so no truncation is reported.
    end1 = max(o for o, v in got if v.startswith(b"before")) + 1
    validated = []
    for ex in exchanges:
        if ex.api_key == api.OFFSET_FOR_LEADER_EPOCH and ex.seq >= restart_seq:
            asked = {(t.topic, p.partition): p.leader_epoch for t in ex.request.topics for p in t.partitions}
            for t in ex.response.topics:
                for p in t.partitions:
                    if t.topic == topic and p.error_code == 0 and asked.get((topic, p.partition)) == epoch1:
                        assert (p.leader_epoch, p.end_offset) == (epoch1, end1), \
                            f"OffsetForLeaderEpoch({epoch1}) answered {(p.leader_epoch, p.end_offset)}, want {(epoch1, end1)}"
                        validated.append(p.end_offset)
    if client_epoch1 is not None:
        assert client_epoch1 == epoch1 and client_epoch2 == epoch2, (client_epoch1, client_epoch2, epoch1, epoch2)
    print(f"{client} crash={crash}: epochs {epoch1}->{epoch2}, fenced={fenced}, "
          f"metadata refreshes with new epoch={len(learned)}, validated end offsets={validated}")
