"""Issue 24, item 6 (its TLS part): `format("kraftd")` reads and writes a TLS listener with the
`kafka.security.protocol` and `kafka.ssl.*` options Spark's Kafka source takes (PEM stores, as
KIP-651 names them). SASL, not there yet, is refused with an option error, not ignored."""
from __future__ import annotations

import ssl
from types import SimpleNamespace

import pytest

from kraftd.pipeline.options import OptionError
from kraftd.pipeline.security import client_tls
from tests.support.certs import ClientTls
from tests.support.kraftd_process import KraftdProcess


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

    admin = AdminClient({"bootstrap.servers": tls_server.bootstrap, **ClientTls.of(certs).confluent()})
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
        ({"security.protocol": "SASL_SSL"}, "SASL is not supported yet"),
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
