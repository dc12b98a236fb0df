"""glibc malloc settings for the server process.

Requests and follower Fetch answers are buffers of 100 KB to a few MB, allocated and freed all
the time. With glibc's defaults such buffers come from fresh mmap()s or from heap top that is
trimmed back to the kernel after each free, so every one of them is paid for again in page
faults and page zeroing: a profile of a three-node acks=all run had ~10% of each node's CPU
in page faults and `brk`. Raising the mmap threshold and the trim threshold keeps up to
`TRIM_BYTES` of freed heap for reuse instead. Skipped where the C library is not glibc.
"""
from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_BYTES = 32 * 1024 * 1024   # glibc's largest allowed value on 64-bit
TRIM_BYTES = 128 * 1024 * 1024


def tune_malloc() -> bool:
    """Apply the settings; False if this libc has no mallopt (not glibc) or refused them."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_BYTES))
