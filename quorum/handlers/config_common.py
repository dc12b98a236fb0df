"""What DescribeConfigs and IncrementalAlterConfigs share: resource types, where a topic's
explicit configs are read (the committed metadata image in a cluster, where a node may host
none of the topic's partitions; the catalog on a single node), and applying Kafka's four
incremental operations to them."""
from __future__ import annotations

from ...protocol.errors import ErrorCode

from ..metadata.acls import ResourceType
from ..topic_config import LIST_CONFIGS, InvalidTopicConfig, TopicConfig, policy_change_problem

TOPIC = 2   # Kafka's ConfigResource.Type
BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # Kafka's AlterConfigOp.OpType


class ConfigProblem(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def topic_configs(ctx, name: str, peer, operation, image=None) -> dict[str, str]:
    """The topic's explicit configs, if the caller may see or alter them (`operation`), from
    `image` (the controller's working one) or else the committed one."""
    if not ctx.authorizer.allows(peer, operation, ResourceType.TOPIC, name):
        raise ConfigProblem(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if ctx.plane is not None:
        image = image or ctx.plane.image
        if image.topic(name) is None:
            raise ConfigProblem(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        return dict(image.configs.get(name, {}))
    if ctx.topics.get(name) is None:
        raise ConfigProblem(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    return ctx.topics.explicit_configs(name)


def altered(current: dict[str, str], changes, node_config) -> tuple[dict[str, str], TopicConfig]:
    """`current` after the AlterableConfigs `changes`, and what it resolves to; ConfigProblem if
    an operation or the result is invalid."""
    names = [c.name for c in changes]
    if len(set(names)) != len(names):
        raise ConfigProblem(ErrorCode.INVALID_REQUEST, "A config key appears more than once in the request.")
    defaults = TopicConfig.resolve({}, node_config).to_kafka_configs()
    out = dict(current)
    for change in changes:
        key, op = change.name, change.config_operation
        if key not in defaults:
            raise ConfigProblem(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
        if op == SET:
            if change.value is None:
                raise ConfigProblem(ErrorCode.INVALID_REQUEST, f"Null value not supported for: {key}")
            out[key] = change.value
        elif op == DELETE:
            out.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            if key not in LIST_CONFIGS:
                raise ConfigProblem(ErrorCode.INVALID_CONFIG,
                                    f"Config value {'append' if op == APPEND else 'subtract'} is not allowed for "
                                    f"config key: {key}")
            items = [v for v in out.get(key, defaults[key]).split(",") if v]
            given = [v.strip() for v in (change.value or "").split(",") if v.strip()]
            items = items + [v for v in given if v not in items] if op == APPEND else [v for v in items if v not in given]
            out[key] = ",".join(items)
        else:
            raise ConfigProblem(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
    try:
        before = TopicConfig.resolve(current, node_config)
        after = TopicConfig.resolve(out, node_config)
    except InvalidTopicConfig as exc:
        raise ConfigProblem(ErrorCode.INVALID_CONFIG, str(exc)) from None
    problem = policy_change_problem(before, after)
    if problem:
        raise ConfigProblem(ErrorCode.INVALID_CONFIG, problem)
    return out, after
