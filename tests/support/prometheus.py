"""Scraping a real server's /metrics with prometheus_client's own parser."""
from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape_samples(metrics_port: int, host: str = "127.0.0.1") -> dict[tuple, float]:
    """Every sample: {(name, sorted label pairs): value}."""
    with urllib.request.urlopen(f"http://{host}:{metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape_unlabelled(metrics_port: int) -> dict[str, float]:
    """Samples without labels: {name: value}."""
    return {name: value for (name, labels), value in scrape_samples(metrics_port).items() if not labels}
