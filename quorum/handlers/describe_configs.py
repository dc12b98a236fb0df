"""DescribeConfigs v1–4: a topic's configs (every one kraftd knows, with its value, whether the
topic sets it or takes the default, and Kafka's config type), answered by any node; the
node's own broker configs, read-only (they come from its settings file). A topic needs
DESCRIBE_CONFIGS on it, the broker DESCRIBE_CONFIGS on the cluster."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import DescribeConfigsResponse

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from ..topic_config import CONFIG_TYPES, TopicConfig
from .config_common import BROKER, TOPIC, ConfigProblem, topic_configs

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym
TOPIC_SOURCE, STATIC_BROKER_SOURCE, DEFAULT_SOURCE = 1, 4, 5  # Kafka's ConfigSource


def handle(ctx, header, request, now_ms, peer):
    results = []
    for resource in request.resources:
        try:
            configs = _describe(ctx, resource, peer)
            results.append(_result(resource, ErrorCode.NONE, None, configs, request.include_synonyms))
        except ConfigProblem as problem:
            results.append(_result(resource, problem.code, problem.message, [], False))
    return Respond(DescribeConfigsResponse(throttle_time_ms=0, results=results))


def _describe(ctx, resource, peer) -> list[tuple[str, str | None, bool, int, int]]:
    """(name, value, read only, source, type) of each config asked for."""
    wanted = resource.configuration_keys
    if resource.resource_type == TOPIC:
        explicit = topic_configs(ctx, resource.resource_name, peer, Operation.DESCRIBE_CONFIGS)
        values = TopicConfig.resolve(explicit, ctx.config).to_kafka_configs()
        rows = [(k, v, False, TOPIC_SOURCE if k in explicit else DEFAULT_SOURCE, CONFIG_TYPES.get(k, 2))
                for k, v in values.items()]
    elif resource.resource_type == BROKER:
        if not ctx.authorizer.allows(peer, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
            raise ConfigProblem(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        me = str(ctx.config.node_id)
        if resource.resource_name not in ("", me):
            raise ConfigProblem(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {me} or empty string, "
                                                           f"but received {resource.resource_name}")
        rows = [(k, v, True, STATIC_BROKER_SOURCE, t) for k, v, t in _broker_configs(ctx.config)]
    else:
        raise ConfigProblem(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.resource_type}")
    return [r for r in rows if wanted is None or r[0] in wanted]


def _broker_configs(config) -> list[tuple[str, str, int]]:
    """The node's settings that have a Kafka broker config name (kraftd.toml sets them)."""
    rows = [("node.id", config.node_id, 3), ("num.partitions", config.default_partitions, 3),
            ("auto.create.topics.enable", config.auto_create_topics, 1), ("log.segment.bytes", config.segment_bytes, 3),
            ("log.retention.ms", config.retention_ms, 5), ("log.retention.bytes", config.retention_bytes, 5),
            ("message.max.bytes", config.message_max_bytes, 3),
            ("offsets.topic.num.partitions", config.offsets_topic_num_partitions, 3),
            ("log.cleaner.enable", config.log_cleaner_enable, 1),
            ("log.cleaner.backoff.ms", config.log_cleaner_backoff_ms, 5),
            ("log.cleaner.io.max.bytes.per.second", config.log_cleaner_io_max_bytes_per_second, 6)]
    if config.default_replication_factor is not None:
        rows.append(("default.replication.factor", config.default_replication_factor, 3))
    return [(k, str(v).lower() if isinstance(v, bool) else str(v), t) for k, v, t in rows]


def _result(resource, code, message, rows, synonyms: bool) -> Result:
    return Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=[
                      Entry(name=k, value=v, read_only=ro, is_default=source == DEFAULT_SOURCE, config_source=source,
                            is_sensitive=False, config_type=t, documentation=None,
                            synonyms=[Synonym(name=k, value=v, source=source)] if synonyms else [])
                      for k, v, ro, source, t in rows])
