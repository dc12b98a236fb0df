"""Loading snapshots again and again, with reference cycles alive meanwhile, keeps memory and file
descriptors flat (issue 22, item 7). Snapshot loads used to end in gc.freeze(), which moved every
object alive at that moment into a generation the collector never scans: each load leaked the
cycles around it, and any file they held open (~1.5 MB and ~0.6 descriptors per simulation seed).

Run in a fresh interpreter so nothing else this test process allocates is measured."""
from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r"""
import gc, json, os, sys
from kraftd.quorum.snapshots.partition_snapshots import PartitionSnapshots
from kraftd.quorum.snapshots.state_machine import KeyValueStateMachine
from kraftd.storage.snapshots import SnapshotId, SnapshotStore

store = SnapshotStore(sys.argv[1])
sid = SnapshotId(2000, 3)
writer = store.writer(sid, last_contained_log_timestamp=0)
writer.append_many((b"key-%06d" % i, b"v" * 64) for i in range(2000))
writer.freeze()
store = SnapshotStore(sys.argv[1])  # as at startup: the store finds the file

class Log:  # what PartitionSnapshots.load reads of a partition: nothing but the store
    pass

class Cycle:
    pass

def rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

samples = []
for i in range(301):
    c = Cycle()
    c.me = c                                   # a reference cycle, alive during the load
    c.payload = bytearray(64 * 1024)
    c.file = open(store.path(sid), "rb")       # holding a descriptor
    snapshots = PartitionSnapshots(Log(), store, KeyValueStateMachine())
    snapshots.load()
    assert len(snapshots.machine.state) == 2000
    del c, snapshots
    if i % 50 == 0:
        gc.collect()
        samples.append((rss_kib(), len(os.listdir("/proc/self/fd"))))
print(json.dumps(samples))
"""


def test_repeated_snapshot_loads_keep_memory_and_descriptors_flat(tmp_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    samples = json.loads(out.stdout)
    (rss_first, fds_first), (rss_last, fds_last) = samples[1], samples[-1]
    # 250 loads between the two samples; a frozen 64 KiB cycle per load would add ~64 KiB each.
    per_load_kib = (rss_last - rss_first) / 250
    assert per_load_kib < 16, f"RSS grows {per_load_kib:.1f} KiB per load: {samples}"
    assert fds_last == fds_first, f"descriptors grow: {samples}"
