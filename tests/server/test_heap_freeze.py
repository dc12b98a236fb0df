"""server/heap_freeze.py: a served process freezes its startup heap once, and says how much."""
from tests.support.prometheus import scrape_samples, scrape_unlabelled


def test_a_served_process_freezes_its_startup_heap_once(kraftd):
    metrics = scrape_unlabelled(kraftd.metrics_port)
    # The modules, codecs and startup state: tens of thousands of objects no full collection
    # visits again (an empty data dir holds ~50,000 on CPython 3.11).
    assert metrics["kraftd_gc_frozen_objects"] > 10_000
    assert [line for line in kraftd.log_lines if "startup heap frozen" in line]
    generations = {dict(labels)["generation"] for (name, labels) in scrape_samples(kraftd.metrics_port)
                   if name == "python_gc_collections_total"}
    assert generations == {"0", "1", "2"}  # the collector's own counts are exported too
