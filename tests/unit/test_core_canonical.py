"""Canonical JSON and digests: invariant under key order and JSON round trips, strict parsing."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import given as _given
from hypothesis import settings as _settings
from hypothesis import strategies as _st
from hypothesis import strategies as st

from onstation.core import canonical as _canonical
from onstation.core.canonical import canonical_bytes, digest, loads_strict
from onstation.core.errors import BadInput

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


def _shuffled(value: object, rng: random.Random) -> object:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@settings(max_examples=300)
@given(json_values, st.integers())
def test_digest_ignores_key_order_and_survives_a_json_round_trip(value: object, seed: int) -> None:
    reordered = _shuffled(value, random.Random(seed))
    round_tripped = json.loads(json.dumps(value))
    assert digest("test-scope-v1", value) == digest("test-scope-v1", reordered)
    assert digest("test-scope-v1", value) == digest("test-scope-v1", round_tripped)


@given(json_values)
def test_scope_separates_domains(value: object) -> None:
    assert digest("scope-a-v1", value) != digest("scope-b-v1", value)


@given(json_values)
def test_canonical_bytes_parse_back_to_the_same_value(value: object) -> None:
    text = canonical_bytes(value)
    try:
        parsed = loads_strict(text)
    except BadInput as exc:
        # An integral float of 2^53 or more is written without an exponent by RFC 8785, and
        # the strict reader refuses such integers rather than guess their precision.
        assert "interoperable range" in exc.message
        return
    assert parsed == json.loads(json.dumps(value))


def test_integral_floats_beyond_two_to_the_53_are_refused_on_reading() -> None:
    assert canonical_bytes(2.0**53) == b"9007199254740992"
    with pytest.raises(BadInput, match="interoperable range"):
        loads_strict(canonical_bytes(2.0**53))


def test_canonical_form_matches_rfc8785_example() -> None:
    # RFC 8785 section 3.2.2's sorting example, abridged to what fits a literal.
    value = {"numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
             "literals": [None, True, False]}  # fmt: skip
    assert canonical_bytes(value) == (
        b'{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27]}'
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": 1, "a": 2}', "duplicate key"),
        ('{"a": NaN}', "NaN"),
        ("[Infinity]", "Infinity"),
        ('{"n": 9007199254740993}', "interoperable range"),
        ("[" * 100 + "]" * 100, "nested deeper"),
        ("{", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_strict_parsing_refuses_ambiguous_json(text: str | bytes, reason: str) -> None:
    with pytest.raises(BadInput, match=reason):
        loads_strict(text)


def test_bad_scope_is_refused() -> None:
    with pytest.raises(BadInput):
        digest("Bad Scope", {})


# -- the json.dumps fast path (issue 14): the same bytes as rfc8785, or the same refusal ------


_KEYS = _st.text(_st.characters(blacklist_categories=("Cs",)), max_size=8)
_SCALARS = (_st.none() | _st.booleans() | _st.integers(-(2**53) + 1, 2**53 - 1)
            | _st.text(_st.characters(blacklist_categories=("Cs",)), max_size=12))  # fmt: skip
_VALUES = _st.recursive(
    _SCALARS, lambda inner: _st.lists(inner, max_size=4) | _st.dictionaries(_KEYS, inner,
                                                                          max_size=4),
    max_leaves=30,
)  # fmt: skip
_ANY = _st.recursive(
    _st.none() | _st.booleans() | _st.integers() | _st.floats() | _st.text(max_size=6),
    lambda inner: _st.lists(inner, max_size=3) | _st.tuples(inner)
    | _st.dictionaries(_st.text(max_size=4) | _st.integers(), inner, max_size=3),
    max_leaves=20,
)  # fmt: skip


def _exact(value: Any) -> Any:
    """What the exact path alone gives: the bytes, or the kind of refusal."""
    try:
        _canonical._check_value(value, "$", 0)
        return rfc8785.dumps(value)
    except Exception as exc:
        return ("refused", type(exc).__name__)


def _ours(value: Any) -> Any:
    try:
        return _canonical.canonical_bytes(value)
    except Exception as exc:
        return ("refused", type(exc).__name__)


@_settings(max_examples=1500, deadline=None)
@_given(_VALUES)
def test_the_fast_path_writes_the_rfc8785_bytes(value: Any) -> None:
    if _canonical._fast_ok(value):
        assert _canonical.canonical_bytes(value) == rfc8785.dumps(value)


@_settings(max_examples=1500, deadline=None)
@_given(_ANY)
def test_canonical_bytes_are_the_exact_paths_on_anything(value: Any) -> None:
    assert _ours(value) == _exact(value)


def test_the_fast_path_leaves_the_hard_cases_to_the_exact_one() -> None:
    astral = {"\U0001f600": 1, "\uffee": 2}
    assert not _canonical._fast_ok(astral) and _ours(astral) == _exact(astral)
    controls = {"\uffee": 2, "a\x00\x1f\x7f\u2028": "\x00\x08\x0b\x1f\"\\\u2029\U0001f600",
                "b": [True, None, -0, 2**53 - 1]}  # fmt: skip
    assert _canonical._fast_ok(controls)
    assert _canonical.canonical_bytes(controls) == rfc8785.dumps(controls)
    for depth in (60, 62, 63, 64, 65, 66, 70):
        nested: Any = "leaf"
        for _ in range(depth):
            nested = [nested]
        assert _ours(nested) == _exact(nested), depth
    for odd in ({"a": "\ud800"}, {"\udfff": 1}, ["x\ud800y"], {1: 2}, {True: 1}, {"a": (1,)},
                {"a": 2**53}, [1.5]):  # fmt: skip
        assert _ours(odd) == _exact(odd), odd
