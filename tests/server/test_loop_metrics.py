"""The lock-free loop instruments expose exactly what prometheus_client's own would."""
from hypothesis import given, settings, strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from kraftd.server.loop_metrics import LabelledCounter, LabelledHistogram, LoopMetricsCollector
from kraftd.server.metrics import LATENCY_BUCKETS

values = st.lists(st.one_of(st.sampled_from(LATENCY_BUCKETS),
                            st.floats(0, 60, allow_nan=False)), max_size=50)


def samples(registry: CollectorRegistry) -> dict:
    out = {}
    for fam in registry.collect():
        for s in fam.samples:
            if not s.name.endswith("_created"):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@settings(max_examples=200, deadline=None)
@given(values, st.lists(st.tuples(st.sampled_from(["Fetch", "Produce"]),
                                  st.integers(1, 1000)), max_size=20))
def test_same_samples_as_prometheus_client(observations, increments):
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    hist = LabelledHistogram("lat_seconds", "latency", ("api",), LATENCY_BUCKETS)
    counter = LabelledCounter("reqs", "requests", ("api",))
    ours.register(LoopMetricsCollector({}, [counter, hist]))
    ref_hist = Histogram("lat_seconds", "latency", ["api"], buckets=LATENCY_BUCKETS,
                         registry=theirs)
    ref_counter = Counter("reqs", "requests", ["api"], registry=theirs)
    for i, v in enumerate(observations):
        api = "Fetch" if i % 3 else "Metadata"
        hist.child(api).observe(v)
        ref_hist.labels(api).observe(v)
    for api, n in increments:
        counter.child(api).inc(n)
        ref_counter.labels(api).inc(n)
    a, b = samples(ours), samples(theirs)
    assert a.keys() == b.keys()
    for key in a:
        assert abs(a[key] - b[key]) <= 1e-9 * max(1.0, abs(b[key])), key


def test_exposition_names():
    reg = CollectorRegistry()
    hist = LabelledHistogram("kraftd_request_latency_seconds", "x", ("api",), LATENCY_BUCKETS)
    hist.child("Fetch").observe(0.0005)
    reg.register(LoopMetricsCollector({}, [hist]))
    text = generate_latest(reg).decode()
    assert 'kraftd_request_latency_seconds_bucket{api="Fetch",le="0.0005"} 1.0' in text
    assert 'kraftd_request_latency_seconds_count{api="Fetch"} 1.0' in text
