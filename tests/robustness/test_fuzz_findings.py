"""Regression tests for what the coverage-guided fuzzers (fuzz/, `make fuzz`) found.

Each test names the input that found it; bench/README.md, "Fuzzing", has the runs.
"""
from __future__ import annotations

from tests.quorum.node_context import NodeTestContext


class _CountingGroups(dict):
    """The node's {group key: RaftGroup}, counting the walks over every group."""

    walks = 0

    def values(self):
        type(self).walks += 1
        return super().values()


def test_creating_a_topic_walks_the_groups_a_bounded_number_of_times(tmp_path):
    """fuzz/requests.py, first long run (3.5M inputs): a CreateTopics v7 of one snapshot-policy
    topic with 8,514 partitions ran past the 10 s per-input timeout (21.7 s under atheris).
    Each new partition's group computed the node's leader-epoch floor by walking every group
    already hosted: quadratic in the partitions of one request, which holds the event loop.
    Fixed by 045cff5 (the floor is computed once per topic); the work per topic must not grow
    with partitions x groups."""
    ctx = NodeTestContext.builder(tmp_path).with_topic("existing", 50).build()
    groups = _CountingGroups(ctx.node.replication.groups)
    ctx.node.replication.groups = groups
    _CountingGroups.walks = 0
    assert ctx.create_topic("fuzz-8514", 400, {"cleanup.policy": "snapshot"}).error_code == 0
    assert len(groups) == 50 + 400
    assert _CountingGroups.walks < 20, f"{_CountingGroups.walks} walks over every group for one topic of 400 partitions"
