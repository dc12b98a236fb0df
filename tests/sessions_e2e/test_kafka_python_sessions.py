"""KIP-227 on the wire with kafka-python 3.x: a recording proxy between the client and kraftd
decodes every Fetch with kraftd's codec.  (Acceptance item 1.)"""
from __future__ import annotations

import threading
import time

import pytest

from kraftd.protocol import api

from .wire import (RecordingProxy, describe_fetches, fetch_forgotten, fetch_request_partitions,
                   fetch_response_partitions, scrape, wait_until)

pytestmark = pytest.mark.clients

FETCH_SESSION_ID_NOT_FOUND = 70
PARTITIONS = 4


@pytest.fixture
def proxy():
    p = RecordingProxy()
    yield p
    p.close()


def _start(kraftd_factory, proxy, **env):
    server = kraftd_factory("--advertised-listener", f"127.0.0.1:{proxy.port}",
                            env={"KRAFTD_DEFAULT_PARTITIONS": str(PARTITIONS),
                                 "KRAFTD_FSYNC_POLICY": "never", **env})
    proxy.upstream_port = server.port
    return server


def _produce(bootstrap, topic, values_by_partition, client_id="sess-producer"):
    from kafka import KafkaProducer

    # Small batches, so that a consumer with a small max_partition_fetch_bytes needs many fetches.
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, linger_ms=2,
                             batch_size=1024, max_block_ms=30_000)
    try:
        futures = [producer.send(topic, value=v, key=b"k", partition=p)
                   for p, values in values_by_partition.items() for v in values]
        producer.flush(timeout=30)
        assert all(f.is_done and f.succeeded() for f in futures), "produce failed"
    finally:
        producer.close(timeout=5)


def _consumer(bootstrap, client_id, **extra):
    from kafka import KafkaConsumer

    return KafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, group_id=None,
                         enable_auto_commit=False, auto_offset_reset="none",
                         fetch_max_wait_ms=100, request_timeout_ms=10_000, **extra)


def _poll_into(consumer, got: dict, until, timeout: float, what: str):
    """Poll until `until(got)`; got = {partition: [(offset, value)]}."""
    deadline = time.monotonic() + timeout
    while not until(got):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: have "
                                 f"{ {p: len(v) for p, v in got.items()} }")
        for tp, recs in consumer.poll(timeout_ms=100, max_records=500).items():
            got.setdefault(tp.partition, []).extend((r.offset, r.value) for r in recs)


def _check_exact(got: dict, want: dict):
    for p in set(got) | set(want):
        values = [v for _, v in got.get(p, [])]
        offsets = [o for o, _ in got.get(p, [])]
        assert values == want.get(p, []), (
            f"partition {p}: got {len(values)} records, want {len(want.get(p, []))}; "
            f"first difference at #{next((i for i, (a, b) in enumerate(zip(values, want.get(p, []))) if a != b), min(len(values), len(want.get(p, []))))}")
        assert all(a < b for a, b in zip(offsets, offsets[1:])), f"partition {p}: offsets not increasing"


def _check_session_chain(fetches, assigned: set, idle: set):
    """The KIP-227 conversation of one client: one full fetch opening a session, then an
    unbroken run of incremental fetches 1, 2, … that only name partitions whose fetch state
    changed, answered only with partitions that have something new."""
    dump = describe_fetches(fetches)
    first = fetches[0]
    assert (first.request.session_id, first.request.session_epoch) == (0, 0), dump
    assert set(fetch_request_partitions(first)) == assigned, dump
    assert first.response.error_code == 0, dump
    sid = first.response.session_id
    assert sid != 0, "the first full fetch did not create a session\n" + dump
    assert set(fetch_response_partitions(first)) == assigned, "a full response names every partition\n" + dump

    # What the client last told the server (fetch state) and what the server last answered.
    told = {k: (p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch)
            for k, p in fetch_request_partitions(first).items()}
    answered = {k: (d.high_watermark, d.last_stable_offset, d.log_start_offset)
                for k, d in fetch_response_partitions(first).items()}
    in_session = set(assigned)
    for n, ex in enumerate(fetches[1:], start=1):
        req, resp = ex.request, ex.response
        assert (req.session_id, req.session_epoch) == (sid, n), \
            f"fetch #{n} is not incremental epoch {n} of session {sid}\n" + dump
        assert resp.error_code == 0 and resp.session_id == sid, f"fetch #{n} answered\n" + dump
        sent = fetch_request_partitions(ex)
        forgotten = fetch_forgotten(ex)
        for key, p in sent.items():
            state = (p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch)
            # Re-sent only if new to the session or its fetch state changed.
            assert key not in in_session or told.get(key) != state, \
                f"fetch #{n} re-sent unchanged partition {key}\n" + dump
            told[key] = state
        in_session = (in_session - forgotten) | set(sent)
        assert not (set(sent) & idle), f"fetch #{n} re-sent an idle partition\n" + dump
        got = fetch_response_partitions(ex)
        assert not (set(got) & idle), f"incremental response #{n} carried an idle partition\n" + dump
        assert set(got) <= in_session, dump
        for key, d in got.items():
            new = (d.high_watermark, d.last_stable_offset, d.log_start_offset)
            assert (d.error_code != 0 or len(d.records or b"") > 0 or answered.get(key) != new), \
                f"incremental response #{n} carried {key} with nothing new\n" + dump
            answered[key] = new
    return sid


def test_kafka_python_incremental_fetch_sessions_on_the_wire(kraftd_factory, proxy):
    server = _start(kraftd_factory, proxy)
    topic = "sessions-wire"
    busy, idle_parts = [0, 1], [2, 3]
    first = {0: [b"a0-%04d" % i + b"." * 40 for i in range(300)],
             1: [b"a1-%04d" % i + b"." * 40 for i in range(120)]}
    _produce(proxy.bootstrap, topic, first)

    from kafka import TopicPartition
    consumer = _consumer(proxy.bootstrap, "sess-consumer", max_partition_fetch_bytes=2048)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        # Busy partitions from the beginning; idle ones at their end (nothing will ever come).
        for tp in tps:
            consumer.seek(tp, 0 if tp.partition in busy else ends[tp])
        want = {p: list(v) for p, v in first.items()}
        got: dict = {}
        _poll_into(consumer, got, lambda g: all(len(g.get(p, [])) >= len(want[p]) for p in busy),
                   30, "the first batch")
        # More data on partition 0 only, while the consumer keeps polling.
        second = {0: [b"b0-%04d" % i + b"." * 40 for i in range(200)]}
        _produce(proxy.bootstrap, topic, second)
        want[0] += second[0]
        _poll_into(consumer, got, lambda g: all(len(g.get(p, [])) >= len(want[p]) for p in busy),
                   30, "the second batch")
        # A few idle incremental round trips (nothing new anywhere), then the server-side view.
        n_before = len(proxy.snapshot(api.FETCH, "sess-consumer"))
        _poll_into(consumer, got, lambda g: len(proxy.snapshot(api.FETCH, "sess-consumer")) >= n_before + 5,
                   20, "idle incremental fetches")
        _check_exact(got, want)

        metrics = wait_until(lambda: (m := scrape(server.metrics_port))
                             ["kraftd_num_incremental_fetch_partitions_cached"] == PARTITIONS and m,
                             10, "partitions cached == assigned")
        assert metrics["kraftd_num_incremental_fetch_sessions"] >= 1
        assert metrics["kraftd_incremental_fetch_session_evictions_total"] == 0
    finally:
        consumer.close()

    assert not proxy.errors, proxy.errors[:5]
    fetches = proxy.snapshot(api.FETCH, "sess-consumer")
    assert len(fetches) >= 8
    assert all(ex.api_version >= 7 for ex in fetches)
    assigned = {(topic, p) for p in range(PARTITIONS)}
    _check_session_chain(fetches, assigned, {(topic, p) for p in idle_parts})
    # The new data on partition 0 arrived in incremental responses naming only partition 0.
    carried = [set(k for k, d in fetch_response_partitions(ex).items() if len(d.records or b""))
               for ex in fetches[1:]]
    assert any(c == {(topic, 0)} for c in carried), describe_fetches(fetches)
    # Some incremental round trips carried no partition at all (nothing new anywhere).
    assert any(not fetch_response_partitions(ex) for ex in fetches[1:]), describe_fetches(fetches)


def test_kafka_python_session_eviction_falls_back_to_full_fetch(kraftd_factory, proxy):
    """One session slot and no protection time: each consumer's new session evicts the other's
    (KIP-227: a session idle past min_incremental_fetch_session_eviction_ms may be evicted by
    any newcomer).  The evicted consumer's next incremental fetch gets
    FETCH_SESSION_ID_NOT_FOUND (70), it falls back to a full fetch, and nothing is lost or
    read twice."""
    server = _start(kraftd_factory, proxy,
                    KRAFTD_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS="1",
                    KRAFTD_MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS="0")
    topic = "sessions-evict"
    busy = [0, 1]
    _produce(proxy.bootstrap, topic, {0: [b"warmup"], 1: [b"warmup"]})
    evictions_before = scrape(server.metrics_port)["kraftd_incremental_fetch_session_evictions_total"]
    want = {0: [b"warmup"], 1: [b"warmup"]}

    from kafka import TopicPartition
    stop = threading.Event()
    results: dict = {}
    failures: list = []

    def consume(client_id):
        consumer = _consumer(proxy.bootstrap, client_id, max_partition_fetch_bytes=2048)
        got: dict = {}
        results[client_id] = got
        try:
            tps = [TopicPartition(topic, p) for p in busy]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
            deadline = time.monotonic() + 60
            while not (stop.is_set() and all(len(got.get(p, [])) >= len(want[p]) for p in busy)):
                if time.monotonic() > deadline:
                    raise AssertionError(f"{client_id} stalled at { {p: len(v) for p, v in got.items()} }")
                for tp, recs in consumer.poll(timeout_ms=50, max_records=200).items():
                    got.setdefault(tp.partition, []).extend((r.offset, r.value) for r in recs)
        except BaseException as exc:
            failures.append((client_id, exc))
        finally:
            consumer.close()

    threads = [threading.Thread(target=consume, args=(c,), daemon=True) for c in ("evict-a", "evict-b")]
    threads[0].start()
    # Let A open its session first, then B arrives and takes A's slot.
    wait_until(lambda: any(ex.response.session_id != 0 for ex in proxy.snapshot(api.FETCH, "evict-a")),
               20, "consumer A's session")
    threads[1].start()
    for rnd in range(6):
        batch = {p: [b"r%d-p%d-%04d" % (rnd, p, i) + b"." * 40 for i in range(80)] for p in busy}
        _produce(proxy.bootstrap, topic, batch)
        for p in busy:
            want[p] += batch[p]
        time.sleep(0.15)
    stop.set()
    for t in threads:
        t.join(90)
    assert not any(t.is_alive() for t in threads), "a consumer thread did not finish"
    assert not failures, failures
    for client_id in ("evict-a", "evict-b"):
        _check_exact(results[client_id], want)

    evictions_after = scrape(server.metrics_port)["kraftd_incremental_fetch_session_evictions_total"]
    assert evictions_after > evictions_before, (evictions_before, evictions_after)

    assert not proxy.errors, proxy.errors[:5]
    assigned = {(topic, p) for p in busy}
    for client_id in ("evict-a", "evict-b"):
        fetches = proxy.snapshot(api.FETCH, client_id)
        dump = describe_fetches(fetches, limit=200)
        not_found = [i for i, ex in enumerate(fetches) if ex.response.error_code == FETCH_SESSION_ID_NOT_FOUND]
        if client_id == "evict-a":
            assert not_found, "consumer A's session was never reported evicted (no error 70)\n" + dump
        for i in not_found:
            ex = fetches[i]
            assert ex.request.session_id != 0 and ex.request.session_epoch > 0, dump
            assert ex.response.session_id == 0 and not ex.response.responses, dump
            if i + 1 < len(fetches):
                nxt = fetches[i + 1]
                assert (nxt.request.session_id, nxt.request.session_epoch) == (0, 0), \
                    f"{client_id}: after error 70 the next fetch is not a full fetch\n" + dump
                assert set(fetch_request_partitions(nxt)) == assigned, dump
        # Every answer other than 70 kept the KIP-227 bookkeeping straight: incremental epochs
        # follow on from the full fetch that opened the session.
        expect = None
        for ex in fetches:
            req, resp = ex.request, ex.response
            if req.session_epoch == 0:
                assert req.session_id == 0 or resp is not None
            elif resp.error_code == 0:
                assert expect is not None and (req.session_id, req.session_epoch) == expect, dump
            if resp.error_code == 0 and resp.session_id != 0:
                expect = (resp.session_id, req.session_epoch + 1)
            else:
                expect = None
