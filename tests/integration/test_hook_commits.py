"""A hook call's writes are grouped into as few commits as its decisions allow, and a call
the fast path declines is answered on the fast path's connection.

Each SQLite commit of the full path is synchronous=FULL (a sync of the WAL, and of the
directory when the WAL is new): a session's first start and its first reading each made
several. These count the commits that wrote something, on a real ledger, through the real
hook runner; the records they leave are the differential tests' business.
"""

from __future__ import annotations

import _sqlite3
import io
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from onstation.cli.hooks import hook_main
from onstation.harness.adapters import HookCall
from onstation.harness.config import load_config
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.fastpath import handed_ledger
from onstation.relief import hotpath
from onstation.relief.hooks import HookRunner


def _assistant(tokens: int) -> str:
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 400,
             "cache_read_input_tokens": tokens - 403, "output_tokens": 50}  # fmt: skip
    return json.dumps({
        "type": "assistant", "isSidechain": False, "uuid": "u1", "requestId": "r1",
        "message": {"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": "ok"}], "usage": usage},
    }) + "\n"  # fmt: skip


class _Commits:
    """Counts the commits of a ledger's SQLite connection that changed a row, and of those
    the synchronous ones (``synchronous=FULL``: each a sync of the WAL)."""

    def __init__(self, ledger: Ledger) -> None:
        conn: Any = ledger.backend._conn  # type: ignore[attr-defined]
        self.count = 0
        self.synced = 0
        self._conn = conn
        self._begun = 0
        self._full = conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        conn.set_trace_callback(self._trace)

    def _trace(self, sql: str) -> None:
        words = sql.strip().upper().replace("=", " = ").split()
        word = words[0] if words else ""
        if words[:2] == ["PRAGMA", "SYNCHRONOUS"] and len(words) == 4:
            self._full = words[3] in ("FULL", "2", "EXTRA", "3")
        elif word == "BEGIN":
            self._begun = self._conn.total_changes
        elif word == "COMMIT" and self._conn.total_changes != self._begun:
            self.count += 1
            self.synced += self._full


def _world(tmp_path: Path) -> tuple[str, Path, Path]:
    db = str(tmp_path / "ledger.db")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(_assistant(30_000))
    with Ledger.open(db) as ledger:
        ledger.register_node("agent-a")
        HarnessLedger(ledger).bind_workspace(str(workspace), "agent-a", harness="claude-code",
                                             by="test")  # fmt: skip
    return db, workspace, transcript


def _handle(db: str, workspace: Path, transcript: Path, event: str, **extra: Any) -> _Commits:
    payload = {"session_id": "s1", "cwd": str(workspace), "transcript_path": str(transcript),
               "hook_event_name": event, **extra}  # fmt: skip
    with Ledger.open(db) as ledger:
        commits = _Commits(ledger)
        runner = HookRunner(ledger, "claude-code", load_config(str(workspace)))
        runner.handle(HookCall.from_payload("claude-code", event, payload))
        return commits


def test_a_first_session_start_commits_once(tmp_path: Path) -> None:
    db, workspace, transcript = _world(tmp_path)
    # The admission (lease, session, host, events) and the transcript's path: one commit.
    commits = _handle(db, workspace, transcript, "SessionStart", source="startup")
    assert (commits.count, commits.synced) == (1, 1)
    with Ledger.open(db) as ledger:
        session = HarnessLedger(ledger).session("s1")
    assert session is not None and session.state == "ADMITTED"
    assert session.transcript_path == str(transcript)


def test_a_first_reading_commits_its_cursor_and_its_fill_together(tmp_path: Path) -> None:
    db, workspace, transcript = _world(tmp_path)
    _handle(db, workspace, transcript, "SessionStart", source="startup")
    # The reading (cursor, fill, first tier) and the tool call's journal row: two commits,
    # and only the reading's waits for the disk (the journal row is evidence, committed at
    # synchronous=NORMAL as the fast path commits it: docs/decisions.md).
    read = {"tool_name": "Read", "tool_input": {}, "tool_use_id": "t1"}
    commits = _handle(db, workspace, transcript, "PostToolUse", **read)
    assert (commits.count, commits.synced) == (2, 1)
    with Ledger.open(db) as ledger:
        session = HarnessLedger(ledger).session("s1")
        fill = HarnessLedger(ledger).latest_fill("agent-a")
    assert session is not None and session.telemetry_cursor is not None
    assert fill is not None and fill["tier"] == "green"


def _connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every SQLite connection opened from now on (the fast path connects through
    ``_sqlite3``, the ledger through ``sqlite3``: the same function, looked up on each)."""
    opened: list[str] = []
    real = _sqlite3.connect

    def counting(database: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(database))
        return real(database, *args, **kwargs)

    monkeypatch.setattr(_sqlite3, "connect", counting)
    monkeypatch.setattr(sqlite3, "connect", counting)
    return opened


def test_a_declined_fast_path_hands_its_connection_to_the_full_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db, workspace, transcript = _world(tmp_path)
    _handle(db, workspace, transcript, "SessionStart", source="startup")
    payload = {"session_id": "s1", "cwd": str(workspace), "transcript_path": str(transcript),
               "hook_event_name": "PostToolUse", "tool_name": "Read", "tool_input": {},
               "tool_use_id": "t1"}  # fmt: skip
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    transcript.write_text(_assistant(60_000))  # Amber: a first tier with a message to send
    opened = _connections(monkeypatch)
    # A first Amber reading: the fast path opens the ledger, declines, and the full path
    # answers (a quiet, Green one the fast path records itself).
    assert hook_main(["claude-code", "PostToolUse", "--db", db], whole_process=False) == 0
    assert capsys.readouterr().err == ""
    assert opened == [db]  # one connection for both paths
    with Ledger.open(db) as ledger:
        assert HarnessLedger(ledger).latest_fill("agent-a") is not None


def test_a_handed_connection_gets_the_ledgers_own_settings(tmp_path: Path) -> None:
    db, _workspace, _transcript = _world(tmp_path)
    settings = ("synchronous", "foreign_keys", "busy_timeout", "journal_mode", "cache_size",
                "temp_store", "wal_autocheckpoint", "query_only")  # fmt: skip

    def read(ledger: Ledger) -> dict[str, Any]:
        conn: Any = ledger.backend._conn  # type: ignore[attr-defined]
        return {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in settings}

    with Ledger.open(db) as fresh:
        expected = read(fresh)
    conn = hotpath.open_wal(db)
    assert conn is not None
    ledger = handed_ledger(conn, db)
    assert ledger is not None
    try:
        assert ledger.backend._conn is conn
        assert read(ledger) == expected  # synchronous=FULL (2) among them
        assert ledger.get_node("agent-a").node == "agent-a"
    finally:
        ledger.close()
    assert sqlite3.connect is _sqlite3.connect  # the backend's connect is given back


def test_a_connection_to_another_file_is_not_handed(tmp_path: Path) -> None:
    db, _workspace, _transcript = _world(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    other_db, _w, _t = _world(other)
    conn = hotpath.open_wal(other_db)
    assert conn is not None
    try:
        assert handed_ledger(conn, db) is None
        assert handed_ledger(conn, "postgresql://nobody@127.0.0.1:1/none") is None
    finally:
        conn.close()
