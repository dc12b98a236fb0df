"""The rebalance planner (kraftd/commands/balance_plan.py), over random assignments (hypothesis):
every node within one replica of even, over the cluster and within each topic."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kraftd.commands.balance_plan import moves, plan, spread


@st.composite
def clusters(draw):
    old_nodes = draw(st.integers(1, 6))
    assignment = {}
    for topic in range(draw(st.integers(1, 4))):
        partitions = draw(st.integers(1, 30))
        rf = draw(st.integers(1, min(3, old_nodes)))
        assignment.update({(f"t{topic}", p): [((p + k) % old_nodes) + 1 for k in range(rf)]
                           for p in range(partitions)})
    nodes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=7, unique=True))
    return assignment, nodes


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_every_node_ends_within_one_replica_of_even_and_every_partition_keeps_its_factor(case):
    assignment, nodes = case
    target = plan(assignment, nodes)
    assert set(target) == set(assignment)
    for key, replicas in target.items():
        assert len(set(replicas)) == len(replicas) == min(len(assignment[key]), len(nodes))
        assert set(replicas) <= set(nodes)
    replicas, leaders = spread(target, nodes)
    assert max(replicas.values()) - min(replicas.values()) <= 1, replicas
    for topic in {k[0] for k in target}:  # and each topic on its own
        per_topic, _ = spread({k: r for k, r in target.items() if k[0] == topic}, nodes)
        assert max(per_topic.values()) - min(per_topic.values()) <= 1, (topic, per_topic)
    # (leaders are spread as far as the replicas allow: never more than one over the even share
    # when every node holds a replica of many partitions)
    if len(target) >= 4 * len(nodes) and all(len(r) == len(nodes) or len(r) >= 2 for r in target.values()):
        assert max(leaders.values()) - min(leaders.values()) <= 2, leaders


def test_a_balanced_cluster_does_not_move():
    assignment = {("t", p): [(p % 3) + 1, ((p + 1) % 3) + 1, ((p + 2) % 3) + 1] for p in range(12)}
    assert moves(assignment, plan(assignment, [1, 2, 3])) == {}


def test_two_new_nodes_take_their_share_and_a_decommissioned_node_none():
    assignment = {("t", p): [(p % 3) + 1, ((p + 1) % 3) + 1, ((p + 2) % 3) + 1] for p in range(12)}
    target = plan(assignment, [1, 2, 3, 4, 5])
    replicas, leaders = spread(target, [1, 2, 3, 4, 5])
    assert sorted(replicas.values()) == [7, 7, 7, 7, 8]
    assert max(leaders.values()) - min(leaders.values()) <= 1
    # Only what must move moves: 36 replicas, 14 or 15 of them onto the new nodes.
    moved = sum(len(set(t) - set(assignment[k])) for k, t in target.items())
    assert moved == replicas[4] + replicas[5]
    gone = plan(target, [2, 3, 4, 5])
    assert all(1 not in r for r in gone.values())
    replicas, _ = spread(gone, [2, 3, 4, 5])
    assert sorted(replicas.values()) == [9, 9, 9, 9]
