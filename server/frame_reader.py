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

import mmap
import struct
from typing import Any

_SIZE = struct.Struct(">i")
SCRATCH_BYTES = 256 * 1024


class ClaimBudget:
    """Bytes that frame headers announced and that have not arrived yet, across the readers
    sharing it. A reader gives a large frame an ordinary buffer of its full size (fast: filled
    in place, no page faults to speak of) while the claims outstanding stay within `limit`;
    past it, a lazy one (`lazy_buffer`), so headers claiming large frames cannot make the
    process allocate memory their senders never send."""

    __slots__ = ("limit", "outstanding")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.outstanding = 0


def lazy_buffer(size: int) -> mmap.mmap:
    """A writable buffer of `size` zero bytes whose pages the kernel provides on first write
    (anonymous memory): resident memory follows the bytes written, not the size."""
    return mmap.mmap(-1, size)


class FrameSizeError(ValueError):
    """A frame header announced a size outside 0..max_frame. args: (size, the complete frames
    that came before it in the same read)."""


class FrameReader:
    """`get_buffer()` / `buffer_updated(n)` for a BufferedProtocol; `buffer_updated` returns the
    frames (bytes-like, without their size prefix) that are now complete."""

    __slots__ = ("_max_frame", "_budget", "_claimed", "_scratch_bytes", "_keep_scratch", "_scratch", "_view",
                 "_start", "_end", "_big", "_big_view", "_big_filled")

    def __init__(self, max_frame: int, scratch_bytes: int = SCRATCH_BYTES, *,
                 budget: ClaimBudget | None = None, keep_scratch: bool = True) -> None:
        """`budget`: large frames' buffers are bytearrays of their full size while it allows
        (always without one: the peer links of authenticated nodes), else `lazy_buffer`s.
        `keep_scratch=False`: the scratch buffer exists only while a read is under way or a
        partial small frame waits in it (a client connection: thousands of idle ones hold
        none)."""
        self._max_frame = max_frame
        self._budget = budget
        self._claimed = 0  # this reader's share of budget.outstanding
        self._scratch_bytes = scratch_bytes
        self._keep_scratch = keep_scratch
        self._scratch: bytearray | None = None
        self._view: memoryview | None = None
        if keep_scratch:
            self._new_scratch()
        self._start = 0  # first unparsed byte in scratch
        self._end = 0    # end of the bytes read into scratch
        self._big: Any = None  # a large frame's own buffer (see `_allocate`)
        self._big_view: memoryview | None = None
        self._big_filled = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        if self._big_view is not None:
            return self._big_view[self._big_filled:]
        if self._scratch is None:
            self._new_scratch()
        elif self._end == len(self._scratch):
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list:
        if self._big is not None:
            self._big_filled += nbytes
            if self._claimed:
                arrived = min(nbytes, self._claimed)
                self._claimed -= arrived
                self._budget.outstanding -= arrived
            if self._big_filled < len(self._big):
                return []
            frame = self._big
            self._big = self._big_view = None
            return [frame]
        self._end += nbytes
        return self._split()

    @property
    def buffered_bytes(self) -> int:
        """Bytes read that are not part of a frame handed out yet."""
        if self._big is not None:
            return self._big_filled
        return self._end - self._start

    def reset(self) -> None:
        if self._claimed:
            self._budget.outstanding -= self._claimed
            self._claimed = 0
        self._start = self._end = 0
        self._big = self._big_view = None
        if not self._keep_scratch:
            self._scratch = self._view = None

    def _split(self) -> list:
        frames = []
        view, start, end = self._view, self._start, self._end
        while end - start >= 4:
            size = _SIZE.unpack_from(view, start)[0]
            if size < 0 or size > self._max_frame:
                raise FrameSizeError(size, frames)
            if end - start - 4 >= size:
                frames.append(bytes(view[start + 4:start + 4 + size]))
                start += 4 + size
                continue
            if size > self._scratch_bytes // 2:
                # Large: its own buffer, the bytes already here copied in, the rest read into it.
                have = end - start - 4
                self._big = self._allocate(size, size - have)
                self._big_view = memoryview(self._big)
                self._big_view[:have] = view[start + 4:end]
                self._big_filled = have
                start = end = 0
            break
        if start == end:
            start = end = 0
            if not self._keep_scratch:
                self._scratch = self._view = None
        self._start, self._end = start, end
        return frames

    def _new_scratch(self) -> None:
        self._scratch = bytearray(self._scratch_bytes)
        self._view = memoryview(self._scratch)

    def _allocate(self, size: int, missing: int):
        budget = self._budget
        if budget is None:
            return bytearray(size)
        if budget.outstanding + missing <= budget.limit:
            budget.outstanding += missing
            self._claimed = missing
            return bytearray(size)
        return lazy_buffer(size)

    def _compact(self) -> None:
        """Move the unparsed tail (a partial small frame) to the front of scratch."""
        n = self._end - self._start
        self._view[:n] = self._view[self._start:self._end]
        self._start, self._end = 0, n
