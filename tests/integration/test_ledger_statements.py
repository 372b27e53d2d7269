"""The ledger's cheaper statements (issue 14), on every backend: each gives what the longer
form gave, and runs only the statements it names.

- the generation guard reads the node and its lease in one statement (PostgreSQL: after the
  node's row lock, sent in the same round trip);
- the SQLite fence's compare-and-swap says what the fence has to end, so nothing runs for a
  lease or grants that are not there, and what was ended is still reported and recorded;
- reads that need no common snapshot run without BEGIN/ROLLBACK outside a unit of work, and
  inside one still see what the unit wrote;
- a node's lists ask whether the node exists only when they come back empty;
- a renewal, a release, an effect's step and a grant return what a fresh read returns.
"""

from __future__ import annotations

import json
import pathlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from pg_functions import function_statement

from onstation.core.errors import BadInput, Conflict, StaleGeneration
from onstation.core.leases import LeaseState
from onstation.ledger import Ledger
from onstation.ledger.backends import Asked, Params, Row, Tx
from onstation.testing import FakeClock


class _Counting:
    """A Tx that records the name of each named query it runs (raw SQL as its text)."""

    def __init__(self, tx: Tx, names: dict[str, str], log: list[str]) -> None:
        self._tx, self._names, self._log = tx, names, log

    def _note(self, sql: str) -> None:
        self._log.append(self._names.get(sql, sql))

    def one(self, sql: str, params: Params = ()) -> Row | None:
        self._note(sql)
        return self._tx.one(sql, params)

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        self._note(sql)
        return self._tx.all(sql, params)

    def run(self, sql: str, params: Params = ()) -> int:
        self._note(sql)
        return self._tx.run(sql, params)

    def send(self, sql: str, params: Params = ()) -> None:
        self._note(sql)
        self._tx.send(sql, params)

    def ask(self, sql: str, params: Params = ()) -> Asked:
        self._note(sql)
        return self._tx.ask(sql, params)


def _count(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """(statements run by name, transactions opened: "write" / "read")."""
    names = {sql: name for name, sql in ledger._queries.items()}
    log: list[str] = []
    opened: list[str] = []
    backend = ledger.backend
    real_write, real_read, real_auto = backend.write, backend.read, backend.autocommit

    def wrapped(kind: str, real: Callable[..., Any]) -> Callable[..., Any]:
        @contextmanager
        def counted(**options: Any) -> Iterator[Tx]:  # write(relaxed=...) passes one
            opened.append(kind)
            with real(**options) as tx:
                yield _Counting(tx, names, log)

        return counted

    monkeypatch.setattr(backend, "write", wrapped("write", real_write))
    monkeypatch.setattr(backend, "read", wrapped("read", real_read))
    monkeypatch.setattr(backend, "autocommit", lambda: _Counting(real_auto(), names, log))
    return log, opened


def test_the_guard_reads_node_and_lease_in_one_statement(
    ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.register_node("body")
    lease = ledger.acquire_lease("body", holder="h")
    clock.advance(minutes=1)
    log, _ = _count(ledger, monkeypatch)
    renewed = ledger.renew_lease("body", generation=1)
    lock = ["node_row_lock"] if ledger.backend.name == "postgres" else []
    assert log == [*lock, "node_and_lease", "lease_renew"]
    assert renewed == ledger.lease("body", 1)
    assert renewed.lease_id == lease.lease_id and renewed.expires_at > lease.expires_at


def test_the_guard_still_denies_a_stale_generation_and_an_expired_lease(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.register_node("body")
    ledger.acquire_lease("body", ttl=timedelta(seconds=30))
    clock.advance(seconds=31)
    with pytest.raises(StaleGeneration) as expired:
        ledger.renew_lease("body", generation=1)
    assert expired.value.details["reason"] == "lease expired"
    assert ledger.lease("body", 1).state is LeaseState.EXPIRED  # type: ignore[union-attr]
    ledger.fence("body", expect_generation=1)
    with pytest.raises(StaleGeneration) as stale:
        ledger.issue_grant("body", generation=1, capability="tool:Bash")
    assert (stale.value.details["presented_generation"],
            stale.value.details["current_generation"]) == (1, 2)  # fmt: skip
    assert [d.presented_generation for d in ledger.denials("body")] == [1, 1]
    with pytest.raises(BadInput, match="no such node"):
        ledger.renew_lease("nobody", generation=1)


def test_a_fence_reports_and_records_what_it_ended(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.register_node("body")
    lease = ledger.acquire_lease("body")
    grants = [ledger.issue_grant("body", generation=1, capability=c).grant_id
              for c in ("tool:Bash", "mcp:git")]  # fmt: skip
    log, _ = _count(ledger, monkeypatch)
    result = ledger.fence("body", expect_generation=1, reason="relief")
    assert (result.generation, result.revoked_leases, result.revoked_grants) == (
        2, [lease.lease_id], sorted(grants))  # fmt: skip
    if ledger.backend.name == "sqlite":
        assert log == ["fence_bump_generation", "fence_revoke_leases", "fence_revoke_grants",
                       "event_insert"]  # fmt: skip
    assert ledger.lease("body", 1).state is LeaseState.FENCED  # type: ignore[union-attr]
    assert {g.state for g in ledger.grants("body")} == {"REVOKED"}
    fenced = [e for e in ledger.history("body") if e.kind == "node.fenced"][-1]
    assert fenced.detail == {"fenced_generations": [1], "previous_generation": 1,
                             "reason": "relief", "revoked_grants": sorted(grants),
                             "revoked_leases": [lease.lease_id]}  # fmt: skip


def test_a_fence_with_nothing_live_runs_only_its_compare_and_swap(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.register_node("body")
    ledger.acquire_lease("body")
    ledger.release_lease("body", generation=1)
    log, _ = _count(ledger, monkeypatch)
    result = ledger.fence("body", expect_generation=1)
    assert (result.generation, result.revoked_leases, result.revoked_grants) == (2, [], [])
    if ledger.backend.name == "sqlite":
        assert log == ["fence_bump_generation", "event_insert"]
    with pytest.raises(Conflict, match="generation is 2, not 1"):
        ledger.fence("body", expect_generation=1)
    assert ledger.get_node("body").generation == 2
    # Admission then fence again: the new lease is the one ended.
    second = ledger.acquire_lease("body", expect_generation=2)
    assert ledger.fence("body", expect_generation=2).revoked_leases == [second.lease_id]
    assert len([le for le in ledger.leases("body") if le.state is LeaseState.LIVE]) == 0


def test_reads_outside_a_unit_open_no_transaction_and_inside_one_see_its_writes(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.register_node("body")
    ledger.acquire_lease("body")
    log, opened = _count(ledger, monkeypatch)
    node = ledger.get_node("body")
    assert ledger.live_lease("body") is not None
    assert ledger.live_grants("body", 1) == frozenset()
    assert ledger.multiple_live_leases() == {}
    assert opened == []
    assert log == ["node_get", "node_and_lease", "live_grants_of_generation",
                   "lease_nodes_with_many_live"]  # fmt: skip
    with ledger.transaction():
        ledger.fence("body", expect_generation=1)
        assert ledger.get_node("body").generation == 2  # the unit's own, uncommitted write
        assert ledger.live_lease("body") is None
        ledger.register_node("newcomer")
        assert ledger.leases("newcomer") == []
    assert opened == ["write"]
    assert node.generation == 1 and ledger.get_node("body").generation == 2


@pytest.mark.parametrize(
    "read",
    [
        lambda ledger: ledger.leases("nobody"),
        lambda ledger: ledger.lease("nobody", 1),
        lambda ledger: ledger.denials("nobody"),
        lambda ledger: ledger.grants("nobody"),
        lambda ledger: ledger.effects("nobody"),
        lambda ledger: ledger.open_effects("nobody"),
        lambda ledger: ledger.episodes("nobody"),
        lambda ledger: ledger.runs("nobody"),
        lambda ledger: ledger.live_lease("nobody"),
        lambda ledger: ledger.get_node("nobody"),
    ],
)
def test_a_list_of_a_node_that_does_not_exist_is_refused(
    ledger: Ledger, read: Callable[[Ledger], Any]
) -> None:
    ledger.register_node("somebody")
    with pytest.raises(BadInput, match="no such node 'nobody'"):
        read(ledger)


def test_an_empty_list_of_a_node_that_exists_is_empty(ledger: Ledger) -> None:
    ledger.register_node("body")
    assert ledger.leases("body") == []
    assert ledger.lease("body", 1) is None
    assert ledger.denials("body") == []
    assert ledger.grants("body") == []
    assert ledger.effects("body") == []
    assert ledger.open_effects("body") == []
    assert ledger.episodes("body") == []
    assert ledger.runs("body") == []
    assert ledger.live_lease("body") is None


def test_a_grant_given_twice_is_refused_once_and_kept_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.register_node("body")
    ledger.acquire_lease("body")
    first = ledger.issue_grant("body", generation=1, capability="tool:Bash")
    before = ledger.history("body")
    log, _ = _count(ledger, monkeypatch)
    with pytest.raises(Conflict, match="already granted"):
        ledger.issue_grant("body", generation=1, capability="tool:Bash")
    assert "grant_insert" in log
    assert ledger.grants("body") == [first]
    assert ledger.history("body") == before
    assert ledger.live_grants("body", 1) == frozenset({"tool:Bash"})


def test_a_release_and_an_effects_step_return_what_a_fresh_read_returns(ledger: Ledger) -> None:
    ledger.register_node("body")
    ledger.acquire_lease("body")
    effect, _ = ledger.intend_effect(
        "body", generation=1, operation="git.push", destination="file:///r", arguments={"a": 1}
    )
    dispatched = ledger.dispatch_effect(effect.effect_id, generation=1)
    assert dispatched == ledger.get_effect(effect.effect_id)
    observed = ledger.observe_effect(effect.effect_id, generation=1, result={"ok": True})
    assert observed == ledger.get_effect(effect.effect_id)
    assert observed.result == {"ok": True}
    released = ledger.release_lease("body", generation=1)
    assert released == ledger.lease("body", 1)
    assert released.state is LeaseState.RELEASED and released.end_reason == "released by body"


def _until_waiting_for_a_lock(
    ledger_url: str, ledger: Ledger, worker: threading.Thread, outcome: dict[str, Any]
) -> None:
    """PostgreSQL: return once ``ledger``'s connection waits for a lock (the server says so);
    ``worker``, which uses it, must not end before."""
    import psycopg

    waiter = ledger.backend._conn.info.backend_pid  # type: ignore[attr-defined]
    with psycopg.connect(ledger_url.partition("?schema=")[0], autocommit=True) as watch:
        while not watch.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
            (waiter,),
        ).fetchone():
            assert worker.is_alive(), outcome


def _write_under_an_open_fence(
    ledger_url: str, write: Callable[[Ledger, dict[str, Any]], object]
) -> dict[str, Any]:
    """PostgreSQL: run ``write`` (the body's, as generation 1) while another connection holds
    a fence of the body uncommitted, and commit the fence only once the body's connection waits
    for a lock the fence holds (the server says so). What ``write`` returned ("done") or the
    denial's details ("denied")."""
    if not ledger_url.startswith("postgresql://"):
        pytest.skip("SQLite's writer lock serializes whole transactions; no read can wait")

    facts: dict[str, Any] = {}
    with Ledger.open(ledger_url) as setup:
        setup.register_node("body")
        setup.acquire_lease("body")
        facts["effect"], _ = setup.intend_effect("body", generation=1, operation="git.push",
                                                 destination="file:///r", arguments={})  # fmt: skip
    fencer, body = Ledger.open(ledger_url), Ledger.open(ledger_url)
    outcome: dict[str, Any] = {}
    try:
        with fencer.transaction():
            fencer.fence("body", expect_generation=1)

            def run() -> None:
                try:
                    outcome["done"] = write(body, facts)
                except StaleGeneration as exc:
                    outcome["denied"] = exc.details

            worker = threading.Thread(target=run)
            worker.start()
            _until_waiting_for_a_lock(ledger_url, body, worker, outcome)
        worker.join()
    finally:
        fencer.close()
        body.close()
    return outcome


def test_a_guard_waiting_on_a_fence_sees_the_generation_the_fence_made(
    ledger_url: str,
) -> None:
    """PostgreSQL: the guard's read after the node's lock is taken once the lock is held, so
    a body whose generation was fenced while it waited is denied, not allowed."""
    outcome = _write_under_an_open_fence(
        ledger_url, lambda body, _facts: body.renew_lease("body", generation=1)
    )
    assert "done" not in outcome
    assert (outcome["denied"]["presented_generation"],
            outcome["denied"]["current_generation"]) == (1, 2)  # fmt: skip


def test_an_effects_step_waiting_on_a_fence_sees_the_generation_the_fence_made(
    ledger_url: str,
) -> None:
    """PostgreSQL: an effect's one read is taken once the node's row lock is held, so a body
    whose generation was fenced while its step waited is denied, not allowed."""
    outcome = _write_under_an_open_fence(
        ledger_url,
        lambda body, facts: body.dispatch_effect(facts["effect"].effect_id, generation=1),
    )
    assert "done" not in outcome
    assert (outcome["denied"]["presented_generation"],
            outcome["denied"]["current_generation"]) == (1, 2)  # fmt: skip


def test_the_fence_event_detail_is_json_as_the_history_reads_it(ledger: Ledger) -> None:
    ledger.register_node("body")
    ledger.acquire_lease("body")
    ledger.fence("body", expect_generation=1, reason='quote " and \\ backslash')
    event = [e for e in ledger.history("body") if e.kind == "node.fenced"][-1]
    assert json.loads(json.dumps(event.detail))["reason"] == 'quote " and \\ backslash'


def _removed_by_filters(plan: Any) -> int:
    """Lease rows a plan read and then threw away (by a join filter, or a filter on a scan of
    body_lease), over all its nodes."""
    if isinstance(plan, list):
        return sum(_removed_by_filters(p) for p in plan)
    if not isinstance(plan, dict):
        return 0
    own = int(plan.get("Rows Removed by Join Filter", 0))
    if plan.get("Relation Name") == "body_lease":
        own += int(plan.get("Rows Removed by Filter", 0))
    return own + sum(_removed_by_filters(v) for v in plan.values() if isinstance(v, list | dict))


def test_postgres_finds_the_current_lease_by_its_key_however_long_the_history(
    ledger_url: str,
) -> None:
    """The guard's read and the admission find the current generation's lease by the
    (node, generation) key, not by reading every lease of the node (a plain join could)."""
    if not ledger_url.startswith("postgresql://"):
        pytest.skip("SQLite's plans are checked by the statement counts above")
    import psycopg

    with Ledger.open(ledger_url) as ledger:
        ledger.register_node("body")
        ledger.acquire_lease("body")
        for generation in range(1, 61):
            ledger.fence("body", expect_generation=generation)
            ledger.acquire_lease("body", expect_generation=generation + 1)
        queries = ledger._queries
        # The admission function's statement, as the server holds it (schema version 18).
        admission = function_statement(ledger, "onstation_admit", {
            "p_node": "body", "p_holder": None, "p_now": 1, "p_expires": 2, "p_expect": None,
            "p_actor": "t", "p_detail": "{}"})  # fmt: skip
    base, _, schema = ledger_url.partition("?schema=")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        with conn.transaction(force_rollback=True):
            for sql, params in (
                (queries["node_and_lease"], ("body",)),
                admission,
            ):
                (plan,) = conn.execute(
                    "EXPLAIN (ANALYZE, FORMAT JSON) " + sql.replace("?", "%s"), params
                ).fetchone()  # type: ignore[misc]
                assert _removed_by_filters(plan) == 0, json.dumps(plan)[:2000]


def test_sqlite_keeps_a_statements_scratch_tables_in_memory(sqlite_url: str) -> None:
    """An INSERT ... SELECT ... RETURNING (the admission) buffers its rows in a scratch
    table: in a temporary file by default, created and deleted on every admission."""
    with Ledger.open(sqlite_url) as ledger:
        conn: Any = ledger.backend._conn  # type: ignore[attr-defined]
        assert conn.execute("PRAGMA temp_store").fetchone()[0] == 2  # MEMORY
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL, as before
        ledger.register_node("body")
        assert ledger.acquire_lease("body").generation == 1


def test_an_intended_effect_is_returned_as_written_not_read_back(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger.register_node("body")
    ledger.acquire_lease("body")
    log, _ = _count(ledger, monkeypatch)
    effect, created = ledger.intend_effect(
        "body", generation=1, operation="git.push", destination="file:///r", arguments={"a": 1}
    )
    assert created and "effect_insert_intended" in log and "effect_by_id" not in log
    assert effect == ledger.get_effect(effect.effect_id)
    ledger.fence("body", expect_generation=1)
    ledger.acquire_lease("body", expect_generation=2)
    log.clear()
    again, created = ledger.intend_effect(
        "body", generation=2, operation="git.push", destination="file:///r", arguments={"a": 1}
    )
    assert not created and "effect_reintend" in log and "effect_by_id" not in log
    assert again == ledger.get_effect(effect.effect_id)
    assert (again.effect_id, again.generation, again.state.value) == (
        effect.effect_id, 2, "INTENDED")  # fmt: skip


def test_an_effects_step_reads_the_effect_and_the_guards_rows_in_one_statement(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An effect's step reads the effect, the node, its lease and the acting generation's
    birth in one statement (issue 14: three before; PostgreSQL after locking the node's row,
    sent in the same round trip), a new effect its node, lease and birth in one (two before),
    and each returns what a fresh read returns."""
    ledger.register_node("body")
    ledger.acquire_lease("body")
    log, opened = _count(ledger, monkeypatch)
    pg = ledger.backend.name == "postgres"
    effect, _ = ledger.intend_effect(
        "body", generation=1, operation="git.push", destination="file:///r", arguments={"a": 1}
    )
    # A new effect: the guard's node and lease and the birth's state in one read too.
    assert log[: 2 if pg else 1] == [*(["node_row_lock"] if pg else []), "node_lease_and_birth"]
    assert "node_and_lease" not in log and "birth_state_of_generation" not in log
    log.clear()
    opened.clear()
    lock = ["effect_node_row_lock"] if pg else []
    dispatched = ledger.dispatch_effect(effect.effect_id, generation=1)
    # A dispatch also asks the halt gate (PostgreSQL: after taking it, shared).
    gate = ["SELECT id FROM gate WHERE id = 1 FOR SHARE"] if pg else []
    assert log == [*lock, "effect_and_guard", *gate, "halt_blocking_node", "effect_advance",
                   "event_insert"]  # fmt: skip
    log.clear()
    observed = ledger.observe_effect(effect.effect_id, generation=1, result={"ok": True})
    assert log == [*lock, "effect_and_guard", "effect_advance", "event_insert"]
    log.clear()
    committed = ledger.commit_effect(effect.effect_id, generation=1)
    assert log == [*lock, "effect_and_guard", "effect_advance", "event_insert"]
    assert opened == ["write"] * 3
    assert dispatched.state.value == "DISPATCHED" and observed.result == {"ok": True}
    assert committed == ledger.get_effect(effect.effect_id)


@pytest.mark.parametrize("running", [False, True])
def test_an_effects_step_still_denies_a_stale_body_and_an_unchallenged_successor(
    ledger: Ledger, running: bool
) -> None:
    """The one read of an effect's step decides as the three reads did: a fenced generation
    is denied with a receipt, a successor whose birth is not yet RUNNING may not dispatch,
    one RUNNING may; an effect that does not exist is bad input."""
    from onstation.ledger.relief_records import CHALLENGE_FIELDS, ReliefLedger

    ledger.register_node("body")
    ledger.acquire_lease("body")
    effect, _ = ledger.intend_effect(
        "body", generation=1, operation="git.push", destination="file:///r", arguments={"a": 1}
    )
    ledger.fence("body", expect_generation=1)
    with pytest.raises(StaleGeneration) as stale:
        ledger.dispatch_effect(effect.effect_id, generation=1)
    assert (stale.value.details["presented_generation"],
            stale.value.details["current_generation"]) == (1, 2)  # fmt: skip
    assert [d.presented_generation for d in ledger.denials("body")] == [1]
    lease = ledger.acquire_lease("body")  # generation 2's body, born of a relief
    births = ReliefLedger(ledger)
    challenge: dict[str, Any] = dict.fromkeys(CHALLENGE_FIELDS, "x")
    births.start_birth("body", generation=2, lease_id=lease.lease_id, challenge=challenge,
                       by="relief")  # fmt: skip
    if running:
        births.decide_birth("body", generation=2, running=True, reason="agreed", by="relief")
    second, _ = (
        ledger.intend_effect(
            "body", generation=2, operation="git.push", destination="file:///r", arguments={"b": 2}
        )
        if running
        else (effect, False)
    )
    if running:
        assert ledger.dispatch_effect(second.effect_id, generation=2).state.value == "DISPATCHED"
    else:
        # The old generation's effect, presented by the new body before its challenge: the
        # guard lets generation 2 pass; its birth does not.
        with pytest.raises(StaleGeneration) as early:
            ledger.dispatch_effect(effect.effect_id, generation=2)
        assert early.value.details["reason"] == "successor not yet challenged"
        assert len(ledger.denials("body")) == 2
    with pytest.raises(BadInput, match="no such effect"):
        ledger.observe_effect("eff-nothing", generation=2)


def test_a_base_is_recorded_in_one_statement_and_the_first_one_wins(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generation's base is recorded by one statement (with its event); a second record of
    the same generation keeps the first and writes nothing; a node that does not exist is
    refused as before."""
    from onstation.ledger.bodies import HarnessLedger

    ledger.register_node("body")
    records = HarnessLedger(ledger)
    log, _ = _count(ledger, monkeypatch)
    assert records.record_base("body", 1, "a" * 40, source="session-start") == "a" * 40
    assert log == ["generation_base_record", "event_insert"]
    before = ledger.history("body")
    log.clear()
    assert records.record_base("body", 1, "b" * 40, source="launch") == "a" * 40
    assert log == ["generation_base_record", "generation_base_of"]
    assert ledger.history("body") == before
    assert records.base_of("body", 1) == "a" * 40
    with pytest.raises(BadInput, match="no such node 'nobody'"):
        records.record_base("nobody", 1, "a" * 40, source="launch")


def test_a_base_recorded_meanwhile_is_waited_for_and_kept(ledger_url: str) -> None:
    """PostgreSQL: a record of a generation's base while another transaction has recorded
    one and not committed waits for it and keeps its base (it was a unique-key error)."""
    if not ledger_url.startswith("postgresql://"):
        pytest.skip("SQLite's writer lock serializes whole transactions")

    from onstation.ledger.bodies import HarnessLedger

    with Ledger.open(ledger_url) as setup:
        setup.register_node("body")
    first, second = Ledger.open(ledger_url), Ledger.open(ledger_url)
    outcome: dict[str, Any] = {}
    try:
        with first.transaction():
            HarnessLedger(first).record_base("body", 1, "a" * 40, source="launch")

            def run() -> None:
                try:
                    outcome["kept"] = HarnessLedger(second).record_base(
                        "body", 1, "b" * 40, source="session-start"
                    )
                except Exception as exc:  # the failure the test is about
                    outcome["error"] = exc

            worker = threading.Thread(target=run)
            worker.start()
            _until_waiting_for_a_lock(ledger_url, second, worker, outcome)
        worker.join()
    finally:
        first.close()
        second.close()
    assert outcome == {"kept": "a" * 40}
    with Ledger.open(ledger_url) as after:
        events = [e for e in after.history("body") if e.kind == "generation.base"]
        assert [e.actor for e in events] == ["launch"]


def test_a_session_is_bound_by_one_statement_returning_its_row(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admission reads the session once (under the node's lock) and takes the row its
    insert or re-judging update returns, which is what a fresh read returns."""
    from onstation.ledger.bodies import HarnessLedger

    ledger.register_node("body")
    records = HarnessLedger(ledger)
    log, _ = _count(ledger, monkeypatch)
    first = records.admit_session("s-1", harness="claude-code", node="body", workspace="/w")
    assert first.admitted
    assert log.count("session_by_id") == 1 and "session_insert" in log
    assert first.session == records.session("s-1")
    log.clear()
    refused = records.admit_session("s-2", harness="claude-code", node="body", workspace="/w")
    assert not refused.admitted and refused.session == records.session("s-2")
    ledger.release_lease("body", generation=1)
    log.clear()
    again = records.admit_session("s-2", harness="claude-code", node="body", workspace="/w")
    assert again.admitted and again.session.state == "ADMITTED"
    assert log.count("session_by_id") == 1 and "session_rejudge" in log
    assert again.session == records.session("s-2")


def test_a_generations_dispatched_calls_are_asked_in_one_statement(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generation's dispatched calls (every full-path hook call asks) come with whether the
    node exists, in one statement: none, some, or a node that does not exist."""
    ledger.register_node("body")
    ledger.acquire_lease("body")
    log, _ = _count(ledger, monkeypatch)
    assert ledger.dispatched_calls("body", generation=1) == []
    assert log == ["effect_calls_dispatched_of_generation"]
    effect, _ = ledger.intend_effect(
        "body", generation=1, operation="git.push", destination="file:///r", arguments={"a": 1}
    )
    ledger.dispatch_effect(effect.effect_id, generation=1)
    log.clear()
    calls = ledger.dispatched_calls("body", generation=1)
    assert [(c.effect_id, c.generation, c.arguments, c.tool_use_id) for c in calls] == [
        (effect.effect_id, 1, {"a": 1}, None)
    ]
    assert log == ["effect_calls_dispatched_of_generation"]
    assert ledger.dispatched_calls("body", generation=2) == []
    with pytest.raises(BadInput, match="no such node 'nobody'"):
        ledger.dispatched_calls("nobody", generation=1)


def test_asked_statements_run_in_order_and_are_read_later(ledger: Ledger) -> None:
    """``Tx.ask``: a statement asked is run where it was asked (it sees what ran before it and
    nothing after), whenever its rows are read."""
    ledger.register_node("body")
    count = "SELECT count(*) FROM event WHERE kind = ?"
    insert = (
        "INSERT INTO event (node, kind, generation, actor, detail, at) VALUES (?, ?, ?, ?, ?, ?)"
    )
    with ledger.backend.write() as tx:
        before = tx.ask(count, ("test.asked",))
        tx.send(insert, ("body", "test.asked", 1, "test", "{}", 1))
        after = tx.ask(count, ("test.asked",))
        none = tx.ask("SELECT kind FROM event WHERE kind = ?", ("test.nothing",))
        assert after.all() == [(1,)] and after.one() == (1,)
        assert before.one() == (0,)
        assert none.one() is None and none.all() == []


def test_an_admission_asks_its_first_reads_with_the_nodes_lock(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judgement's lock and first reads are asked together (one round trip on
    PostgreSQL); a new body's lease is acquired by the judgement and says so, a known body's
    is not."""
    from onstation.ledger.bodies import HarnessLedger

    ledger.register_node("body")
    records = HarnessLedger(ledger)
    log, _ = _count(ledger, monkeypatch)
    first = records.admit_session("s-1", harness="claude-code", node="body", workspace="/w")
    # (SQLite's node_lock is node_get's text: the writer lock covers the row.)
    assert log[0] in ("node_lock", "node_get")
    assert log[1:4] == ["session_by_id", "session_live_lease", "session_generation_spent_now"]
    assert first.admitted and first.lease_acquired
    again = records.admit_session("s-1", harness="claude-code", node="body", workspace="/w")
    assert again.admitted and not again.lease_acquired
    ledger.release_lease("body", generation=1)
    # The generation had a lease: the next body is admitted under the next one.
    second = records.admit_session("s-2", harness="claude-code", node="body", workspace="/w")
    assert second.admitted and second.lease_acquired and second.session.generation == 2


def test_a_new_bodys_session_start_reads_no_lease_or_birth_after_its_admission(
    ledger_url: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session start that acquired its body's lease does not read the lease back to see
    whether it is due for renewal, nor look for a relief's birth of its new generation, nor
    for its calls left unanswered (it made none); a body's next session start (its lease
    already live) still does."""
    from onstation.harness.adapters import HookCall
    from onstation.harness.config import load_config
    from onstation.relief.hooks import HookRunner

    workspace = tmp_path / "ws"
    (workspace / ".onstation").mkdir(parents=True)
    (workspace / ".onstation" / "config.json").write_text(json.dumps({"node": "body"}))
    with Ledger.open(ledger_url) as setup:
        setup.register_node("body")
    with Ledger.open(ledger_url) as ledger:
        log, _ = _count(ledger, monkeypatch)

        def start(session_id: str) -> None:
            payload = {"session_id": session_id, "cwd": str(workspace),
                       "hook_event_name": "SessionStart", "source": "startup"}  # fmt: skip
            HookRunner(ledger, "claude-code", load_config(str(workspace))).handle(
                HookCall.from_payload("claude-code", "SessionStart", payload)
            )

        start("s-1")
        assert "session_insert" in log
        assert "node_and_lease" not in log and "birth_by_generation" not in log
        assert "effect_calls_dispatched_of_generation" not in log
        log.clear()
        start("s-1")  # the same session starts again: its body's lease is live
        assert "session_insert" not in log
        assert "node_and_lease" in log and "birth_by_generation" in log
        assert "effect_calls_dispatched_of_generation" in log


def test_a_take_that_finds_no_message_writes_nothing(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Taking messages asks first whether one waits (every full-path hook call takes): none,
    and it opens no write; some, and it takes exactly those its body may have, as before."""
    from onstation.ledger.correspondence import Correspondence

    ledger.register_node("body")
    mail = Correspondence(ledger)
    log, opened = _count(ledger, monkeypatch)
    assert mail.take_messages("body", delivered_to="s-1", generation=1) == []
    assert log == ["message_waiting_for_body"] and "write" not in opened
    for generation in (None, 1, 2):
        mail.post_message(sender="lead", recipient="body", kind="note", body=f"g{generation}",
                          generation=generation)  # fmt: skip
    log.clear()
    taken = mail.take_messages("body", delivered_to="s-1", generation=1)
    assert [m.body for m in taken] == ["gNone", "g1"]
    assert log == ["message_waiting_for_body", "message_take_for_body"]
    assert [m.body for m in mail.take_messages("body", delivered_to="s-2", generation=2,
                                               fenced=True)] == ["g2"]  # fmt: skip
    assert mail.take_messages("body", delivered_to="s-3") == []
    assert all(m.delivered_at is not None for m in mail.messages("body"))
