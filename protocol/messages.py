"""Generated message classes, one per schema in `kraftd.schemas` (`FetchRequest`, ...).

Importing this module parses every schema once and builds the classes; codecs for each
version are generated lazily on first use (see `generator.py`).
"""
from __future__ import annotations

from pathlib import Path

from .. import schemas as _schemas_pkg

from .generator import GeneratedStruct, load_schema_dir

#: Every generated root class, by schema name.
ALL_MESSAGES: dict[str, type] = load_schema_dir(Path(_schemas_pkg.__file__).parent)

globals().update(ALL_MESSAGES)

__all__ = ["ALL_MESSAGES", "GeneratedStruct", *sorted(ALL_MESSAGES)]
