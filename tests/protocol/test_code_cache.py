"""protocol/code_cache.py: codecs' bytecode from the install-time cache, never other source's."""
import importlib.util
import marshal

import pytest

from kraftd.protocol import build_code_cache, code_cache, messages
from kraftd.protocol.generator import build_classes


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("codecs") / "codecs.cache"
    assert build_code_cache.build(path) > 300
    return path.read_bytes()


@pytest.fixture
def cache(built, tmp_path):
    path = tmp_path / "codecs.cache"
    path.write_bytes(built)
    code_cache.use(path)
    yield path
    code_cache.use(None)


def refuse_compiling(monkeypatch):
    def refuse(source, filename, mode):
        raise AssertionError(f"compiled {filename}")
    monkeypatch.setattr(code_cache, "compile", refuse, raising=False)


def test_a_fresh_codec_comes_from_the_cache_and_encodes_the_same(cache, monkeypatch):
    refuse_compiling(monkeypatch)
    spec = messages.ALL_MESSAGES["ProduceResponse"].SCHEMA
    fresh = build_classes(spec)  # new classes: nothing of them compiled in this process
    known = messages.ALL_MESSAGES["ProduceResponse"]
    for version in (3, 9, 10):
        def response(cls):
            part = cls.PartitionProduceResponse(index=2, error_code=0, base_offset=41)
            return cls(responses=[cls.TopicProduceResponse(name="t", partition_responses=[part])],
                       throttle_time_ms=5)
        assert response(fresh).to_bytes(version) == response(known).to_bytes(version)
        decoded, _ = fresh.decode(response(known).to_bytes(version), 0, version)
        assert decoded.responses[0].partition_responses[0].base_offset == 41


def test_source_the_cache_does_not_hold_is_compiled(cache):
    code = code_cache.compile_source("x = 6 * 7\n", "<not a codec>")
    ns: dict = {}
    exec(code, ns)
    assert ns["x"] == 42


def test_a_damaged_entry_is_compiled_instead(cache, monkeypatch):
    entries = code_cache.load(cache)
    damaged = {key: b"not zlib" for key in entries}
    cache.write_bytes(marshal.dumps((importlib.util.MAGIC_NUMBER, damaged)))
    code_cache.use(cache)
    spec = messages.ALL_MESSAGES["ApiVersionsRequest"].SCHEMA
    fresh = build_classes(spec)
    assert fresh(client_software_name="x").to_bytes(3) == \
        messages.ALL_MESSAGES["ApiVersionsRequest"](client_software_name="x").to_bytes(3)


def test_another_pythons_cache_is_not_read(cache):
    cache.write_bytes(marshal.dumps((b"\x00\x00\r\n", code_cache.load(cache))))
    assert code_cache.load(cache) == {}
    cache.write_bytes(b"garbage")
    assert code_cache.load(cache) == {}
    assert code_cache.load(cache.parent / "missing") == {}
