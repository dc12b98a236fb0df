"""The data-dir marker of a node that replaced a lost disk (`kraftd serve --rejoin`).

A voter restarted on an empty data dir may have voted and acknowledged records before, and has
forgotten both. Such a node must not vote until it has caught up (the disk-loss rule, README),
and it must keep knowing that across its own restarts, so the flag is a file, written before
anything else in the new data dir. `--rejoin` on a data dir that already holds state is
ignored: that dir did not replace anything. The node removes the marker once every group it
hosts has caught up (quorum/node.py `_check_rejoin_complete`).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from .atomic_file import atomic_write

log = logging.getLogger(__name__)

REJOIN_MARKER = "rejoined-after-disk-loss"
STATE_FILE = "quorum-state"  # election states: present once this data dir has taken part


def rejoin_marked(data_dir: str | os.PathLike, *, rejoin: bool) -> bool:
    """True if this data dir replaces a lost one: marked before, or empty and `rejoin` asked."""
    data_dir = Path(data_dir)
    marker = data_dir / REJOIN_MARKER
    if marker.exists():
        return True
    if not rejoin:
        return False
    if (data_dir / STATE_FILE).exists():
        log.warning("--rejoin ignored: %s already holds election state (it replaced no lost disk)", data_dir)
        return False
    atomic_write(marker, b"this data dir replaced a lost one: groups with a history vote only once caught up\n")
    log.warning("rejoining after a disk loss: no vote in any group with a history until it has caught up")
    return True


def clear_rejoin_marker(data_dir: str | os.PathLike) -> None:
    """The rejoin is complete: groups created from now on vote at once."""
    try:
        os.unlink(Path(data_dir) / REJOIN_MARKER)
    except FileNotFoundError:
        pass
