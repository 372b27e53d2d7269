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
    identity_slot,
    intent_fingerprint,
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
    # Issue 10: a hook killed after INTENDED gave its host no decision; the tool may have run.
    assert next_state(EffectAction.RECONCILE, EffectState.INTENDED) is EffectState.AMBIGUOUS
    assert next_state(EffectAction.RECONCILE_REFUSED, EffectState.INTENDED) is (
        EffectState.FAILED_BEFORE_DISPATCH
    )


#: Moves no operator makes: what the ledger does for bodies, hooks and reconciliation.
_AUTOMATIC = [a for a in EffectAction if not a.value.startswith("resolve-")]
#: States in which the effect may have reached the world.
_MAY_HAVE_RUN = frozenset(
    {EffectState.DISPATCHED, EffectState.OBSERVED, EffectState.COMMITTED, EffectState.AMBIGUOUS}
)


@given(st.sampled_from(list(EffectState)), st.lists(st.sampled_from(_AUTOMATIC), max_size=12))
def test_what_may_have_run_is_never_intended_again_automatically(
    start: EffectState, actions: list[EffectAction]
) -> None:
    """Once an effect may have reached the world, no automatic move makes it reintendable."""
    state = start
    may_have_run = start in _MAY_HAVE_RUN
    for action in actions:
        moved = next_state(action, state)
        if moved is None:
            continue
        state = moved
        may_have_run = may_have_run or state in _MAY_HAVE_RUN
        if may_have_run:
            assert state not in REINTENDABLE


@given(st.sampled_from(list(EffectState)))
def test_reconcile_never_settles_an_unproven_effect_as_not_run(state: EffectState) -> None:
    """Plain reconciliation proves nothing: it never leads to a state that may be intended
    again. Only the evidence of a refused dispatch (or the body's own fail) does."""
    moved = next_state(EffectAction.RECONCILE, state)
    assert moved is None or moved not in REINTENDABLE
    into_failed = {a for (a, src), dst in TRANSITIONS.items()
                   if dst is EffectState.FAILED_BEFORE_DISPATCH}  # fmt: skip
    assert into_failed == {EffectAction.FAIL, EffectAction.RECONCILE_REFUSED}


def test_ambiguous_is_left_only_by_an_operator() -> None:
    leaving = {action for (action, src) in TRANSITIONS if src is EffectState.AMBIGUOUS}
    assert leaving == {EffectAction.RESOLVE_OBSERVED, EffectAction.RESOLVE_COMPENSATED}
    assert EffectState.AMBIGUOUS not in REINTENDABLE


#: Moves taken with their evidence recorded: an operator's resolution, or the host's proof
#: that it did not run a dispatched call.
_EVIDENCED = [a for a in EffectAction if a.value.startswith("resolve-")]


def test_not_executed_is_reached_only_from_dispatched_on_evidence() -> None:
    into = {(a, src) for (a, src), dst in TRANSITIONS.items() if dst is EffectState.NOT_EXECUTED}
    assert into == {(EffectAction.RESOLVE_NOT_EXECUTED, EffectState.DISPATCHED)}
    assert EffectState.NOT_EXECUTED in REINTENDABLE
    # A failure that may have reached its destination is AMBIGUOUS, never reintendable.
    assert next_state(EffectAction.UNCERTAIN, EffectState.DISPATCHED) is EffectState.AMBIGUOUS
    assert [src for (a, src) in TRANSITIONS if a is EffectAction.UNCERTAIN] == [
        EffectState.DISPATCHED
    ]


def test_only_an_evidenced_move_makes_what_may_have_run_reintendable() -> None:
    """Every move from a state where the effect may have reached the world into one where it
    may be intended again carries its evidence (a ``resolve-`` action)."""
    for (action, src), dst in TRANSITIONS.items():
        if src in _MAY_HAVE_RUN and dst in REINTENDABLE:
            assert action in _EVIDENCED, (action, src, dst)


@given(st.lists(st.sampled_from(list(EffectAction)), max_size=16))
def test_any_sequence_keeps_states_known_and_absorbing_states_closed(
    actions: list[EffectAction],
) -> None:
    """From INTENDED, any sequence of moves stays within the states; NOT_EXECUTED is only ever
    entered from DISPATCHED, and nothing automatic leaves AMBIGUOUS or COMMITTED."""
    state = EffectState.INTENDED
    for action in actions:
        moved = next_state(action, state)
        if moved is None:
            continue
        if moved is EffectState.NOT_EXECUTED:
            assert state is EffectState.DISPATCHED
            assert action is EffectAction.RESOLVE_NOT_EXECUTED
        if state is EffectState.AMBIGUOUS:
            assert action in _EVIDENCED and action is not EffectAction.RESOLVE_NOT_EXECUTED
        assert state is not EffectState.COMMITTED
        state = moved


@given(st.lists(st.sampled_from(_AUTOMATIC), max_size=12))
def test_no_automatic_move_reaches_not_executed(actions: list[EffectAction]) -> None:
    """Reconciliation, dispatch, observation and failure never settle a call as not run."""
    state = EffectState.DISPATCHED
    for action in actions:
        state = next_state(action, state) or state
        assert state is not EffectState.NOT_EXECUTED


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
    assert _fp(approval_slot="second") != base  # a declared repeat's recorded slot


_SLOTS = st.one_of(st.none(), st.text(min_size=1, max_size=40))
_ARGS = st.dictionaries(st.text(max_size=5), st.integers(-1000, 1000), max_size=4)
_WORDS = st.text(min_size=1, max_size=40).filter(str.strip)


def _intent(slot: str | None, reason: str | None, arguments: dict[str, int] | None = None) -> str:
    return intent_fingerprint(
        node="n", operation="git.push", destination="origin", arguments=arguments or {},
        approval_slot=slot, repeat_reason=reason,
    )  # fmt: skip


@given(slot=_SLOTS, other=_SLOTS, args=_ARGS)
def test_intent_fingerprint_does_not_depend_on_an_undeclared_slot(
    slot: str | None, other: str | None, args: dict[str, int]
) -> None:
    """Issue 9: a fresh slot id must not make one logical effect look like a new one."""
    logical = _fp(arguments=args)
    assert _intent(slot, None, args) == _intent(other, None, args) == logical


@given(slot=_WORDS, reasons=st.lists(_WORDS, min_size=2, max_size=2))
def test_a_declared_repeat_has_its_own_fingerprint_per_slot_not_per_reason(
    slot: str, reasons: list[str]
) -> None:
    first, second = (_intent(slot, reason) for reason in reasons)
    assert first == second != _intent(None, None)
    # What a plan validator recomputes from the recorded slot agrees with the ledger.
    assert first == _fp(arguments={}, approval_slot=slot)


@pytest.mark.parametrize(
    ("slot", "reason", "message"),
    [
        (None, "because", "--repeat-reason: a deliberate repeat needs its own --slot"),
        ("s", "", "--repeat-reason: must not be empty"),
        ("s", " \t", "--repeat-reason: must not be empty"),
        (" ", "because", "slot: a deliberate repeat's slot must not be empty"),
    ],
)
def test_a_repeat_is_declared_with_a_slot_and_a_reason(
    slot: str | None, reason: str, message: str
) -> None:
    with pytest.raises(BadInput) as caught:
        identity_slot(slot, reason)
    assert caught.value.message == message
    assert identity_slot("s", None) is None and identity_slot("s", "because") == "s"


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
