"""A LogSegment owns its file descriptor: closed by close(), or when the last reference (the log
or an in-flight FileRegion handed to sendfile) goes away, never while a region can still use it."""
import copy
import gc
import os

from kraftd.storage.segment import LogSegment


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def test_a_dropped_segment_closes_its_fd_once_no_region_holds_it(tmp_path):
    seg = LogSegment(str(tmp_path), 0, create=True)
    os.pwrite(seg.fd, b"x" * 100, 0)
    fd = seg.fd
    region = seg.region(0, 10)
    del seg
    gc.collect()
    assert is_open(fd) and os.pread(region.fileno(), 10, 0) == b"x" * 10  # the region keeps it
    del region
    assert not is_open(fd)


def test_close_closes_at_once_and_only_once(tmp_path):
    seg = LogSegment(str(tmp_path), 0, create=True)
    fd = seg.fd
    seg.close()
    assert not is_open(fd)
    other = os.open(os.devnull, os.O_RDONLY)  # may reuse the number: the segment must not close it
    try:
        seg.close()
        del seg
        gc.collect()
        assert is_open(other)
    finally:
        os.close(other)


def test_a_copy_does_not_close_the_original_fd(tmp_path):
    seg = LogSegment(str(tmp_path), 0, create=True)
    plain = copy.copy(seg)
    del plain
    gc.collect()
    assert is_open(seg.fd)
    seg.close()


def test_a_segment_in_a_reference_cycle_closes_its_fd_when_collected(tmp_path):
    seg = LogSegment(str(tmp_path), 0, create=True)
    fd = seg.fd
    seg.me = seg
    del seg
    gc.collect()
    assert not is_open(fd)
