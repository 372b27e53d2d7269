"""The ledger contract: one suite, run against every backend (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from pg_functions import function_statement

from onstation.core.canonical import canonical_bytes
from onstation.core.effects import (
    EffectState,
    effect_id_for,
    fingerprint,
    normalize_destination,
)
from onstation.core.errors import BadInput, BlockedByPolicy, Conflict, StaleGeneration
from onstation.core.governor import RespawnPolicy
from onstation.core.leases import LeaseState
from onstation.core.types import Effect
from onstation.ledger import Ledger, backends
from onstation.testing import FakeClock

PUSH = {"operation": "git.push", "destination": "git@example.com:o/r.git"}


def _born(ledger: Ledger, name: str = "exec-1") -> int:
    ledger.register_node(name, role="executor", spawner="lead")
    return ledger.acquire_lease(name, holder="body-1").generation


# -- identities -------------------------------------------------------------------------------


def test_register_starts_at_generation_one_and_records_history(ledger: Ledger) -> None:
    node = ledger.register_node("coord-a", role="coordinator", spawner="pd")
    assert ledger.generation_of("coord-a") == 1
    assert (node.node, node.generation, node.role, node.spawner) == (
        "coord-a",
        1,
        "coordinator",
        "pd",
    )
    assert [e.kind for e in ledger.history("coord-a")] == ["node.registered"]


def test_register_twice_is_a_conflict(ledger: Ledger) -> None:
    ledger.register_node("a")
    with pytest.raises(Conflict):
        ledger.register_node("a")


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "-rf", "x" * 129, "a\x00b", "naïve", ".."])
def test_unsafe_names_are_bad_input(ledger: Ledger, bad: str) -> None:
    with pytest.raises(BadInput):
        ledger.register_node(bad)
    assert ledger.list_nodes() == []


def test_unknown_node_is_bad_input(ledger: Ledger) -> None:
    with pytest.raises(BadInput, match="no such node"):
        ledger.get_node("ghost")
    with pytest.raises(BadInput, match="no such node 'ghost'"):
        ledger.generation_of("ghost")
    with pytest.raises(BadInput):
        ledger.generation_of("../x")
    with pytest.raises(BadInput):
        ledger.acquire_lease("ghost")


def test_actors_and_episodes(ledger: Ledger) -> None:
    ledger.register_node("coord")
    actor = ledger.add_actor("coord-auth", node="coord")
    assert actor.node == "coord"
    with pytest.raises(Conflict):
        ledger.add_actor("coord-auth")
    ep = ledger.open_episode("coord", "ship the login page")
    with pytest.raises(Conflict):
        ledger.open_episode("coord", "a second one")
    lease = ledger.acquire_lease("coord")
    runs = ledger.runs("coord")
    assert [(r.generation, r.lease_id, r.episode_id) for r in runs] == [
        (1, lease.lease_id, ep.episode_id)
    ]
    assert ledger.episodes("coord", open_only=True) == ledger.episodes("coord") == [ep]
    settled = ledger.settle_episode("coord")
    assert settled.state == "SETTLED"
    assert [e.state for e in ledger.episodes("coord")] == ["SETTLED"]
    assert ledger.episodes("coord", open_only=True) == []
    second = ledger.open_episode("coord", "the signup page")
    assert [e.state for e in ledger.episodes("coord")] == ["SETTLED", "OPEN"]
    assert ledger.episodes("coord", open_only=True) == [second]
    with pytest.raises(BadInput):
        ledger.episodes("nobody", open_only=True)


# -- leases and fencing -----------------------------------------------------------------------


def test_one_lease_per_generation(ledger: Ledger) -> None:
    _born(ledger)
    with pytest.raises(Conflict, match="live body"):
        ledger.acquire_lease("exec-1")
    ledger.release_lease("exec-1", generation=1)
    with pytest.raises(Conflict, match="fence it"):
        ledger.acquire_lease("exec-1")
    ledger.fence("exec-1", expect_generation=1)
    assert ledger.acquire_lease("exec-1").generation == 2


def test_fence_is_a_compare_and_swap(ledger: Ledger) -> None:
    _born(ledger)
    result = ledger.fence("exec-1", expect_generation=1, reason="relief")
    assert (result.previous_generation, result.generation) == (1, 2)
    assert len(result.revoked_leases) == 1
    with pytest.raises(Conflict, match="generation is 2, not 1"):
        ledger.fence("exec-1", expect_generation=1)
    assert ledger.get_node("exec-1").generation == 2
    assert ledger.generation_of("exec-1") == 2  # the generation alone, read as get_node's
    leases = ledger.leases("exec-1")
    assert [(ls.generation, ls.state) for ls in leases] == [(1, LeaseState.FENCED)]


def test_acquire_with_expected_generation(ledger: Ledger) -> None:
    ledger.register_node("n")
    with pytest.raises(Conflict):
        ledger.acquire_lease("n", expect_generation=2)
    assert ledger.acquire_lease("n", expect_generation=1).generation == 1


def test_fence_revokes_grants_of_older_generations(ledger: Ledger) -> None:
    _born(ledger)
    grant = ledger.issue_grant("exec-1", generation=1, capability="tool:Bash")
    result = ledger.fence("exec-1", expect_generation=1)
    assert result.revoked_grants == [grant.grant_id]
    assert [g.state for g in ledger.grants("exec-1")] == ["REVOKED"]
    with pytest.raises(StaleGeneration):
        ledger.issue_grant("exec-1", generation=1, capability="tool:Edit")


def test_stale_write_is_denied_and_the_denial_is_durable(
    ledger: Ledger, make_ledger: Callable[..., Ledger]
) -> None:
    _born(ledger)
    ledger.fence("exec-1", expect_generation=1)
    with pytest.raises(StaleGeneration) as info:
        ledger.guard("exec-1", generation=1, action="git push")
    assert info.value.details["current_generation"] == 2
    # A second connection (another process, a restarted controller) sees the receipt.
    other = make_ledger()
    denials = other.denials("exec-1")
    assert [
        (d.presented_generation, d.current_generation, d.action, d.reason) for d in denials
    ] == [(1, 2, "git push", "stale generation")]
    assert other.history("exec-1")[-1].kind == "write.denied"


def _commit_durability(ledger: Ledger, tx: backends.Tx) -> str:
    """How the open transaction will commit: "full" (waits for the disk) or "relaxed"."""
    if ledger.backend.name == "sqlite":
        level = tx.one("PRAGMA synchronous")
        return {2: "full", 1: "relaxed"}[level[0] if level else -1]
    setting = tx.one("SHOW synchronous_commit")
    return {"on": "full", "off": "relaxed"}[setting[0] if setting else ""]


def test_a_relaxed_write_commits_without_waiting_and_the_next_write_waits_again(
    ledger: Ledger,
) -> None:
    def seen(tx: backends.Tx, _now: int) -> str:
        return _commit_durability(ledger, tx)

    assert ledger._write(seen) == "full"
    assert ledger._write(seen, relaxed=True) == "relaxed"
    assert ledger._write(seen) == "full"

    def fails(tx: backends.Tx, _now: int) -> None:
        raise RuntimeError("the body failed")

    with pytest.raises(RuntimeError):
        ledger._write(fails, relaxed=True)
    assert ledger._write(seen) == "full"  # a rolled-back relaxed write leaves no setting
    with ledger.transaction():  # inside a unit, the unit decides: a synchronous commit
        assert ledger._write(seen, relaxed=True) == "full"


def test_a_relaxed_write_whose_commit_fails_leaves_the_next_write_synchronous(
    ledger: Ledger,
) -> None:
    """SQLite leaves a transaction open when its COMMIT fails on a deferred constraint; the
    relaxed setting is still taken back, so the next write commits synchronously."""
    if ledger.backend.name != "sqlite":
        pytest.skip("PostgreSQL ends a transaction whose COMMIT failed; SET LOCAL ends with it")
    conn = ledger.backend._conn  # type: ignore[attr-defined]
    conn.execute("CREATE TABLE t_parent (id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TABLE t_child (parent INTEGER REFERENCES t_parent (id) "
                 "DEFERRABLE INITIALLY DEFERRED)")  # fmt: skip

    def orphan(tx: backends.Tx, _now: int) -> None:
        tx.run("INSERT INTO t_child (parent) VALUES (42)")  # refused only at COMMIT

    with pytest.raises(Conflict):
        ledger._write(orphan, relaxed=True)
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM t_child").fetchone()[0] == 0
    assert ledger._write(lambda tx, _now: _commit_durability(ledger, tx)) == "full"


def test_a_relaxed_write_refused_as_stale_commits_its_denial_synchronously(
    ledger: Ledger, make_ledger: Callable[..., Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool journal's row commits relaxed; a stale body's attempt is denied with a receipt
    committed as every denial is (synchronously), once."""
    from onstation.ledger.bodies import HarnessLedger

    _born(ledger)
    ledger.fence("exec-1", expect_generation=1)
    backend = type(ledger.backend)
    real_write = backend.write
    asked: list[bool] = []

    def write(self: object, *, relaxed: bool = False) -> object:
        asked.append(relaxed)
        return real_write(self, relaxed=relaxed)  # type: ignore[arg-type]

    monkeypatch.setattr(backend, "write", write)
    with pytest.raises(StaleGeneration):
        HarnessLedger(ledger).record_tool_outcome(
            "exec-1", generation=1, session_id="s1", tool_use_id="t1", tool="Bash",
            call_summary="git status", outcome="succeeded", exit_code=0,
        )  # fmt: skip
    assert asked == [True, False]  # tried relaxed, rolled back, run again synchronously
    monkeypatch.setattr(backend, "write", real_write)
    other = make_ledger()
    assert [(d.presented_generation, d.reason) for d in other.denials("exec-1")] == [
        (1, "stale generation")
    ]
    assert HarnessLedger(other).tool_outcomes("exec-1", generation=1) == []
    # A current body's row is journaled by the relaxed write alone.
    generation = ledger.acquire_lease("exec-1", holder="body-2").generation
    asked.clear()
    monkeypatch.setattr(backend, "write", write)
    HarnessLedger(ledger).record_tool_outcome(
        "exec-1", generation=generation, session_id="s2", tool_use_id="t2", tool="Bash",
        call_summary="git status", outcome="succeeded", exit_code=0,
    )  # fmt: skip
    assert asked == [True]
    assert [r.tool_use_id for r in HarnessLedger(other).tool_outcomes(
        "exec-1", generation=generation)] == ["t2"]  # fmt: skip


def test_future_generation_and_missing_lease_are_denied(ledger: Ledger) -> None:
    ledger.register_node("n")
    with pytest.raises(StaleGeneration, match="no live lease"):
        ledger.guard("n", generation=1)
    with pytest.raises(StaleGeneration, match="not yet issued"):
        ledger.guard("n", generation=7)
    assert [d.reason for d in ledger.denials("n")] == ["no live lease", "generation not yet issued"]


def test_lease_expiry_is_judged_on_the_ledger_clock(ledger: Ledger, clock: FakeClock) -> None:
    ledger.register_node("n")
    ledger.acquire_lease("n", ttl=timedelta(seconds=60))
    clock.advance(seconds=30)
    ledger.renew_lease("n", generation=1, ttl=timedelta(seconds=60))
    clock.advance(seconds=59)
    assert ledger.guard("n", generation=1).state is LeaseState.LIVE
    clock.advance(seconds=2)
    with pytest.raises(StaleGeneration, match="lease expired"):
        ledger.guard("n", generation=1)
    assert ledger.leases("n")[0].state is LeaseState.EXPIRED
    assert ledger.live_lease("n") is None


def test_released_lease_cannot_act(ledger: Ledger) -> None:
    _born(ledger)
    ledger.release_lease("exec-1", generation=1)
    with pytest.raises(StaleGeneration, match="released"):
        ledger.renew_lease("exec-1", generation=1)


# -- effects ----------------------------------------------------------------------------------


def test_effect_full_lifecycle(ledger: Ledger) -> None:
    gen = _born(ledger)
    effect, created = ledger.intend_effect(
        "exec-1", generation=gen, arguments={"ref": "main", "commit": "abc"}, **PUSH
    )
    assert created and effect.state is EffectState.INTENDED
    assert ledger.dispatch_effect(effect.effect_id, generation=gen).state is EffectState.DISPATCHED
    observed = ledger.observe_effect(effect.effect_id, generation=gen, result={"ok": True})
    assert observed.state is EffectState.OBSERVED and observed.result == {"ok": True}
    assert ledger.commit_effect(effect.effect_id, generation=gen).state is EffectState.COMMITTED
    kinds = [e.kind for e in ledger.history("exec-1") if e.kind.startswith("effect.")]
    assert kinds == ["effect.intended", "effect.dispatched", "effect.observed", "effect.committed"]


def test_fingerprint_is_recomputed_not_taken_from_the_caller(ledger: Ledger) -> None:
    gen = _born(ledger)
    first, created = ledger.intend_effect(
        "exec-1", generation=gen, arguments='{"ref": "main", "commit": "abc"}',
        caller_ref="random-1", **PUSH,
    )  # fmt: skip
    again, created_again = ledger.intend_effect(
        "exec-1",
        generation=gen,
        operation="GIT.PUSH",
        destination="ssh://git@EXAMPLE.com:22/o/r/",
        arguments='{ "commit":"abc",   "ref":"main" }',
        caller_ref="random-2",
    )
    assert created and not created_again
    assert again.effect_id == first.effect_id and again.fingerprint == first.fingerprint
    ledger.dispatch_effect(first.effect_id, generation=gen)
    with pytest.raises(Conflict, match="already dispatched"):
        ledger.intend_effect(
            "exec-1", generation=gen, arguments={"commit": "abc", "ref": "main"},
            caller_ref="random-3", **PUSH,
        )  # fmt: skip
    assert len(ledger.effects("exec-1")) == 1


def test_arguments_make_distinct_effects_a_slot_alone_does_not(ledger: Ledger) -> None:
    gen = _born(ledger)
    a, _ = ledger.intend_effect("exec-1", generation=gen, arguments={"commit": "a"}, **PUSH)
    b, _ = ledger.intend_effect("exec-1", generation=gen, arguments={"commit": "b"}, **PUSH)
    c, created = ledger.intend_effect(
        "exec-1", generation=gen, arguments={"commit": "a"}, approval_slot="second", **PUSH
    )
    assert a.effect_id != b.effect_id
    assert not created and c.effect_id == a.effect_id and c.approval_slot is None


def test_a_new_slot_does_not_disguise_a_repeated_effect(ledger: Ledger) -> None:
    """Issue 9: `effect intend ... --slot slot-99` of a pushed commit was a new effect."""
    gen = _born(ledger)
    push, _ = ledger.intend_effect("exec-1", generation=gen, arguments={"commit": "abc"}, **PUSH)
    again, created = ledger.intend_effect(
        "exec-1", generation=gen, arguments={"commit": "abc"}, approval_slot="slot-7", **PUSH
    )
    assert not created and again.effect_id == push.effect_id  # still INTENDED: returned
    ledger.dispatch_effect(push.effect_id, generation=gen)
    for slot in ("slot-99", "slot-100", None):
        with pytest.raises(Conflict, match="already dispatched") as caught:
            ledger.intend_effect(
                "exec-1", generation=gen, arguments={"commit": "abc"}, approval_slot=slot,
                **PUSH,
            )  # fmt: skip
        assert caught.value.details["effect_id"] == push.effect_id
    assert [e.effect_id for e in ledger.effects("exec-1")] == [push.effect_id]
    # The successor presenting it under a fresh slot is refused just the same.
    ledger.fence("exec-1", expect_generation=gen)
    ledger.reconcile("exec-1")
    successor = ledger.acquire_lease("exec-1").generation
    with pytest.raises(Conflict, match="AMBIGUOUS"):
        ledger.intend_effect(
            "exec-1", generation=successor, arguments={"commit": "abc"},
            approval_slot="slot-99", **PUSH,
        )  # fmt: skip
    assert len(ledger.effects("exec-1")) == 1


def test_a_declared_repeat_is_recorded_with_its_reason(ledger: Ledger) -> None:
    gen = _born(ledger)
    first, _ = ledger.intend_effect("exec-1", generation=gen, arguments={"commit": "abc"}, **PUSH)
    ledger.dispatch_effect(first.effect_id, generation=gen)
    ledger.observe_effect(first.effect_id, generation=gen, result={"ok": True})
    ledger.commit_effect(first.effect_id, generation=gen)

    def repeat(slot: str, reason: str = "re-deploy after rollback") -> tuple[Effect, bool]:
        return ledger.intend_effect(
            "exec-1", generation=gen, operation="GIT.PUSH",
            destination="ssh://git@example.com/o/r", arguments={"commit": "abc"},
            approval_slot=slot, repeat_reason=reason,
        )  # fmt: skip

    second, created = repeat("slot-2")
    assert created and second.effect_id != first.effect_id
    assert second.fingerprint != first.fingerprint and second.state is EffectState.INTENDED
    assert (second.approval_slot, second.repeat_of, second.repeat_reason) == (
        "slot-2", first.effect_id, "re-deploy after rollback",
    )  # fmt: skip
    assert (first.repeat_of, first.repeat_reason) == (None, None)
    assert ledger.get_effect(second.effect_id) == second
    event = [e for e in ledger.history("exec-1") if e.kind == "effect.intended"][-1]
    assert event.detail["effect_id"] == second.effect_id
    assert event.detail["repeat_of"] == first.effect_id
    assert event.detail["repeat_reason"] == "re-deploy after rollback"
    assert event.detail["approval_slot"] == "slot-2"

    # The same slot again finds that repeat, whatever reason is given: no third effect.
    same, created_again = repeat("slot-2", "retrying the command")
    assert not created_again and same == second
    ledger.dispatch_effect(second.effect_id, generation=gen)
    with pytest.raises(Conflict, match="already dispatched"):
        repeat("slot-2")
    # An undeclared slot still finds the logical effect itself, never a repeat.
    with pytest.raises(Conflict) as caught:
        ledger.intend_effect(
            "exec-1", generation=gen, arguments={"commit": "abc"}, approval_slot="slot-2", **PUSH
        )
    assert caught.value.details["effect_id"] == first.effect_id
    # A further declared repeat repeats the logical effect, not the previous repeat.
    third, created_third = repeat("slot-3", "second rollback")
    assert created_third and third.repeat_of == first.effect_id
    assert len(ledger.effects("exec-1")) == 3


@pytest.mark.parametrize(
    ("slot", "reason", "message"),
    [
        (None, "re-deploy", "--repeat-reason: a deliberate repeat needs its own --slot"),
        ("slot-2", "", "--repeat-reason: must not be empty"),
        ("slot-2", "   ", "--repeat-reason: must not be empty"),
        ("slot-2", "bad\x00", "--repeat-reason: must not contain NUL"),
    ],
)
def test_a_repeat_reason_needs_a_slot_and_words(
    ledger: Ledger, slot: str | None, reason: str, message: str
) -> None:
    gen = _born(ledger)
    first, _ = ledger.intend_effect("exec-1", generation=gen, arguments={}, **PUSH)
    ledger.dispatch_effect(first.effect_id, generation=gen)
    before = len(ledger.history("exec-1"))
    with pytest.raises(BadInput, match=re.escape(message)):
        ledger.intend_effect(
            "exec-1", generation=gen, arguments={}, approval_slot=slot, repeat_reason=reason,
            **PUSH,
        )  # fmt: skip
    assert len(ledger.history("exec-1")) == before and len(ledger.effects("exec-1")) == 1


def test_a_repeat_needs_something_to_repeat_and_never_an_ambiguous_one(ledger: Ledger) -> None:
    gen = _born(ledger)
    with pytest.raises(BadInput, match=r"no earlier git\.push"):
        ledger.intend_effect(
            "exec-1", generation=gen, arguments={}, approval_slot="slot-2",
            repeat_reason="again", **PUSH,
        )  # fmt: skip
    assert ledger.effects("exec-1") == []
    first, _ = ledger.intend_effect("exec-1", generation=gen, arguments={}, **PUSH)
    ledger.dispatch_effect(first.effect_id, generation=gen)
    ledger.fence("exec-1", expect_generation=gen)
    ledger.reconcile("exec-1")
    successor = ledger.acquire_lease("exec-1").generation
    with pytest.raises(Conflict, match="AMBIGUOUS"):
        ledger.intend_effect(
            "exec-1", generation=successor, arguments={}, approval_slot="slot-2",
            repeat_reason="it probably failed", **PUSH,
        )  # fmt: skip
    ledger.resolve_effect(first.effect_id, outcome="observed", by="op", why="on the remote")
    again, created = ledger.intend_effect(
        "exec-1", generation=successor, arguments={}, approval_slot="slot-2",
        repeat_reason="push it once more", **PUSH,
    )  # fmt: skip
    assert created and again.repeat_of == first.effect_id and again.generation == successor


def test_stale_generation_cannot_touch_effects(ledger: Ledger) -> None:
    gen = _born(ledger)
    effect, _ = ledger.intend_effect("exec-1", generation=gen, arguments={}, **PUSH)
    ledger.fence("exec-1", expect_generation=gen)
    for attempt in (
        lambda: ledger.dispatch_effect(effect.effect_id, generation=gen),
        lambda: ledger.intend_effect("exec-1", generation=gen, arguments={"x": 1}, **PUSH),
    ):
        with pytest.raises(StaleGeneration):
            attempt()
    assert ledger.get_effect(effect.effect_id).state is EffectState.INTENDED
    assert len(ledger.denials("exec-1")) == 2


def test_reconcile_settles_fenced_generations(ledger: Ledger) -> None:
    gen = _born(ledger)
    make = lambda commit: ledger.intend_effect(  # noqa: E731 - a one-line helper reads best as a lambda here
        "exec-1", generation=gen, arguments={"commit": commit}, **PUSH
    )[0]
    intended, dispatched, observed, committed = make("a"), make("b"), make("c"), make("d")
    refused = make("e")
    for e in (dispatched, observed, committed):
        ledger.dispatch_effect(e.effect_id, generation=gen)
    for e in (observed, committed):
        ledger.observe_effect(e.effect_id, generation=gen, result={"ok": True})
    ledger.commit_effect(committed.effect_id, generation=gen)

    before = ledger.reconcile("exec-1")
    assert before.ambiguous == [] and before.committed == []  # the live generation is untouched

    ledger.fence("exec-1", expect_generation=gen)
    # The fenced generation's dispatch is refused (a receipt): evidence its tool did not run.
    with pytest.raises(StaleGeneration):
        ledger.dispatch_effect(refused.effect_id, generation=gen)
    report = ledger.reconcile("exec-1")
    # An intent without such evidence may have run (its hook killed before the dispatch).
    assert sorted(report.ambiguous) == sorted([intended.effect_id, dispatched.effect_id])
    assert report.failed_before_dispatch == [refused.effect_id]
    assert report.committed == [observed.effect_id]
    assert report.unresolved_ambiguous == sorted([intended.effect_id, dispatched.effect_id])
    states = {e.effect_id: e.state for e in ledger.effects("exec-1")}
    assert states[committed.effect_id] is EffectState.COMMITTED
    assert ledger.reconcile("exec-1").ambiguous == []  # idempotent


def test_ambiguous_is_never_retried_only_an_operator_leaves_it(ledger: Ledger) -> None:
    gen = _born(ledger)
    effect, _ = ledger.intend_effect("exec-1", generation=gen, arguments={"c": 1}, **PUSH)
    ledger.dispatch_effect(effect.effect_id, generation=gen)
    ledger.fence("exec-1", expect_generation=gen)
    ledger.reconcile("exec-1")
    successor = ledger.acquire_lease("exec-1").generation
    with pytest.raises(Conflict, match="AMBIGUOUS"):
        ledger.intend_effect("exec-1", generation=successor, arguments={"c": 1}, **PUSH)
    with pytest.raises(Conflict):
        ledger.dispatch_effect(effect.effect_id, generation=successor)
    ledger.resolve_effect(effect.effect_id, outcome="compensated", by="op", why="reverted")
    with pytest.raises(Conflict, match="only an AMBIGUOUS"):
        ledger.resolve_effect(effect.effect_id, outcome="observed", by="op", why="again")
    resolved = ledger.get_effect(effect.effect_id)
    assert resolved.state is EffectState.COMPENSATED
    assert resolved.resolved_by == "op" and resolved.resolution == "compensated: reverted"
    # Compensated: the world is as before, so the same logical effect may be intended anew.
    again, created = ledger.intend_effect(
        "exec-1", generation=successor, arguments={"c": 1}, **PUSH
    )
    assert not created and again.state is EffectState.INTENDED and again.generation == successor


def test_resolve_observed_commits(ledger: Ledger) -> None:
    gen = _born(ledger)
    effect, _ = ledger.intend_effect("exec-1", generation=gen, arguments={}, **PUSH)
    ledger.dispatch_effect(effect.effect_id, generation=gen)
    ledger.fence("exec-1", expect_generation=gen)
    ledger.reconcile("exec-1")
    done = ledger.resolve_effect(effect.effect_id, outcome="observed", by="ops", why="on remote")
    assert done.state is EffectState.COMMITTED
    with pytest.raises(BadInput):
        ledger.resolve_effect(effect.effect_id, outcome="retry", by="ops", why="no")


def test_intended_effect_of_a_fenced_generation_can_be_intended_again(ledger: Ledger) -> None:
    gen = _born(ledger)
    effect, _ = ledger.intend_effect("exec-1", generation=gen, arguments={}, **PUSH)
    ledger.fence("exec-1", expect_generation=gen)
    successor = ledger.acquire_lease("exec-1").generation
    again, created = ledger.intend_effect("exec-1", generation=successor, arguments={}, **PUSH)
    assert not created and again.effect_id == effect.effect_id and again.generation == successor
    assert (
        ledger.dispatch_effect(again.effect_id, generation=successor).state
        is EffectState.DISPATCHED
    )


def test_invalid_transitions_are_conflicts(ledger: Ledger) -> None:
    gen = _born(ledger)
    effect, _ = ledger.intend_effect("exec-1", generation=gen, arguments={}, **PUSH)
    with pytest.raises(Conflict):
        ledger.commit_effect(effect.effect_id, generation=gen)
    with pytest.raises(Conflict):
        ledger.observe_effect(effect.effect_id, generation=gen)
    assert ledger.fail_effect(effect.effect_id, generation=gen, reason="cancelled").state is (
        EffectState.FAILED_BEFORE_DISPATCH
    )
    with pytest.raises(Conflict):
        ledger.dispatch_effect(effect.effect_id, generation=gen)


@pytest.mark.parametrize(
    "args",
    ['{"a": 1, "a": 2}', '{"a": NaN}', "[1, 2", '{"n": 99999999999999999999}', "Infinity"],
)
def test_bad_effect_arguments_change_nothing(ledger: Ledger, args: str) -> None:
    gen = _born(ledger)
    before = len(ledger.history("exec-1"))
    with pytest.raises(BadInput):
        ledger.intend_effect("exec-1", generation=gen, arguments=args, **PUSH)
    assert len(ledger.history("exec-1")) == before and ledger.effects("exec-1") == []


def _schema_4_ledger(url: str, rows: list[tuple[str | None, int]]) -> dict[str | None, str]:
    """A ledger as schema 4 left it, holding one push recorded under each ``(slot, created_at)``
    the way the slot-blind code did: the slot inside the fingerprint, nothing else to tell
    them apart. Returns the effect id of each slot."""
    dialect = "postgres" if url.startswith("postgresql://") else "sqlite"
    folder = Path(backends.__file__).parent / "migrations" / dialect
    scripts = [
        (folder / name).read_text(encoding="utf-8")
        for name in sorted(os.listdir(folder))
        if name.endswith(".sql") and int(name.split("_", 1)[0]) <= 4
    ]
    args = {"commit": "abc"}
    ids: dict[str | None, str] = {}
    effects = []
    for slot, at in rows:
        print_ = fingerprint(node="exec-1", arguments=args, approval_slot=slot, **PUSH)
        ids[slot] = effect_id_for(print_)
        effects.append(
            (ids[slot], "exec-1", 1, print_, "git.push", normalize_destination(PUSH["destination"]),
             canonical_bytes(args).decode(), slot, None, "COMMITTED", None, at, at, None, None)
        )  # fmt: skip
    effect_sql = "INSERT INTO effect VALUES (" + ", ".join(["?"] * 15) + ")"
    node_sql = "INSERT INTO agent_node (name, generation, created_at) VALUES ('exec-1', 1, 0)"
    version_sql = "INSERT INTO schema_version (version, applied_at) VALUES (?, 0)"
    if dialect == "sqlite":
        with sqlite3.connect(url) as conn:
            for script in scripts:
                conn.executescript(script)
            conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, "
                         "applied_at INTEGER NOT NULL)")  # fmt: skip
            conn.executemany(version_sql, [(v,) for v in range(1, 5)])
            conn.execute(node_sql)
            conn.executemany(effect_sql, effects)
        conn.close()
        return ids
    import psycopg

    from conftest import _pg_base

    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(_pg_base()) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        for script in scripts:
            conn.execute(script.encode())
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, "
                     "applied_at BIGINT NOT NULL)")  # fmt: skip
        with conn.cursor() as cur:
            cur.executemany(version_sql.replace("?", "%s"), [(v,) for v in range(1, 5)])
            cur.execute(node_sql)
            cur.executemany(effect_sql.replace("?", "%s"), effects)
    return ids


def test_effects_recorded_under_slots_before_schema_5_migrate(
    ledger_url: str, make_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    ids = _schema_4_ledger(ledger_url, [("slot-1", 1), ("slot-2", 2)])
    backend = backends.open_backend(ledger_url, require_migrated=False)
    backend.migrate()  # SQLite has already migrated on open; PostgreSQL waits to be told
    assert backend.schema_version() >= 5
    backend.close()
    ledger = make_ledger(clock=clock)
    original, repeat = ledger.get_effect(ids["slot-1"]), ledger.get_effect(ids["slot-2"])
    assert (original.repeat_of, original.repeat_reason) == (None, None)
    assert repeat.repeat_of == original.effect_id and "slot-2" in (repeat.repeat_reason or "")
    gen = ledger.acquire_lease("exec-1").generation
    # The oldest slotted push is the logical effect now, whatever slot is presented.
    for slot in (None, "slot-99", "slot-1"):
        with pytest.raises(Conflict) as caught:
            ledger.intend_effect(
                "exec-1", generation=gen, arguments={"commit": "abc"}, approval_slot=slot, **PUSH
            )
        assert caught.value.details["effect_id"] == original.effect_id
    declare = {"arguments": {"commit": "abc"}, "repeat_reason": "again", **PUSH}
    with pytest.raises(Conflict) as caught:
        ledger.intend_effect("exec-1", generation=gen, approval_slot="slot-2", **declare)
    assert caught.value.details["effect_id"] == repeat.effect_id
    third, created = ledger.intend_effect(
        "exec-1", generation=gen, approval_slot="slot-3", **declare
    )
    assert created and third.repeat_of == original.effect_id
    assert len(ledger.effects("exec-1")) == 3


def test_an_unslotted_effect_stays_the_logical_one_when_migrated(
    ledger_url: str, make_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    ids = _schema_4_ledger(ledger_url, [("early-slot", 1), (None, 2)])
    backend = backends.open_backend(ledger_url, require_migrated=False)
    backend.migrate()
    backend.close()
    ledger = make_ledger(clock=clock)
    assert ledger.get_effect(ids[None]).repeat_of is None
    assert ledger.get_effect(ids["early-slot"]).repeat_of == ids[None]


# -- halt gate --------------------------------------------------------------------------------


def test_halt_blocks_admission_and_new_effects_until_lifted(ledger: Ledger) -> None:
    gen = _born(ledger)
    effect, _ = ledger.intend_effect("exec-1", generation=gen, arguments={}, **PUSH)
    halt = ledger.halt(by="alice", why="incident 42")
    assert ledger.halt(by="bob", why="again").halt_id == halt.halt_id  # idempotent per scope
    with pytest.raises(BlockedByPolicy, match="incident 42"):
        ledger.intend_effect("exec-1", generation=gen, arguments={"x": 1}, **PUSH)
    with pytest.raises(BlockedByPolicy):
        ledger.dispatch_effect(effect.effect_id, generation=gen)
    ledger.fence("exec-1", expect_generation=gen)  # fencing is always allowed
    with pytest.raises(BlockedByPolicy):
        ledger.acquire_lease("exec-1")
    assert [h.why for h in ledger.halts()] == ["incident 42"]
    assert len(ledger.unhalt(by="alice")) == 1
    assert ledger.acquire_lease("exec-1").generation == 2


def test_halt_of_one_node_leaves_others_alone(ledger: Ledger) -> None:
    ledger.register_node("a")
    ledger.register_node("b")
    ledger.halt(node="a", by="ops", why="looping")
    with pytest.raises(BlockedByPolicy):
        ledger.acquire_lease("a")
    assert ledger.acquire_lease("b").generation == 1
    assert ledger.unhalt(by="ops") == []  # no global halt in force
    assert len(ledger.unhalt(node="a", by="ops")) == 1
    assert ledger.acquire_lease("a").generation == 1


def _plan(ledger: Ledger, sql: str, params: tuple[object, ...]) -> str:
    """The backend's plan for ``sql``; on PostgreSQL with sequential scans off, as a tiny
    test table would otherwise be scanned whatever its indexes."""
    if ledger.backend.name == "sqlite":
        rows = ledger._read(lambda tx, _now: tx.all(f"EXPLAIN QUERY PLAN {sql}", params))
    else:

        def explain(tx: backends.Tx, _now: int) -> list[backends.Row]:
            tx.run("SET LOCAL enable_seqscan = off")
            return tx.all(f"EXPLAIN {sql}", params)

        rows = ledger._write(explain)
    return "\n".join(" ".join(str(v) for v in row) for row in rows)


def test_the_halts_in_force_are_read_through_their_own_index(ledger: Ledger) -> None:
    """Lifted halts stay on record for good; every question about the halts in force (an
    admission's, a new effect's, the lead's poll, a lift's) reads them through the partial
    index of halts in force (schema version 16), so its cost does not grow with the lifted
    ones (before it, 100,000 lifted halts made a fence and an admission 40 times slower)."""
    ledger.register_node("a")
    for n in range(3):
        ledger.halt(node="a", by="ops", why=f"round {n}")
        ledger.unhalt(node="a", by="ops")
    questions: dict[str, tuple[object, ...]] = {
        "halts_in_force": (),
        "halt_blocking_node": ("a",),
        "halt_active_in_scope": ("a", "a"),
        "halt_lift_scope": (0, "ops", "a", "a"),
        "lease_admission_read": ("a",),
    }
    statements = {name: (ledger._q(name), params) for name, params in questions.items()}
    if ledger.backend.name == "sqlite":
        statements["lease_admit_if_allowed"] = (
            ledger._q("lease_admit_if_allowed"), (None, 0, 0, 1, "a", None, None))  # fmt: skip
    else:  # the admission function's statement, as the server holds it
        statements["onstation_admit"] = function_statement(ledger, "onstation_admit", {
            "p_node": "a", "p_holder": None, "p_now": 0, "p_expires": 1, "p_expect": None,
            "p_actor": "ops", "p_detail": "{}"})  # fmt: skip
    for name, (sql, params) in statements.items():
        plan = _plan(ledger, sql, params)
        assert "halt_in_force" in plan, (name, plan)
    assert ledger.halts() == [] and len(ledger.halts(active_only=False)) == 3
    assert ledger.acquire_lease("a").generation == 1


def test_a_nodes_own_rows_are_read_without_reading_every_nodes(ledger: Ledger) -> None:
    """Questions about one node's (or one lease's, one message's) rows in tables that only
    accumulate read them through an index (schema version 17), never the whole table: a
    session's last fill reading (the team view, per identity and poll), notes, episodes, the
    replies to open exchanges, the session bound at a launch, host witnesses, the bound
    workspace, the LIVE leases past their expiry (the alert pass), and the open episode
    alone (a relief's brief, capsule and launch ask for it). SQLite's plan names
    an index for each table; PostgreSQL's, with sequential scans off, scans none."""
    questions: dict[str, tuple[object, ...]] = {
        "telemetry_latest_of_node": ("a",),
        "notes_of_node": ("a",),
        "episodes_of_node": ("a",),
        "episodes_open_of_node": ("a",),
        "message_open_exchanges": ("a",),
        "body_provisional_launch": ("a", 1, 1),
        "body_hosts_of_node": ("a",),
        "workspace_latest_of_node": ("a",),
        "alert_overdue_leases": (0,),
    }
    for name, params in questions.items():
        plan = _plan(ledger, ledger._q(name), params)
        if ledger.backend.name == "sqlite":
            unindexed = [line for line in plan.splitlines()
                         if re.search(r"\bSCAN \w+$", line)]  # fmt: skip
        else:
            unindexed = [line for line in plan.splitlines() if "Seq Scan" in line]
        assert unindexed == [], (name, plan)


# -- respawn governor and breaker -------------------------------------------------------------


def test_respawn_governor_counts_atomically_and_reopens(ledger: Ledger, clock: FakeClock) -> None:
    ledger.register_node("coord")
    for expected in (1, 2, 3):
        assert ledger.request_respawn("coord").count_in_window == expected
        clock.advance(hours=1)
    with pytest.raises(BlockedByPolicy) as info:
        ledger.request_respawn("coord")
    first = clock.now - timedelta(hours=3)
    assert info.value.details["reopens_at"] == (first + timedelta(hours=24)).isoformat().replace(
        "+00:00", "Z"
    )
    status = ledger.respawn_status("coord")
    assert (status.allowed, status.count_in_window) == (False, 3)
    clock.now = first + timedelta(hours=24)
    assert ledger.request_respawn("coord").count_in_window == 3  # the first left the window
    assert [e.kind for e in ledger.history("coord")].count("respawn.blocked") == 1


def test_respawn_policy_is_configurable(
    make_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    ledger = make_ledger(
        clock=clock, respawn_policy=RespawnPolicy(limit=1, window=timedelta(hours=1))
    )
    ledger.register_node("x")
    ledger.request_respawn("x")
    with pytest.raises(BlockedByPolicy):
        ledger.request_respawn("x")
    clock.advance(hours=1, seconds=1)
    ledger.request_respawn("x")


def test_breaker_survives_a_restart_until_closed(
    ledger: Ledger, make_ledger: Callable[..., Ledger]
) -> None:
    ledger.register_node("coord")
    ledger.open_breaker("coord", by="ops", why="crash loop")
    ledger.close()
    restarted = make_ledger()
    assert restarted.get_node("coord").breaker_open
    with pytest.raises(BlockedByPolicy, match="breaker open"):
        restarted.request_respawn("coord")
    restarted.close_breaker("coord", by="ops")
    assert restarted.request_respawn("coord").allowed


# -- history, capsules ------------------------------------------------------------------------


def test_history_is_append_only(ledger: Ledger) -> None:
    ledger.register_node("n")
    with pytest.raises(Exception, match="append-only"), ledger.backend.write() as tx:
        tx.run("UPDATE event SET kind = 'forged'")
    with pytest.raises(Exception, match="append-only"), ledger.backend.write() as tx:
        tx.run("DELETE FROM event")
    assert [e.kind for e in ledger.history("n")] == ["node.registered"]


def test_capsule_acceptance_refuses_replay(ledger: Ledger) -> None:
    ledger.register_node("n")
    d1, d2 = "a" * 64, "b" * 64
    assert ledger.accept_capsule("n", generation=2, sequence=1, digest=d1, key_id="k")
    assert not ledger.accept_capsule("n", generation=2, sequence=1, digest=d1, key_id="k")
    with pytest.raises(Conflict, match="replay"):
        ledger.accept_capsule("n", generation=2, sequence=1, digest=d2, key_id="k")
    with pytest.raises(Conflict, match="replay"):
        ledger.accept_capsule("n", generation=1, sequence=9, digest=d2, key_id="k")
    assert ledger.accept_capsule("n", generation=3, sequence=0, digest=d2, key_id="k")


# -- the unit of work ---------------------------------------------------------------------------


def test_a_unit_of_work_commits_together(ledger: Ledger) -> None:
    from onstation.ledger.bodies import HarnessLedger

    generation = _born(ledger)
    records = HarnessLedger(ledger)
    with ledger.transaction() as unit:
        unit.event(node="exec-1", kind="hull.precompact", generation=generation, actor="test")
        records.post_message(sender="exec-1", recipient="lead", kind="tier_changed", body="red")
        # Inside the unit, reads see the unit's own writes.
        assert [m.kind for m in records.messages("lead")] == ["tier_changed"]
        stamped = unit.now
    assert [m.kind for m in records.messages("lead")] == ["tier_changed"]
    [event] = [e for e in ledger.history("exec-1") if e.kind == "hull.precompact"]
    assert event.at == stamped


def test_a_unit_of_work_that_fails_writes_nothing(ledger: Ledger) -> None:
    from onstation.ledger.bodies import HarnessLedger

    generation = _born(ledger)
    before = ledger.history()

    def failing_unit() -> None:
        with ledger.transaction() as unit:
            unit.event(node="exec-1", kind="hull.precompact", generation=generation, actor="t")
            HarnessLedger(ledger).post_message(
                sender="exec-1", recipient="lead", kind="tier_changed", body="red"
            )
            raise RuntimeError("the caller's own failure")

    with pytest.raises(RuntimeError):
        failing_unit()
    assert ledger.history() == before
    assert HarnessLedger(ledger).messages("lead") == []


def test_a_refused_write_ends_its_unit_and_keeps_only_its_receipt(ledger: Ledger) -> None:
    from onstation.ledger.bodies import HarnessLedger

    old = _born(ledger)
    ledger.fence("exec-1", expect_generation=old, by="test")
    records = HarnessLedger(ledger)

    def refused_unit() -> None:
        with ledger.transaction():
            records.post_message(sender="lead", recipient="ops", kind="note", body="before")
            ledger.intend_effect("exec-1", generation=old, **PUSH, arguments={"ref": "main"})

    with pytest.raises(StaleGeneration):
        refused_unit()
    assert records.messages("ops") == []  # the unit's other write is rolled back
    [denial] = ledger.denials("exec-1")  # the refusal's receipt is kept
    assert (denial.presented_generation, denial.current_generation) == (old, old + 1)
    assert ledger.effects("exec-1") == []


def test_a_refusal_handled_inside_the_unit_commits_with_it(ledger: Ledger) -> None:
    from onstation.ledger.bodies import HarnessLedger

    old = _born(ledger)
    ledger.fence("exec-1", expect_generation=old, by="test")
    records = HarnessLedger(ledger)
    with ledger.transaction():
        with pytest.raises(StaleGeneration):
            ledger.intend_effect("exec-1", generation=old, **PUSH, arguments={"ref": "main"})
        records.post_message(sender="lead", recipient="ops", kind="note", body="the lead is told")
    assert [m.body for m in records.messages("ops")] == ["the lead is told"]
    assert len(ledger.denials("exec-1")) == 1


def test_units_of_work_nest_into_the_outer_one(ledger: Ledger) -> None:
    generation = _born(ledger)

    def nested_units() -> None:
        with ledger.transaction():
            with ledger.transaction() as inner:
                inner.event(node="exec-1", kind="inner", generation=generation, actor="test")
            raise RuntimeError("the outer block fails after the inner one ended")

    with pytest.raises(RuntimeError):
        nested_units()
    assert [e for e in ledger.history("exec-1") if e.kind == "inner"] == []


# -- a body is a host process -------------------------------------------------------------------


def test_a_session_continuing_the_same_host_process_keeps_the_body(ledger: Ledger) -> None:
    from onstation.ledger.bodies import HarnessLedger, same_process

    ledger.register_node("exec-1", role="executor", spawner="lead")
    records = HarnessLedger(ledger)
    host = {"host": "h", "boot_id": "b", "pid": 4242, "start_ticks": 77, "executable": "/n"}
    other = {**host, "pid": 4243}
    asked: list[str] = []

    def seen(witness: dict[str, object]) -> object:
        def read() -> dict[str, object]:
            asked.append("read")
            return witness

        return read

    first = records.admit_session("s1", harness="claude-code", node="exec-1", workspace=None,
                                  host=seen(host), source="startup")  # fmt: skip
    assert first.admitted and asked == ["read"]
    # Known sessions are not witnessed again.
    records.admit_session("s1", harness="claude-code", node="exec-1", workspace=None,
                          host=seen(host), source=None)  # fmt: skip
    assert asked == ["read"]
    # Another process, whatever it says, and the same process starting afresh: refused.
    for sid, witness, source in (("s2", other, "clear"), ("s3", host, "startup"),
                                 ("s4", host, None)):  # fmt: skip
        refused = records.admit_session(
            sid, harness="claude-code", node="exec-1", workspace=None, host=seen(witness),
            source=source,
        )  # fmt: skip
        assert not refused.admitted and "already has a live body" in refused.reason
    # The same process after /clear: the same body, lease and generation.
    after = records.admit_session("s5", harness="claude-code", node="exec-1", workspace=None,
                                  host=seen({**host, "nonce": "x"}), source="clear")  # fmt: skip
    assert after.admitted and after.session.generation == first.session.generation
    assert after.session.lease_id == first.session.lease_id
    lease = ledger.live_lease("exec-1")
    assert lease is not None and lease.holder == "claude-code session s5"
    [event] = [e for e in ledger.history("exec-1") if e.kind == "session.continued"]
    assert event.detail["continues"] == "s1" and event.detail["source"] == "clear"
    # The session continued from s5 can itself be continued (a second /clear).
    again = records.admit_session("s6", harness="claude-code", node="exec-1", workspace=None,
                                  host=seen(host), source="resume")  # fmt: skip
    assert again.admitted and again.session.lease_id == first.session.lease_id
    assert same_process(host, {**host, "executable": "/other"})  # an exec is the same process
    assert not same_process(host, other)
    assert not same_process({}, {})  # no pid, no identity


def test_a_newcomer_replaces_a_body_whose_host_process_is_gone(ledger: Ledger) -> None:
    from onstation.ledger.bodies import HarnessLedger

    ledger.register_node("exec-1", role="executor", spawner="lead")
    records = HarnessLedger(ledger)
    host = {"host": "h", "boot_id": "b", "pid": 4242, "start_ticks": 77}

    def admit(sid: str, gone: str | None) -> object:
        return records.admit_session(
            sid, harness="claude-code", node="exec-1", workspace=None,
            host=lambda: {**host, "pid": 5000 + len(sid)}, source="startup",
            host_gone=lambda witness: gone,
        )  # fmt: skip

    first = records.admit_session("s1", harness="claude-code", node="exec-1", workspace=None,
                                  host=lambda: host, source="startup")  # fmt: skip
    assert first.admitted and first.session.generation == 1
    refused = admit("s2", None)  # the first body's process may live: refused
    assert not refused.admitted  # type: ignore[attr-defined]
    taken = admit("s33", "GONE: no process 4242")
    assert taken.admitted and taken.session.generation == 2  # type: ignore[attr-defined]
    [event] = [e for e in ledger.history("exec-1") if e.kind == "session.previous_body_gone"]
    assert event.detail["evidence"] == [{"session_id": "s1", "why": "GONE: no process 4242"}]
    assert records.admit_session("s1", harness="claude-code", node="exec-1",
                                 workspace=None).fenced  # fmt: skip


def test_a_launched_successors_own_session_is_bound_by_its_process(ledger: Ledger) -> None:
    """``codex exec`` chooses its own session id: a new session whose host process is (or
    descends from) the process a relief launched takes the launched lease while the birth is
    provisional; any other process is refused, and after the birth nothing binds that way."""
    from onstation.ledger.bodies import HarnessLedger
    from onstation.ledger.relief_records import CHALLENGE_FIELDS, ReliefLedger

    ledger.register_node("exec-1", role="executor", spawner="lead")
    records, relief = HarnessLedger(ledger), ReliefLedger(ledger)
    ledger.fence("exec-1", expect_generation=1)
    lease = ledger.acquire_lease("exec-1", holder="relief 1")
    ledger.hand_over_lease("exec-1", lease_id=lease.lease_id, holder="relief 1",
                           to="codex session launched-1", by="t")  # fmt: skip
    records.bind_launched_session("launched-1", harness="codex", node="exec-1", generation=2,
                                  lease_id=lease.lease_id, workspace=None,
                                  launcher={"harness": "codex", "model": "m"})  # fmt: skip
    relief.start_birth("exec-1", generation=2, lease_id=lease.lease_id, by="t",
                       challenge=dict.fromkeys(CHALLENGE_FIELDS, "x"))  # fmt: skip
    launched = {"v": 1, "host": "h", "boot_id": "b", "pid": 900, "start_ticks": 5}
    child = {"host": "h", "boot_id": "b", "pid": 901, "start_ticks": 6}
    stranger = {"host": "h", "boot_id": "b", "pid": 950, "start_ticks": 7}
    asked: list[tuple[int, int]] = []

    def launched_by(witness: dict[str, object], seen: dict[str, object]) -> bool:
        asked.append((int(witness["pid"]), int(seen["pid"])))  # type: ignore[call-overload]
        return seen["pid"] in (900, 901)

    def admit(sid: str, seen: dict[str, object]) -> object:
        return records.admit_session(sid, harness="codex", node="exec-1", workspace=None,
                                     host=lambda: seen, source="startup",
                                     launched_by=launched_by)  # fmt: skip

    # Before the launch is witnessed nothing can be matched: refused, and asked again later.
    early = admit("thread-1", child)
    assert not early.admitted  # type: ignore[attr-defined]
    relief.set_launch_witness("exec-1", 2, launched)
    assert not admit("thread-x", stranger).admitted  # type: ignore[attr-defined]
    bound = admit("thread-1", child)
    assert bound.admitted and bound.session.generation == 2  # type: ignore[attr-defined]
    assert bound.session.lease_id == lease.lease_id  # type: ignore[attr-defined]
    assert bound.session.launcher == {"harness": "codex", "model": "m"}  # type: ignore[attr-defined]
    assert asked[-1] == (900, 901)
    live = ledger.live_lease("exec-1")
    assert live is not None and live.holder == "codex session thread-1"
    [event] = [e for e in ledger.history("exec-1") if e.kind == "session.launch_bound"]
    assert event.detail["launched_session"] == "launched-1"
    assert event.detail["session_id"] == "thread-1"
    # Once the birth is decided, a new session of that process binds only as any other does.
    relief.decide_birth("exec-1", generation=2, running=True, reason="test", by="t")
    assert not admit("thread-2", child).admitted  # type: ignore[attr-defined]


def test_a_generation_records_its_base_once(ledger: Ledger) -> None:
    from onstation.ledger.bodies import HarnessLedger

    ledger.register_node("exec-1", role="executor", spawner="lead")
    records = HarnessLedger(ledger)
    assert records.base_of("exec-1", 1) is None
    assert records.record_base("exec-1", 1, "a" * 40, source="launch") == "a" * 40
    assert records.record_base("exec-1", 1, "b" * 64, source="session-start") == "a" * 40
    assert records.record_base("exec-1", 2, "b" * 64, source="session-start") == "b" * 64
    assert (records.base_of("exec-1", 1), records.base_of("exec-1", 2)) == ("a" * 40, "b" * 64)
    events = [e for e in ledger.history("exec-1") if e.kind == "generation.base"]
    assert [(e.generation, e.actor) for e in events] == [(1, "launch"), (2, "session-start")]


def test_capsules_and_plans_are_kept_by_their_digest(ledger: Ledger) -> None:
    from onstation.ledger.correspondence import Correspondence

    ledger.register_node("exec-1", role="executor", spawner="lead")
    store = Correspondence(ledger)
    first, second = "ab" * 32, "ab" + "cd" * 31
    assert store.store_object("capsule", "exec-1", first, {"digest": first, "n": 1})
    assert not store.store_object("capsule", "exec-1", first, {"digest": first, "n": 2})
    assert store.store_object("plan", "exec-1", second, {"plan": True})
    found = store.stored_object("capsule", first)
    assert (found.node, found.body) == ("exec-1", {"digest": first, "n": 1})  # first kept
    assert store.stored_object("capsule", f"sha256:{first[:12]}").digest == first
    assert store.stored_object("plan", second[:8]).body == {"plan": True}
    with pytest.raises(BadInput, match="no plan with digest"):
        store.stored_object("plan", first)  # a capsule's digest is not a plan's
    with pytest.raises(BadInput, match="prefix of at least 8"):
        store.stored_object("capsule", "abab")
    assert store.store_object("capsule", "exec-1", "abababab" + "ef" * 28, {})
    with pytest.raises(BadInput, match="more than one capsule"):
        store.stored_object("capsule", "abababab")
    with pytest.raises(BadInput, match="not a SHA-256"):
        store.store_object("capsule", "exec-1", "xyz", {})
    with pytest.raises(BadInput, match="kind"):
        store.store_object("brief", "exec-1", first, {})


def test_the_tool_call_journal_is_bound_to_the_generation(ledger: Ledger) -> None:
    from onstation.ledger.bodies import HarnessLedger

    generation = _born(ledger)
    records = HarnessLedger(ledger)
    call = {"session_id": "s1", "tool_use_id": None, "tool": "Bash"}
    for i in range(5):
        records.record_tool_outcome("exec-1", generation=generation, **call,
                                    call_summary=f"pytest -k t{i}", outcome="succeeded",
                                    exit_code=0)  # fmt: skip
    records.record_tool_outcome("exec-1", generation=generation, session_id="s1",
                                tool_use_id="toolu_9", tool="Bash", call_summary="pytest",
                                outcome="failed", exit_code=1,
                                detail="Command exited with non-zero status code 1")  # fmt: skip
    rows = records.tool_outcomes("exec-1", generation=generation)
    assert [r.call_summary for r in rows] == [*(f"pytest -k t{i}" for i in range(5)), "pytest"]
    assert [r.id for r in rows] == sorted(r.id for r in rows)
    last = rows[-1]
    assert (last.tool_use_id, last.outcome, last.exit_code) == ("toolu_9", "failed", 1)
    assert last.detail == "Command exited with non-zero status code 1"
    newest = records.tool_outcomes("exec-1", generation=generation, limit=2)
    assert [r.call_summary for r in newest] == ["pytest -k t4", "pytest"]  # newest, in order
    assert records.tool_outcomes("exec-1", generation=generation + 1) == []

    # Bad input is refused, naming the field, and nothing is written.
    bad = [({"outcome": "maybe"}, "outcome"), ({"call_summary": "x" * 501}, "call_summary"),
           ({"exit_code": 2**40}, "exit_code"), ({"detail": "d" * 401}, "detail"),
           ({"tool": ""}, "tool"), ({"session_id": "a\x00b"}, "session_id"),
           ({"generation": 0}, "generation")]  # fmt: skip
    for change, field in bad:
        args = {"generation": generation, "session_id": "s1", "tool_use_id": None,
                "tool": "Bash", "call_summary": "ls", "outcome": "succeeded", **change}  # fmt: skip
        with pytest.raises(BadInput, match=field):
            records.record_tool_outcome("exec-1", **args)  # type: ignore[arg-type]
    assert len(records.tool_outcomes("exec-1", generation=generation)) == 6

    # A fenced generation is denied, durably, and journals nothing.
    ledger.fence("exec-1", expect_generation=generation)
    before = len(ledger.denials("exec-1"))
    with pytest.raises(StaleGeneration):
        records.record_tool_outcome("exec-1", generation=generation, session_id="s1",
                                    tool_use_id="toolu_10", tool="Bash", call_summary="ls",
                                    outcome="succeeded")  # fmt: skip
    denials = ledger.denials("exec-1")
    assert len(denials) == before + 1 and denials[-1].action == "tool outcome Bash"
    assert len(records.tool_outcomes("exec-1", generation=generation)) == 6


def test_the_change_token_moves_with_every_commit_and_only_then(
    make_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    """Ledger.change_token (issue 14: the simulator's checker reads the history only when
    something was committed): equal across reads, different after a commit on this
    connection or on another one; None where the backend cannot tell (PostgreSQL)."""
    one, two = make_ledger(clock=clock), make_ledger(clock=clock)
    first = one.change_token()
    if one.backend.name != "sqlite":
        assert first is None
        return
    one.list_nodes()
    one.events_after(0)
    assert one.change_token() == first
    one.register_node("exec-1")  # this connection commits
    mine = one.change_token()
    assert mine != first
    assert one.change_token() == mine
    two.acquire_lease("exec-1", holder="body-1")  # another connection commits
    assert one.change_token() != mine
    with pytest.raises(Conflict):
        one.register_node("exec-1")  # refused: nothing committed, the token may still move
    settled = one.change_token()
    two.get_node("exec-1")
    assert one.change_token() == settled
