"""DeleteTopics on a single node: by name (v0–5) and by id (v6); the files go, the name can be
reused, and what was deleted stays deleted across a restart."""
from __future__ import annotations

from pathlib import Path

import pytest

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import build_batch

from .node_context import NodeTestContext


@pytest.fixture
def ctx(tmp_path):
    return NodeTestContext.builder(tmp_path).build()


def _create(ctx, name: str, partitions: int = 2):
    request = m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=-1, assignments=[], configs=[])],
        timeout_ms=1000, validate_only=False)
    result = ctx.respond(request, 5).topics[0]
    assert result.error_code == 0
    return result.topic_id


def test_delete_by_name_removes_the_files_and_frees_the_name(ctx, tmp_path):
    _create(ctx, "gone")
    ctx.produce("gone", 0, build_batch([(b"k", b"v", None, 1)]))
    assert (Path(tmp_path) / "gone-0").is_dir()
    response = ctx.respond(m.DeleteTopicsRequest(topic_names=["gone", "never"], timeout_ms=1000), 5)
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("gone", 0), ("never", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert not (Path(tmp_path) / "gone-0").exists() and not (Path(tmp_path) / "gone-1").exists()
    metadata = ctx.respond(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="gone")],
                                             allow_auto_topic_creation=False), 9)
    assert metadata.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    _create(ctx, "gone", partitions=1)  # the name can be used again
    ctx = ctx.restart()
    metadata = ctx.respond(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="gone")],
                                             allow_auto_topic_creation=False), 9)
    assert len(metadata.topics[0].partitions) == 1


def test_delete_by_id_in_v6(ctx):
    topic_id = _create(ctx, "by-id")
    State = m.DeleteTopicsRequest.DeleteTopicState
    response = ctx.respond(m.DeleteTopicsRequest(topics=[State(name=None, topic_id=topic_id)], timeout_ms=1000), 6)
    assert [(r.name, r.topic_id, r.error_code) for r in response.responses] == [("by-id", topic_id, 0)]
    again = ctx.respond(m.DeleteTopicsRequest(topics=[State(name=None, topic_id=topic_id)], timeout_ms=1000), 6)
    assert again.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
