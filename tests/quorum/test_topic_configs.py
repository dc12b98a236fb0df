"""DescribeConfigs and IncrementalAlterConfigs through the node (single node, real files)."""
import pytest

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode

from .node_context import NodeTestContext

Q = m.DescribeConfigsRequest
A = m.IncrementalAlterConfigsRequest
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def ctx(tmp_path):
    return NodeTestContext.builder(tmp_path).with_topic("t", 1, {"retention.ms": "1000"}).build()


def describe(ctx, name="t", keys=None, version=4, resource_type=2, synonyms=False):
    request = Q(resources=[Q.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                     configuration_keys=keys)],
                include_synonyms=synonyms, include_documentation=False)
    return ctx.respond(request, version).results[0]


def alter(ctx, *ops, name="t", validate_only=False, version=1):
    request = A(resources=[A.AlterConfigsResource(resource_type=2, resource_name=name, configs=[
        A.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])], validate_only=validate_only)
    return ctx.respond(request, version).responses[0]


def values(result) -> dict:
    return {c.name: (c.value, c.config_source) for c in result.configs}


def test_describe_gives_every_topic_config_and_where_it_comes_from(ctx):
    result = describe(ctx)
    assert result.error_code == 0
    got = values(result)
    assert got["retention.ms"] == ("1000", 1) and got["cleanup.policy"] == ("delete", 5)
    assert got["min.cleanable.dirty.ratio"] == ("0.5", 5) and got["delete.retention.ms"] == ("86400000", 5)
    types = {c.name: c.config_type for c in result.configs}
    assert types["cleanup.policy"] == 7 and types["retention.ms"] == 5 and types["segment.bytes"] == 3
    only = describe(ctx, keys=["segment.ms"], synonyms=True)
    assert [(c.name, c.value, [s.name for s in c.synonyms]) for c in only.configs] == [
        ("segment.ms", "604800000", ["segment.ms"])]
    assert describe(ctx, version=1).error_code == 0
    assert describe(ctx, name="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_the_broker_resource_is_the_nodes_settings_read_only(ctx):
    result = describe(ctx, name="1", resource_type=4)
    got = {c.name: (c.value, c.read_only) for c in result.configs}
    assert result.error_code == 0 and got["log.cleaner.enable"] == ("true", True)
    assert describe(ctx, name="7", resource_type=4).error_code == ErrorCode.INVALID_REQUEST


def test_set_delete_append_subtract_and_validate_only(ctx):
    assert alter(ctx, ("cleanup.policy", SET, "compact"), validate_only=True).error_code == 0
    assert values(describe(ctx))["cleanup.policy"] == ("delete", 5)
    assert alter(ctx, ("cleanup.policy", APPEND, "compact"), ("retention.ms", DELETE, None)).error_code == 0
    got = values(describe(ctx))
    assert got["cleanup.policy"] == ("compact,delete", 1) and got["retention.ms"] == ("604800000", 5)
    partition = ctx.node.topics.partition("t", 0)
    assert partition.config.is_compacted and partition.config.deletes and partition.log.gaps_allowed
    assert alter(ctx, ("cleanup.policy", SUBTRACT, "delete"), ("segment.bytes", SET, "4096")).error_code == 0
    assert values(describe(ctx))["cleanup.policy"] == ("compact", 1)
    assert partition.log.segment_bytes == 4096 and not partition.config.deletes
    again = ctx.restart()  # the catalog kept them
    assert values(describe(again))["cleanup.policy"] == ("compact", 1)
    assert again.node.topics.partition("t", 0).log.gaps_allowed


@pytest.mark.parametrize("ops, code", [
    ([("cleanup.policy", SET, "snapshot")], ErrorCode.INVALID_CONFIG),
    ([("retention.ms", APPEND, "5")], ErrorCode.INVALID_CONFIG),
    ([("no.such.config", SET, "1")], ErrorCode.INVALID_CONFIG),
    ([("retention.ms", SET, "x")], ErrorCode.INVALID_CONFIG),
    ([("retention.ms", SET, "5"), ("retention.ms", DELETE, None)], ErrorCode.INVALID_REQUEST),
    ([("retention.ms", SET, None)], ErrorCode.INVALID_REQUEST),
])
def test_invalid_alterations_change_nothing(ctx, ops, code):
    assert alter(ctx, *ops).error_code == code
    assert values(describe(ctx))["retention.ms"] == ("1000", 1)


def test_unknown_topics_and_broker_resources_are_refused(ctx):
    assert alter(ctx, ("retention.ms", SET, "5"), name="nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    request = A(resources=[A.AlterConfigsResource(resource_type=4, resource_name="1", configs=[])], validate_only=False)
    assert ctx.respond(request, 0).responses[0].error_code == ErrorCode.INVALID_REQUEST


def test_acls_decide_who_may_describe_and_alter(ctx):
    from kraftd.quorum.authorizer import AclAuthorizer
    from kraftd.quorum.metadata.image import MetadataImage

    from .test_authorizer import _record, acl
    from kraftd.quorum.metadata.acls import Operation as O

    image = MetadataImage()
    image.replay(_record(acl("t", O.DESCRIBE_CONFIGS)))
    ctx.node._ctx.authorizer = AclAuthorizer(lambda: image, (), False)
    alice = {"principal": "User:alice"}
    request = Q(resources=[Q.DescribeConfigsResource(resource_type=2, resource_name="t", configuration_keys=None),
                           Q.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None)],
                include_synonyms=False, include_documentation=False)
    topic, broker = ctx.respond(request, 4, **alice).results
    assert topic.error_code == 0 and broker.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    change = A(resources=[A.AlterConfigsResource(resource_type=2, resource_name="t", configs=[
        A.AlterableConfig(name="retention.ms", config_operation=SET, value="5")])], validate_only=False)
    assert ctx.respond(change, 1, **alice).responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert ctx.node.topics.explicit_configs("t") == {"retention.ms": "1000"}
