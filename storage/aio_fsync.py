"""fsync through Linux native AIO (io_submit with IOCB_CMD_FSYNC), without a thread.

The kernel runs each fsync in one of its own workers and counts the completion on an eventfd,
which the event loop watches like a socket. So a group commit neither blocks the loop on the
disk nor wakes a Python thread that then has to win the GIL back from a busy loop: on a 2-core
VM, those hand-offs cost more context switches than the fsyncs themselves (bench/README.md, (g)).

Linux has run IOCB_CMD_FSYNC for every file system with an fsync since 4.18. `AioFsync.open`
proves it on the data directory's own file system with a real fsync of a scratch file, and
returns None where it does not work (another OS, an unknown architecture, a kernel or sandbox
without AIO): the caller then fsyncs as before.

No event loop here: `submit` hands fsyncs to the kernel, `reap` collects the finished ones once
`fileno()` is readable.
"""
from __future__ import annotations

import ctypes
import os
import platform
import select
import tempfile

__all__ = ["AioFsync"]

# (io_setup, io_destroy, io_getevents, io_submit) by architecture.
_SYSCALLS = {"x86_64": (206, 207, 208, 209), "aarch64": (0, 1, 4, 2)}
_IOCB_CMD_FSYNC = 2
_IOCB_FLAG_RESFD = 1
_PROBE_TIMEOUT_S = 5.0


class _Iocb(ctypes.Structure):  # <linux/aio_abi.h>, little-endian layout
    _fields_ = [("aio_data", ctypes.c_uint64), ("aio_key", ctypes.c_uint32), ("aio_rw_flags", ctypes.c_int32),
                ("aio_lio_opcode", ctypes.c_uint16), ("aio_reqprio", ctypes.c_int16),
                ("aio_fildes", ctypes.c_uint32), ("aio_buf", ctypes.c_uint64), ("aio_nbytes", ctypes.c_uint64),
                ("aio_offset", ctypes.c_int64), ("aio_reserved2", ctypes.c_uint64), ("aio_flags", ctypes.c_uint32),
                ("aio_resfd", ctypes.c_uint32)]


class _IoEvent(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64), ("res", ctypes.c_int64),
                ("res2", ctypes.c_int64)]


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class AioFsync:
    """One kernel AIO context and its eventfd. Tokens are the caller's ints, handed back by
    `reap` with 0 (durable) or the errno the fsync failed with."""

    def __init__(self, capacity: int = 1024) -> None:
        numbers = _SYSCALLS.get(platform.machine())
        if numbers is None or ctypes.sizeof(_Iocb) != 64:
            raise OSError(f"no native AIO on {platform.machine()}")
        self._setup, self._destroy, self._getevents, self._submit = numbers
        # PyDLL: the calls keep the GIL. Each returns at once (io_submit only queues an fsync
        # for a kernel worker; io_getevents is asked not to wait), and a call that let the GIL go
        # would wait up to sys.getswitchinterval() (5 ms) to have it back whenever another
        # thread of the server wanted it (bench/README.md, (x)).
        self._libc = ctypes.PyDLL(None, use_errno=True)
        self._libc.syscall.restype = ctypes.c_long
        self.capacity = capacity
        self.in_flight = 0
        self._ctx = ctypes.c_ulong(0)
        if self._libc.syscall(self._setup, capacity, ctypes.byref(self._ctx)) < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"io_setup: {os.strerror(err)}")
        self._eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._events = (_IoEvent * 64)()
        self._no_wait = _Timespec(0, 0)

    @classmethod
    def open(cls, directory: str, capacity: int = 1024) -> "AioFsync | None":
        """A context that has fsynced a scratch file in `directory`, or None if AIO cannot."""
        try:
            aio = cls(capacity)
        except (OSError, AttributeError):
            return None
        try:
            fd, path = tempfile.mkstemp(prefix=".aio-probe-", dir=directory)
            try:
                os.write(fd, b"probe")
                if aio.submit([(0, fd)]) == 1 and _readable(aio.fileno(), _PROBE_TIMEOUT_S) \
                        and aio.reap() == [(0, 0)]:
                    return aio
            finally:
                os.close(fd)
                os.unlink(path)
        except OSError:
            pass
        aio.close()
        return None

    def fileno(self) -> int:
        """Readable when fsyncs have finished."""
        return self._eventfd

    def submit(self, fsyncs) -> int:
        """Start fsync(fd) for each (token, fd), in order, as far as there is room; returns how
        many were started. OSError if the first of them cannot be (a closed fd: EBADF)."""
        fsyncs = list(fsyncs)[:self.capacity - self.in_flight]
        if not fsyncs:
            return 0
        blocks = [_Iocb(aio_data=token, aio_lio_opcode=_IOCB_CMD_FSYNC, aio_fildes=fd,
                        aio_flags=_IOCB_FLAG_RESFD, aio_resfd=self._eventfd) for token, fd in fsyncs]
        pointers = (ctypes.POINTER(_Iocb) * len(blocks))(*(ctypes.pointer(b) for b in blocks))
        started = self._libc.syscall(self._submit, self._ctx, len(blocks), pointers)
        if started < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"io_submit: {os.strerror(err)}")
        self.in_flight += started
        return started

    def reap(self) -> list[tuple[int, int]]:
        """(token, 0 or errno) of every fsync finished since the last call."""
        try:
            os.eventfd_read(self._eventfd)
        except BlockingIOError:
            return []
        done: list[tuple[int, int]] = []
        events = self._events
        while True:
            n = self._libc.syscall(self._getevents, self._ctx, 0, len(events), events, ctypes.byref(self._no_wait))
            if n < 0:
                err = ctypes.get_errno()
                raise OSError(err, f"io_getevents: {os.strerror(err)}")
            for i in range(n):
                done.append((events[i].data, -events[i].res if events[i].res < 0 else 0))
            self.in_flight -= n
            if n < len(events):
                return done

    def close(self) -> None:
        """Only once nothing is in flight (io_destroy would wait for it)."""
        if self._eventfd >= 0:
            self._libc.syscall(self._destroy, self._ctx)
            os.close(self._eventfd)
            self._eventfd = -1


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether `fd` becomes readable within `timeout_s` (poll, not select: a process with many
    open files hands out descriptors above select's limit of 1024)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))
