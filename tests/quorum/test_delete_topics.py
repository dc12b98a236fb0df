"""DeleteTopics on a single node: by name (v0–5) and by id (v6); the files go, the name can be
reused, and what was deleted stays deleted across a restart."""
from __future__ import annotations

from pathlib import Path

import pytest

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import build_batch
from kraftd.quorum.raft.election_state import ElectionState
from kraftd.server.election_state_file import FileElectionStore
from kraftd.storage.background_writes import background_writes

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
    background_writes().barrier()  # the directory is renamed and removed in the background
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


def _stored_states(data_dir) -> dict:
    return FileElectionStore(Path(data_dir) / "quorum-state").load()


def test_a_deleted_topics_election_states_leave_the_quorum_state_file(ctx, tmp_path):
    _create(ctx, "gone")
    ctx.flush()
    assert {("gone", 0), ("gone", 1)} <= set(_stored_states(tmp_path))
    ctx.respond(m.DeleteTopicsRequest(topic_names=["gone"], timeout_ms=1000), 5)
    ctx.flush()
    assert not {k for k in _stored_states(tmp_path) if k[0] == "gone"}


def test_states_left_by_a_deletion_cut_short_are_dropped_at_start(ctx, tmp_path):
    """The node deleted the topic and stopped before the states' removal was written: at the
    next start the states of topics it no longer has go, so a topic created again under the
    name does not start from the old one's epoch and vote."""
    _create(ctx, "gone", partitions=1)
    ctx.respond(m.DeleteTopicsRequest(topic_names=["gone"], timeout_ms=1000), 5)
    ctx.node.close()
    FileElectionStore(Path(tmp_path) / "quorum-state").write({("gone", 0): ElectionState(7, 1, 1)})
    ctx = ctx.restart()
    assert ("gone", 0) not in _stored_states(tmp_path)
    _create(ctx, "gone", partitions=1)
    ctx.flush()
    assert _stored_states(tmp_path)[("gone", 0)].epoch < 7
    assert ctx.node.topics.partition("gone", 0).raft.epoch < 7
