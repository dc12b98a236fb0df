# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The produce path's per-record walk (protocol/records.py's `_check_payload`) in C.

`records_are_well_formed(data, count)` answers only yes or no: True when the pure-Python walk
would accept the records section, False when it would raise. On False, protocol/records.py runs
the Python walk, which raises the exact error, so messages live in one place. A False for a
section Python accepts costs speed only; a True for one it refuses would let garbage into the
log, which tests/protocol/test_record_walk_differential.py checks against (hypothesis, both
ways, over valid and mangled sections).

Varints follow protocol/varint.py: at most 10 bytes, zigzag-decoded. Python decodes them into
unbounded integers; here a length whose varint decodes past 2**62 counts as "too large", which
every use of a length refuses just as Python's would (it runs past the end of the section or
is below -1).
"""
from cpython.unicode cimport PyUnicode_DecodeUTF8

cdef const long long HUGE = 4611686018427387904  # 2**62


cdef inline Py_ssize_t _varint(const unsigned char *d, Py_ssize_t pos, Py_ssize_t end,
                               long long *out) noexcept nogil:
    """Signed varint at pos -> new pos, or -1 (truncated or longer than 10 bytes). A value past
    +-2**62 is clamped to +-HUGE (only its sign and size matter to the callers)."""
    cdef unsigned long long z = 0
    cdef unsigned int shift = 0
    cdef unsigned char b
    cdef bint big = False
    while True:
        if pos >= end:
            return -1
        b = d[pos]
        pos += 1
        if shift < 63:
            z |= (<unsigned long long>(b & 0x7F)) << shift
        elif b & 0x7F:  # bit 63 or above: the value's magnitude is past 2**62
            big = True
        if b < 0x80:
            break
        shift += 7
        if shift >= 70:
            return -1
    if big:
        out[0] = -HUGE if z & 1 else HUGE
    else:
        out[0] = <long long>(z >> 1) ^ -(<long long>(z & 1))
    return pos


cdef inline Py_ssize_t _skip_varint(const unsigned char *d, Py_ssize_t pos, Py_ssize_t end) noexcept nogil:
    cdef int n = 0
    while True:
        if pos >= end:
            return -1
        n += 1
        if d[pos] < 0x80:
            return pos + 1
        pos += 1
        if n >= 10:
            return -1


cdef inline Py_ssize_t _past_deltas(const unsigned char *d, Py_ssize_t pos, Py_ssize_t end) noexcept nogil:
    """From a record's attributes byte to its key length (past the timestamp and offset
    deltas, whose values do not matter here); -1 if a varint runs out."""
    pos += 1  # attributes
    pos = _skip_varint(d, pos, end)  # timestamp delta
    if pos < 0:
        return -1
    return _skip_varint(d, pos, end)  # offset delta


cdef Py_ssize_t _headers(const unsigned char *d, Py_ssize_t pos, Py_ssize_t end) except? -2:
    """Walk a record's headers -> new pos, or -1 when Python's walk would refuse them."""
    cdef long long count, n, k
    pos = _varint(d, pos, end, &count)
    if pos < 0 or count < 0:
        return -1
    k = 0
    while k < count:
        pos = _varint(d, pos, end, &n)
        if pos < 0 or n < 0 or n > end - pos:
            return -1
        try:
            PyUnicode_DecodeUTF8(<const char *>d + pos, n, "strict")
        except UnicodeDecodeError:
            return -1
        pos += n
        pos = _varint(d, pos, end, &n)
        if pos < 0 or n < -1 or n > end - pos:
            return -1
        if n > 0:
            pos += n
        k += 1
    return pos


cdef int _walk(const unsigned char[::1] data, long long count, bint find_keyless) except -1:
    """0: the records section is not well formed; 1: it is; 2 (`find_keyless`): a record without
    a key came before anything was found wrong."""
    cdef const unsigned char *d = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t end = data.shape[0]
    cdef Py_ssize_t pos = 0, rec_end
    cdef long long i = 0, length, n
    while i < count:
        pos = _varint(d, pos, end, &length)
        if pos < 0 or length < 6 or length > end - pos:
            return 0
        rec_end = pos + length
        pos = _past_deltas(d, pos, end)
        if pos < 0:
            return 0
        pos = _varint(d, pos, end, &n)  # key length
        if pos < 0 or n < -1 or n > end - pos:
            return 0
        if n == -1 and find_keyless:
            return 2
        if n > 0:
            pos += n
        pos = _varint(d, pos, end, &n)  # value length
        if pos < 0 or n < -1 or n > end - pos:
            return 0
        if n > 0:
            pos += n
        if pos >= end:
            return 0
        if d[pos] == 0:
            pos += 1
        else:
            pos = _headers(d, pos, end)
            if pos < 0:
                return 0
        if pos != rec_end:
            return 0
        i += 1
    return 1 if pos == end else 0


def records_are_well_formed(const unsigned char[::1] data not None, long long count):
    """True when protocol/records.py's `_check_payload(data, count, ...)` would return, False
    when it would raise."""
    return _walk(data, count, False) == 1


def has_keyless_record(const unsigned char[::1] data not None, long long count):
    """True when a record of a records section that `records_are_well_formed` accepted has no
    key (key length -1): what a compacted topic refuses."""
    return _walk(data, count, True) == 2
