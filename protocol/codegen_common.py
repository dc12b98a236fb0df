"""What the decoder and encoder emitters share: source assembly and the field layout.

A struct's layout for one version is a sequence of steps — a run of consecutive fixed-width
fields (one precompiled struct.Struct call) or one variable-width field — plus its tagged
fields in tag order.
"""
from __future__ import annotations

from .schema_model import FieldSpec, StructSpec


class SourceEmitter:
    def __init__(self, ctx, struct: StructSpec):
        self.ctx = ctx            # the VersionCompiler: version, flexible, constant pool
        self.s = struct
        self.lines: list[str] = []
        self._tmp = 0

    def tmp(self, base: str) -> str:
        self._tmp += 1
        return f"{base}{self._tmp}"

    def emit(self, ind: int, line: str) -> None:
        self.lines.append("    " * ind + line)

    def layout(self) -> tuple[list[FieldSpec], list, list[FieldSpec]]:
        """(fields present in this version, steps, tagged fields by tag)."""
        v = self.ctx.version
        present = [f for f in self.s.fields if v in f.versions]
        regular = [f for f in present if v not in f.tagged]
        tagged = sorted((f for f in present if v in f.tagged), key=lambda f: f.tag)
        steps: list = []
        i = 0
        while i < len(regular):
            run = []
            while i < len(regular) and self.ctx.is_fixed(regular[i]):
                run.append(regular[i])
                i += 1
            if run:
                steps.append(run)
            else:
                steps.append(regular[i])
                i += 1
        return present, steps, tagged
