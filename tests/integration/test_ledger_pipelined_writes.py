"""A writing transaction whose statements are sent ahead (PostgreSQL's pipeline mode) keeps the
all-or-nothing rule of every other: a statement that fails where nobody waits for it, or a
failure of the caller after statements were sent, leaves nothing, and the next write works.
Both backends run it; on SQLite every statement runs at once, which the rule equally covers.
"""

from __future__ import annotations

import pytest

from onstation.core.errors import Conflict
from onstation.ledger import Ledger
from onstation.ledger.backends import Tx

_EVENT = "INSERT INTO event (node, kind, generation, actor, detail, at) VALUES (?, ?, ?, ?, ?, ?)"


def _kinds(ledger: Ledger) -> list[str]:
    return [e.kind for e in ledger.history("p-1")]


def test_a_sent_statement_that_fails_fails_its_whole_transaction(ledger: Ledger) -> None:
    ledger.register_node("p-1")
    before = _kinds(ledger)

    def body(tx: Tx, now: int) -> None:
        tx.send(_EVENT, ("p-1", "pipelined.first", 1, "test", "{}", now))
        tx.send(_EVENT, ("p-1", "pipelined.broken", 1, None, "{}", now))  # actor NOT NULL
        tx.send(_EVENT, ("p-1", "pipelined.after", 1, "test", "{}", now))
        tx.one("SELECT 1")

    with pytest.raises(Conflict):
        ledger._write(body)
    assert _kinds(ledger) == before
    # The connection is usable again: the fence and the admission that follow work.
    fenced = ledger.fence("p-1", expect_generation=1, by="test")
    lease = ledger.acquire_lease("p-1", expect_generation=fenced.generation)
    assert lease.generation == 2
    assert _kinds(ledger)[-2:] == ["node.fenced", "lease.acquired"]


def test_a_failure_after_statements_were_sent_keeps_the_callers_error(ledger: Ledger) -> None:
    if ledger.backend.name != "postgres":
        pytest.skip("SQLite runs a statement when it is sent: the broken one raises there")
    ledger.register_node("p-1")
    before = _kinds(ledger)

    class CallersOwn(Exception):
        pass

    def body(tx: Tx, now: int) -> None:
        tx.send(_EVENT, ("p-1", "pipelined.first", 1, "test", "{}", now))
        tx.send(_EVENT, ("p-1", "pipelined.broken", 1, None, "{}", now))
        raise CallersOwn

    with pytest.raises(CallersOwn):
        ledger._write(body)
    assert _kinds(ledger) == before
    assert ledger.acquire_lease("p-1", expect_generation=1).generation == 1


def test_a_run_counts_the_rows_of_its_own_statement(ledger: Ledger) -> None:
    ledger.register_node("p-1")

    def body(tx: Tx, now: int) -> tuple[int, int]:
        tx.send(_EVENT, ("p-1", "pipelined.first", 1, "test", "{}", now))
        changed = tx.run("UPDATE agent_node SET role = role WHERE name = ?", ("p-1",))
        missing = tx.run("UPDATE agent_node SET role = role WHERE name = ?", ("nobody",))
        return changed, missing

    assert ledger._write(body) == (1, 0)
    assert _kinds(ledger)[-1] == "pipelined.first"
