"""Issue 24, item 4: the ACL rules, Kafka's (StandardAuthorizer): which bindings cover a resource
(LITERAL, the LITERAL wildcard, PREFIXED), principal and host matching (`User:*`, `*`), DENY
over ALLOW, the operations an ALLOW implies, super users and nodes, the no-ACL rule; the ACLs
as metadata records in the image and its snapshots; DescribeAcls/DeleteAcls filters."""
from __future__ import annotations

import uuid

import pytest

from kraftd.protocol import messages as m
from kraftd.protocol.metadata_records import decode_metadata_record, encode_metadata_record
from kraftd.quorum.authorizer import AclAuthorizer, AllowEveryone, operations_bitfield
from kraftd.quorum.metadata.acls import (AclBinding, AclFilter, Operation as O, PatternType as P,
                                         Permission, ResourceType as R, creation_problem)
from kraftd.quorum.metadata.image import MetadataImage, acl_key
from kraftd.quorum.peer import Peer

ALLOW, DENY = Permission.ALLOW, Permission.DENY
ALICE = Peer("10.0.0.1:5000", principal="User:alice")
BOB = Peer("10.0.0.2:5000", principal="User:bob")


def _record(b: AclBinding, acl_id=None):
    return m.AccessControlEntryRecord(id=acl_id or uuid.uuid4(), resource_type=b.resource_type,
                                      resource_name=b.resource_name, pattern_type=b.pattern_type,
                                      principal_name=b.principal, host=b.host, operation=b.operation,
                                      permission_type=b.permission)


def acl(name, op, principal="User:alice", *, kind=R.TOPIC, pattern=P.LITERAL, host="*", permission=ALLOW):
    return AclBinding(kind, name, pattern, principal, host, op, permission)


def authorizer(*bindings, super_users=(), allow_if_none=False):
    image = MetadataImage()
    for b in bindings:
        image.replay(_record(b))
    return AclAuthorizer(lambda: image, super_users, allow_if_none), image


def test_a_literal_allow_covers_exactly_its_topic_for_exactly_its_principal():
    auth, _ = authorizer(acl("orders", O.WRITE))
    assert auth.allows(ALICE, O.WRITE, R.TOPIC, "orders")
    assert not auth.allows(ALICE, O.WRITE, R.TOPIC, "orders-eu")
    assert not auth.allows(ALICE, O.READ, R.TOPIC, "orders")
    assert not auth.allows(BOB, O.WRITE, R.TOPIC, "orders")
    assert not auth.allows(ALICE, O.WRITE, R.GROUP, "orders")  # another resource type


def test_the_wildcard_name_prefixes_and_user_star():
    auth, _ = authorizer(acl("*", O.READ), acl("logs-", O.WRITE, pattern=P.PREFIXED),
                         acl("shared", O.DESCRIBE, "User:*"))
    assert auth.allows(ALICE, O.READ, R.TOPIC, "anything")
    assert auth.allows(ALICE, O.WRITE, R.TOPIC, "logs-eu") and auth.allows(ALICE, O.WRITE, R.TOPIC, "logs-")
    assert not auth.allows(ALICE, O.WRITE, R.TOPIC, "log")
    assert auth.allows(BOB, O.DESCRIBE, R.TOPIC, "shared")
    assert not auth.allows(Peer("x:1", principal="Group:ops"), O.DESCRIBE, R.TOPIC, "shared")  # User:* is users


def test_deny_wins_over_any_allow_and_implies_nothing():
    auth, _ = authorizer(acl("*", O.ALL), acl("secret", O.READ, permission=DENY),
                         acl("pay-", O.WRITE, pattern=P.PREFIXED, permission=DENY))
    assert auth.allows(ALICE, O.READ, R.TOPIC, "public")
    assert not auth.allows(ALICE, O.READ, R.TOPIC, "secret")
    assert auth.allows(ALICE, O.DESCRIBE, R.TOPIC, "secret")  # a DENY of READ does not deny DESCRIBE
    assert not auth.allows(ALICE, O.WRITE, R.TOPIC, "pay-in")
    everything_denied, _ = authorizer(acl("t", O.WRITE), acl("t", O.ALL, permission=DENY))
    assert not everything_denied.allows(ALICE, O.WRITE, R.TOPIC, "t")


@pytest.mark.parametrize("granted,implied", [(O.READ, O.DESCRIBE), (O.WRITE, O.DESCRIBE), (O.DELETE, O.DESCRIBE),
                                             (O.ALTER, O.DESCRIBE), (O.ALTER_CONFIGS, O.DESCRIBE_CONFIGS)])
def test_an_allow_implies_describe_as_kafkas_does(granted, implied):
    auth, _ = authorizer(acl("t", granted))
    assert auth.allows(ALICE, implied, R.TOPIC, "t")
    assert not auth.allows(ALICE, O.CREATE, R.TOPIC, "t")


def test_hosts_must_match_unless_star():
    auth, _ = authorizer(acl("t", O.READ, host="10.0.0.1"))
    assert auth.allows(ALICE, O.READ, R.TOPIC, "t")
    assert not auth.allows(Peer("10.9.9.9:1", principal="User:alice"), O.READ, R.TOPIC, "t")


def test_super_users_and_nodes_may_do_anything_even_against_a_deny():
    auth, _ = authorizer(acl("*", O.ALL, "User:*", permission=DENY), super_users={"User:admin"})
    assert auth.allows(Peer("h:1", principal="User:admin"), O.ALTER, R.CLUSTER)
    assert auth.allows(Peer("h:1", node_id=2, principal="User:kraftd-node-2"), O.CLUSTER_ACTION, R.CLUSTER)
    assert not auth.allows(ALICE, O.READ, R.TOPIC, "t")


def test_a_resource_no_acl_covers_is_refused_unless_allow_everyone_if_no_acl_found():
    strict, _ = authorizer(acl("other", O.READ, "User:bob"))
    lenient, _ = authorizer(acl("other", O.READ, "User:bob"), allow_if_none=True)
    assert not strict.allows(ALICE, O.READ, R.TOPIC, "t")
    assert lenient.allows(ALICE, O.READ, R.TOPIC, "t")
    assert not lenient.allows(ALICE, O.READ, R.TOPIC, "other")  # covered (for bob): the ACLs decide


def test_acl_changes_are_seen_at_once_and_removals_too():
    auth, image = authorizer()
    binding = acl("t", O.READ)
    acl_id = uuid.uuid4()
    assert not auth.allows(ALICE, O.READ, R.TOPIC, "t")
    image.replay(_record(binding, acl_id))
    assert auth.allows(ALICE, O.READ, R.TOPIC, "t")
    image.replay(m.RemoveAccessControlEntryRecord(id=acl_id))
    assert not auth.allows(ALICE, O.READ, R.TOPIC, "t")


def test_authorized_operations_are_kafkas_bitfield_of_supported_operations():
    auth, _ = authorizer(acl("t", O.READ), acl("t", O.WRITE), acl("kafka-cluster", O.DESCRIBE, kind=R.CLUSTER))
    assert auth.authorized_operations(ALICE, R.TOPIC, "t") == (1 << O.READ) | (1 << O.WRITE) | (1 << O.DESCRIBE)
    assert auth.authorized_operations(ALICE, R.CLUSTER, "kafka-cluster") == 1 << O.DESCRIBE
    # no authorizer: everything the resource type supports
    assert AllowEveryone().authorized_operations(ALICE, R.GROUP, "g") == operations_bitfield(
        [O.READ, O.DESCRIBE, O.DELETE]) == 0b101001000


def test_writing_some_topic_is_what_an_idempotent_producer_needs():
    auth, _ = authorizer(acl("t", O.WRITE), acl("u", O.WRITE, "User:bob"), acl("u", O.WRITE, "User:bob", permission=DENY))
    assert auth.allows_any(ALICE, O.WRITE, R.TOPIC)
    assert not auth.allows_any(BOB, O.WRITE, R.TOPIC)  # its only WRITE is denied


def test_acls_are_replayed_and_a_snapshot_of_the_image_recreates_them():
    image = MetadataImage()
    kept, gone = uuid.uuid4(), uuid.uuid4()
    binding = acl("billing-", O.READ, pattern=P.PREFIXED, kind=R.GROUP, host="10.0.0.7", permission=DENY)
    touched = set(image.replay(_record(binding, kept)))
    touched |= set(image.replay(_record(acl("t", O.WRITE), gone)))
    touched |= set(image.replay(m.RemoveAccessControlEntryRecord(id=gone)))
    assert image.acls == {kept: binding}
    snapshot = [image.entity_record(key) for key in sorted(touched)]
    assert sorted(touched) == sorted([acl_key(kept), acl_key(gone)]) and snapshot.count(None) == 1
    restored = MetadataImage()
    for record in snapshot:
        if record is not None:
            restored.replay(decode_metadata_record(encode_metadata_record(record)))
    assert restored.acls == image.acls


def test_creation_is_refused_for_what_kafka_refuses():
    ok = acl("t", O.READ)
    assert creation_problem(ok) is None
    assert "resource type" in creation_problem(acl("t", O.READ, kind=R.ANY))
    assert "pattern type" in creation_problem(acl("t", O.READ, pattern=P.MATCH))
    assert "operation" in creation_problem(acl("t", O.ANY))
    assert "permission" in creation_problem(acl("t", O.READ, permission=Permission.ANY))
    assert "principal" in creation_problem(acl("t", O.READ, "alice"))
    assert "empty" in creation_problem(acl("", O.READ))
    assert "kafka-cluster" in creation_problem(acl("c", O.ALTER, kind=R.CLUSTER))
    assert "not supported" in creation_problem(acl("g", O.WRITE, kind=R.GROUP))
    assert creation_problem(acl("g", O.ALL, kind=R.GROUP)) is None


def _filter(kind=R.ANY, name=None, pattern=P.ANY, principal=None, host=None, op=O.ANY, permission=Permission.ANY):
    return AclFilter(kind, name, pattern, principal, host, op, permission)


def test_filters_any_match_literal_and_prefixed():
    exact = acl("orders", O.READ)
    star = acl("*", O.READ)
    prefix = acl("ord", O.WRITE, pattern=P.PREFIXED)
    other = acl("users", O.READ, kind=R.GROUP, permission=DENY)
    bindings = [exact, star, prefix, other]

    def matched(f):
        return [b for b in bindings if f.matches(b)]
    assert matched(_filter()) == bindings
    assert matched(_filter(name="orders")) == [exact]                       # ANY: exactly that name
    assert matched(_filter(name="orders", pattern=P.MATCH)) == [exact, star, prefix]  # all that apply
    assert matched(_filter(pattern=P.PREFIXED)) == [prefix]
    assert matched(_filter(name="ord", pattern=P.LITERAL)) == []
    assert matched(_filter(kind=R.GROUP)) == [other]
    assert matched(_filter(permission=DENY)) == [other]
    assert matched(_filter(op=O.WRITE, principal="User:alice")) == [prefix]
    assert matched(_filter(host="10.0.0.1")) == []
    assert _filter(kind=R.UNKNOWN).problem() is not None and _filter().problem() is None
