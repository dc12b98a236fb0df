"""The rebalance planner (no I/O): a target assignment that evens replicas and preferred leaders
over the nodes, moving as few replicas as it can (Redpanda's partition balancing, Kafka's
kafka-reassign-partitions --generate).

- Replicas on nodes that are not among `nodes` (stopped, or being decommissioned) are replaced.
- Each partition keeps its replication factor (capped at the number of nodes) on distinct nodes.
- Every node ends within one replica of even: a replica moves from the fullest node to the
  emptiest while they differ by more than one.
- The preferred leader (first replica) of each partition is then chosen among its replicas so
  that leaderships spread evenly too, keeping the current one when it is no worse.
"""
from __future__ import annotations

from collections import Counter


def plan(assignment: dict, nodes) -> dict:
    """`assignment` {(topic, partition): [replicas]}; returns {(topic, partition): target
    replicas} for every partition (its current replicas when it does not move)."""
    nodes = sorted(set(nodes))
    if not nodes:
        raise ValueError("no node to place replicas on")
    placed = {key: [r for r in replicas if r in nodes] for key, replicas in assignment.items()}
    load = Counter({n: 0 for n in nodes})
    for replicas in placed.values():
        load.update(replicas)
    by_topic: dict = {}
    for key in sorted(placed):
        by_topic.setdefault(key[0], []).append(key)
    topic_loads = {}
    for topic, keys in sorted(by_topic.items()):
        topic_load = Counter({n: 0 for n in nodes})
        for key in keys:
            topic_load.update(placed[key])
        for key in keys:  # refill what sat on nodes that are gone
            want = min(len(assignment[key]), len(nodes))
            while len(placed[key]) < want:
                node = min((n for n in nodes if n not in placed[key]), key=lambda n: (topic_load[n], load[n], n))
                placed[key].append(node)
                load[node] += 1
                topic_load[node] += 1
        _even_topic(placed, keys, topic_load, load, nodes)
        topic_loads[topic] = topic_load
    _even_nodes(placed, by_topic, topic_loads, load, nodes)
    return _spread_leaders(assignment, placed, nodes)


def _move(placed, key, high, low, *counters) -> None:
    replicas = placed[key]
    replicas[replicas.index(high)] = low
    for c in counters:
        c[high] -= 1
        c[low] += 1


def _even_topic(placed: dict, keys: list, topic_load: Counter, load: Counter, nodes: list) -> None:
    """Each node within one of even for this topic (ties go by the whole cluster's load)."""
    while True:
        high = max(nodes, key=lambda n: (topic_load[n], load[n], -n))
        low = min(nodes, key=lambda n: (topic_load[n], load[n], n))
        if topic_load[high] - topic_load[low] <= 1:
            return
        key = next((k for k in keys if high in placed[k] and low not in placed[k]), None)
        if key is None:
            return  # (cannot happen while high holds more of the topic's partitions than low)
        _move(placed, key, high, low, topic_load, load)


def _even_nodes(placed: dict, by_topic: dict, topic_loads: dict, load: Counter, nodes: list) -> None:
    """Then each node within one of even over every topic, moving only replicas of a topic the
    fuller node holds more of (so each topic stays within one of even)."""
    while True:
        high = max(nodes, key=lambda n: (load[n], -n))
        low = min(nodes, key=lambda n: (load[n], n))
        if load[high] - load[low] <= 1:
            return
        found = None
        for topic, keys in sorted(by_topic.items()):
            t = topic_loads[topic]
            if t[high] > t[low]:
                found = next(((k, t) for k in keys if high in placed[k] and low not in placed[k]), None)
                if found is not None:
                    break
        if found is None:
            return
        _move(placed, found[0], high, low, found[1], load)


def _spread_leaders(assignment: dict, placed: dict, nodes: list) -> dict:
    """First replicas: per topic, each partition's least-leading replica (by the topic's count,
    then the cluster's; the current leader when no worse); then a leadership moves from the
    most-leading node to the least while they differ by more than one and a partition allows."""
    leaders = Counter({n: 0 for n in nodes})
    out: dict = {}
    topic_leaders: dict = {}
    for key in sorted(placed):
        t = topic_leaders.setdefault(key[0], Counter())
        replicas = placed[key]
        current = assignment[key][0] if assignment[key] else None
        first = min(replicas, key=lambda r: (t[r], leaders[r], r != current, r))
        t[first] += 1
        leaders[first] += 1
        out[key] = [first] + [r for r in replicas if r != first]
    while _move_a_leadership(out, leaders, topic_leaders, nodes):
        pass
    return out


def _move_a_leadership(out: dict, leaders: Counter, topic_leaders: dict, nodes: list) -> bool:
    """Move one leadership from a node leading two or more than another to that one, through a
    partition led by the first with a replica on the second; False when none can move."""
    for high in sorted(nodes, key=lambda n: (-leaders[n], n)):
        for low in sorted(nodes, key=lambda n: (leaders[n], n)):
            if leaders[high] - leaders[low] <= 1:
                break
            movable = [k for k in sorted(out) if out[k][0] == high and low in out[k]]
            if not movable:
                continue
            # (one that keeps its topic's leaders even, if there is one)
            key = next((k for k in movable if topic_leaders[k[0]][high] > topic_leaders[k[0]][low]), movable[0])
            out[key] = [low] + [r for r in out[key] if r != low]
            for c in (leaders, topic_leaders[key[0]]):
                c[high] -= 1
                c[low] += 1
            return True
    return False


def moves(assignment: dict, target: dict) -> dict:
    """The partitions whose replicas (or preferred leader) change: {partition: target}."""
    return {key: t for key, t in target.items() if list(assignment[key]) != list(t)}


def spread(assignment: dict, nodes) -> tuple[Counter, Counter]:
    """(replicas per node, preferred leaders per node) of an assignment."""
    replicas = Counter({n: 0 for n in nodes})
    leaders = Counter({n: 0 for n in nodes})
    for rs in assignment.values():
        replicas.update(rs)
        if rs:
            leaders[rs[0]] += 1
    return replicas, leaders
