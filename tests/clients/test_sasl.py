"""Issue 24, SASL: on a SASL_SSL listener every real client (kafka-python, confluent-kafka,
aiokafka, kcat, the Java client, kafkajs) logs in with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN as
a user an admin created through AlterUserScramCredentials, then writes 1,000 records and reads
them back exactly. The admin itself is the `bootstrap_user`. A wrong password is refused with
SASL_AUTHENTICATION_FAILED (58); a request other than ApiVersions before a login closes the
connection unanswered, as on Kafka."""
from __future__ import annotations

import ssl
import subprocess
import zlib

import pytest

from kraftd.client import WireClient
from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from tests.clients import helpers as h
from tests.support.certs import ClientSecurity
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.clients

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,  # noqa: E402
                                   UserScramCredentialUpsertion)

N = 1_000
FIRST = 1  # offset 0 holds the LeaderChange control batch
ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-pw")
MECHANISMS = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]


def _create_alice(bootstrap: str, certs) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap,
                         **ClientSecurity.of(certs, sasl=("SCRAM-SHA-512", *ADMIN)).confluent()})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(ALICE[0], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                     ALICE[1].encode()),
        UserScramCredentialUpsertion(ALICE[0], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                     ALICE[1].encode())])
    try:
        futures[ALICE[0]].result(10)
        return True
    except KafkaException:
        return False  # the bootstrap user is not committed yet: log-in failed


@pytest.fixture(scope="module")
def sasl_node(tmp_path_factory, certs):
    """A one-voter cluster (credentials live in the metadata log) with a SASL_SSL listener."""
    env = {**certs.server_env(), "KRAFTD_SECURITY_PROTOCOL": "SASL_SSL",
           "KRAFTD_SASL_MECHANISMS": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN", "KRAFTD_BOOTSTRAP_USER": ":".join(ADMIN)}
    with KraftdCluster(tmp_path_factory.mktemp("sasl"), nodes=1, env=env) as cluster:
        wait_until(lambda: _create_alice(cluster.bootstrap(), certs), 60, "the admin to create alice")
        yield cluster


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("client", ["kafka-python", "confluent", "aiokafka", "kcat", "java", "kafkajs"])
def test_a_user_logs_in_writes_and_reads_back(sasl_node, certs, client, mechanism, tmp_path):
    bootstrap = sasl_node.bootstrap()
    security = ClientSecurity.of(certs, sasl=(mechanism, *ALICE))
    topic = f"sasl-{client}-{mechanism}".lower()
    if client in ("java", "kafkajs"):
        lines = (h.java_round_trip(bootstrap, topic, N, security, tmp_path) if client == "java"
                 else h.kafkajs_round_trip(bootstrap, topic, N, security))
        assert lines[-1] == "done" and lines[0].startswith(f"produced {FIRST}"), lines[-3:]
        assert lines[1:-1] == h.round_trip_lines(N, FIRST)
        return
    if client == "kcat":
        records = h.make_text_records(N, seed=zlib.crc32(topic.encode()), headers=(("h", b"1"),))
        h.kcat_produce(bootstrap, topic, records, extra=security.kcat())
        h.assert_same(h.kcat_consume(bootstrap, topic, extra=security.kcat()), records, first_offset=FIRST)
        return
    records = h.make_records(N, seed=zlib.crc32(topic.encode()))
    if client == "kafka-python":
        offsets, _ = h.kafka_python_produce(bootstrap, topic, records, **security.kafka_python())
        got = h.kafka_python_consume(bootstrap, topic, N, **security.kafka_python())
    elif client == "confluent":
        offsets = h.confluent_produce(bootstrap, topic, records, **security.confluent())
        got = h.confluent_consume(bootstrap, topic, N, **security.confluent())
    else:
        offsets = h.aiokafka_produce(bootstrap, topic, records, **security.aiokafka())
        got = h.aiokafka_consume(bootstrap, topic, N, **security.aiokafka())
    assert offsets == list(range(FIRST, FIRST + N))
    h.assert_same(got, records, first_offset=FIRST)


def _client(sasl_node, certs) -> WireClient:
    return WireClient(sasl_node.bootstrap(), tls=ssl.create_default_context(cafile=certs.ca), timeout=10)


def _versions() -> m.ApiVersionsRequest:
    return m.ApiVersionsRequest(client_software_name="t", client_software_version="1")


def test_a_wrong_password_is_refused_with_58(sasl_node, certs):
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        client = _client(sasl_node, certs)
        try:
            handshake = client.request(17, 1, m.SaslHandshakeRequest(mechanism=mechanism))
            assert handshake.error_code == 0 and set(handshake.mechanisms) >= set(MECHANISMS)
            if mechanism == "PLAIN":
                token = b"\0alice\0not-her-password"
            else:
                token = b"n,,n=alice,r=0123456789abcdef"  # a SCRAM client-first, then a wrong proof
                first = client.request(36, 2, m.SaslAuthenticateRequest(auth_bytes=token))
                assert first.error_code == 0
                nonce = dict(p.split("=", 1) for p in bytes(first.auth_bytes).decode().split(","))["r"]
                token = f"c=biws,r={nonce},p={'A' * 88}".encode()
            answer = client.request(36, 2, m.SaslAuthenticateRequest(auth_bytes=token))
            assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED == 58
            assert mechanism in answer.error_message
        finally:
            client.close()
    # And a real client with the wrong password gets nowhere.
    admin = AdminClient({"bootstrap.servers": sasl_node.bootstrap(),
                         **ClientSecurity.of(certs, sasl=("SCRAM-SHA-256", "alice", "wrong")).confluent()})
    with pytest.raises(KafkaException):  # (librdkafka reports the 58 in its log, then "transport failure")
        admin.list_topics(timeout=5)


def test_requests_before_a_login_are_not_answered(sasl_node, certs):
    client = _client(sasl_node, certs)
    try:
        assert client.request(api.API_VERSIONS, 3, _versions()).error_code == 0  # allowed before a login
        with pytest.raises((ConnectionError, OSError)):
            client.request(api.METADATA, 12, m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                              include_topic_authorized_operations=False))
    finally:
        client.close()


def test_sasl_plaintext_logs_in_without_tls(tmp_path):
    """SASL_PLAINTEXT: the same logins on a plaintext listener (the bootstrap user here)."""
    env = {"KRAFTD_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KRAFTD_SASL_MECHANISMS": "SCRAM-SHA-256",
           "KRAFTD_BOOTSTRAP_USER": ":".join(ADMIN)}
    with KraftdCluster(tmp_path, nodes=1, env=env) as cluster:
        security = ClientSecurity.of(None, sasl=("SCRAM-SHA-256", *ADMIN))
        assert security.protocol == "SASL_PLAINTEXT"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), **security.confluent()})

        def logged_in():
            try:
                return len(admin.list_topics(timeout=3).brokers) == 1
            except KafkaException:
                return False  # the bootstrap user is not committed yet

        wait_until(logged_in, 60, "the bootstrap user to log in")
        records = h.make_records(N, seed=7)
        assert h.confluent_produce(cluster.bootstrap(), "plain-sasl", records, **security.confluent()) == \
            list(range(FIRST, FIRST + N))
        h.assert_same(h.confluent_consume(cluster.bootstrap(), "plain-sasl", N, **security.confluent()), records,
                      first_offset=FIRST)
        # A mechanism not in sasl_mechanisms is refused (SCRAM-SHA-512 stays for the nodes only).
        other = ClientSecurity.of(None, sasl=("SCRAM-SHA-512", *ADMIN))
        with pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": cluster.bootstrap(), **other.confluent()}).list_topics(timeout=3)


def test_the_java_admin_creates_a_user_who_then_logs_in(sasl_node, certs, tmp_path):
    from tests.support.java_client import compile_driver, java_command

    classes = compile_driver("ScramUsers", tmp_path / "java")
    admin = ClientSecurity.of(certs, sasl=("SCRAM-SHA-512", *ADMIN))
    props = h.java_properties(tmp_path / "admin.properties", admin.java())
    done = subprocess.run(java_command("ScramUsers", classes, sasl_node.bootstrap(), str(props), "carol", "carol-pw"),
                          capture_output=True, text=True, timeout=180)
    assert done.stdout.splitlines() == ["created carol", "described carol SCRAM-SHA-512 4096", "done"], \
        (done.stdout, done.stderr[-2000:])
    carol = ClientSecurity.of(certs, sasl=("SCRAM-SHA-512", "carol", "carol-pw")).confluent()
    records = h.make_records(50, seed=3)
    assert h.confluent_produce(sasl_node.bootstrap(), "carols", records, **carol) == list(range(FIRST, FIRST + 50))
