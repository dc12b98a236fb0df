"""Issue 24, item 3: users' SCRAM credentials through the admin API, kept in the metadata log.
confluent-kafka's AdminClient creates, describes and deletes them (AlterUserScramCredentials and
DescribeUserScramCredentials, KIP-554) through any node; each node's image answers the describe,
so a user created through one node is known to all, and a restart keeps them (the metadata log
and its snapshots). Kafka's refusals: too few iterations, a deletion of nothing."""
from __future__ import annotations

import pytest

from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,  # noqa: E402
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def _described(admin: AdminClient) -> dict:
    """{user: {mechanism name: iterations}} as one node describes them."""
    try:
        found = admin.describe_user_scram_credentials().result(10)
    except KafkaException:
        return {}
    return {user: {info.mechanism.name: info.iterations for info in d.scram_credential_infos}
            for user, d in found.items()}


def test_users_are_created_described_and_deleted_through_any_node_and_survive_restarts(tmp_path):
    with KraftdCluster(tmp_path, nodes=3) as cluster:
        admins = {i: AdminClient({"bootstrap.servers": cluster.node(i)}) for i in cluster.ids}
        wait_until(lambda: len(admins[1].list_topics(timeout=5).brokers) == 3, 60, "three brokers registered")
        futures = admins[2].alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(SHA512, 8192), b"alice-secret"),
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(SHA256, 4096), b"alice-secret"),
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(SHA256, 4096), b"bob-secret")])
        for future in futures.values():
            future.result(30)
        want = {"alice": {"SCRAM_SHA_256": 4096, "SCRAM_SHA_512": 8192}, "bob": {"SCRAM_SHA_256": 4096}}
        for i in cluster.ids:  # every node's image knows them
            wait_until(lambda i=i: _described(admins[i]) == want, 30, f"node {i} to describe both users")

        # Kafka's refusals, per user: a user with an error changes nothing.
        futures = admins[3].alter_user_scram_credentials([
            UserScramCredentialUpsertion("carol", ScramCredentialInfo(SHA256, 1024), b"x"),
            UserScramCredentialDeletion("dave", SHA512)])
        with pytest.raises(KafkaException, match="Too few iterations"):
            futures["carol"].result(30)
        with pytest.raises(KafkaException, match="does not exist"):
            futures["dave"].result(30)
        found = admins[1].describe_user_scram_credentials(["alice", "nobody"])
        assert {i.mechanism.name for i in found["alice"].result(10).scram_credential_infos} == \
            {"SCRAM_SHA_256", "SCRAM_SHA_512"}
        with pytest.raises(KafkaException, match="does not exist"):
            found["nobody"].result(10)

        admins[1].alter_user_scram_credentials([UserScramCredentialDeletion("alice", SHA256)])["alice"].result(30)
        want["alice"] = {"SCRAM_SHA_512": 8192}
        wait_until(lambda: all(_described(admins[i]) == want for i in cluster.ids), 30, "the deletion everywhere")

        for i in cluster.ids:
            cluster.restart(i)
        cluster.wait_ready()
        admins = {i: AdminClient({"bootstrap.servers": cluster.node(i)}) for i in cluster.ids}
        for i in cluster.ids:
            wait_until(lambda i=i: _described(admins[i]) == want, 60, f"node {i} to know the users after a restart")


def test_a_node_without_a_metadata_log_says_where_credentials_live(kraftd):
    admin = AdminClient({"bootstrap.servers": kraftd.bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(SHA512, 4096), b"secret")])
    with pytest.raises(KafkaException, match="metadata log"):
        futures["alice"].result(30)
