"""Issue 24, item 4: the ACL matrix as raw frames over real sockets. A one-voter cluster with a
SASL_PLAINTEXT listener, `authorizer = "acl"` and `super_users = "User:admin"`; the admin (the
bootstrap user) creates the user alice and, per API, the ACLs it needs with CreateAcls. Each row:
alice's request is refused with Kafka's error (29, 30 or 31) while she has no ACL, succeeds once
the admin grants what Kafka checks, and is refused again after DeleteAcls removes it."""
from __future__ import annotations

import itertools

import pytest

from kraftd.client import WireClient
from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import build_batch
from kraftd.quorum.metadata.acls import Operation as O, PatternType as P, Permission, ResourceType as R
from kraftd.quorum.metadata.scram import SCRAM_SHA_256, salted_password
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-pw")
TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                        ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
_names = itertools.count()


def _login(cluster, user) -> WireClient:
    return WireClient(cluster.bootstrap(), sasl=("SCRAM-SHA-256", *user), timeout=15)


def _try_login(cluster, user) -> bool:
    try:
        _login(cluster, user).close()
        return True
    except Exception:
        return False


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    env = {"KRAFTD_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KRAFTD_SASL_MECHANISMS": "SCRAM-SHA-256",
           "KRAFTD_BOOTSTRAP_USER": ":".join(ADMIN), "KRAFTD_AUTHORIZER": "acl", "KRAFTD_SUPER_USERS": "User:admin",
           "KRAFTD_AUTO_CREATE_TOPICS": "false"}
    with KraftdCluster(tmp_path_factory.mktemp("acl"), nodes=1, env=env) as cluster:
        wait_until(lambda: _try_login(cluster, ADMIN), 60, "the bootstrap user to log in")
        admin = _login(cluster, ADMIN)
        salt = b"alice-salt-01234"
        Upsertion = m.AlterUserScramCredentialsRequest.ScramCredentialUpsertion
        result = admin.request(api.ALTER_USER_SCRAM_CREDENTIALS, 0, m.AlterUserScramCredentialsRequest(
            deletions=[], upsertions=[Upsertion(name=ALICE[0], mechanism=SCRAM_SHA_256, iterations=4096, salt=salt,
                                                salted_password=salted_password(SCRAM_SHA_256, ALICE[1], salt,
                                                                                4096))])).results[0]
        assert result.error_code == 0, result
        for topic in ("data", "snap"):
            _create_topic(admin, topic)
        # (the first FindCoordinator creates __consumer_offsets, whose leader coordinates groups)
        wait_until(lambda: _find_coordinator(admin) == 0 and _describe_groups(admin) == 0, 60,
                   "the group coordinator")
        wait_until(lambda: _try_login(cluster, ALICE), 30, "alice to log in")
        admin.close()
        yield cluster


def _create_topic(client, name: str) -> int:
    Topic = m.CreateTopicsRequest.CreatableTopic
    return client.request(api.CREATE_TOPICS, 7, m.CreateTopicsRequest(
        topics=[Topic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10_000, validate_only=False)).topics[0].error_code


def _acls(client, api_key, request, version=3):
    return client.request(api_key, version, request)


def _grant(cluster, bindings) -> None:
    Creation = m.CreateAclsRequest.AclCreation
    with _admin(cluster) as admin:
        results = _acls(admin, api.CREATE_ACLS, m.CreateAclsRequest(creations=[
            Creation(resource_type=t, resource_name=n, resource_pattern_type=p, principal="User:alice", host="*",
                     operation=o, permission_type=Permission.ALLOW) for t, n, p, o in bindings])).results
    assert [r.error_code for r in results] == [0] * len(bindings), results


def _revoke_all(cluster) -> int:
    Filter = m.DeleteAclsRequest.DeleteAclsFilter
    with _admin(cluster) as admin:
        result = _acls(admin, api.DELETE_ACLS, m.DeleteAclsRequest(filters=[Filter(
            resource_type_filter=R.ANY, resource_name_filter=None, pattern_type_filter=P.ANY,
            principal_filter=None, host_filter=None, operation=O.ANY, permission_type=Permission.ANY)]))
    assert result.filter_results[0].error_code == 0
    return len(result.filter_results[0].matching_acls)


class _admin:
    def __init__(self, cluster):
        self.client = _login(cluster, ADMIN)

    def __enter__(self):
        return self.client

    def __exit__(self, *exc):
        self.client.close()


# -- one request per API, as alice: the error code that decides the row --------------------------
def _produce(c, topic="data"):
    batch = build_batch([(b"k", b"v", None, 0)])
    r = c.request(api.PRODUCE, 9, m.ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
            m.ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
    return r.responses[0].partition_responses[0].error_code


def _fetch(c, topic="data"):
    F = m.FetchRequest
    r = c.request(api.FETCH, 12, F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                   session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[], topics=[
        F.FetchTopic(topic=topic, partitions=[F.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                               last_fetched_epoch=-1, log_start_offset=-1,
                                                               partition_max_bytes=1 << 20)])]))
    return r.responses[0].partitions[0].error_code


def _list_offsets(c):
    L = m.ListOffsetsRequest
    r = c.request(api.LIST_OFFSETS, 7, L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name="data", partitions=[L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
    return r.topics[0].partitions[0].error_code


def _metadata(c):
    r = c.request(api.METADATA, 12, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="data")],
                                                      allow_auto_topic_creation=False,
                                                      include_topic_authorized_operations=True))
    return r.topics[0].error_code


def _offset_for_leader_epoch(c):
    E = m.OffsetForLeaderEpochRequest
    r = c.request(api.OFFSET_FOR_LEADER_EPOCH, 4, E(replica_id=-1, topics=[E.OffsetForLeaderTopic(
        topic="data", partitions=[E.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                             leader_epoch=0)])]))
    return r.topics[0].partitions[0].error_code


def _create_topics(c):
    return _create_topic(c, f"made-{next(_names)}")


def _delete_records(c):
    D = m.DeleteRecordsRequest
    r = c.request(api.DELETE_RECORDS, 2, D(timeout_ms=5000, topics=[D.DeleteRecordsTopic(
        name="data", partitions=[D.DeleteRecordsPartition(partition_index=0, offset=0)])]))
    return r.topics[0].partitions[0].error_code


def _find_coordinator(c):
    r = c.request(api.FIND_COORDINATOR, 4, m.FindCoordinatorRequest(key="", key_type=0, coordinator_keys=["g"]))
    return r.coordinators[0].error_code


def _join_group(c):
    J = m.JoinGroupRequest
    r = c.request(api.JOIN_GROUP, 5, J(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                       member_id="", group_instance_id=None, protocol_type="consumer",
                                       protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    return r.error_code


def _offset_commit(c):
    C = m.OffsetCommitRequest
    r = c.request(api.OFFSET_COMMIT, 8, C(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                          group_instance_id=None, retention_time_ms=-1, topics=[C.OffsetCommitRequestTopic(
        name="data", partitions=[C.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                                committed_leader_epoch=-1, committed_metadata="")])]))
    return r.topics[0].partitions[0].error_code


def _offset_fetch(c):
    F = m.OffsetFetchRequest
    r = c.request(api.OFFSET_FETCH, 7, F(group_id="g", topics=None, require_stable=False))
    return r.error_code


def _describe_groups(c):
    r = c.request(api.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=["g"], include_authorized_operations=True))
    return r.groups[0].error_code


def _delete_groups(c):
    r = c.request(api.DELETE_GROUPS, 2, m.DeleteGroupsRequest(groups_names=["nobody-uses-this"]))
    return r.results[0].error_code


def _describe_quorum(c):
    Q = m.DescribeQuorumRequest
    return c.request(api.DESCRIBE_QUORUM, 1, Q(topics=[Q.TopicData(topic_name="__cluster_metadata", partitions=[
        Q.PartitionData(partition_index=0)])])).error_code


def _describe_acls(c):
    return c.request(api.DESCRIBE_ACLS, 3, m.DescribeAclsRequest(
        resource_type_filter=R.ANY, resource_name_filter=None, pattern_type_filter=P.ANY, principal_filter=None,
        host_filter=None, operation=O.ANY, permission_type=Permission.ANY)).error_code


def _create_acls(c):
    Creation = m.CreateAclsRequest.AclCreation
    return c.request(api.CREATE_ACLS, 3, m.CreateAclsRequest(creations=[Creation(
        resource_type=R.TOPIC, resource_name="x", resource_pattern_type=P.LITERAL, principal="User:mallory",
        host="*", operation=O.READ, permission_type=Permission.ALLOW)])).results[0].error_code


def _describe_scram(c):
    return c.request(api.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
                     m.DescribeUserScramCredentialsRequest(users=None)).error_code


def _init_producer_id(c):
    return c.request(api.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1)).error_code


def _fetch_snapshot(c):
    S = m.FetchSnapshotRequest
    r = c.request(api.FETCH_SNAPSHOT, 0, S(replica_id=-1, max_bytes=1 << 20, topics=[S.TopicSnapshot(
        name="snap", partitions=[S.PartitionSnapshot(partition=0, current_leader_epoch=-1, snapshot_id=S.SnapshotId(
            end_offset=1, epoch=0), position=0)])]))
    return r.topics[0].partitions[0].error_code


TOPIC, GROUP, CLUSTER = R.TOPIC, R.GROUP, R.CLUSTER
L, PRE = P.LITERAL, P.PREFIXED
# (request, what it needs, the refusal, what counts as getting through)
ROWS = {
    "produce": (_produce, [(TOPIC, "data", L, O.WRITE)], TOPIC_AUTH, {0}),
    "fetch": (_fetch, [(TOPIC, "da", PRE, O.READ)], TOPIC_AUTH, {0}),
    "list_offsets": (_list_offsets, [(TOPIC, "data", L, O.DESCRIBE)], TOPIC_AUTH, {0}),
    "metadata": (_metadata, [(TOPIC, "*", L, O.READ)], TOPIC_AUTH, {0}),  # READ implies DESCRIBE
    "offset_for_leader_epoch": (_offset_for_leader_epoch, [(TOPIC, "data", L, O.DESCRIBE)], TOPIC_AUTH, {0}),
    "create_topics": (_create_topics, [(CLUSTER, "kafka-cluster", L, O.CREATE)], TOPIC_AUTH, {0}),
    "delete_records": (_delete_records, [(TOPIC, "data", L, O.DELETE)], TOPIC_AUTH, {0}),
    "fetch_snapshot": (_fetch_snapshot, [(TOPIC, "snap", L, O.READ)], TOPIC_AUTH,
                       {ErrorCode.SNAPSHOT_NOT_FOUND}),
    "find_coordinator": (_find_coordinator, [(GROUP, "g", L, O.DESCRIBE)], GROUP_AUTH, {0}),
    "join_group": (_join_group, [(GROUP, "g", L, O.READ)], GROUP_AUTH, {0, ErrorCode.MEMBER_ID_REQUIRED}),
    "offset_commit": (_offset_commit, [(GROUP, "g", L, O.READ), (TOPIC, "data", L, O.READ)], GROUP_AUTH, {0}),
    "offset_fetch": (_offset_fetch, [(GROUP, "*", L, O.DESCRIBE)], GROUP_AUTH, {0}),
    "describe_groups": (_describe_groups, [(GROUP, "g", L, O.DESCRIBE)], GROUP_AUTH, {0}),
    "delete_groups": (_delete_groups, [(GROUP, "nobody", PRE, O.DELETE)], GROUP_AUTH,
                      {ErrorCode.GROUP_ID_NOT_FOUND}),
    "describe_quorum": (_describe_quorum, [(CLUSTER, "kafka-cluster", L, O.DESCRIBE)], CLUSTER_AUTH, {0}),
    "describe_acls": (_describe_acls, [(CLUSTER, "kafka-cluster", L, O.DESCRIBE)], CLUSTER_AUTH, {0}),
    "create_acls": (_create_acls, [(CLUSTER, "kafka-cluster", L, O.ALTER)], CLUSTER_AUTH, {0}),
    "describe_user_scram_credentials": (_describe_scram, [(CLUSTER, "kafka-cluster", L, O.DESCRIBE)],
                                        CLUSTER_AUTH, {0}),
    "init_producer_id": (_init_producer_id, [(CLUSTER, "kafka-cluster", L, O.IDEMPOTENT_WRITE)], CLUSTER_AUTH,
                         {0}),
}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_each_api_is_refused_without_its_acl_allowed_with_it_and_refused_after_delete_acls(node, row):
    call, needs, refusal, through = ROWS[row]
    _revoke_all(node)
    alice = _login(node, ALICE)
    try:
        assert call(alice) == refusal, f"{row} without an ACL"
        _grant(node, needs)
        wait_until(lambda: call(alice) in through, 15, f"{row} to be allowed")
        assert _revoke_all(node) >= len(needs)  # (alice's CreateAcls made one of hers too)
        wait_until(lambda: call(alice) == refusal, 15, f"{row} to be refused after DeleteAcls")
    finally:
        alice.close()


def test_offset_commit_needs_the_topic_too(node):
    _revoke_all(node)
    _grant(node, [(GROUP, "g", L, O.READ)])
    alice = _login(node, ALICE)
    try:
        wait_until(lambda: _offset_commit(alice) == TOPIC_AUTH, 15, "the topic refused, the group allowed")
    finally:
        alice.close()
        _revoke_all(node)


def test_a_deny_beats_a_wildcard_allow_and_listings_leave_out_what_alice_may_not_see(node):
    _revoke_all(node)
    with _admin(node) as admin:
        Creation = m.CreateAclsRequest.AclCreation
        results = admin.request(api.CREATE_ACLS, 3, m.CreateAclsRequest(creations=[
            Creation(resource_type=R.TOPIC, resource_name="*", resource_pattern_type=L, principal="User:alice",
                     host="*", operation=O.ALL, permission_type=Permission.ALLOW),
            Creation(resource_type=R.TOPIC, resource_name="snap", resource_pattern_type=L, principal="User:alice",
                     host="*", operation=O.DESCRIBE, permission_type=Permission.DENY)])).results
        assert [r.error_code for r in results] == [0, 0]
    alice = _login(node, ALICE)
    try:
        def listed():
            r = alice.request(api.METADATA, 12, m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                                  include_topic_authorized_operations=True))
            return {t.name: t.topic_authorized_operations for t in r.topics}
        wait_until(lambda: set(listed()) == {"data"} or set(listed()) >= {"data"} and "snap" not in listed(), 15,
                   "the listing without snap")
        topics = listed()
        assert "snap" not in topics and "data" in topics
        everything_on_a_topic = sum(1 << op for op in (O.READ, O.WRITE, O.CREATE, O.DESCRIBE, O.DELETE, O.ALTER,
                                                       O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS))
        assert topics["data"] == everything_on_a_topic
        assert _produce(alice, "snap") == 0  # WRITE is allowed by the wildcard: only DESCRIBE is denied
        assert _list_offsets(alice) == 0 and _metadata(alice) == 0
    finally:
        alice.close()
        _revoke_all(node)


def test_metadata_says_what_the_caller_may_do_with_the_cluster(node):
    _revoke_all(node)
    request = m.MetadataRequest(topics=[], allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                                include_topic_authorized_operations=False)
    cluster_operations = (O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE,
                          O.ALTER, O.DESCRIBE)
    with _admin(node) as admin:  # a super user
        assert admin.request(api.METADATA, 10, request).cluster_authorized_operations == \
            sum(1 << op for op in cluster_operations)
    _grant(node, [(CLUSTER, "kafka-cluster", L, O.ALTER)])
    alice = _login(node, ALICE)
    try:
        wait_until(lambda: alice.request(api.METADATA, 10, request).cluster_authorized_operations ==
                   (1 << O.ALTER) | (1 << O.DESCRIBE), 15, "ALTER (and the DESCRIBE it implies) for alice")
        unasked = m.MetadataRequest(topics=[], allow_auto_topic_creation=False)
        assert alice.request(api.METADATA, 10, unasked).cluster_authorized_operations == -2147483648
    finally:
        alice.close()
        _revoke_all(node)


def test_acl_requests_are_validated_and_described_as_created(node):
    _revoke_all(node)
    Creation = m.CreateAclsRequest.AclCreation
    with _admin(node) as admin:
        results = admin.request(api.CREATE_ACLS, 3, m.CreateAclsRequest(creations=[
            Creation(resource_type=R.TOPIC, resource_name="orders-", resource_pattern_type=PRE,
                     principal="User:alice", host="*", operation=O.WRITE, permission_type=Permission.ALLOW),
            Creation(resource_type=R.TOPIC, resource_name="x", resource_pattern_type=L, principal="alice",
                     host="*", operation=O.READ, permission_type=Permission.ALLOW),
            Creation(resource_type=R.GROUP, resource_name="g", resource_pattern_type=P.MATCH,
                     principal="User:alice", host="*", operation=O.READ, permission_type=Permission.ALLOW)])).results
        assert [r.error_code for r in results] == [0, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]
        described = admin.request(api.DESCRIBE_ACLS, 3, m.DescribeAclsRequest(
            resource_type_filter=R.TOPIC, resource_name_filter="orders-eu", pattern_type_filter=P.MATCH,
            principal_filter=None, host_filter=None, operation=O.ANY, permission_type=Permission.ANY))
        assert described.error_code == 0
        assert [(r.resource_type, r.resource_name, r.pattern_type,
                 [(a.principal, a.host, a.operation, a.permission_type) for a in r.acls])
                for r in described.resources] == [
            (R.TOPIC, "orders-", PRE, [("User:alice", "*", O.WRITE, Permission.ALLOW)])]
        unknown = admin.request(api.DESCRIBE_ACLS, 3, m.DescribeAclsRequest(
            resource_type_filter=R.UNKNOWN, resource_name_filter=None, pattern_type_filter=P.ANY,
            principal_filter=None, host_filter=None, operation=O.ANY, permission_type=Permission.ANY))
        assert unknown.error_code == ErrorCode.INVALID_REQUEST
    assert _revoke_all(node) == 1


def test_without_an_authorizer_the_acl_apis_say_security_is_disabled(kraftd):
    client = WireClient(kraftd.bootstrap, timeout=10)
    try:
        assert _create_acls(client) == ErrorCode.SECURITY_DISABLED
        assert _describe_acls(client) == ErrorCode.SECURITY_DISABLED
        deleted = client.request(api.DELETE_ACLS, 3, m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=R.ANY, resource_name_filter=None, pattern_type_filter=P.ANY, principal_filter=None,
            host_filter=None, operation=O.ANY, permission_type=Permission.ANY)]))
        assert deleted.filter_results[0].error_code == ErrorCode.SECURITY_DISABLED
        assert _produce(client, "anything") != TOPIC_AUTH  # and nothing is refused
    finally:
        client.close()
