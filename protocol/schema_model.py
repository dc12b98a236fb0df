"""Loads Kafka JSON message definitions into a small model the code generator walks.

Only what the wire format needs is kept: per field its type, the versions it exists in, is
nullable in, is tagged in, its tag and default. Version-specific decisions are left to the
generator, which asks `field.present(v)` etc. for the one version it compiles.
"""
from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field as dc_field

__all__ = ["Versions", "FieldSpec", "StructSpec", "MessageSpec", "parse_schema", "load_json",
           "snake_case", "FIXED_TYPES"]

# Fixed-width primitives: struct format code and size.
FIXED_TYPES = {
    "int8": ("b", 1), "int16": ("h", 2), "int32": ("i", 4), "int64": ("q", 8),
    "uint16": ("H", 2), "uint32": ("I", 4), "float64": ("d", 8), "bool": ("?", 1),
    "uuid": ("16s", 16),
}
VARIABLE_TYPES = {"string", "bytes", "records"}
PRIMITIVE_TYPES = set(FIXED_TYPES) | VARIABLE_TYPES

# Attribute names that would clash with the generated class's own members.
_RESERVED = {"decode", "encode", "encode_into", "_unknown_tagged_fields"}


class Versions:
    """A version range as written in schemas: "0-16", "3+", "5", "none"."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: int, hi: int):
        self.lo, self.hi = lo, hi

    @classmethod
    def parse(cls, text) -> "Versions":
        if text is None:
            return NO_VERSIONS
        text = str(text).strip()
        if text in ("", "none"):
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), 0x7FFF)
        if "-" in text:
            a, b = text.split("-", 1)
            return cls(int(a), int(b))
        v = int(text)
        return cls(v, v)

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    def __bool__(self) -> bool:
        return self.lo <= self.hi

    def __repr__(self) -> str:
        return f"Versions({self.lo}-{self.hi})" if self else "Versions(none)"


NO_VERSIONS = Versions(0, -1)


_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    s = _WORD.sub(r"\1_\2", _ACRONYM.sub(r"\1_\2", name)).lower()
    if keyword.iskeyword(s) or s in _RESERVED:
        s += "_"
    return s


@dataclass(eq=False)
class FieldSpec:
    name: str                     # Kafka's name, e.g. "PartitionIndex"
    attr: str                     # snake_case attribute name
    type: str                     # element type for arrays ("int32", "PartitionData")
    is_array: bool
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: object               # raw schema default (str/number/bool) or None if absent
    ignorable: bool
    flexible_override: Versions | None   # field-level flexibleVersions (RequestHeader.ClientId)
    struct: "StructSpec | None" = None   # resolved struct for struct / []struct fields

    @property
    def is_struct(self) -> bool:
        return self.type not in PRIMITIVE_TYPES


@dataclass(eq=False)
class StructSpec:
    name: str
    versions: Versions
    fields: list[FieldSpec] = dc_field(default_factory=list)


@dataclass(eq=False)
class MessageSpec:
    name: str
    type: str                     # request / response / header / data
    api_key: int | None
    valid: Versions
    flexible: Versions
    root: StructSpec
    structs: dict[str, StructSpec]  # every nested and common struct, by class name


def load_json(text: str) -> dict:
    """Kafka's schema files carry `//` comment lines; strip them before parsing."""
    if "//" in text:
        text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
    return json.loads(text)


def parse_schema(doc: dict) -> MessageSpec:
    name = doc["name"]
    valid = Versions.parse(doc.get("validVersions"))
    structs: dict[str, StructSpec] = {}
    pending: list[FieldSpec] = []

    def parse_fields(raw_fields, owner_versions) -> list[FieldSpec]:
        out = []
        for raw in raw_fields or ():
            t = raw["type"]
            is_array = t.startswith("[]")
            elem = t[2:] if is_array else t
            versions = Versions.parse(raw.get("versions"))
            fo = raw.get("flexibleVersions")
            f = FieldSpec(
                name=raw["name"], attr=snake_case(raw["name"]), type=elem, is_array=is_array,
                versions=versions,
                nullable=Versions.parse(raw.get("nullableVersions")),
                tagged=Versions.parse(raw.get("taggedVersions")),
                tag=raw.get("tag"), default=raw.get("default"),
                ignorable=bool(raw.get("ignorable", False)),
                flexible_override=Versions.parse(fo) if fo is not None else None,
            )
            if elem not in PRIMITIVE_TYPES:
                if "fields" in raw:
                    if elem in structs:
                        raise ValueError(f"{name}: struct {elem} defined twice")
                    structs[elem] = StructSpec(elem, versions, [])
                    structs[elem].fields = parse_fields(raw["fields"], versions)
                pending.append(f)
            out.append(f)
        return out

    for cs in doc.get("commonStructs") or ():
        structs[cs["name"]] = StructSpec(cs["name"], Versions.parse(cs.get("versions")), [])
    for cs in doc.get("commonStructs") or ():
        structs[cs["name"]].fields = parse_fields(cs.get("fields"), structs[cs["name"]].versions)
    root = StructSpec(name, valid, parse_fields(doc.get("fields"), valid))
    for f in pending:
        if f.type not in structs:
            raise ValueError(f"{name}: field {f.name} has unknown type {f.type}")
        f.struct = structs[f.type]
    for s in [root, *structs.values()]:
        attrs = [f.attr for f in s.fields]
        if len(set(attrs)) != len(attrs):
            raise ValueError(f"{name}.{s.name}: duplicate field names {attrs}")
    return MessageSpec(
        name=name, type=doc.get("type", "data"), api_key=doc.get("apiKey"), valid=valid,
        flexible=Versions.parse(doc.get("flexibleVersions")), root=root, structs=structs,
    )
