"""The server's replication-offset-checkpoint: min(HW, flushed offset) per hosted partition,
rewritten periodically off the loop when it changed, and once more at stop."""
import asyncio
from types import SimpleNamespace

from kraftd.server.hw_checkpoints import HighWatermarkCheckpointer, checkpointed_offsets
from kraftd.storage.replication_offset_checkpoint import read_replication_offsets


def _node(fsync_policy="acks_all", **partitions):
    """partitions: name=(hw, flushed, log end), each as `<topic>_<index>`."""
    parts = [SimpleNamespace(key=(name.rsplit("_", 1)[0], int(name.rsplit("_", 1)[1])), high_watermark=hw,
                             log=SimpleNamespace(flushed_offset=flushed, log_end_offset=end))
             for name, (hw, flushed, end) in partitions.items()]
    return SimpleNamespace(config=SimpleNamespace(fsync_policy=fsync_policy),
                           topics=SimpleNamespace(partitions=lambda: list(parts)), parts=parts)


def test_the_checkpoint_never_passes_what_is_durable_here():
    node = _node(events_0=(10, 7, 12), events_1=(5, 9, 9))
    assert checkpointed_offsets(node) == {("events", 0): 7, ("events", 1): 5}
    # fsync_policy=never flushes nothing until shutdown: the log end bounds it instead.
    assert checkpointed_offsets(_node("never", events_0=(10, 0, 12))) == {("events", 0): 10}


def test_written_periodically_when_changed_and_at_stop(tmp_path):
    node = _node(events_0=(3, 3, 3))
    path = tmp_path / "replication-offset-checkpoint"

    async def run():
        writer = HighWatermarkCheckpointer(node, str(tmp_path), interval_s=0.02)
        writer.start()
        for _ in range(200):
            await asyncio.sleep(0.01)
            if path.exists():
                break
        assert read_replication_offsets(path) == {("events", 0): 3}
        inode = path.stat().st_ino
        await asyncio.sleep(0.1)
        assert path.stat().st_ino == inode  # unchanged offsets: not rewritten
        node.parts[0].high_watermark = node.parts[0].log.flushed_offset = 8
        await writer.stop()
        assert read_replication_offsets(path) == {("events", 0): 8}

    asyncio.run(run())
