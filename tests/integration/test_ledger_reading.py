"""``Ledger.reading()``, on every backend: reads made inside one block share one read
transaction (the team view's many reads cost one BEGIN/ROLLBACK, not one pair each), give
what the same reads give alone, and a write inside the block is refused without writing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from onstation.ledger import Ledger
from onstation.ledger.ledger import Reread
from onstation.relief.team import team_rows


def _team(ledger: Ledger) -> None:
    for n in range(3):
        name = f"exec-{n}"
        ledger.register_node(name)
        generation = ledger.acquire_lease(name, holder=f"body-{n}").generation
        ledger.intend_effect(name, generation=generation, operation="git.push",
                             destination=f"file:///r{n}", arguments={})  # fmt: skip


def test_reads_in_one_block_share_one_transaction_and_answer_the_same(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _team(ledger)
    alone = [(ledger.get_node(f"exec-{n}"), ledger.open_effects(f"exec-{n}")) for n in range(3)]
    opened: list[int] = []
    real = ledger.backend.read

    def counted() -> Any:
        opened.append(1)
        return real()

    monkeypatch.setattr(ledger.backend, "read", counted)
    with ledger.reading():
        together = [(ledger.get_node(f"exec-{n}"), ledger.open_effects(f"exec-{n}"))
                    for n in range(3)]  # fmt: skip
        assert len(team_rows(ledger)) == 3  # nested: joins the block
    assert together == alone
    assert opened == [1]


def test_a_write_inside_a_reading_block_is_refused_and_writes_nothing(ledger: Ledger) -> None:
    _team(ledger)
    before = ledger.history(limit=1)[-1].seq
    with ledger.reading(), pytest.raises(RuntimeError, match="only reads"):
        ledger.register_node("intruder")
    assert [n.node for n in ledger.list_nodes()] == ["exec-0", "exec-1", "exec-2"]
    assert ledger.history(limit=1)[-1].seq == before
    ledger.register_node("after")  # the ledger works as before once the block ended
    assert "after" in [n.node for n in ledger.list_nodes()]


def test_the_team_view_reads_in_one_transaction(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _team(ledger)
    opened: list[int] = []
    real = ledger.backend.read

    def counted() -> Any:
        opened.append(1)
        return real()

    monkeypatch.setattr(ledger.backend, "read", counted)
    rows = team_rows(ledger, detail=True)
    assert [r["node"] for r in rows] == ["exec-0", "exec-1", "exec-2"]
    assert all(r["open_effects"] == 1 and r["lease"] is not None for r in rows)
    assert opened == [1]


def test_a_reread_reads_again_only_after_a_commit(
    ledger: Ledger, make_ledger: Callable[..., Ledger]
) -> None:
    """``Reread``: while nothing is committed (by this connection or another) the last answer
    is given again unread; after a commit by another connection it reads. A backend without
    a change token (PostgreSQL) reads on every call."""
    _team(ledger)
    reads: list[int] = []

    def read() -> int:
        reads.append(1)
        return ledger.get_node("exec-0").generation

    poll = Reread(ledger, read)
    assert [poll(), poll(), poll()] == [1, 1, 1]
    assert len(reads) == (1 if ledger.change_token() is not None else 3)
    make_ledger().register_node("exec-9")  # a commit on another connection
    before = len(reads)
    assert poll() == 1 and len(reads) == before + 1


def test_own_changes_grow_with_this_connections_writes_alone(
    ledger: Ledger, make_ledger: Callable[..., Ledger]
) -> None:
    """``Ledger.own_changes``: on SQLite the rows this connection changed, grown by its own
    writes and by nothing else, neither its reads nor
    another connection's commits; PostgreSQL does not count them (None)."""
    before = ledger.own_changes()
    if ledger.backend.name == "postgres":
        _team(ledger)
        assert before is None and ledger.own_changes() is None
        return
    assert isinstance(before, int)
    _team(ledger)
    written = ledger.own_changes()
    assert written is not None and written > before
    ledger.get_node("exec-0")
    ledger.open_effects("exec-0")
    assert ledger.own_changes() == written  # reads change no row
    other = make_ledger()
    other.register_node("exec-9")  # a commit on another connection
    assert ledger.own_changes() == written and (other.own_changes() or 0) > 0
    ledger.fence("exec-0", expect_generation=1)
    assert (ledger.own_changes() or 0) > written
