"""A follower's copy leaves the page cache once durable (FileLog.flush); a leader's appends and
logs whose state machine reads records back (cache_replicated) stay cached."""
import ctypes
import ctypes.util
import mmap
import os

import pytest

from kraftd.storage import FileLog
from storage_helpers import batch

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
VALUE = os.urandom(1000)


def resident_pages(path) -> int:
    """Pages of the file in the page cache."""
    return sum(resident_map(path))


def resident_map(path) -> list[int]:
    """Per page of the file, 1 if it is in the page cache (mincore on a mapping that is never
    touched)."""
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = (ctypes.c_ubyte * pages)()
        try:
            assert _libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
        finally:
            _libc.munmap(addr, size)
        return [v & 1 for v in vec]
    finally:
        os.close(fd)


def _on_tmpfs(path) -> bool:
    with open("/proc/mounts") as f:
        mounts = [line.split() for line in f]
    best = max((m for m in mounts if os.path.realpath(path).startswith(m[1])), key=lambda m: len(m[1]))
    return best[2] in ("tmpfs", "ramfs")


def _fill(log, *, replicated: bool, batches: int = 512) -> str:
    """About 2 MB in 512 batches of 2 records, appended as a leader or as a follower."""
    for i in range(batches):
        b = batch(2, value=VALUE, base_offset=log.log_end_offset, epoch=1)
        if replicated:
            log.append_as_follower(b)
        else:
            log.append_as_leader(b, leader_epoch=1, now_ms=0)
    return log._segments[-1].path


@pytest.fixture
def log_dir(tmp_path):
    if _on_tmpfs(tmp_path):
        pytest.skip("tmpfs pages are the file: they cannot leave the page cache")
    return tmp_path / "t-0"


def test_follower_appends_leave_the_page_cache_once_flushed(log_dir):
    log = FileLog(log_dir)
    path = _fill(log, replicated=True)
    pages = os.path.getsize(path) // mmap.PAGESIZE
    assert resident_pages(path) >= pages - 1  # written, not yet durable: cached
    log.flush()
    assert resident_pages(path) <= 1  # at most the partial last page
    # Later appends are dropped too, including the page the previous range ended in.
    _fill(log, replicated=True, batches=64)
    log.flush()
    assert resident_pages(path) <= 1
    assert len(log.read(0, 1 << 30).to_bytes()) == os.path.getsize(path)  # read back from disk
    log.close()


def test_leader_appends_stay_cached(log_dir):
    log = FileLog(log_dir)
    path = _fill(log, replicated=False)
    log.flush()
    assert resident_pages(path) >= os.path.getsize(path) // mmap.PAGESIZE - 1
    log.close()


def test_logs_that_are_read_back_keep_replicated_data_cached(log_dir):
    log = FileLog(log_dir)
    log.cache_replicated = True
    path = _fill(log, replicated=True)
    log.flush()
    assert resident_pages(path) >= os.path.getsize(path) // mmap.PAGESIZE - 1
    log.close()


def _storage_reads() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("read_bytes:"))


def test_the_partial_last_page_stays_cached_so_the_next_append_reads_nothing(log_dir):
    # Dropping it too (this kernel does, for a range ending mid-page) made every small follower
    # append read that page back from disk first, on the event loop (bench/README.md, (g)).
    log = FileLog(log_dir)
    path = _fill(log, replicated=True, batches=5)
    assert os.path.getsize(path) % mmap.PAGESIZE
    log.flush()
    assert resident_map(path) == [0] * (os.path.getsize(path) // mmap.PAGESIZE) + [1]
    before = _storage_reads()
    _fill(log, replicated=True, batches=1)
    assert _storage_reads() == before
    log.close()
