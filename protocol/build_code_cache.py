"""Writes protocol/code_cache.py's cache: the bytecode of every codec version of every schema
and of every message class's generated methods.

    python -m kraftd.protocol.build_code_cache [PATH]    # default: the cache code_cache reads
"""
from __future__ import annotations

import importlib.util
import marshal
import os
import sys
from pathlib import Path

from . import code_cache, generator, messages


def build(path: Path) -> int:
    """Compile everything and write the code to `path` (atomically); the number of entries."""
    entries: dict[bytes, bytes] = {}
    code_cache.record(entries)
    try:
        for root in messages.ALL_MESSAGES.values():
            compiler = root._compiler
            for version in range(root.MIN_VERSION, root.MAX_VERSION + 1):
                source, filename, _ = compiler.generate(version)
                code_cache.compile_source(source, filename)
            for cls in compiler.classes.values():
                code_cache.compile_source(*generator.method_source(cls))
    finally:
        code_cache.record(None)
    tmp = Path(f"{path}.tmp")
    tmp.write_bytes(marshal.dumps((importlib.util.MAGIC_NUMBER, entries)))
    os.replace(tmp, path)
    return len(entries)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else code_cache.CACHE_FILE
    print(f"{build(target)} code objects -> {target}")
