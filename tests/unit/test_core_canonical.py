"""Canonical JSON and digests: invariant under key order and JSON round trips, strict parsing."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
