"""RFC 8785 reference vectors and the fingerprint invariant (goal G8).

The digest's own properties (key order, scope separation) are tested once, in
``tests/unit/test_core_canonical.py``."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onstation.core.canonical import canonical_bytes, digest, loads_strict
from onstation.core.effects import fingerprint
from onstation.core.errors import BadInput

VECTORS = json.loads((Path(__file__).parent / "data" / "rfc8785_vectors.json").read_text("ascii"))


@pytest.mark.parametrize("case", VECTORS["documents"], ids=lambda c: c["name"])
def test_rfc8785_document_vectors(case: dict[str, str]) -> None:
    assert canonical_bytes(loads_strict(case["input"])).decode("utf-8") == case["output"]


@pytest.mark.parametrize(("ieee_hex", "expected"), VECTORS["numbers"])
def test_rfc8785_number_vectors(ieee_hex: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(ieee_hex))[0]
    assert canonical_bytes(value).decode("ascii") == expected


@pytest.mark.parametrize("ieee_hex", VECTORS["invalid_numbers"])
def test_rfc8785_non_finite_numbers_are_refused(ieee_hex: str) -> None:
    with pytest.raises(BadInput):
        canonical_bytes(struct.unpack(">d", bytes.fromhex(ieee_hex))[0])


# JSON values that survive a JSON round trip: finite floats, I-JSON integers, any text
# (astral plane included; lone surrogates excluded since UTF-8 cannot carry them).
_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_digest_and_fingerprint_invariant_under_json_round_trip(value: Any) -> None:
    again = loads_strict(json.dumps(value, ensure_ascii=False, indent=1))
    assert digest("resurrection-capsule-v1", again) == digest("resurrection-capsule-v1", value)
    common = {"node": "n-1", "operation": "git.push", "destination": "https://example.org/r"}
    assert fingerprint(**common, arguments=again, approval_slot=None) == fingerprint(
        **common, arguments=value, approval_slot=None
    )
