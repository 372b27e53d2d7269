"""core/fastjson against json: the same values, the same text, the same errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onstation.core import fastjson

_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
)  # fmt: skip
VALUES = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children,
                                                                       max_size=5),
    max_leaves=30,
)  # fmt: skip


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


@settings(max_examples=300)
@given(VALUES, st.booleans())
def test_dumps_writes_what_json_writes(value: Any, sort_keys: bool) -> None:
    assert fastjson.dumps(value, sort_keys=sort_keys) == json.dumps(value, sort_keys=sort_keys)


@settings(max_examples=300)
@given(VALUES, st.sampled_from(["", " ", "\n\t ", "\r\n"]))
def test_loads_reads_what_json_reads(value: Any, space: str) -> None:
    text = space + json.dumps(value, ensure_ascii=False) + space
    assert fastjson.loads(text) == json.loads(text)


def _outcome(fn: Any, text: str | bytes) -> tuple[str, Any]:
    try:
        return "ok", fn(text)
    except ValueError as exc:  # json.JSONDecodeError, or int's digit limit
        return type(exc).__name__, str(exc)
    except RecursionError:
        return "RecursionError", None


@settings(max_examples=500)
@given(st.text(alphabet=' \t\n\r{}[]":,0123456789.eE+-truefalsn\\u\ufeffINaiy', max_size=40))
def test_loads_fails_as_json_fails(text: str) -> None:
    got, want = _outcome(fastjson.loads, text), _outcome(json.loads, text)
    assert got[0] == want[0]
    if got[0] == "ok":
        assert _same(got[1], want[1]) or got[1] == want[1]
    else:
        assert got[1] == want[1]


@pytest.mark.parametrize(
    "text",
    ["", "  ", "\ufeff{}", "{} x", "[1,]", "NaN", "-Infinity", '"\\ud800"', "1" * 5000,
     "[" * 50 + "]" * 50, "{\"a\": 1} \n", "tru"],
)  # fmt: skip
def test_edge_cases_match_json(text: str) -> None:
    got, want = _outcome(fastjson.loads, text), _outcome(json.loads, text)
    assert got[0] == want[0]
    assert got[1] == want[1] or _same(got[1], want[1])


@settings(max_examples=300)
@given(
    VALUES,
    st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32-be"]),
    st.binary(max_size=6),
)
def test_loads_bytes_reads_what_json_reads(value: Any, encoding: str, junk: bytes) -> None:
    data = json.dumps(value, ensure_ascii=False).encode(encoding, "surrogatepass")
    for candidate in (data, junk, data + junk, junk + data, b"\xef\xbb\xbf" + junk):
        got = _outcome(fastjson.loads_bytes, candidate)  # type: ignore[arg-type]
        want = _outcome(json.loads, candidate)  # type: ignore[arg-type]
        assert got[0] == want[0]
        assert got[1] == want[1] or _same(got[1], want[1])


def test_dumps_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        fastjson.dumps({"a": object()})
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        fastjson.dumps(loop)
    # A failed call leaves nothing behind: the same list encodes afterwards.
    shared = [1]
    with pytest.raises(TypeError):
        fastjson.dumps([shared, object()])
    assert fastjson.dumps([shared, shared]) == "[[1], [1]]"


def test_importing_it_imports_neither_json_nor_re() -> None:
    code = (
        "import sys; from onstation.core import fastjson; fastjson.loads('{\"a\": [1, 2.5]}');"
        "fastjson.dumps({'b': 'c'}, sort_keys=True);"
        "print(sorted(m for m in ('json', 're') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert out.strip() == "[]"
