"""What a file-backed node decides about its data dir before opening anything in it (blocking).

- It takes the data dir's lock (a second process on the same dir, or `kraftd quorum force-leader`
  against a live node, is refused).
- A cluster node compares the metadata quorum's voters its catalog remembers with `--voters`:
  equal is the normal case. A node that was a voter and is not in `--voters` any more was lost
  in an unclean recovery: its logs may hold records the new leaders never had, so it sets its
  whole data dir aside (`discarded-<ms>/`, nothing deleted) and starts empty, under the
  disk-loss rule, as a broker. Any other change of the voter set is refused, as before.
- It reads the rejoin marker (left by an older kraftd's `--rejoin`, or by a set-aside below) and
  a pending `forced-recovery.json`. `--rejoin` itself does nothing any more (directory ids).
- It reads the dir's identity (`meta.properties`: node id, directory id), writing one with a
  new directory id if the dir has none, and refuses a dir that belongs to another node.
"""
from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..quorum.metadata.names import METADATA_TOPIC
from ..quorum.node_config import VoterSetMismatch
from ..storage import TopicCatalog
from ..storage.data_dir_lock import DataDirLock
from ..storage.file_log import DELETE_SUFFIX
from ..storage.forced_recovery import ForcedRecovery, read_forced_recovery, set_aside
from ..storage.meta_properties import MetaProperties, ensure_meta_properties
from ..storage.rejoin_marker import rejoin_marked

log = logging.getLogger(__name__)


@dataclass
class DataDirStartup:
    lock: DataDirLock
    rejoining: bool
    forced: ForcedRecovery | None
    set_aside_to: Path | None = None
    meta: MetaProperties | None = None


def prepare_data_dir(config, now_ms: int) -> DataDirStartup:
    data_dir = Path(config.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = DataDirLock(data_dir).acquire()
    try:
        moved = None
        rejoin = False
        if config.rejoin:
            log.warning("--rejoin (KRAFTD_REJOIN) is no longer needed and does nothing: a data dir has a "
                        "directory id (meta.properties), so the quorum tells a replaced disk from the voter it "
                        "replaced, and a partition placed on the lost disk catches up before this node votes "
                        "in it (README, \"Replacing a lost disk\")")
        if config.clustered:
            metadata = TopicCatalog(data_dir).get(METADATA_TOPIC)
            remembered = tuple(sorted(metadata.assignments[0])) if metadata and metadata.assignments else None
            wanted = tuple(sorted(config.voters))
            if remembered is not None and remembered != wanted:
                if config.node_id in remembered and config.node_id not in wanted:
                    moved = set_aside(data_dir, now_ms)
                    log.warning(
                        "this node was a voter of %s and is not in --voters %s: an unclean recovery "
                        "(kraftd quorum force-leader) left it out. Its data may hold records the new "
                        "leaders never had, so it is set aside in %s (not deleted) and this node starts "
                        "empty as a broker.", list(remembered), list(wanted), moved)
                    rejoin = True  # it may have voted in groups it now knows nothing of
                else:
                    raise VoterSetMismatch(
                        f"{METADATA_TOPIC} here was founded with voters {list(remembered)}, --voters says "
                        f"{list(wanted)}: start every node with the --voters it was founded with (change the "
                        "voters online with `kraftd quorum add-voter`/`remove-voter`; after losing a majority, "
                        "`kraftd quorum force-leader` on every surviving voter)")
        meta = ensure_meta_properties(data_dir, config.node_id)  # (after a set-aside: a new directory)
        finish_deletions(data_dir)
        return DataDirStartup(lock, rejoin_marked(data_dir, rejoin=rejoin), read_forced_recovery(data_dir), moved,
                              meta)
    except BaseException:
        lock.release()
        raise


def finish_deletions(data_dir: Path) -> list[str]:
    """A deleted partition's directory is renamed `<topic>-<n>.<id>-delete` before it is removed
    in the background (FileLog.discard). One left by a crash is removed now, and its topic, if
    the catalog on disk still lists it (the crash came before the catalog was written), is
    dropped from the catalog: the deletion had been decided."""
    doomed = sorted(p for p in data_dir.iterdir() if p.is_dir() and p.name.endswith(DELETE_SUFFIX))
    if not doomed:
        return []
    catalog = TopicCatalog(data_dir)
    for path in doomed:
        topic = path.name[:-len(DELETE_SUFFIX)].rpartition(".")[0].rpartition("-")[0]
        info = catalog.get(topic)
        if info is not None and not (data_dir / f"{topic}-0").exists():
            catalog.delete(topic)
            for index in range(info.partitions):  # (renamed one by one: a crash may come between)
                shutil.rmtree(data_dir / f"{topic}-{index}", ignore_errors=True)
            log.warning("finishing the deletion of topic %s, interrupted by a crash", topic)
        shutil.rmtree(path, ignore_errors=True)
    catalog.flush()
    return [p.name for p in doomed]
