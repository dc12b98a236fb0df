"""Emits the Python source of one struct's encoder for one version.

Generated encoders have the signature `_e_<Struct>(o, out, parts) -> out`: fixed-size and small
pieces are appended to the bytearray `out`; a bytes/records value is handed to `parts` as-is
(zero copy) after flushing `out`, and a fresh bytearray is returned for what follows.
"""
from __future__ import annotations

from .codegen_common import SourceEmitter
from .schema_model import FIXED_TYPES, NO_VERSIONS, FieldSpec


class EncodeEmitter(SourceEmitter):
    def build(self) -> str:
        ctx, s = self.ctx, self.s
        self.emit(0, f"def _e_{s.name}(o, out, parts):")
        _, steps, tagged = self.layout()
        for step in steps:
            if isinstance(step, list):
                fmt = ">" + "".join(FIXED_TYPES[f.type][0] for f in step)
                args = ", ".join(f"o.{f.attr}.bytes" if f.type == "uuid" else f"o.{f.attr}"
                                 for f in step)
                self.emit(1, f"out += {ctx.struct_const(fmt)}.pack({args})")
            else:
                self.emit(1, f"v = o.{step.attr}")
                self.value(1, step, "v", zero_copy=True)
        if ctx.flexible:
            self.tag_section(1, tagged)
        self.emit(1, "return out")
        return "\n".join(self.lines)

    # -- one value ------------------------------------------------------------------------------
    def length(self, ind: int, expr: str, compact: bool, wide: bool) -> None:
        """Write length `expr` (>= 0): compact adds one and uses a uvarint."""
        if compact:
            n = self.tmp("n")
            self.emit(ind, f"{n} = {expr} + 1")
            self.emit(ind, f"if {n} < 128:")
            self.emit(ind + 1, f"out.append({n})")
            self.emit(ind, "else:")
            self.emit(ind + 1, f"out += _uvb({n})")
        else:
            self.emit(ind, f"out += {'_I32' if wide else '_I16'}.pack({expr})")

    def null_check(self, ind: int, f: FieldSpec, var: str, compact: bool, wide: bool) -> bool:
        """Emit the None case; returns True if an `else:` branch was opened (indent + 1)."""
        what = f"{self.s.name}.{f.name}"
        self.emit(ind, f"if {var} is None:")
        if self.ctx.version in f.nullable:
            if compact:
                self.emit(ind + 1, "out.append(0)")
            else:
                self.emit(ind + 1, f"out += {'_NULL32' if wide else '_NULL16'}")
        else:
            self.emit(ind + 1, f"_enull({what!r}, {self.ctx.version})")
        self.emit(ind, "else:")
        return True

    def value(self, ind: int, f: FieldSpec, var: str, zero_copy: bool) -> None:
        ctx = self.ctx
        if f.is_array:
            self.null_check(ind, f, var, ctx.flexible, True)
            self.length(ind + 1, f"len({var})", ctx.flexible, True)
            self.array_body(ind + 1, f, var, zero_copy)
        elif f.is_struct:
            if ctx.version in f.nullable:
                self.emit(ind, f"if {var} is None:")
                self.emit(ind + 1, "out += b'\\xff'")
                self.emit(ind, "else:")
                self.emit(ind + 1, "out += b'\\x01'")
                self.emit(ind + 1, f"out = _e_{f.struct.name}({var}, out, parts)")
            else:
                self.emit(ind, f"out = _e_{f.struct.name}({var}, out, parts)")
        elif f.type in FIXED_TYPES:
            st = ctx.struct_const(">" + FIXED_TYPES[f.type][0])
            arg = f"{var}.bytes" if f.type == "uuid" else var
            self.emit(ind, f"out += {st}.pack({arg})")
        elif f.type == "string":
            compact = ctx.field_flexible(f)
            self.null_check(ind, f, var, compact, False)
            b = self.tmp("b")
            self.emit(ind + 1, f"{b} = {var}.encode('utf-8')")
            self.length(ind + 1, f"len({b})", compact, False)
            self.emit(ind + 1, f"out += {b}")
        else:  # bytes / records
            compact = ctx.field_flexible(f)
            self.null_check(ind, f, var, compact, True)
            n = self.tmp("n")
            self.emit(ind + 1, f"{n} = len({var})")
            self.length(ind + 1, n, compact, True)
            self.emit(ind + 1, f"if {n}:")
            if zero_copy:
                # Hand the value over untouched: it may be a big memoryview or a FileRegion.
                self.emit(ind + 2, "parts.append(out)")
                self.emit(ind + 2, f"parts.append({var})")
                self.emit(ind + 2, "out = bytearray()")
            else:
                self.emit(ind + 2, f"out += {var}")

    def array_body(self, ind: int, f: FieldSpec, var: str, zero_copy: bool) -> None:
        if f.type in FIXED_TYPES and f.type != "uuid":
            code = FIXED_TYPES[f.type][0]
            self.emit(ind, f"out += _pack('>%d{code}' % len({var}), *{var})")
            return
        e = self.tmp("x")
        self.emit(ind, f"for {e} in {var}:")
        if f.is_struct:
            self.emit(ind + 1, f"out = _e_{f.struct.name}({e}, out, parts)")
        elif f.type == "uuid":
            self.emit(ind + 1, f"out += {e}.bytes")
        else:
            elem = FieldSpec(f.name, f.attr, f.type, False, f.versions, NO_VERSIONS,
                             NO_VERSIONS, None, None, False, f.flexible_override)
            self.value(ind + 1, elem, e, zero_copy)

    def tag_section(self, ind: int, tagged: list[FieldSpec]) -> None:
        self.emit(ind, "uk = o._unknown_tagged_fields")
        if not tagged:
            self.emit(ind, "if uk is None:")
            self.emit(ind + 1, "out.append(0)")
            self.emit(ind, "else:")
            self.emit(ind + 1, "_emit_tags(out, sorted(uk, key=_key0))")
            return
        self.emit(ind, "tg = []")
        for f in tagged:
            # Kafka writes a tagged field only when it differs from its default.
            self.emit(ind, f"v = o.{f.attr}")
            self.emit(ind, f"if {self.ctx.differs_from_default(f, 'v')}:")
            # Encode aside to learn the size; nested structs may hand chunks to `parts`.
            self.emit(ind + 1, "outer, outer_parts = out, parts")
            self.emit(ind + 1, "out, parts = bytearray(), []")
            self.value(ind + 1, f, "v", zero_copy=False)
            self.emit(ind + 1, "if parts:")
            self.emit(ind + 2, "parts.append(out)")
            self.emit(ind + 2, "out = b''.join(parts)")
            self.emit(ind + 1, f"tg.append(({f.tag}, out))")
            self.emit(ind + 1, "out, parts = outer, outer_parts")
        self.emit(ind, "if uk:")
        self.emit(ind + 1, "tg.extend(uk)")
        self.emit(ind + 1, "tg.sort(key=_key0)")
        self.emit(ind, "if tg:")
        self.emit(ind + 1, "_emit_tags(out, tg)")
        self.emit(ind, "else:")
        self.emit(ind + 1, "out.append(0)")
