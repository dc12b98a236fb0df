"""Option lookup shared by every kraftd data source (pipeline/options.py): case-insensitive
names, and true/false flags refused otherwise, as Spark's Kafka source does."""
from __future__ import annotations

import pytest

from kraftd.pipeline.options import OptionError, flag, option


def test_names_are_case_insensitive():
    assert option({"IncludeHeaders": "true", "path": "/d"}, "includeheaders") == "true"
    assert option({"PATH": "/d"}, "path") == "/d"
    assert option({}, "rows", "records") == "records"


def test_flags_take_true_or_false_only():
    assert flag({"includeHeaders": " TRUE "}, "includeHeaders") is True
    assert flag({}, "includeHeaders") is False and flag({}, "failOnDataLoss", True) is True
    with pytest.raises(OptionError, match="includeHeaders must be true or false"):
        flag({"includeHeaders": "yes"}, "includeHeaders")
