"""A document's digest with an embedded part's canonical bytes spliced in is exactly the
digest of the whole document (issue 14: a relief's incident and plan embed the capsule)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from onstation.core.canonical import canonical_bytes, digest
from onstation.plan.embedded import spliced_canonical, spliced_digest

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(st.dictionaries(st.text(), _JSON, max_size=6), st.text(), _JSON)
def test_splicing_a_part_gives_the_whole_documents_bytes(
    rest: dict[str, Any], key: str, part: Any
) -> None:
    document = {**rest, key: part}
    whole = canonical_bytes(document)
    assert spliced_canonical(document, key, canonical_bytes(part)) == whole
    assert spliced_digest("onstation-test-v1", document, key, canonical_bytes(part)) == digest(
        "onstation-test-v1", document
    )


def test_a_document_holding_a_placeholder_shaped_text_is_still_exact() -> None:
    part = {"payload": {"b": [1, 2.5, "x"]}}
    document = {"note": "onstation-embedded-0000", "capsule": part, "z": None}
    assert spliced_canonical(document, "capsule", canonical_bytes(part)) == canonical_bytes(
        document
    )


def test_a_placeholder_found_twice_encodes_the_whole_document(
    monkeypatch: Any,
) -> None:
    from onstation.plan import embedded

    monkeypatch.setattr(embedded.secrets, "token_hex", lambda _n: "fixed")
    part = [1, 2]
    document = {"a": "onstation-embedded-fixed", "b": part}
    assert spliced_canonical(document, "b", b"WRONG") == canonical_bytes(document)
