"""The /metrics text, with the per-partition families rendered straight to text.

prometheus_client builds a `Sample` (a named tuple and a labels dict) for every series a collector
adds and formats each one through several helpers: ~15 µs a series on the bench VM. A node with
1,000 partitions exports ~4,000 per-partition series, so a scrape held the event loop ~65 ms
(bench/README.md, (v)). `RowFamily` keeps a family's rows as plain tuples and renders them with
one format string; `render()` writes every other family through prometheus_client as before.

A `RowFamily` is still a prometheus_client `Metric` (its `samples` are built when asked for), so
`generate_latest()` and the library's parsers read it the same: tests/server/test_metrics_text.py
holds the two renderings equal.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from ..quorum.snapshots.state_machine import collector_paused


def label_text(value: str) -> str:
    """A label value escaped for the text format (Kafka's topic names never need it)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')
    return value


class SeriesLabels:
    """One series' label values and their text `{name="value",...}`, made once and shared by
    every family the series is in (a partition's offsets, epoch and snapshot gauges)."""

    __slots__ = ("names", "values", "text")

    def __init__(self, names: tuple[str, ...], values: tuple[str, ...], text: str | None = None) -> None:
        self.names, self.values = names, values
        self.text = text if text is not None else (
            "{" + ",".join(f'{k}="{label_text(v)}"' for k, v in zip(names, values)) + "}")


class RowFamily(Metric):
    """A gauge family of many labelled series, kept as rows (labels, value)."""

    def __init__(self, name: str, documentation: str,
                 rows: list[tuple[SeriesLabels, int | float]] | None = None) -> None:
        self._rows = rows if rows is not None else []
        super().__init__(name, documentation, "gauge")

    def add(self, labels: SeriesLabels, value: int | float) -> None:
        self._rows.append((labels, value))

    @property
    def samples(self) -> list[Sample]:  # type: ignore[override]
        return [Sample(self.name, dict(zip(labels.names, labels.values)), float(value))
                for labels, value in self._rows]

    @samples.setter
    def samples(self, value: list) -> None:
        if value:  # (Metric.__init__ sets it empty; rows come through add())
            raise AttributeError("a RowFamily takes rows through add()")

    def text(self) -> str:
        doc = self.documentation.replace("\\", r"\\").replace("\n", r"\n")
        name = self.name
        out = [f"# HELP {name} {doc}\n# TYPE {name} gauge\n"]
        out += [f"{name}{labels.text} {value if type(value) is int else floatToGoString(value)}\n"
                for labels, value in self._rows]
        return "".join(out)


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def render(registry) -> bytes:
    """The Prometheus text format of everything `registry` collects (as `generate_latest`).

    The collector is paused meanwhile: a scrape of 1,000 partitions allocates ~15,000 objects,
    all freed by reference counting when it ends; their count alone would start collections
    inside the scrape, now and then the full one (17-20 ms more at 1,000 partitions)."""
    rows: list[RowFamily] = []
    others: list[Metric] = []
    with collector_paused():
        for family in registry.collect():
            (rows if isinstance(family, RowFamily) else others).append(family)
        return generate_latest(_Families(others)) + "".join(f.text() for f in rows).encode()
