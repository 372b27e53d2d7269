"""The hand-encoded details of the relief's two hot events are exactly json.dumps's text."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from onstation.ledger.leases import _acquired_detail, _fenced_detail

_ids = st.lists(st.integers(min_value=0, max_value=2**63 - 1), max_size=5)
_text = st.text(max_size=40)


@given(holder=st.none() | _text, lease_id=st.integers(0, 2**63 - 1), ttl=st.integers(1, 10**7))
def test_the_lease_acquired_detail_is_the_sorted_json_of_its_fields(
    holder: str | None, lease_id: int, ttl: int
) -> None:
    expected = {"holder": holder, "lease_id": lease_id, "ttl_seconds": ttl}
    assert _acquired_detail(holder, lease_id, ttl) == json.dumps(expected, sort_keys=True)


@given(previous=st.integers(1, 2**63 - 1), reason=_text, leases=_ids, grants=_ids, gens=_ids)
def test_the_node_fenced_detail_is_the_sorted_json_of_its_fields(
    previous: int, reason: str, leases: list[int], grants: list[int], gens: list[int]
) -> None:
    expected = {
        "previous_generation": previous,
        "reason": reason,
        "revoked_leases": leases,
        "revoked_grants": grants,
        "fenced_generations": gens,
    }
    got = _fenced_detail(previous, reason, leases, grants, gens)
    assert got == json.dumps(expected, sort_keys=True)


def test_quotes_control_characters_and_non_ascii_are_escaped_as_json_does() -> None:
    reason = 'a "quoted"\\ reason\n\twith é and \u2028'
    assert json.loads(_fenced_detail(2, reason, [1], [], [1]))["reason"] == reason
    assert json.loads(_acquired_detail(reason, 3, 60))["holder"] == reason
