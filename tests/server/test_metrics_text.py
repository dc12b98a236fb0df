"""server/metrics_text.py: /metrics renders the per-partition families itself; the text must
read back exactly as prometheus_client's own rendering of the same collectors."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kraftd.server.metrics import ServerMetrics
from kraftd.server.metrics_text import RowFamily, SeriesLabels, render
from tests.quorum.node_context import NodeTestContext


def samples(text: bytes) -> dict[tuple, float]:
    """{(name, sorted label pairs): value}, without python_gc_* (they move between two renderings)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples
            if not s.name.startswith("python_gc_")}


def families(text: bytes) -> dict[str, tuple[str, str]]:
    return {f.name: (f.type, f.documentation) for f in text_string_to_metric_families(text.decode())}


def test_a_node_with_many_partitions_renders_as_prometheus_client_does(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).build()
    for i in range(20):
        ctx.create_topic(f"t.{i}_x-y", 1 + i % 3)
    ctx.run_jobs()
    ctx.flush()
    metrics = ServerMetrics()
    metrics.watch_node(lambda: ctx.node)

    ours, theirs = render(metrics.registry), generate_latest(metrics.registry)

    assert samples(ours) == samples(theirs)
    assert families(ours) == families(theirs)
    got = samples(ours)
    assert len([k for k in got if k[0] == "kraftd_log_end_offset"]) == sum(1 + i % 3 for i in range(20))
    assert got[("kraftd_leader_epoch", (("partition", "2"), ("topic", "t.5_x-y")))] >= 0
    # one HELP and TYPE line per family, as the format requires
    lines = ours.decode().splitlines()
    assert lines.count("# TYPE kraftd_high_watermark gauge") == 1
    assert len([ln for ln in lines if ln.startswith("# TYPE ")]) == len(families(ours))


def test_label_values_and_values_are_escaped_and_formatted_as_the_library_does():
    odd = SeriesLabels(("topic", "partition"), ('a"b\\c\nd', "0"))
    plain = SeriesLabels(("topic", "partition"), ("orders", "1"))
    family = RowFamily("kraftd_test_rows", "Rows with \\ and\nnewline",
                       [(odd, 5), (plain, 2.5), (plain, float("inf")), (plain, 12_345_678_901_234)])

    class One:
        def collect(self):
            return [family]

    registry = CollectorRegistry()
    registry.register(One())

    ours, theirs = render(registry), generate_latest(registry)

    assert families(ours) == families(theirs)
    # (the same series appears more than once here on purpose: compare the lines' parsed rows)
    rows = [(s.labels, s.value) for f in text_string_to_metric_families(ours.decode()) for s in f.samples]
    assert rows == [({"topic": 'a"b\\c\nd', "partition": "0"}, 5.0), ({"topic": "orders", "partition": "1"}, 2.5),
                    ({"topic": "orders", "partition": "1"}, float("inf")),
                    ({"topic": "orders", "partition": "1"}, 12_345_678_901_234.0)]
    assert b'kraftd_test_rows{topic="orders",partition="1"} 12345678901234\n' in ours  # ints exact


def test_a_row_family_takes_rows_only_through_add():
    family = RowFamily("kraftd_x", "x")
    family.add(SeriesLabels(("topic",), ("t",)), 1)
    assert [s.value for s in family.samples] == [1.0]
    try:
        family.samples = [object()]
    except AttributeError:
        pass
    else:
        raise AssertionError("samples assigned")


def test_label_sets_kept_between_scrapes_are_only_those_of_partitions_still_here(tmp_path):
    from kraftd.protocol import messages as m
    from kraftd.server.metrics import NodeCollector

    ctx = NodeTestContext.builder(tmp_path).build()
    for name in ("kept", "gone"):
        ctx.create_topic(name, 2)
    ctx.run_jobs()
    ctx.flush()
    collector = NodeCollector(lambda: ctx.node)
    registry = CollectorRegistry()
    registry.register(collector)
    first = samples(render(registry))
    assert ("kraftd_log_end_offset", (("partition", "1"), ("topic", "gone"))) in first

    ctx.deliver(m.DeleteTopicsRequest(topic_names=["gone"], timeout_ms=1000), 4)
    ctx.run_jobs()
    ctx.flush()
    second = samples(render(registry))

    assert not [k for k in second if ("topic", "gone") in k[1]]
    assert ("kraftd_log_end_offset", (("partition", "1"), ("topic", "kept"))) in second
    assert {topic for topic, _ in collector._labels.made} == {"kept"}
