"""Emits the Python source of one struct's decoder for one version.

Generated decoders have the signature `_d_<Struct>(buf, pos, blen) -> (obj, pos)`; `buf` is a
memoryview (byte format), `blen` its length. They check every length against `blen` before
slicing (slices never raise, they would silently truncate); an index or struct read past the
end raises IndexError/struct.error, which the public `decode` turns into DecodeError.
"""
from __future__ import annotations

from .codegen_common import SourceEmitter
from .schema_model import FIXED_TYPES, NO_VERSIONS as _NONE, FieldSpec


class DecodeEmitter(SourceEmitter):
    # -- whole function -------------------------------------------------------------------
    def build(self) -> str:
        ctx, s = self.ctx, self.s
        self.emit(0, f"def _d_{s.name}(buf, pos, blen):")
        self.emit(1, f"o = _new({ctx.cls_ref(s)})")
        present, steps, tagged = self.layout()
        for step in steps:
            if isinstance(step, list):
                self.fixed_run(1, step)
            else:
                self.field(1, step, f"o.{step.attr}")
        for f in s.fields:
            if f not in present or f in tagged:
                self.emit(1, f"o.{f.attr} = {ctx.default_expr(f)}")
        if ctx.flexible:
            self.tag_section(1, tagged)
        else:
            self.emit(1, "o._unknown_tagged_fields = None")
        self.emit(1, "return o, pos")
        return "\n".join(self.lines)

    def fixed_run(self, ind: int, run: list[FieldSpec]) -> None:
        fmt = ">" + "".join(FIXED_TYPES[f.type][0] for f in run)
        size = sum(FIXED_TYPES[f.type][1] for f in run)
        st = self.ctx.struct_const(fmt)
        targets, fixups = [], []
        for f in run:
            if f.type == "uuid":
                t = self.tmp("u")
                targets.append(t)
                fixups.append(f"o.{f.attr} = _uuid({t})")
            else:
                targets.append(f"o.{f.attr}")
        self.emit(ind, f"{', '.join(targets)}, = {st}.unpack_from(buf, pos)")
        for line in fixups:
            self.emit(ind, line)
        self.emit(ind, f"pos += {size}")

    # -- one value --------------------------------------------------------------------------
    def length(self, ind: int, var: str, compact: bool, wide: bool) -> None:
        """Read a length prefix into `var`: compact -> uvarint-1, else int16/int32."""
        if compact:
            self.emit(ind, f"{var} = buf[pos]")
            self.emit(ind, "pos += 1")
            self.emit(ind, f"if {var} > 127:")
            self.emit(ind + 1, f"{var}, pos = _ruv(buf, pos - 1)")
            self.emit(ind, f"{var} -= 1")
        else:
            self.emit(ind, f"{var}, = {'_I32' if wide else '_I16'}.unpack_from(buf, pos)")
            self.emit(ind, f"pos += {4 if wide else 2}")

    def null_branch(self, ind: int, var: str, f: FieldSpec, target: str, what: str) -> None:
        """After reading length `var`: negative means null (-1) or garbage (< -1)."""
        v = self.ctx.version
        self.emit(ind, f"if {var} < 0:")
        if v in f.nullable:
            self.emit(ind + 1, f"if {var} != -1:")
            self.emit(ind + 2, f"_badlen({what!r}, {var}, pos)")
            self.emit(ind + 1, f"{target} = None")
        else:
            self.emit(ind + 1, f"if {var} != -1:")
            self.emit(ind + 2, f"_badlen({what!r}, {var}, pos)")
            self.emit(ind + 1, f"_nonull({what!r}, pos)")

    def field(self, ind: int, f: FieldSpec, target: str) -> None:
        ctx = self.ctx
        what = f"{self.s.name}.{f.name}"
        if f.is_array:
            n = self.tmp("n")
            self.length(ind, n, ctx.flexible, True)
            self.null_branch(ind, n, f, target, what)
            self.emit(ind, "else:")
            self.array_body(ind + 1, f, n, target, what)
        elif f.is_struct:
            sub = f.struct
            if ctx.version in f.nullable:
                # Nullable structs carry an int8 marker: -1 null, 1 present.
                self.emit(ind, "if buf[pos] == 255:")
                self.emit(ind + 1, f"{target} = None")
                self.emit(ind + 1, "pos += 1")
                self.emit(ind, "else:")
                self.emit(ind + 1, "pos += 1")
                self.emit(ind + 1, f"{target}, pos = _d_{sub.name}(buf, pos, blen)")
            else:
                self.emit(ind, f"{target}, pos = _d_{sub.name}(buf, pos, blen)")
        elif f.type in FIXED_TYPES:
            fmt = ">" + FIXED_TYPES[f.type][0]
            st = self.ctx.struct_const(fmt)
            if f.type == "uuid":
                self.emit(ind, "if pos + 16 > blen:")
                self.emit(ind + 1, f"_trunc({what!r}, 16, pos, blen)")
                self.emit(ind, f"{target} = _uuid(buf[pos:pos + 16])")
            else:
                self.emit(ind, f"{target}, = {st}.unpack_from(buf, pos)")
            self.emit(ind, f"pos += {FIXED_TYPES[f.type][1]}")
        else:
            self.varlen(ind, f, target, what)

    def varlen(self, ind: int, f: FieldSpec, target: str, what: str) -> None:
        """string / bytes / records."""
        compact = self.ctx.field_flexible(f)
        n = self.tmp("n")
        self.length(ind, n, compact, f.type != "string")
        self.null_branch(ind, n, f, target, what)
        self.emit(ind, "else:")
        end = self.tmp("e")
        self.emit(ind + 1, f"{end} = pos + {n}")
        self.emit(ind + 1, f"if {end} > blen:")
        self.emit(ind + 2, f"_trunc({what!r}, {n}, pos, blen)")
        if f.type == "string":
            self.emit(ind + 1, f"{target} = _str(buf[pos:{end}], 'utf-8')")
        else:
            self.emit(ind + 1, f"{target} = buf[pos:{end}]")
        self.emit(ind + 1, f"pos = {end}")

    def array_body(self, ind: int, f: FieldSpec, n: str, target: str, what: str) -> None:
        ctx = self.ctx
        min_size = ctx.min_elem_size(f)
        if min_size:
            # Fail fast on a hostile count before allocating or looping.
            self.emit(ind, f"if {n} * {min_size} > blen - pos:")
            self.emit(ind + 1, f"_trunc({what!r}, {n} * {min_size}, pos, blen)")
        if f.type in FIXED_TYPES and f.type != "uuid":
            code, size = FIXED_TYPES[f.type]
            self.emit(ind, f"{target} = list(_unpack_from('>%d{code}' % {n}, buf, pos))")
            self.emit(ind, f"pos += {n} * {size}")
            return
        lst = self.tmp("l")
        self.emit(ind, f"{lst} = []")
        self.emit(ind, f"for _ in range({n}):")
        if f.is_struct:
            self.emit(ind + 1, f"v, pos = _d_{f.struct.name}(buf, pos, blen)")
        elif f.type == "uuid":
            self.emit(ind + 1, "if pos + 16 > blen:")
            self.emit(ind + 2, f"_trunc({what!r}, 16, pos, blen)")
            self.emit(ind + 1, "v = _uuid(buf[pos:pos + 16])")
            self.emit(ind + 1, "pos += 16")
        else:
            # Array elements are never nullable in Kafka's schemas.
            elem = FieldSpec(f.name, f.attr, f.type, False, f.versions, _NONE, _NONE, None,
                             None, False, f.flexible_override)
            self.varlen(ind + 1, elem, "v", what + "[]")
        self.emit(ind + 1, f"{lst}.append(v)")
        self.emit(ind, f"{target} = {lst}")

    def tag_section(self, ind: int, tagged: list[FieldSpec]) -> None:
        nt = self.tmp("t")
        self.emit(ind, f"{nt} = buf[pos]")
        self.emit(ind, "pos += 1")
        self.emit(ind, f"if {nt} > 127:")
        self.emit(ind + 1, f"{nt}, pos = _ruv(buf, pos - 1)")
        self.emit(ind, "uk = None")
        self.emit(ind, f"if {nt}:")
        self.emit(ind + 1, f"if {nt} * 2 > blen - pos:")
        self.emit(ind + 2, f"_trunc('tagged fields of {self.s.name}', {nt} * 2, pos, blen)")
        self.emit(ind + 1, f"for _ in range({nt}):")
        i = ind + 2
        for var in ("tag", "sz"):   # one-byte varints inline, the rest via _ruv
            self.emit(i, f"{var} = buf[pos]")
            self.emit(i, "pos += 1")
            self.emit(i, f"if {var} > 127:")
            self.emit(i + 1, f"{var}, pos = _ruv(buf, pos - 1)")
        self.emit(i, "end = pos + sz")
        self.emit(i, "if end > blen:")
        self.emit(i + 1, f"_trunc('tagged field of {self.s.name}', sz, pos, blen)")
        kw = "if"
        for f in tagged:
            self.emit(i, f"{kw} tag == {f.tag}:")
            # Decode within the tag's bounds so a bad value cannot run past its size.
            self.emit(i + 1, "outer = blen")
            self.emit(i + 1, "blen = end")
            self.field(i + 1, f, f"o.{f.attr}")
            self.emit(i + 1, "blen = outer")
            self.emit(i + 1, "if pos != end:")
            self.emit(i + 2, f"_tagsize({self.s.name!r}, tag, sz, pos - end + sz)")
            kw = "elif"
        if tagged:
            self.emit(i, "else:")
            i += 1
        self.emit(i, "if uk is None:")
        self.emit(i + 1, "uk = []")
        self.emit(i, "uk.append((tag, bytes(buf[pos:end])))")
        self.emit(i, "pos = end")
        self.emit(ind, "o._unknown_tagged_fields = uk")

