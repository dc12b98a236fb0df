"""Size-prefixed Kafka frames read straight into their own buffers (an `asyncio.BufferedProtocol`
helper).

A plain `Protocol` gets each socket read as a fresh `bytes`, which the receiver then appends to
a buffer and slices out again: a large frame (a follower's ~1 MB Fetch answer) was copied three
times after the kernel's copy, each copy into freshly allocated memory. Here small frames are
read into one reused scratch buffer and copied out once; a frame that does not fit in what is
left of it gets a buffer of exactly its size, and the socket reads the rest of it into that
buffer directly (no copy at all).
"""
from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
SCRATCH_BYTES = 256 * 1024


class FrameSizeError(ValueError):
    """A frame header announced a size outside 0..max_frame."""


class FrameReader:
    """`get_buffer()` / `buffer_updated(n)` for a BufferedProtocol; `buffer_updated` returns the
    frames (bytes-like, without their size prefix) that are now complete."""

    __slots__ = ("_max_frame", "_scratch", "_view", "_start", "_end", "_big", "_big_view", "_big_filled")

    def __init__(self, max_frame: int, scratch_bytes: int = SCRATCH_BYTES) -> None:
        self._max_frame = max_frame
        self._scratch = bytearray(scratch_bytes)
        self._view = memoryview(self._scratch)
        self._start = 0  # first unparsed byte in scratch
        self._end = 0    # end of the bytes read into scratch
        self._big: bytearray | None = None
        self._big_view: memoryview | None = None
        self._big_filled = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        if self._big_view is not None:
            return self._big_view[self._big_filled:]
        if self._end == len(self._scratch):
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list:
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled < len(self._big):
                return []
            frame = self._big
            self._big = self._big_view = None
            return [frame]
        self._end += nbytes
        return self._split()

    def reset(self) -> None:
        self._start = self._end = 0
        self._big = self._big_view = None

    def _split(self) -> list:
        frames = []
        view, start, end = self._view, self._start, self._end
        while end - start >= 4:
            size = _SIZE.unpack_from(view, start)[0]
            if size < 0 or size > self._max_frame:
                raise FrameSizeError(size)
            if end - start - 4 >= size:
                frames.append(bytes(view[start + 4:start + 4 + size]))
                start += 4 + size
                continue
            if size > len(self._scratch) // 2:
                # Large: its own buffer, the bytes already here copied in, the rest read into it.
                have = end - start - 4
                self._big = bytearray(size)
                self._big_view = memoryview(self._big)
                self._big_view[:have] = view[start + 4:end]
                self._big_filled = have
                start = end = 0
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames

    def _compact(self) -> None:
        """Move the unparsed tail (a partial small frame) to the front of scratch."""
        n = self._end - self._start
        self._view[:n] = self._view[self._start:self._end]
        self._start, self._end = 0, n
