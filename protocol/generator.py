"""Turns Kafka JSON message definitions into Python classes with specialised codecs.

At import only the classes are built (slots, keyword-only `__init__`, `__eq__`, `__repr__`).
The decoder and encoder of a (message, version) pair are generated as Python source on first
use, exec'd once and cached on the classes: per version only that version's fields, runs of
fixed-width fields read and written by one precompiled `struct.Struct`, and the flexible or
classic encodings chosen at generation time rather than tested at run time.
"""
from __future__ import annotations

import linecache
import struct
import uuid
from operator import itemgetter
from pathlib import Path

from .code_cache import compile_source
from .codegen_decode import DecodeEmitter
from .codegen_encode import EncodeEmitter
from .errors import DecodeError, EncodeError, UnsupportedVersionError
from .primitives import (
    INT16, INT32, ZERO_UUID, bad_length, null_not_allowed, read_uvarint, truncated,
    uuid_from_bytes, uvarint_bytes, write_uvarint,
)
from .schema_model import FIXED_TYPES, FieldSpec, MessageSpec, StructSpec, load_json, parse_schema

__all__ = ["GeneratedStruct", "build_classes", "load_schema_dir", "source_for"]

_MISSING = object()


class GeneratedStruct:
    """Base of every generated message and struct class."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _compiler: "MessageCompiler"
    _dec: dict
    _enc: dict

    @classmethod
    def decode(cls, buf, pos: int, version: int):
        """Decode one instance at `pos`; returns (obj, new_pos). Raises DecodeError."""
        fn = cls._dec.get(version)
        if fn is None:
            fn = cls._compiler.function(cls, version, cls._dec)
        if type(buf) is not memoryview:
            buf = memoryview(buf)
        try:
            return fn(buf, pos, len(buf))
        except DecodeError as e:
            raise DecodeError(f"{cls.__qualname__} v{version}: {e}") from None
        except (struct.error, IndexError) as e:
            raise DecodeError(f"{cls.__qualname__} v{version}: truncated input ({e})") from None
        except UnicodeDecodeError as e:
            raise DecodeError(f"{cls.__qualname__} v{version}: invalid UTF-8 ({e})") from None
        except (ValueError, OverflowError, TypeError) as e:
            raise DecodeError(f"{cls.__qualname__} v{version}: {e}") from None

    @classmethod
    def encode(cls, obj, version: int, parts: list) -> None:
        """Append the encoding of `obj` to `parts` (bytearray chunks and zero-copy values)."""
        fn = cls._enc.get(version)
        if fn is None:
            fn = cls._compiler.function(cls, version, cls._enc)
        try:
            out = fn(obj, bytearray(), parts)
        except (struct.error, AttributeError, TypeError) as e:
            raise EncodeError(f"{cls.__qualname__} v{version}: {e}") from None
        if out:
            parts.append(out)

    @classmethod
    def encode_into(cls, obj, version: int, out: bytearray, parts: list) -> bytearray:
        """Lower-level encode continuing an existing bytearray; returns the current one."""
        fn = cls._enc.get(version)
        if fn is None:
            fn = cls._compiler.function(cls, version, cls._enc)
        try:
            return fn(obj, out, parts)
        except (struct.error, AttributeError, TypeError) as e:
            raise EncodeError(f"{cls.__qualname__} v{version}: {e}") from None

    def to_bytes(self, version: int) -> bytes:
        """Convenience for tests and tools: the whole encoding joined into bytes (copies)."""
        parts: list = []
        type(self).encode(self, version, parts)
        return b"".join(p if not hasattr(p, "view") else p.view() for p in parts)

    def __repr__(self) -> str:
        args = ", ".join(f"{a}={getattr(self, a)!r}" for a in self._fields)
        return f"{type(self).__qualname__}({args})"

    __hash__ = None  # mutable


# -- defaults ------------------------------------------------------------------------------------
def _const_default(f: FieldSpec):
    """The Python default of a scalar field, or _MISSING for list/struct (built fresh)."""
    d = f.default
    if f.is_array or f.is_struct:
        return None if d == "null" else _MISSING
    if d == "null":
        return None
    t = f.type
    if t == "bool":
        return d if isinstance(d, bool) else str(d).lower() == "true"
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        if d is None or d == "":
            return 0
        try:
            return int(d)
        except ValueError:
            return int(str(d), 0)
    if t == "float64":
        return float(d) if d not in (None, "") else 0.0
    if t == "string":
        return "" if d is None else str(d)
    if t == "uuid":
        return ZERO_UUID if not d else uuid.UUID(str(d))
    # bytes / records: Kafka defaults records to null; bytes to empty
    if t == "records" and d is None and f.nullable:
        return None
    return b""


def _fresh_expr(f: FieldSpec, struct_ref: str):
    """Expression building a fresh mutable default (list or struct instance)."""
    return "[]" if f.is_array else f"{struct_ref}()"


class MessageCompiler:
    """Holds one schema's classes and generates their codecs per version on demand."""

    def __init__(self, spec: MessageSpec):
        self.spec = spec
        self.classes: dict[str, type] = {}   # struct name -> class (root included)
        self.sources: dict[int, str] = {}

    # Called by GeneratedStruct on a cache miss.
    def function(self, cls, version: int, table: dict):
        if version not in self.sources:
            if version not in self.spec.valid:
                raise UnsupportedVersionError(
                    f"{self.spec.name} does not support version {version} "
                    f"(valid {self.spec.valid.lo}-{self.spec.valid.hi})")
            self.compile(version)
        fn = table.get(version)
        if fn is None:
            raise UnsupportedVersionError(f"{cls.__qualname__} is not part of "
                                          f"{self.spec.name} v{version}")
        return fn

    def generate(self, version: int) -> tuple[str, str, "VersionContext"]:
        """The codec source of `version`, its file name, and the context its code runs in."""
        ctx = VersionContext(self, version)
        chunks = []
        for s in ctx.reachable():
            chunks.append(DecodeEmitter(ctx, s).build())
            chunks.append(EncodeEmitter(ctx, s).build())
        chunks.extend(ctx.factories())
        return "\n\n".join(chunks) + "\n", f"<kraftd codec {self.spec.name} v{version}>", ctx

    def compile(self, version: int) -> None:
        src, filename, ctx = self.generate(version)
        structs = ctx.reachable()
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        ns = ctx.namespace()
        exec(compile_source(src, filename), ns)
        for s in structs:
            cls = self.classes[s.name]
            cls._dec[version] = ns[f"_d_{s.name}"]
            cls._enc[version] = ns[f"_e_{s.name}"]
        self.sources[version] = src


class VersionContext:
    """What the emitters need to know about one version, plus the generated code's globals."""

    def __init__(self, compiler: MessageCompiler, version: int):
        self.compiler = compiler
        self.spec = compiler.spec
        self.version = version
        self.flexible = version in self.spec.flexible
        self.consts: dict[str, object] = {}
        self._struct_names: dict[str, str] = {}
        self._factories: set[str] = set()

    def factories(self) -> list[str]:
        """Sources of `_f_<Struct>()` default-instance factories used by the decoders."""
        done: dict[str, str] = {}
        while self._factories - done.keys():
            name = min(self._factories - done.keys())
            s = self.spec.structs[name]
            lines = [f"def _f_{name}():", f"    o = _new(_C_{name})"]
            lines += [f"    o.{f.attr} = {self.default_expr(f)}" for f in s.fields]
            lines += ["    o._unknown_tagged_fields = None", "    return o"]
            done[name] = "\n".join(lines)
        return [done[k] for k in sorted(done)]

    def reachable(self) -> list[StructSpec]:
        seen: dict[str, StructSpec] = {}

        def walk(s: StructSpec):
            seen[s.name] = s
            for f in s.fields:
                if f.is_struct and self.version in f.versions and f.struct.name not in seen:
                    walk(f.struct)
        walk(self.spec.root)
        return list(seen.values())

    def namespace(self) -> dict:
        ns = dict(_RUNTIME)
        ns.update(self.consts)
        for name, cls in self.compiler.classes.items():
            ns[f"_C_{name}"] = cls
        return ns

    def const(self, value) -> str:
        name = f"_K{len(self.consts)}"
        self.consts[name] = value
        return name

    def cls_ref(self, s: StructSpec) -> str:
        return f"_C_{s.name}"

    def struct_const(self, fmt: str) -> str:
        name = self._struct_names.get(fmt)
        if name is None:
            name = self._struct_names[fmt] = self.const(struct.Struct(fmt))
        return name

    def is_fixed(self, f: FieldSpec) -> bool:
        return not f.is_array and f.type in FIXED_TYPES

    def field_flexible(self, f: FieldSpec) -> bool:
        if not self.flexible:
            return False
        return f.flexible_override is None or self.version in f.flexible_override

    def default_expr(self, f: FieldSpec) -> str:
        d = _const_default(f)
        if d is _MISSING:
            if f.is_struct and not f.is_array:
                # A generated factory: cheaper than the keyword-argument constructor.
                self._factories.add(f.struct.name)
                return f"_f_{f.struct.name}()"
            return _fresh_expr(f, "")
        if d is None or isinstance(d, (bool, int, str)):
            return repr(d)
        return self.const(d)

    def differs_from_default(self, f: FieldSpec, var: str) -> str:
        d = _const_default(f)
        if d is None:
            return f"{var} is not None"
        if f.is_array or f.type in ("bytes", "records"):
            return f"({var} is None or len({var}) != 0)"
        if d is _MISSING:  # struct: compare with a default-constructed instance
            sub = f.struct.fields
            consts = [_const_default(g) for g in sub]
            if sub and all(c is None or type(c) in (bool, int) for c in consts):
                # Inline the comparison for the common all-scalar struct (leader/epoch pairs).
                return "(" + " or ".join(f"{var}.{g.attr} != {c!r}"
                                         for g, c in zip(sub, consts)) + ")"
            return f"{var} != {self.const(self.compiler.classes[f.struct.name]())}"
        if isinstance(d, (bool, int, str)):
            return f"{var} != {d!r}"
        return f"{var} != {self.const(d)}"

    def struct_min_size(self, s: StructSpec) -> int:
        total = 1 if self.flexible else 0   # the tagged-field count
        for f in s.fields:
            if self.version not in f.versions or self.version in f.tagged:
                continue
            total += self.field_min_size(f)
        return total

    def field_min_size(self, f: FieldSpec) -> int:
        if f.is_array:
            return 1 if self.flexible else 4
        if f.is_struct:
            return 1 if self.version in f.nullable else self.struct_min_size(f.struct)
        if f.type in FIXED_TYPES:
            return FIXED_TYPES[f.type][1]
        if self.field_flexible(f):
            return 1
        return 2 if f.type == "string" else 4

    def min_elem_size(self, f: FieldSpec) -> int:
        if f.is_struct:
            return self.struct_min_size(f.struct)
        if f.type in FIXED_TYPES:
            return FIXED_TYPES[f.type][1]
        return 1 if self.field_flexible(f) else (2 if f.type == "string" else 4)


def _emit_tags(out: bytearray, tags) -> None:
    write_uvarint(out, len(tags))
    for tag, b in tags:
        write_uvarint(out, tag)
        write_uvarint(out, len(b))
        out += b


def _encode_null(what: str, version: int):
    raise EncodeError(f"{what} is None but is not nullable in version {version}")


def _tag_size(struct_name: str, tag: int, declared: int, used: int):
    raise DecodeError(f"{struct_name}: tagged field {tag} declared {declared} bytes "
                      f"but its value used {used}")


_RUNTIME = {
    "_new": object.__new__, "_str": str, "_ruv": read_uvarint, "_uvb": uvarint_bytes,
    "_uuid": uuid_from_bytes, "_trunc": truncated, "_badlen": bad_length,
    "_nonull": null_not_allowed, "_I16": INT16, "_I32": INT32,
    "_unpack_from": struct.unpack_from, "_pack": struct.pack,
    "_NULL16": b"\xff\xff", "_NULL32": b"\xff\xff\xff\xff", "_enull": _encode_null,
    "_emit_tags": _emit_tags, "_key0": itemgetter(0), "_tagsize": _tag_size,
}


# -- class construction ------------------------------------------------------------------------
def _method_source(s: StructSpec) -> str:
    """Source of `__init__` (keyword-only, schema defaults) and `__eq__` for one struct."""
    params, body = [], []
    for f in s.fields:
        if _const_default(f) is _MISSING:
            params.append(f"{f.attr}=_M")
            fresh = _fresh_expr(f, f"_C_{f.struct.name}" if f.is_struct else "")
            body.append(f"self.{f.attr} = {fresh} if {f.attr} is _M else {f.attr}")
        else:
            params.append(f"{f.attr}=_D_{f.attr}")
            body.append(f"self.{f.attr} = {f.attr}")
    body.append("self._unknown_tagged_fields = None")
    star = "*, " if params else ""
    cmp = " and ".join(f"self.{f.attr} == other.{f.attr}" for f in s.fields) or "True"
    return (f"def __init__(self, {star}{', '.join(params)}):\n    " + "\n    ".join(body)
            + "\ndef __eq__(self, other):\n"
            "    if type(other) is not type(self):\n        return NotImplemented\n"
            f"    return {cmp}\n")


def method_source(cls) -> tuple[str, str]:
    """The source of a message class's generated `__init__`/`__eq__`, and its file name."""
    return _method_source(cls._spec), f"<kraftd class {cls.__qualname__}>"


def _build_methods(cls) -> None:
    """Replace the lazy stubs with generated `__init__`/`__eq__` (first use of the class).

    Deferred so that importing `messages` does not compile code for classes never used.
    """
    s: StructSpec = cls._spec
    ns = {"_M": _MISSING}
    for f in s.fields:
        d = _const_default(f)
        if d is not _MISSING:
            ns[f"_D_{f.attr}"] = d
    for name, other in cls._compiler.classes.items():
        ns[f"_C_{name}"] = other
    exec(compile_source(*method_source(cls)), ns)
    cls.__init__ = ns["__init__"]
    cls.__eq__ = ns["__eq__"]


def _lazy_init(self, **kwargs):
    cls = type(self)
    _build_methods(cls)
    cls.__init__(self, **kwargs)


def _lazy_eq(self, other):
    cls = type(self)
    if "__eq__" not in cls.__dict__ or cls.__dict__["__eq__"] is _lazy_eq:
        _build_methods(cls)
    return cls.__eq__(self, other)


def _make_class(compiler: MessageCompiler, s: StructSpec, qualname: str) -> type:
    attrs = tuple(f.attr for f in s.fields)
    cls = type(s.name, (GeneratedStruct,), {
        "__slots__": attrs + ("_unknown_tagged_fields",),
        "__init__": _lazy_init, "__eq__": _lazy_eq, "__hash__": None,
        "__qualname__": qualname, "__module__": "kraftd.protocol.messages",
        "_fields": attrs, "_spec": s, "_compiler": compiler, "_dec": {}, "_enc": {},
    })
    compiler.classes[s.name] = cls
    return cls


def build_classes(spec: MessageSpec) -> type:
    """Create the root class of `spec` with its nested structs as class attributes."""
    compiler = MessageCompiler(spec)
    root = _make_class(compiler, spec.root, spec.name)
    for name, s in spec.structs.items():
        setattr(root, name, _make_class(compiler, s, f"{spec.name}.{name}"))
    valid, flex = spec.valid, spec.flexible
    root.SCHEMA = spec
    root.SCHEMA_TYPE = spec.type
    root.API_KEY = spec.api_key
    root.MIN_VERSION, root.MAX_VERSION = valid.lo, valid.hi
    lo = max(valid.lo, flex.lo)
    root.FLEXIBLE_MIN = lo if flex and lo <= min(valid.hi, flex.hi) else None
    return root


def load_schema_dir(path: Path) -> dict[str, type]:
    """Parse every `*.json` schema in `path`; returns root classes by message name."""
    classes = {}
    for p in sorted(Path(path).glob("*.json")):
        spec = parse_schema(load_json(p.read_text(encoding="utf-8")))
        classes[spec.name] = build_classes(spec)
    return classes


def source_for(cls: type, version: int) -> str:
    """The generated codec source of `cls`'s message at `version` (compiling it if needed)."""
    compiler = cls._compiler
    if version not in compiler.sources:
        compiler.function(cls, version, cls._dec)
    return compiler.sources[version]
