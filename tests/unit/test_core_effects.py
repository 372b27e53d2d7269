"""The effect state machine and the logical fingerprint."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onstation.core.effects import (
    REINTENDABLE,
    TRANSITIONS,
    EffectAction,
    EffectState,
    fingerprint,
    next_state,
    normalize_destination,
)
from onstation.core.errors import BadInput


def _fp(**overrides: object) -> str:
    base: dict[str, object] = {
        "node": "n", "operation": "git.push", "destination": "origin",
        "arguments": {"ref": "main"}, "approval_slot": None,
    }  # fmt: skip
    return fingerprint(**(base | overrides))  # type: ignore[arg-type]


def test_happy_path_and_reconcile_moves() -> None:
    assert next_state(EffectAction.DISPATCH, EffectState.INTENDED) is EffectState.DISPATCHED
    assert next_state(EffectAction.OBSERVE, EffectState.DISPATCHED) is EffectState.OBSERVED
    assert next_state(EffectAction.COMMIT, EffectState.OBSERVED) is EffectState.COMMITTED
    assert next_state(EffectAction.RECONCILE, EffectState.DISPATCHED) is EffectState.AMBIGUOUS
    assert next_state(EffectAction.RECONCILE, EffectState.INTENDED) is (
        EffectState.FAILED_BEFORE_DISPATCH
    )


def test_ambiguous_is_left_only_by_an_operator() -> None:
    leaving = {action for (action, src) in TRANSITIONS if src is EffectState.AMBIGUOUS}
    assert leaving == {EffectAction.RESOLVE_OBSERVED, EffectAction.RESOLVE_COMPENSATED}
    assert EffectState.AMBIGUOUS not in REINTENDABLE


def test_committed_is_terminal() -> None:
    assert not [key for key in TRANSITIONS if key[1] is EffectState.COMMITTED]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("git@github.com:o/r.git", "ssh://git@GitHub.com/o/r"),
        ("https://Example.com:443/path/", "https://example.com/path"),
        ("  origin ", "origin"),
    ],
)
def test_destination_spellings_normalize_together(a: str, b: str) -> None:
    assert normalize_destination(a) == normalize_destination(b)


def test_fingerprint_covers_each_part() -> None:
    base = _fp()
    assert _fp(operation="GIT.PUSH ") == base
    assert _fp(node="other") != base
    assert _fp(operation="gh.pr.create") != base
    assert _fp(destination="upstream") != base
    assert _fp(arguments={"ref": "dev"}) != base
    assert _fp(approval_slot="second") != base


@given(st.dictionaries(st.text(max_size=5), st.integers(-1000, 1000), max_size=6))
def test_fingerprint_ignores_argument_key_order(args: dict[str, int]) -> None:
    reversed_args = dict(reversed(list(args.items())))
    assert _fp(arguments=args) == _fp(arguments=reversed_args)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"operation": ""},
        {"operation": "two words"},
        {"destination": " "},
        {"arguments": float("nan")},
    ],
)
def test_bad_effect_parts_are_bad_input(kwargs: dict[str, object]) -> None:
    with pytest.raises(BadInput):
        _fp(**kwargs)
