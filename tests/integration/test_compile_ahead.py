"""Statements compiled ahead (``ledger.fastpath``: ``noting``, ``compile_ahead``): the
daemon's warm-up notes the statements a session's hook calls run, and each spare compiles
them on the ledger it opened ahead, so that its call finds them compiled. What must hold, on
a real SQLite ledger and through the real hook entry:

- a call on a connection compiled ahead compiles none of them again: neither the fast path
  nor the full path it hands the connection to (whose ``PRAGMA foreign_keys = ON`` would
  expire them all if it were set again);
- compiling ahead runs nothing and leaves no transaction open, and stops when told;
- only statements that do nothing until they run are noted (never a PRAGMA), and only while
  noting.

SQLite calls the authorizer of a connection for each statement it compiles (and compiles
again), never for one it runs already compiled: the tests count those calls. Setting an
authorizer expires what the connection has compiled, so it is set before compiling ahead.
"""

from __future__ import annotations

import io
import json
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onstation.ledger import Ledger, fastpath

NODE = "coder"
#: The authorizer's action codes of a statement compiled (sqlite3.h).
COMPILED = {
    sqlite3.SQLITE_SELECT: "SELECT",
    sqlite3.SQLITE_INSERT: "INSERT",
    sqlite3.SQLITE_UPDATE: "UPDATE",
    sqlite3.SQLITE_DELETE: "DELETE",
}


@pytest.fixture(autouse=True)
def fresh_notes() -> Iterator[None]:
    """Each test notes its own statements and opens its own ledger ahead."""
    fastpath._NOTED.clear()
    fastpath._AHEAD.clear()
    yield
    fastpath._NOTED.clear()
    for conn, _identity in fastpath._AHEAD.values():
        conn.close()
    fastpath._AHEAD.clear()
    fastpath._TAKEN.clear()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A workspace bound to ``NODE`` (its git HEAD written by hand: no git runs) on a fresh
    ledger, with a transcript of one assistant turn."""
    db = tmp_path / "ledger.db"
    work = tmp_path / "work"
    (work / ".onstation").mkdir(parents=True)
    (work / ".onstation" / "config.json").write_text(json.dumps({"node": NODE, "db": str(db)}))
    (work / ".git" / "refs" / "heads").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / ".git" / "refs" / "heads" / "main").write_text("0" * 39 + "2\n")
    usage = {"input_tokens": 3, "cache_read_input_tokens": 20_000, "output_tokens": 5}
    turn = {"type": "assistant", "uuid": "u1", "requestId": "r1",
            "message": {"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5",
                        "content": [{"type": "text", "text": "ok"}], "usage": usage}}  # fmt: skip
    (work / "session.jsonl").write_text(json.dumps(turn) + "\n")
    with Ledger.open(str(db)) as ledger:
        ledger.register_node(NODE)
    return work


def _db(work: Path) -> str:
    return str(work.parent / "ledger.db")


def hook(cwd: Path, session: str, event: str, **fields: Any) -> None:
    """One hook call through the entry a daemon's child runs, its payload on stdin."""
    from onstation.cli.hooks import _run

    work = next(p for p in (cwd, *cwd.parents) if (p / ".onstation").is_dir())
    payload = {"session_id": session, "cwd": str(cwd), "hook_event_name": event,
               "transcript_path": str(work / "session.jsonl"), **fields}  # fmt: skip
    given = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode()))
    kept: list[Any] = []
    try:
        _run("claude-code", event, _db(work), time.monotonic() + 30, {}, kept)
    finally:
        sys.stdin = given
        for conn in kept:
            conn.close()


def a_session(work: Path, session: str) -> None:
    """A session's start, a tool call, and its end."""
    read = {"tool_name": "Read", "tool_input": {"file_path": "README.md"}, "tool_use_id": "t1"}
    hook(work, session, "SessionStart", source="startup")
    hook(work, session, "PreToolUse", **read)
    hook(work, session, "PostToolUse", **read, tool_response={})
    hook(work, session, "SessionEnd", reason="other")


def noted_sessions(work: Path) -> None:
    """What the daemon's warm-up notes: an identity's first session, then the start and end
    of its next (admitted at the next generation)."""
    with fastpath.noting():
        a_session(work, "first")
        hook(work, "second", "SessionStart", source="startup")
        hook(work, "second", "SessionEnd", reason="other")


class Compiles:
    """An authorizer that counts the statements compiled on its connection, by kind."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        #: Every call, for a failing test's message: (action, table or name, column, ...).
        self.detail: list[tuple[object, ...]] = []

    def __call__(self, action: int, *args: object) -> int:
        if action in COMPILED:
            self.seen.append(COMPILED[action])
        self.detail.append((action, *args))
        return sqlite3.SQLITE_OK


def opened_ahead(work: Path, *, compile_first: bool) -> tuple[Any, Compiles]:
    """The ledger opened ahead as a spare opens it, an authorizer on it, and (when asked)
    the noted statements compiled on it; the count starts after that."""
    assert fastpath.open_ahead(_db(work))
    conn = fastpath._AHEAD[_db(work)][0]
    compiles = Compiles()
    conn.set_authorizer(compiles)
    if compile_first:
        assert fastpath.compile_ahead(_db(work), lambda: False) == len(fastpath.noted())
    compiles.seen.clear()
    compiles.detail.clear()
    return conn, compiles


def test_a_session_start_on_a_ledger_compiled_ahead_compiles_nothing_again(
    project: Path,
) -> None:
    noted_sessions(project)
    assert len(fastpath.noted()) > 10
    _conn, compiles = opened_ahead(project, compile_first=True)
    # From another directory of the workspace, deeper: the lookup's text is the same.
    (project / "src" / "pkg").mkdir(parents=True)
    hook(project / "src" / "pkg", "third", "SessionStart", source="startup")
    assert fastpath.took_ahead()
    # The full path ran on the connection handed over (the third session was admitted, at
    # the next generation) and compiled nothing: not the fast path's statements, not the
    # full path's.
    with Ledger.open(_db(project)) as ledger:
        assert ledger.get_node(NODE).generation == 3
        sessions = [e for e in ledger.history(NODE) if e.kind == "session.admitted"]
    assert len(sessions) == 3
    assert compiles.seen == [], [d for d in compiles.detail if d[0] != sqlite3.SQLITE_PRAGMA]


def test_without_compiling_ahead_the_same_start_compiles_its_statements(
    project: Path,
) -> None:
    """The control: the count above would see a statement compiled in the call."""
    noted_sessions(project)
    _conn, compiles = opened_ahead(project, compile_first=False)
    hook(project, "third", "SessionStart", source="startup")
    assert fastpath.took_ahead()
    assert len(compiles.seen) >= 10
    assert {"SELECT", "INSERT", "UPDATE"} <= set(compiles.seen)


def test_the_full_path_leaves_foreign_keys_on_as_it_finds_them(project: Path) -> None:
    """Setting ``PRAGMA foreign_keys = ON`` again, on the connection the fast path hands
    over, would expire every statement compiled ahead (SQLite expires them on any change of
    such a flag, even to the value it had); the fast path sets it from the start."""
    fast = fastpath.connect(_db(project), isolation_level=None)
    assert fastpath.fast_settings(fast)
    assert fast.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError):  # enforced on the fast path's own writes
        fast.execute("INSERT INTO actor (name, node, created_at) VALUES ('a', 'no such node', 0)")
    fast.close()
    noted_sessions(project)
    _conn, compiles = opened_ahead(project, compile_first=True)
    handed = fastpath.take_ahead(_db(project))
    from onstation.ledger.fastpath import handed_ledger

    ledger = handed_ledger(handed, _db(project))
    assert ledger is not None
    assert handed.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    ledger.get_node(NODE)  # a full-path read of a noted statement: still compiled
    assert compiles.seen == []
    ledger.close()


def test_compiling_ahead_runs_nothing_and_stops_when_told(project: Path) -> None:
    with fastpath.noting():
        a_session(project, "first")
    before = list(sqlite3.connect(_db(project)).iterdump())
    conn, _compiles = opened_ahead(project, compile_first=False)
    changes = conn.total_changes
    assert fastpath.compile_ahead(_db(project), lambda: False) == len(fastpath.noted())
    assert conn.total_changes == changes and not conn.in_transaction
    assert list(sqlite3.connect(_db(project)).iterdump()) == before
    # Told to stop at once (a call has come): nothing compiled, no transaction left open.
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 3

    fastpath._AHEAD.clear()
    conn.close()
    again, compiles = opened_ahead(project, compile_first=False)
    assert fastpath.compile_ahead(_db(project), stop) == 3
    assert not again.in_transaction
    assert compiles.seen  # the three were compiled
    # Nothing noted, or no ledger opened ahead for that path: nothing to do.
    assert fastpath.compile_ahead(str(project / "other.db"), lambda: False) == 0


def test_only_inert_statements_are_noted_and_only_while_noting(project: Path) -> None:
    a_session(project, "unnoted")
    assert fastpath.noted() == []
    with fastpath.noting():
        a_session(project, "first")
    noted = fastpath.noted()
    assert noted and all(
        sql.lstrip().upper().startswith(("SELECT", "INSERT", "UPDATE", "DELETE", "WITH"))
        for sql in noted
    )
    assert fastpath.SESSION_CURSOR in noted  # the fast path's
    assert any(sql.startswith("INSERT INTO body_session") for sql in noted)  # the full path's
    assert len(noted) <= fastpath.MAX_NOTED


def test_at_most_max_noted_statements_are_noted(project: Path) -> None:
    conn = None
    with fastpath.noting():
        conn = fastpath.connect(":memory:", isolation_level=None)
        for n in range(fastpath.MAX_NOTED + 10):
            conn.execute(f"SELECT {n} + ?", (n,))
    conn.close()
    assert len(fastpath.noted()) == fastpath.MAX_NOTED


def test_the_daemon_warm_up_notes_a_session_of_both_paths() -> None:
    from onstation.cli import daemon_warmup

    assert daemon_warmup.warm_hooks()
    noted = fastpath.noted()
    assert fastpath.SESSION_CURSOR in noted
    assert any(sql.startswith("INSERT INTO body_lease") for sql in noted)
    # The identity's next session too: its admission takes the next generation.
    assert any(sql.startswith("UPDATE agent_node SET generation = generation + 1") for sql in noted)
    assert not fastpath._NOTING[0]
