"""Issue 24, TLS between nodes: a 3-node cluster whose listeners speak TLS (and require client
certificates), or SASL_SSL, forms and replicates. Its nodes reach each other over TLS (each
verifies the other's certificate and host name against the CA, and shows its own; on SASL_SSL
they log in as nodes with the cluster secret), so acks=all records written through it are on
the followers: with the leader killed, a survivor serves every one."""
from __future__ import annotations

import pytest

from tests.clients import helpers as h
from tests.support.certs import ClientSecurity, make_certs
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

N = 1_000


def _brokers(admin: AdminClient) -> int:
    try:
        return len(admin.list_topics(timeout=5).brokers)
    except confluent_kafka.KafkaException:
        return 0  # (SASL_SSL: the bootstrap user is not committed yet)


def _leader(admin: AdminClient, topic: str):
    try:
        meta = admin.list_topics(topic, timeout=5)
    except confluent_kafka.KafkaException:
        return None
    t = meta.topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    p = t.partitions[0]
    return p.leader if p.leader >= 0 and len(p.isrs) == 3 else None


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_a_cluster_with_tls_listeners_forms_and_replicates(tmp_path, protocol):
    certs = make_certs(tmp_path / "certs")
    env = certs.server_env(client_auth="required")
    sasl = None
    if protocol == "SASL_SSL":
        env.update(KRAFTD_SECURITY_PROTOCOL="SASL_SSL", KRAFTD_BOOTSTRAP_USER="admin:admin-secret")
        sasl = ("SCRAM-SHA-512", "admin", "admin-secret")
    tls = ClientSecurity.of(certs, "alice", sasl=sasl).confluent()
    with KraftdCluster(tmp_path, nodes=3, env=env) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), **tls})
        wait_until(lambda: _brokers(admin) == 3, 60, "three brokers registered")
        futures = admin.create_topics([NewTopic("t", 1, 3)], operation_timeout=20)
        futures["t"].result(30)
        leader = wait_until(lambda: _leader(admin, "t"), 30, "t-0: a leader and a full ISR")
        records = h.make_records(N, seed=24)
        assert h.confluent_produce(cluster.bootstrap(), "t", records, **tls) == list(range(1, N + 1))

        cluster.kill(leader)
        survivor = next(i for i in cluster.ids if i != leader)
        got = h.confluent_consume(cluster.node(survivor), "t", N, **tls)
        h.assert_same(got, records, first_offset=1)
        logs = "\n".join(cluster.logs(i) for i in cluster.ids)
        assert "Traceback" not in logs, logs[-3000:]
