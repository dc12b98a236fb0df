"""Issue 24, item 6: `format("kraftd")` reads and writes a TLS listener and a SASL_SSL one with
the `kafka.security.protocol`, `kafka.ssl.*` (PEM stores, as KIP-651 names them) and
`kafka.sasl.mechanism`/`kafka.sasl.jaas.config` options Spark's Kafka source takes."""
from __future__ import annotations

import ssl
from types import SimpleNamespace

import pytest

from kraftd.pipeline.options import OptionError
from kraftd.pipeline.security import client_sasl, client_tls
from tests.support.certs import ClientSecurity
from tests.support.cluster import KraftdCluster
from tests.support.kraftd_process import KraftdProcess
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, certs):
    process = KraftdProcess(tmp_path_factory.mktemp("kraftd") / "data",
                            env={"KRAFTD_FSYNC_POLICY": "never", **certs.server_env(client_auth="requested")}).start()
    yield process
    process.kill()


def _tls_options(certs) -> dict:
    return {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": certs.ca}


def test_a_dataframe_goes_through_a_tls_listener_and_back(spark, tls_server, certs):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": tls_server.bootstrap, **ClientSecurity.of(certs).confluent()})
    admin.create_topics([NewTopic("tls-df", 2, 1)], operation_timeout=20)["tls-df"].result(30)
    rows = [(f"k{i}", f"v{i}") for i in range(500)]
    options = {"kafka.bootstrap.servers": tls_server.bootstrap, **_tls_options(certs)}
    spark.createDataFrame(rows, "key string, value string").write.format("kraftd").mode("append") \
        .options(**options).option("topic", "tls-df").save()
    got = spark.read.format("kraftd").options(**options).option("subscribe", "tls-df").load().collect()
    assert sorted((r.key.decode(), r.value.decode()) for r in got) == sorted(rows)
    # The same read without the TLS options finds no broker: nothing is read in the clear.
    plain = spark.read.format("kraftd").option("kafka.bootstrap.servers", tls_server.bootstrap) \
        .option("subscribe", "tls-df")
    with pytest.raises(Exception):
        plain.load().collect()


def _opts(**client):
    return SimpleNamespace(client_option=lambda name, default=None: client.get(name, default))


def test_the_tls_options_are_read_as_kafka_names_them(certs):
    assert client_tls(_opts()) is None
    context = client_tls(_opts(**{"security.protocol": "ssl", "ssl.truststore.location": certs.ca}))
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    pem = open(certs.ca).read()
    no_host_check = client_tls(_opts(**{"security.protocol": "SSL", "ssl.truststore.certificates": pem,
                                        "ssl.endpoint.identification.algorithm": ""}))
    assert not no_host_check.check_hostname
    both = tmp_key_and_cert(certs)
    assert client_tls(_opts(**{"security.protocol": "SSL", "ssl.truststore.location": certs.ca,
                               "ssl.keystore.type": "PEM", "ssl.keystore.location": both})) is not None
    for client, message in [
        ({"security.protocol": "SASL_SPARKLE"}, "one of PLAINTEXT"),
        ({"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": certs.ca},
         "PEM trust stores only"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent.pem"}, "kafka.ssl.truststore"),
        ({"security.protocol": "SSL", "ssl.keystore.location": certs.ca}, "kafka.ssl.keystore.location"),
    ]:
        with pytest.raises(OptionError, match=message):
            client_tls(_opts(**client))


def tmp_key_and_cert(certs) -> str:
    """A PEM key store: the client's key and certificate in one file."""
    path = certs.dir / "alice-keystore.pem"
    path.write_text(open(certs.key("alice")).read() + open(certs.cert("alice")).read())
    return str(path)


def test_the_sasl_options_are_read_as_spark_passes_them():
    scram = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p\\"w";'
    assert client_sasl(_opts(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                "sasl.jaas.config": scram})) == ("SCRAM-SHA-512", "alice", 'p"w')
    plain = 'org.apache.kafka.common.security.plain.PlainLoginModule required password="x" username="bob";'
    assert client_sasl(_opts(**{"security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN",
                                "sasl.jaas.config": plain})) == ("PLAIN", "bob", "x")
    assert client_sasl(_opts(**{"security.protocol": "SSL"})) is None
    with pytest.raises(OptionError, match="GSSAPI"):  # Kafka's default mechanism
        client_sasl(_opts(**{"security.protocol": "SASL_SSL", "sasl.jaas.config": plain}))
    with pytest.raises(OptionError, match="jaas.config must name"):
        client_sasl(_opts(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}))


def test_a_dataframe_goes_through_a_sasl_ssl_listener_and_back(spark, certs, tmp_path):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    env = {**certs.server_env(), "KRAFTD_SECURITY_PROTOCOL": "SASL_SSL", "KRAFTD_FSYNC_POLICY": "never",
           "KRAFTD_BOOTSTRAP_USER": "etl:etl-secret"}
    with KraftdCluster(tmp_path, nodes=1, env=env) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(),
                             **ClientSecurity.of(certs, sasl=("SCRAM-SHA-512", "etl", "etl-secret")).confluent()})

        def created():
            try:
                admin.create_topics([NewTopic("sasl-df", 2, 1)], operation_timeout=20)["sasl-df"].result(30)
                return True
            except KafkaException:
                return False  # the bootstrap user is not committed yet

        wait_until(created, 60, "the topic, created as the bootstrap user")
        options = {"kafka.bootstrap.servers": cluster.bootstrap(), **_tls_options(certs),
                   "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256",
                   "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                             'username="etl" password="etl-secret";'}
        rows = [(f"k{i}", f"v{i}") for i in range(300)]
        spark.createDataFrame(rows, "key string, value string").write.format("kraftd").mode("append") \
            .options(**options).option("topic", "sasl-df").save()
        got = spark.read.format("kraftd").options(**options).option("subscribe", "sasl-df").load().collect()
        assert sorted((r.key.decode(), r.value.decode()) for r in got) == sorted(rows)
        wrong = {**options, "kafka.sasl.jaas.config": options["kafka.sasl.jaas.config"].replace("etl-secret", "no")}
        with pytest.raises(Exception, match="SASL_AUTHENTICATION_FAILED"):
            spark.read.format("kraftd").options(**wrong).option("subscribe", "sasl-df").load().collect()
