"""SnapshotStore.begin_download: a snapshot fetched from a leader in chunks (KIP-630)."""
import os

import pytest

from kraftd.protocol.records import iter_batch_headers
from kraftd.storage.snapshots import CorruptSnapshotError, SnapshotId, SnapshotStore, SnapshotWriter

SID = SnapshotId(40, 2)
ITEMS = {b"k%02d" % i: b"v%02d" % i for i in range(50)}


def snapshot_bytes(tmp_path, sid=SID, items=ITEMS) -> bytes:
    source = tmp_path / "leader"
    source.mkdir(exist_ok=True)
    writer = SnapshotWriter(source, sid, last_contained_log_timestamp=123, max_batch_bytes=128)
    writer.append_many(sorted(items.items()))
    with open(writer.freeze(), "rb") as f:
        return f.read()


def names(store) -> list[str]:
    return sorted(os.listdir(store.dir))


def test_chunks_written_in_order_complete_into_a_registered_readable_snapshot(tmp_path):
    data = snapshot_bytes(tmp_path)
    store = SnapshotStore(tmp_path / "t-0")
    part = store.begin_download(SID)
    assert SID not in store
    for position in range(0, len(data), 100):
        part.write(position, data[position:position + 100])
    assert SID not in store and names(store) == ["00000000000000000040-0000000002.checkpoint.part"]
    part.complete(len(data))
    assert store.ids() == [SID] and store.latest() == SID
    assert names(store) == ["00000000000000000040-0000000002.checkpoint"]
    assert dict(store.reader(SID).items()) == ITEMS
    assert SnapshotStore(tmp_path / "t-0").ids() == [SID]  # visible after a restart too


@pytest.mark.parametrize("damage", ["flipped byte", "short", "no footer", "no header"])
def test_an_invalid_download_is_refused_and_leaves_nothing(tmp_path, damage):
    data = snapshot_bytes(tmp_path)
    batches = [(pos, h.size) for pos, h in iter_batch_headers(data)]
    header_end = batches[0][1]
    footer_start = batches[-1][0]
    bad = {
        "flipped byte": data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1:],
        "short": data[:-7],
        "no footer": data[:footer_start],
        "no header": data[header_end:],
    }[damage]
    store = SnapshotStore(tmp_path / "t-0")
    part = store.begin_download(SID)
    part.write(0, bad)
    with pytest.raises(CorruptSnapshotError):
        part.complete(len(bad) if damage != "short" else len(data))
    assert store.ids() == [] and names(store) == []


def test_abort_removes_the_partial_file(tmp_path):
    store = SnapshotStore(tmp_path / "t-0")
    part = store.begin_download(SID)
    part.write(0, b"partial")
    part.abort()
    part.abort()  # idempotent
    assert store.ids() == [] and names(store) == []


def test_data_batches_are_the_batches_between_header_and_footer(tmp_path):
    """SnapshotReader.data_batches: positions into the file of every data batch, in order, header
    and footer (control batches) left out; decoding them gives items()."""
    from kraftd.protocol.records import decode_records
    from kraftd.storage.snapshots import SnapshotReader

    data = snapshot_bytes(tmp_path)
    every = list(iter_batch_headers(data))
    reader = SnapshotReader.open(str(tmp_path / "leader" / "00000000000000000040-0000000002.checkpoint"))
    batches = reader.data_batches()
    assert batches == every[1:-1] and len(batches) > 1
    assert every[0][1].is_control and every[-1][1].is_control and not any(h.is_control for _, h in batches)
    decoded = {r.key: r.value for pos, h in batches for r in decode_records(data[pos:pos + h.size], h)}
    assert decoded == ITEMS == dict(reader.items())
    assert reader.info().records == len(ITEMS)
