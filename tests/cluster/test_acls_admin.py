"""Issue 24, item 4, with real clients on a 3-node cluster: a SASL_PLAINTEXT listener,
`authorizer = "acl"`, the bootstrap user as the one super user. The admin creates a user and its
ACLs with confluent-kafka's AdminClient; every node holds them (DescribeAcls through each); the
user writes and reads the topic it may and gets TOPIC_AUTHORIZATION_FAILED on another and
GROUP_AUTHORIZATION_FAILED for a group it may not use; users and ACLs survive a restart of every
node; after DeleteAcls the same calls fail. The Java Admin does the same for a second user."""
from __future__ import annotations

import subprocess
import time

import pytest

from kraftd.client import WireClient
from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import KafkaProtocolError
from tests.clients import helpers as h
from tests.support.certs import ClientSecurity
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, NewTopic, ResourcePatternType, ResourceType, ScramCredentialInfo,
                                   ScramMechanism, UserScramCredentialUpsertion)

pytestmark = pytest.mark.clients

ANY = 1  # Kafka's ANY in a filter's resource type, pattern type, operation and permission
ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-pw")
ENV = {"KRAFTD_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KRAFTD_SASL_MECHANISMS": "SCRAM-SHA-256",
       "KRAFTD_BOOTSTRAP_USER": ":".join(ADMIN), "KRAFTD_AUTHORIZER": "acl", "KRAFTD_SUPER_USERS": "User:admin",
       "KRAFTD_AUTO_CREATE_TOPICS": "false"}


def _security(user) -> dict:
    return ClientSecurity.of(None, sasl=("SCRAM-SHA-256", *user)).confluent()


def _alice_acls():
    def allow(kind, name, op):
        return AclBinding(kind, name, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
    return [allow(ResourceType.TOPIC, "allowed", AclOperation.WRITE),
            allow(ResourceType.TOPIC, "allowed", AclOperation.READ),
            allow(ResourceType.GROUP, "team", AclOperation.READ)]


def _alices() -> AclBindingFilter:
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
                            AclPermissionType.ANY)


def _described(node: str, principal: str) -> set | None:
    """The principal's ACLs as the node at `node` answers DescribeAcls itself. (librdkafka's
    admin sends DescribeAcls to whichever broker it likes, so it cannot check one node.)"""
    try:  # (a node restarting refuses the connection or the login: not yet)
        client = WireClient(node, sasl=("SCRAM-SHA-256", *ADMIN), timeout=10)
    except Exception:
        return None
    try:
        r = client.request(api.DESCRIBE_ACLS, 3, m.DescribeAclsRequest(
            resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY,
            principal_filter=principal, host_filter=None, operation=ANY, permission_type=ANY))
    except (OSError, KafkaProtocolError):
        return None
    finally:
        client.close()
    if r.error_code:
        return None
    return {(res.resource_type, res.resource_name, res.pattern_type, acl.principal, acl.operation, acl.permission_type)
            for res in r.resources for acl in res.acls}


def _key(b: AclBinding):
    """A binding as (resource type, name, pattern type, principal, operation, permission), in
    Kafka's codes (confluent-kafka's enums carry them)."""
    return (b.restype.value, b.name, b.resource_pattern_type.value, b.principal, b.operation.value,
            b.permission_type.value)


def _brokers_seen(admin) -> int:
    try:
        return len(admin.list_topics(timeout=5).brokers)
    except KafkaException:
        return 0  # (the bootstrap user is not committed yet: the login fails)


def _produce_error(bootstrap: str, topic: str, user) -> int | None:
    """One record as `user`: None once acknowledged, else the delivery error's code."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 15_000,
                         **_security(user)})
    outcome = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: outcome.append(None if err is None else err.code()))
    producer.flush(20)
    return outcome[0] if outcome else -1


def _group_read(bootstrap: str, topic: str, group: str, user, timeout: float = 30.0) -> int | str:
    """Subscribe as `user` in `group`: "read" once a record arrives, else the first error code."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": True, **_security(user)})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is None:
                return "read"
            if msg.error().code() != KafkaError._PARTITION_EOF:
                return msg.error().code()
        return "nothing"
    finally:
        consumer.close()


def test_users_and_acls_from_the_admin_api_hold_on_every_node_and_across_restarts(tmp_path):
    with KraftdCluster(tmp_path, nodes=3, env=ENV) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), **_security(ADMIN)})
        wait_until(lambda: _brokers_seen(admin) == 3, 90, "the admin to log in and see three brokers")
        for future in admin.create_topics([NewTopic(t, 1, 3) for t in ("allowed", "forbidden")]).values():
            future.result(30)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            ALICE[0], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), ALICE[1].encode())])[ALICE[0]].result(30)
        # Created through node 2 and deleted through node 3: at least one of them is not the
        # controller, and forwards the request to it.
        via_2 = AdminClient({"bootstrap.servers": cluster.node(2), **_security(ADMIN)})
        for future in via_2.create_acls(_alice_acls()).values():
            future.result(30)
        want = {_key(b) for b in _alice_acls()}
        for i in cluster.ids:
            wait_until(lambda i=i: _described(cluster.node(i), "User:alice") == want, 30, f"node {i} to hold the ACLs")
        assert {_key(b) for b in admin.describe_acls(_alices()).result(10)} == want  # and the admin API says so

        wait_until(lambda: _produce_error(cluster.bootstrap(), "allowed", ALICE) is None, 30, "alice to write")
        assert _produce_error(cluster.bootstrap(), "forbidden", ALICE) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert _group_read(cluster.bootstrap(), "allowed", "team", ALICE) == "read"
        assert _group_read(cluster.bootstrap(), "allowed", "other", ALICE) == KafkaError.GROUP_AUTHORIZATION_FAILED

        for i in cluster.ids:
            cluster.restart(i)
        cluster.wait_ready()
        for i in cluster.ids:
            wait_until(lambda i=i: _described(cluster.node(i), "User:alice") == want, 60,
                       f"node {i} to hold the ACLs after the restart")
        wait_until(lambda: _produce_error(cluster.bootstrap(), "allowed", ALICE) is None, 60,
                   "alice (her credentials kept too) to write after the restart")

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), **_security(ADMIN)})
        via_3 = AdminClient({"bootstrap.servers": cluster.node(3), **_security(ADMIN)})
        deleted = via_3.delete_acls([_alices()])[_alices()].result(30)
        assert {_key(b) for b in deleted} == want
        for i in cluster.ids:
            wait_until(lambda i=i: _described(cluster.node(i), "User:alice") == set(), 30, f"node {i} to drop them")
        assert _produce_error(cluster.bootstrap(), "allowed", ALICE) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert _group_read(cluster.bootstrap(), "allowed", "team", ALICE) in (
            KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)

        # The Java Admin: a user and its ACLs, described, then deleted.
        from tests.support.java_client import compile_driver, java_command

        classes = compile_driver("AclAdmin", tmp_path / "java")
        props = h.java_properties(tmp_path / "admin.properties",
                                  ClientSecurity.of(None, sasl=("SCRAM-SHA-256", *ADMIN)).java())
        admin.create_topics([NewTopic("javas", 1, 3)])["javas"].result(30)

        def java(*args):
            done = subprocess.run(java_command("AclAdmin", classes, cluster.bootstrap(), str(props), *args),
                                  capture_output=True, text=True, timeout=180)
            return done.stdout.splitlines(), done.stderr[-2000:]

        lines, err = java("create", "bob", "bob-pw", "javas", "jteam")
        assert lines[0] == "created bob" and lines[-1] == "done", (lines, err)
        assert sorted(lines[1:-1]) == ["acl GROUP jteam LITERAL READ ALLOW", "acl TOPIC javas LITERAL READ ALLOW",
                                       "acl TOPIC javas LITERAL WRITE ALLOW"], (lines, err)
        bob = ("bob", "bob-pw")
        wait_until(lambda: _produce_error(cluster.bootstrap(), "javas", bob) is None, 30, "bob to write")
        assert _produce_error(cluster.bootstrap(), "allowed", bob) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        lines, err = java("delete", "bob")
        assert lines == ["deleted 3", "done"], (lines, err)
        wait_until(lambda: _produce_error(cluster.bootstrap(), "javas", bob) == KafkaError.TOPIC_AUTHORIZATION_FAILED,
                   30, "bob refused after the Java DeleteAcls")
