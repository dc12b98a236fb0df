"""KafkaConnection without sockets: framing, ordering, coalescing, pausing."""
from __future__ import annotations

import asyncio
import struct

import pytest

from kraftd.server import connection as connmod
from kraftd.server.connection import KafkaConnection
from server_fakes import FakeTransport, ScriptedDispatcher, frame, split_frames


@pytest.fixture
async def wired():
    dispatcher = ScriptedDispatcher()
    conn = KafkaConnection(dispatcher, max_frame_bytes=1000, idle_timeout_s=60)
    transport = FakeTransport()
    conn.connection_made(transport)
    yield conn, dispatcher, transport
    if not transport.closed:
        conn.connection_lost(None)


async def test_frames_split_byte_by_byte(wired):
    conn, d, t = wired
    stream = frame(b"Rone") + frame(b"R") + frame(b"R" + b"three" * 20)
    for i in range(len(stream)):
        conn.feed(stream[i:i + 1])
    assert d.frames == [b"Rone", b"R", b"R" + b"three" * 20]
    assert split_frames(t.output) == [b"one", b"", b"three" * 20]
    assert not t.closed


async def test_many_frames_in_one_chunk_one_write(wired):
    conn, d, t = wired
    conn.feed(b"".join(frame(b"R%d" % i) for i in range(50)))
    assert len(d.frames) == 50
    assert len(t.writes) == 1  # coalesced
    assert split_frames(t.output) == [b"%d" % i for i in range(50)]


async def test_frame_and_a_half_then_rest(wired):
    conn, d, t = wired
    stream = frame(b"Ra") + frame(b"Rbcdef")
    conn.feed(stream[:9])
    assert d.frames == [b"Ra"]
    conn.feed(stream[9:])
    assert d.frames == [b"Ra", b"Rbcdef"]
    assert split_frames(t.output) == [b"a", b"bcdef"]


async def test_zero_length_frame_is_dispatched(wired):
    conn, d, t = wired
    with pytest.raises(RuntimeError):
        d.dispatch(conn, memoryview(b""))  # the script treats it as a bug...
    d.frames.clear()
    conn.feed(struct.pack(">i", 0))
    assert d.frames == [b""] and t.aborted  # ...which aborts only this connection


@pytest.mark.parametrize("split", [False, True])
async def test_oversize_frame_closes_before_body_arrives(wired, split):
    conn, d, t = wired
    header = struct.pack(">i", 1001)
    if split:
        conn.feed(header[:2])
        assert not t.closed
        conn.feed(header[2:])
    else:
        conn.feed(header + b"R")
    assert t.aborted and d.frames == []
    assert conn.buffered_bytes <= 5  # nothing allocated for the announced size
    conn.feed(b"x" * 5000)  # later bytes are ignored
    assert d.frames == []


async def test_negative_length_closes(wired):
    conn, d, t = wired
    conn.feed(frame(b"Rok") + struct.pack(">i", -1))
    assert t.aborted
    assert d.frames == [b"Rok"]


async def test_max_size_frame_is_accepted(wired):
    conn, d, t = wired
    conn.feed(frame(b"R" + b"z" * 999))
    assert not t.closed and len(d.frames[0]) == 1000


async def test_parked_request_holds_back_later_responses(wired):
    conn, d, t = wired
    conn.feed(frame(b"Rfirst") + frame(b"Pa") + frame(b"Rthird") + frame(b"Pb"))
    assert split_frames(t.output) == [b"first"]
    d.complete("b", b"fourth")  # completes out of order: still held back by "a"
    assert split_frames(t.output) == [b"first"]
    writes_before = len(t.writes)
    d.complete("a", b"second")
    assert split_frames(t.output) == [b"first", b"second", b"third", b"fourth"]
    assert len(t.writes) == writes_before + 1  # released responses go out in one write


async def test_no_response_slots_do_not_block(wired):
    conn, d, t = wired
    conn.feed(frame(b"N") + frame(b"Rafter-acks0") + frame(b"N"))
    assert split_frames(t.output) == [b"after-acks0"]
    conn.feed(frame(b"Pp") + frame(b"N") + frame(b"Rlater"))
    assert split_frames(t.output) == [b"after-acks0"]
    d.complete("p", b"parked")
    assert split_frames(t.output) == [b"after-acks0", b"parked", b"later"]


async def test_close_from_dispatcher_after_earlier_responses(wired):
    conn, d, t = wired
    conn.feed(frame(b"Rok") + frame(b"X") + frame(b"Rnever"))
    assert t.closed and not t.aborted  # graceful: already-queued bytes may still go out
    assert d.frames == [b"Rok", b"X"]


async def test_completion_after_close_is_ignored(wired):
    conn, d, t = wired
    conn.feed(frame(b"Pz"))
    conn.connection_lost(None)
    d.complete("z", b"late")
    assert t.output == b""


async def test_write_backpressure_pauses_reading(wired):
    conn, d, t = wired
    assert t.limits == (connmod.WRITE_HIGH_WATER, connmod.WRITE_LOW_WATER)
    conn.pause_writing()
    assert t.reading_paused
    conn.resume_writing()
    assert not t.reading_paused


async def test_too_many_pending_pauses_reading(wired):
    conn, d, t = wired
    conn.feed(b"".join(frame(b"P%d" % i) for i in range(connmod.MAX_PENDING)))
    assert t.reading_paused
    for i in range(connmod.MAX_PENDING // 2 - 1):
        d.complete(str(i), b"")
    assert t.reading_paused
    d.complete(str(connmod.MAX_PENDING // 2 - 1), b"")
    assert not t.reading_paused


async def test_both_pause_reasons_must_clear(wired):
    conn, d, t = wired
    conn.feed(b"".join(frame(b"P%d" % i) for i in range(connmod.MAX_PENDING)))
    conn.pause_writing()
    for i in range(connmod.MAX_PENDING):
        d.complete(str(i), b"")
    assert t.reading_paused  # the write buffer is still full
    conn.resume_writing()
    assert not t.reading_paused


async def test_frames_already_read_wait_while_writes_are_paused(wired):
    conn, d, t = wired
    conn.pause_writing()
    conn.feed(frame(b"Ra") + frame(b"Rb") + frame(b"Rc")[:3])
    assert d.frames == [] and t.output == b""
    conn.resume_writing()
    await asyncio.sleep(0)  # buffered frames are processed on the next loop iteration
    assert d.frames == [b"Ra", b"Rb"]
    conn.feed(frame(b"Rc")[3:])
    assert split_frames(t.output) == [b"a", b"b", b"c"]


async def test_large_ready_responses_flush_mid_batch_and_stop_at_pause(wired):
    conn, d, t = wired
    n = 300 * 1024
    t.writelines = lambda chunks: (t.writes.append(b"".join(map(bytes, chunks))),
                                   conn.pause_writing())  # the socket is "full" at once
    conn.feed(b"".join(frame(b"B%d" % n) for _ in range(20)))
    # Dispatch stopped right after the flush that filled the transport buffer.
    assert len(d.frames) == 4 and len(t.writes) == 1
    assert conn.buffered_bytes > 0


async def test_region_parts_are_written_without_join(wired):
    conn, d, t = wired
    written = []
    t.writelines = lambda chunks: written.append(list(chunks))
    conn.feed(frame(b"Rhead") + frame(b"B%d" % (256 * 1024)))
    (chunks,) = written
    assert isinstance(chunks[-1], memoryview) and len(chunks[-1]) == 256 * 1024
    assert bytes(chunks[0]) == frame(b"head") + struct.pack(">i", 256 * 1024)


async def test_batch_done_once_per_read(wired):
    conn, d, t = wired
    conn.feed(frame(b"Ra") + frame(b"Rb"))
    assert d.batches == 1


async def test_costly_pipelined_frames_yield_the_loop_between_turns(wired, monkeypatch):
    """A connection handles frames for at most TURN_BUDGET_S per turn; the rest wait, unparsed,
    and other callbacks (other clients, /metrics) run in between. Answers keep their order."""
    import time as _time

    conn, d, t = wired
    dispatch = d.dispatch

    def slow(c, f):
        _time.sleep(0.004)
        return dispatch(c, f)

    monkeypatch.setattr(d, "dispatch", slow)
    others: list[int] = []
    asyncio.get_running_loop().call_soon(lambda: others.append(len(d.frames)))
    conn.feed(b"".join(frame(b"R%d" % i) for i in range(10)))
    assert 1 <= len(d.frames) < 10 and t.reading_paused  # over the 10 ms budget: paused
    for _ in range(50):
        await asyncio.sleep(0)
        if len(d.frames) == 10:
            break
    assert len(d.frames) == 10 and not t.reading_paused
    assert others and others[0] < 10  # the other callback ran before the last frames
    assert split_frames(t.output) == [b"%d" % i for i in range(10)]
