import pytest

from kraftd.storage import FileLog, MemoryLog


@pytest.fixture(params=["file", "memory"])
def make_log(request, tmp_path):
    """make_log(**kw) -> a fresh log of the parametrised kind (same directory on each call,
    so a FileLog call after close() reopens it)."""
    def make(segment_bytes=1 << 20, index_interval_bytes=4096):
        if request.param == "file":
            return FileLog(tmp_path / "t-0", segment_bytes=segment_bytes,
                           index_interval_bytes=index_interval_bytes)
        return MemoryLog(segment_bytes=segment_bytes)
    make.kind = request.param
    return make
