"""Issue 24, TLS: security_protocol SSL on the Kafka listener. Every real client (kafka-python,
confluent-kafka, aiokafka, kcat, the Java client, kafkajs) writes 1,000 records over TLS and
reads them back exactly (fetch answers are file regions: were they sent with sendfile, past the
encryption, no client could read them); a plaintext client gets nothing and the server goes on
serving; with tls_client_auth the client certificate decides who may connect."""
from __future__ import annotations

import socket
import ssl
import struct
import zlib

import pytest

from kraftd.client import WireClient
from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.server.tls import ANONYMOUS, principal_of, subject_name
from tests.clients import helpers as h
from tests.support.certs import CLIENT_PRINCIPAL, ClientSecurity
from tests.support.kraftd_process import KraftdProcess

pytestmark = pytest.mark.clients

N = 1_000
FIRST = 1  # offset 0 holds the LeaderChange control batch


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, certs):
    """A TLS listener that asks for (but does not require) a client certificate."""
    server = KraftdProcess(tmp_path_factory.mktemp("kraftd") / "data",
                           env=certs.server_env(client_auth="requested")).start()
    yield server
    server.kill()


def _records(topic: str):
    return h.make_records(N, seed=zlib.crc32(topic.encode()))


def test_kafka_python_over_tls(tls_server, certs):
    records, tls = _records("tls-kp"), ClientSecurity.of(certs).kafka_python()
    offsets, _ = h.kafka_python_produce(tls_server.bootstrap, "tls-kp", records, **tls)
    assert offsets == list(range(FIRST, FIRST + N))
    h.assert_same(h.kafka_python_consume(tls_server.bootstrap, "tls-kp", N, **tls), records, first_offset=FIRST)


def test_confluent_over_tls_with_a_client_certificate(tls_server, certs):
    records, tls = _records("tls-ck"), ClientSecurity.of(certs, "alice").confluent()
    assert h.confluent_produce(tls_server.bootstrap, "tls-ck", records, **tls) == list(range(FIRST, FIRST + N))
    h.assert_same(h.confluent_consume(tls_server.bootstrap, "tls-ck", N, **tls), records, first_offset=FIRST)


def test_aiokafka_over_tls(tls_server, certs):
    records = _records("tls-aio")
    offsets = h.aiokafka_produce(tls_server.bootstrap, "tls-aio", records, **ClientSecurity.of(certs).aiokafka())
    assert offsets == list(range(FIRST, FIRST + N))
    got = h.aiokafka_consume(tls_server.bootstrap, "tls-aio", N, **ClientSecurity.of(certs).aiokafka())
    h.assert_same(got, records, first_offset=FIRST)


def test_kcat_over_tls(tls_server, certs):
    records = h.make_text_records(N, seed=7, headers=(("h", b"1"),))
    extra = ClientSecurity.of(certs).kcat()
    h.kcat_produce(tls_server.bootstrap, "tls-kcat", records, extra=extra)
    h.assert_same(h.kcat_consume(tls_server.bootstrap, "tls-kcat", extra=extra), records, first_offset=FIRST)


def test_java_client_over_tls(tls_server, certs, tmp_path):
    lines = h.java_round_trip(tls_server.bootstrap, "tls-java", N, ClientSecurity.of(certs), tmp_path)
    assert lines[-1] == "done", lines[-3:]
    assert lines[0] == f"produced {FIRST} {FIRST + N - 1}"
    assert lines[1:-1] == h.round_trip_lines(N, FIRST)


def test_kafkajs_over_tls(tls_server, certs):
    lines = h.kafkajs_round_trip(tls_server.bootstrap, "tls-js", N, ClientSecurity.of(certs))
    assert lines[-1] == "done", lines[-3:]
    assert lines[0] == f"produced {FIRST}"
    assert lines[1:-1] == h.round_trip_lines(N, FIRST)


def _api_versions_frame() -> bytes:
    # ApiVersions v0: api key 18, version 0, correlation 7, client id "plain".
    body = struct.pack(">hhih", 18, 0, 7, 5) + b"plain"
    return struct.pack(">i", len(body)) + body


def test_a_plaintext_client_gets_nothing_and_the_server_goes_on(tls_server, certs):
    with socket.create_connection(("127.0.0.1", tls_server.port), timeout=10) as sock:
        sock.sendall(_api_versions_frame())
        answer = b""
        try:
            while chunk := sock.recv(4096):
                answer += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    # No Kafka answer: at most a TLS alert record (content type 21), never a response frame.
    assert not answer or answer[0] == 21, answer[:16]
    # kafka-python speaking plaintext finds no broker.
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    with pytest.raises(KafkaError):
        # (api_version given: probing versions would wait 30 s on a broker that never answers)
        producer = KafkaProducer(bootstrap_servers=tls_server.bootstrap, max_block_ms=3000, api_version=(2, 5),
                                 request_timeout_ms=3000)
        try:
            producer.send("plain", b"v").get(timeout=5)
        finally:
            producer.close(timeout=1)
    # A TLS client right after is served.
    context = ssl.create_default_context(cafile=certs.ca)
    client = WireClient(tls_server.bootstrap, tls=context)
    try:
        assert client.request(api.API_VERSIONS, 3, m.ApiVersionsRequest(
            client_software_name="t", client_software_version="1")).error_code == 0
    finally:
        client.close()
    assert "Traceback" not in "\n".join(tls_server.log_lines)


@pytest.fixture
def mtls_server(tmp_path, certs):
    server = KraftdProcess(tmp_path / "data", env=certs.server_env(client_auth="required")).start()
    yield server
    server.kill()


def _api_versions_over(server, context: ssl.SSLContext) -> int:
    client = WireClient(server.bootstrap, tls=context, timeout=10)
    try:
        return client.request(api.API_VERSIONS, 3, m.ApiVersionsRequest(
            client_software_name="t", client_software_version="1")).error_code
    finally:
        client.close()


def test_required_client_certificates_admit_only_the_cas_clients(mtls_server, certs):
    alice = ssl.create_default_context(cafile=certs.ca)
    alice.load_cert_chain(certs.cert("alice"), certs.key("alice"))
    assert _api_versions_over(mtls_server, alice) == 0
    # A real client with its certificate writes and reads.
    records, tls = _records("mtls-ck"), ClientSecurity.of(certs, "alice").confluent()
    assert h.confluent_produce(mtls_server.bootstrap, "mtls-ck", records, **tls) == list(range(FIRST, FIRST + N))
    h.assert_same(h.confluent_consume(mtls_server.bootstrap, "mtls-ck", N, **tls), records, first_offset=FIRST)
    # Without a certificate, or with one another CA signed, the handshake fails (TLS 1.3 reports
    # it at the first read).
    mallory = ssl.create_default_context(cafile=certs.ca)
    mallory.load_cert_chain(certs.cert("mallory"), certs.key("mallory"))
    for context in (ssl.create_default_context(cafile=certs.ca), mallory):
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            _api_versions_over(mtls_server, context)
    assert _api_versions_over(mtls_server, alice) == 0  # and the server goes on


def test_a_client_certificate_is_the_principal_kafka_names(certs):
    decoded = ssl._ssl._test_decode_cert(certs.cert("alice"))  # what getpeercert() returns for it
    assert "User:" + subject_name(decoded) == CLIENT_PRINCIPAL

    class Showing:
        def getpeercert(self):
            return decoded

    class NotShowing:
        def getpeercert(self):
            return None

    assert principal_of(Showing()) == CLIENT_PRINCIPAL
    assert principal_of(NotShowing()) == principal_of(None) == ANONYMOUS
    # RFC 2253 escapes and multi-valued RDNs.
    assert subject_name({"subject": ((("commonName", "a,b"),), (("organizationName", " x"),
                                                                  ("organizationalUnitName", "y"),))}) \
        == "O=\\ x+OU=y,CN=a\\,b"
