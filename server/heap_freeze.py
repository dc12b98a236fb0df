"""Move the heap the server starts with out of the cyclic collector's way, once.

A full (generation-2) collection visits every tracked object and holds the event loop while it
runs: about 0.25 µs per object on the 2-core bench VM, so ~40 ms for a server that has
created 1,000 topics (bench/README.md, (v)). About half of those objects exist before the
first request: modules, classes, the generated codecs, the state loaded from the data dir.
They live as long as the process, so once the server listens they go to the permanent
generation (`gc.freeze()`), which collections skip; reference counting still frees them.

Done once, at startup: a reference cycle alive at that moment is never collected, a bounded
cost. Freezing again later (for instance after every snapshot load) would make that cost grow
with every freeze, which is why the snapshot loaders only pause the collector.
"""
from __future__ import annotations

import gc
from typing import Iterable

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


_frozen_at_startup = 0


def freeze_startup_heap() -> int:
    """Collect what startup left behind, then freeze the rest; returns how many objects."""
    global _frozen_at_startup
    gc.collect()
    gc.freeze()
    _frozen_at_startup = gc.get_freeze_count()
    return _frozen_at_startup


class FrozenHeapCollector(Collector):
    def describe(self) -> Iterable:
        return []

    def collect(self) -> Iterable:
        # The count taken at the freeze: gc.get_freeze_count() walks the whole frozen list
        # (~5 ms on the loop at every scrape).
        yield GaugeMetricFamily("kraftd_gc_frozen_objects", "Objects moved to the permanent generation at "
                                "startup (never scanned by the cyclic collector)", value=_frozen_at_startup)
