"""The codecs' bytecode, compiled when the package is installed rather than on first use.

The generator (generator.py) writes each codec as Python source the first time a message
version is used, and compiling that source is most of the cost: ~0.9 s for the 366 codecs,
up to ~12 ms for one (ProduceResponse v10, Fetch v12-17). A server compiled a codec on the
event loop the first time a client or peer used its version, and a node that had just started
stalled for 15-25 ms that way (bench/README.md, (v)).

`pip install` (setup.py) and `make` run protocol/build_code_cache.py, which compiles every
codec and every message class's generated methods and keeps the marshalled code objects in
`_codecs.cache` beside this file (1.2 MB, read at the first compile and kept).
`compile_source` looks the code up by a hash of its file name and source, so an entry can
never stand for other source: a schema or generator change only misses and compiles as before. A cache written by another Python (another bytecode magic number) is not
read at all.
"""
from __future__ import annotations

import hashlib
import importlib.util
import marshal
import zlib
from pathlib import Path
from types import CodeType

CACHE_FILE = Path(__file__).with_name("_codecs.cache")

_entries: dict[bytes, bytes] | None = None   # loaded at the first compile
_recording: dict[bytes, bytes] | None = None  # what compile_source compiles goes here too


def _key(source: str, filename: str) -> bytes:
    return hashlib.blake2b(f"{filename}\0{source}".encode(), digest_size=16).digest()


def compile_source(source: str, filename: str) -> CodeType:
    """compile(source, filename, "exec"), from the install-time cache when it holds it."""
    key = _key(source, filename)
    blob = _cached().get(key)
    if blob is not None and _recording is None:
        try:
            return marshal.loads(zlib.decompress(blob))
        except (ValueError, EOFError, TypeError, zlib.error):
            pass  # a damaged entry: compile it
    code = compile(source, filename, "exec")
    if _recording is not None:
        _recording[key] = zlib.compress(marshal.dumps(code), 6)
    return code


def record(into: dict[bytes, bytes] | None) -> None:
    """From now on (None: no longer) compile every source and keep its code in `into`."""
    global _recording
    _recording = into


def _cached() -> dict[bytes, bytes]:
    global _entries
    if _entries is None:
        _entries = load(CACHE_FILE)
    return _entries


def load(path: Path) -> dict[bytes, bytes]:
    """The entries of a cache file; empty when there is none, it is damaged, or another
    Python's bytecode wrote it."""
    try:
        magic, entries = marshal.loads(Path(path).read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if magic != importlib.util.MAGIC_NUMBER or not isinstance(entries, dict):
        return {}
    return entries


def use(path: Path | None) -> None:
    """Read the cache from `path` from now on (None: the installed one). For tests."""
    global CACHE_FILE, _entries
    CACHE_FILE = Path(path) if path is not None else Path(__file__).with_name("_codecs.cache")
    _entries = None
