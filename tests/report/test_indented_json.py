"""report.text.indented_json writes what ``json.dumps(obj, indent=...)`` writes, for any JSON value
(the JSON output of every command goes through it)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rankwise.report.text import indented_json

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text()
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    | st.dictionaries(st.integers() | st.floats(allow_nan=False) | st.booleans() | st.none(), inner, max_size=3),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.sampled_from([0, 1, 2, 4]))
def test_the_same_text_as_json_dumps(obj, indent):
    assert indented_json(obj, indent) == json.dumps(obj, indent=indent)
