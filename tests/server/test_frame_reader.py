"""FrameReader: whatever the socket's read sizes, the frames come out whole, in order, once;
large frames are read into their own buffer without a copy; bad sizes are refused."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftd.server.frame_reader import FrameReader, FrameSizeError


def framed(payloads) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def feed(reader: FrameReader, data: bytes, read_sizes) -> list[bytes]:
    """Play the event loop: each read fills at most what get_buffer offered and the next size."""
    out, pos, sizes = [], 0, iter(read_sizes)
    while pos < len(data):
        buf = reader.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(data) - pos, next(sizes, 1 << 30))
        buf[:n] = data[pos:pos + n]
        pos += n
        out.extend(bytes(f) for f in reader.buffer_updated(n))
    return out


payload = st.one_of(st.binary(max_size=300), st.integers(0, 200_000).map(lambda n: bytes([n % 251]) * n))


@settings(max_examples=150, deadline=None)
@given(st.lists(payload, max_size=12), st.lists(st.integers(1, 70_000), max_size=200))
def test_frames_survive_any_read_sizes(payloads, read_sizes):
    reader = FrameReader(1 << 20, scratch_bytes=64 * 1024)
    assert feed(reader, framed(payloads), read_sizes) == payloads


def test_a_large_frame_is_read_into_its_own_buffer():
    reader = FrameReader(1 << 20, scratch_bytes=1024)
    big = bytes(range(256)) * 40  # 10 KiB, larger than half the scratch buffer
    data = framed([big])
    first = reader.get_buffer(-1)
    first[:100] = data[:100]
    assert reader.buffer_updated(100) == []
    rest = reader.get_buffer(-1)
    assert len(rest) == len(big) - 96  # exactly the frame's remaining bytes, nothing more
    rest[:] = data[100:]
    (frame,) = reader.buffer_updated(len(rest))
    assert frame == big and isinstance(frame, bytearray)
    assert rest.obj is frame  # the socket wrote into the frame itself: no copy


@pytest.mark.parametrize("size", [-1, (1 << 20) + 1])
def test_bad_frame_sizes_are_refused(size):
    reader = FrameReader(1 << 20)
    buf = reader.get_buffer(-1)
    buf[:4] = struct.pack(">i", size)
    with pytest.raises(FrameSizeError):
        reader.buffer_updated(4)


def test_reset_forgets_a_partial_frame():
    reader = FrameReader(1 << 20, scratch_bytes=1024)
    assert feed(reader, framed([b"x" * 5000])[:700], []) == []
    reader.reset()
    assert feed(reader, framed([b"abc", b"de"]), [3]) == [b"abc", b"de"]


def test_large_frames_take_full_buffers_within_the_claim_budget_and_lazy_ones_past_it():
    """A header's claim is trusted (a bytearray of the full size) while the bytes announced and
    not yet arrived stay within the shared budget; past it the buffer is an anonymous mapping,
    whose memory follows the bytes that arrive. Claims are given back as bytes arrive and when
    a reader is reset (its connection gone)."""
    import mmap

    from kraftd.server.frame_reader import ClaimBudget

    budget = ClaimBudget(100_000)
    first, second = (FrameReader(1 << 20, scratch_bytes=1024, budget=budget) for _ in range(2))
    header = struct.pack(">i", 80_000)
    first.get_buffer(-1)[:4] = header
    assert first.buffer_updated(4) == []
    assert budget.outstanding == 80_000 and isinstance(first._big, bytearray)
    second.get_buffer(-1)[:4] = header  # 80,000 more would pass the budget
    second.buffer_updated(4)
    assert isinstance(second._big, mmap.mmap) and budget.outstanding == 80_000
    (frame,) = feed(first, bytes(80_000), [])
    assert len(frame) == 80_000 and budget.outstanding == 0
    third = FrameReader(1 << 20, scratch_bytes=1024, budget=budget)
    third.get_buffer(-1)[:4] = header
    third.buffer_updated(4)
    feed(third, bytes(30_000), [])
    assert budget.outstanding == 50_000
    third.reset()
    assert budget.outstanding == 0
    # Without a budget (the peer links of authenticated nodes) every large frame is a bytearray.
    peer = FrameReader(1 << 20, scratch_bytes=1024)
    peer.get_buffer(-1)[:4] = struct.pack(">i", 900_000)
    peer.buffer_updated(4)
    assert isinstance(peer._big, bytearray)


def test_a_reader_that_does_not_keep_its_scratch_holds_none_between_frames():
    """A client connection's reader: no buffer while idle, one while a partial frame waits."""
    reader = FrameReader(1 << 20, scratch_bytes=1024, keep_scratch=False)
    assert reader._scratch is None
    assert feed(reader, framed([b"abc", b"defg"]), []) == [b"abc", b"defg"]
    assert reader._scratch is None
    whole = framed([b"x" * 100])
    assert feed(reader, whole[:50], []) == []
    assert reader._scratch is not None and reader.buffered_bytes == 50
    assert feed(reader, whole[50:], []) == [b"x" * 100]
    assert reader._scratch is None
    assert feed(reader, framed([b"y" * 5000]), [700]) == [b"y" * 5000]  # a large one: its own buffer
    assert reader._scratch is None


@settings(max_examples=100, deadline=None)
@given(st.lists(payload, max_size=12), st.lists(st.integers(1, 70_000), max_size=200))
def test_frames_survive_any_read_sizes_without_a_kept_scratch(payloads, read_sizes):
    reader = FrameReader(1 << 20, scratch_bytes=64 * 1024, keep_scratch=False)
    assert feed(reader, framed(payloads), read_sizes) == payloads
