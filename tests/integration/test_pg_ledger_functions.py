"""PostgreSQL's fence and admission as one statement each (schema version 18, issue 14).

Each locks first and reads after, in two statements, inside a server-side function
(``onstation_fence``, ``onstation_admit``): the client sends one statement, which commits on
its own outside a unit of work. Sent from the client as before, they took four statements
each (BEGIN, the locks, the work, COMMIT), and the client's own work for them left
fence+admit below bare SQL doing the same writes on a machine where a round trip is cheap.
What they decide is the contract suite's (tests/integration/test_ledger_contract.py); here:
what is sent, that a connection that sent one has sent a commit, and that a caller's
search_path cannot point them at other tables.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from onstation.core.errors import Conflict
from onstation.ledger import Ledger


@pytest.fixture
def pg_ledger(pg_url: str) -> Iterator[Ledger]:
    with Ledger.open(pg_url) as ledger:
        yield ledger


def _sent(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the ledger's connection sends from now on, its first words."""
    conn: Any = ledger.backend._conn  # type: ignore[attr-defined]
    sent: list[str] = []
    execute = conn.execute

    def recording(query: Any, *args: Any, **kwargs: Any) -> Any:
        text = query.decode() if isinstance(query, bytes) else str(query)
        sent.append(" ".join(text.split())[:40])
        return execute(query, *args, **kwargs)

    monkeypatch.setattr(conn, "execute", recording)
    return sent


def test_a_fence_and_an_admission_are_one_statement_each(
    pg_ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = pg_ledger
    ledger.register_node("a")
    ledger.acquire_lease("a")
    assert ledger.backend.commit_sent  # type: ignore[attr-defined]
    sent = _sent(ledger, monkeypatch)
    fenced = ledger.fence("a", expect_generation=1)
    assert sent == ["SELECT * FROM onstation_fence(%s, %s, %s"]
    sent.clear()
    lease = ledger.acquire_lease("a", expect_generation=fenced.generation)
    assert sent == ["SELECT * FROM onstation_admit(%s, %s, %s"]
    assert (fenced.generation, fenced.revoked_leases, lease.generation) == (2, [1], 2)
    # A refusal is explained from the function's row (and reads alone): nothing written.
    sent.clear()
    with pytest.raises(Conflict, match="already has a live body"):
        ledger.acquire_lease("a", expect_generation=2)
    with pytest.raises(Conflict, match="fence of 'a' lost"):
        ledger.fence("a", expect_generation=1)
    assert [e.kind for e in ledger.history("a", limit=3)][-2:] == ["node.fenced", "lease.acquired"]
    # Inside a unit of work they join its transaction, and the fence and the hold of
    # fence_and_hold travel together, as before.
    sent.clear()
    fence, hold = ledger.fence_and_hold("a", expect_generation=2, holder="relief 1",
                                        ttl=timedelta(hours=1))  # fmt: skip
    assert (fence.generation, hold.generation, hold.holder) == (3, 3, "relief 1")
    assert sent == ["BEGIN", "SELECT * FROM onstation_fence(%s, %s, %s",
                    "SELECT * FROM onstation_admit(%s, %s, %s", "COMMIT"]  # fmt: skip


def test_a_connection_that_sent_a_fence_has_sent_a_commit(pg_url: str) -> None:
    """A connection taken from the daemon unchecked may be given up and its work run again
    on another when it dies before anything was committed on it. A fence sent on its own
    may have committed whether or not its answer arrives, so it counts as a commit sent."""
    with Ledger.open(pg_url) as ledger:
        ledger.register_node("a")
    with Ledger.open(pg_url) as ledger:
        assert ledger.get_node("a").generation == 1
        assert not ledger.backend.commit_sent  # type: ignore[attr-defined]
        ledger.fence("a", expect_generation=1)
        assert ledger.backend.commit_sent  # type: ignore[attr-defined]


def test_the_functions_act_on_the_ledgers_tables_whatever_the_callers_search_path(
    pg_url: str,
) -> None:
    """Each function keeps the search_path its migration ran with: a schema put first in a
    caller's search_path, with tables of the same names, changes nothing they do."""
    import psycopg

    base, _, schema = pg_url.partition("?schema=")
    decoy = f"decoy_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{decoy}"')
        conn.execute(f'CREATE TABLE "{decoy}".agent_node (name TEXT, generation BIGINT)')
        conn.execute(f"INSERT INTO \"{decoy}\".agent_node VALUES ('a', 1)")
    try:
        with Ledger.open(pg_url) as ledger:
            ledger.register_node("a")
            ledger.acquire_lease("a")
            conn: Any = ledger.backend._conn  # type: ignore[attr-defined]
            conn.execute(f'SET search_path TO "{decoy}", "{schema}"')
            fenced = ledger.fence("a", expect_generation=1)
            lease = ledger.acquire_lease("a", expect_generation=2)
            conn.execute(f'SET search_path TO "{schema}"')
            assert (fenced.generation, lease.generation) == (2, 2)
            assert ledger.get_node("a").generation == 2
        with psycopg.connect(base, autocommit=True) as conn:
            row = conn.execute(f'SELECT generation FROM "{decoy}".agent_node').fetchone()
            assert row == (1,)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{decoy}" CASCADE')
