"""A ledger left open by a process that ends without closing it (a whole hook call).

A hook call that the full path answers ends its process without closing the ledger, as the
fast path always did (cli/hooks.py ``_exit_now``): closing a SQLite ledger checkpoints the
WAL and deletes it, and the next call's first commit then creates it anew (with a directory
fsync). ``Ledger.leave_open`` keeps such a WAL bounded. Every commit must survive, on every
backend; a call whose fast path declined must not delete the WAL either.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from onstation.ledger import Ledger, backends
from onstation.relief import hotpath

#: Opens the ledger, registers a node, leaves the ledger open and dies without closing it.
LEAVER = """
import os, sys
from onstation.ledger import Ledger
ledger = Ledger.open(sys.argv[1])
ledger.register_node(sys.argv[2])
ledger.leave_open()
sys.stdout.flush()
os._exit(0)
"""

#: Commits ``rows`` rows of 3 KB each and dies without closing.
WRITER = """
import os, sys, _sqlite3
conn = _sqlite3.connect(sys.argv[1], isolation_level=None)
for i in range(int(sys.argv[2])):
    conn.execute("INSERT INTO blob_rows VALUES (?)", (os.urandom(3000),))
os._exit(0)
"""


def _wal(db: str) -> Path:
    return Path(db + "-wal")


def test_what_a_ledger_left_open_committed_is_kept(ledger_url: str) -> None:
    Ledger.open(ledger_url).close()  # migrated
    for name in ("left-1", "left-2"):
        subprocess.run([sys.executable, "-c", LEAVER, ledger_url, name], check=True)
    with Ledger.open(ledger_url) as ledger:
        assert {n.node for n in ledger.list_nodes()} == {"left-1", "left-2"}


def _sqlite_with_rows(tmp_path: Path, rows: int) -> str:
    db = str(tmp_path / "ledger.db")
    Ledger.open(db).close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE blob_rows (x BLOB)")
    conn.close()
    subprocess.run([sys.executable, "-c", WRITER, db, str(rows)], check=True)
    return db


def test_leave_open_truncates_a_wal_past_the_limit_and_loses_nothing(tmp_path: Path) -> None:
    db = _sqlite_with_rows(tmp_path, 200)  # about 800 KiB of WAL, never checkpointed
    assert _wal(db).stat().st_size > backends.WAL_LIMIT_BYTES
    ledger = Ledger.open(db)
    ledger.leave_open()
    assert _wal(db).stat().st_size == 0
    ledger.close()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM blob_rows").fetchone()[0] == 200
    conn.close()


def test_leave_open_leaves_a_small_wal_alone(tmp_path: Path) -> None:
    db = _sqlite_with_rows(tmp_path, 5)
    size = _wal(db).stat().st_size
    assert 0 < size <= backends.WAL_LIMIT_BYTES
    ledger = Ledger.open(db)
    ledger.leave_open()
    assert _wal(db).stat().st_size == size
    ledger.close()


def test_the_ledger_and_the_fast_path_bound_the_wal_alike() -> None:
    assert backends.WAL_LIMIT_BYTES == hotpath.WAL_LIMIT_BYTES


def _onstation(*args: str, env: dict[str, str], stdin: str = "") -> str:
    exe = str(Path(sys.executable).with_name("onstation"))
    done = subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, env=env,
                          check=True)  # fmt: skip
    return done.stdout


def test_whole_hook_calls_on_the_full_path_leave_the_wal_in_place(tmp_path: Path) -> None:
    """SessionStart (full path) and a first PostToolUse (the fast path declines: a first
    reading at Amber has a message to send) each end their process with the WAL still
    there, their writes committed: before, the first deleted it at close and the second's
    fast path deleted it when it declined, so each next commit created it anew."""
    project = tmp_path / "project"
    project.mkdir()
    db = str(tmp_path / "ledger.db")
    env = {**os.environ, "ONSTATION_DB": db, "ONSTATION_DAEMON": "off"}
    _onstation("install", "claude-code", "--project", str(project), "--node", "left", env=env)
    assert not _wal(db).exists()  # the install's CLI closed the ledger: no WAL
    transcript = tmp_path / "session.jsonl"
    usage = {"input_tokens": 3, "cache_read_input_tokens": 60_000, "output_tokens": 5}
    transcript.write_text(json.dumps({"type": "assistant", "uuid": "u1", "message": {
        "id": "m1", "role": "assistant", "model": "claude-sonnet-4-5", "usage": usage,
        "content": [{"type": "text", "text": "ok"}]}}) + "\n")  # fmt: skip

    def payload(event: str, **extra: object) -> str:
        return json.dumps({"session_id": "s-left", "cwd": str(project), "hook_event_name": event,
                           "transcript_path": str(transcript), **extra})  # fmt: skip

    _onstation("hook", "claude-code", "SessionStart", env=env,
               stdin=payload("SessionStart", source="startup"))  # fmt: skip
    assert _wal(db).exists()
    _onstation("hook", "claude-code", "PostToolUse", env=env, stdin=payload(
        "PostToolUse", tool_name="Read", tool_input={}, tool_use_id="t1"))  # fmt: skip
    assert _wal(db).exists()
    with Ledger.open(db) as ledger:
        kinds = [e.kind for e in ledger.history("left")]
    assert "session.admitted" in kinds and "hull.tier" in kinds, kinds


def test_a_deferred_checkpoint_waits_for_settle_deferred_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """A daemon's child notes the checkpoint its call would make (``defer_settling``) and
    makes it once its client has the outcome (``settle_deferred``); then it is at once again."""
    from onstation.ledger import fastpath

    db = _sqlite_with_rows(tmp_path, 200)
    size = _wal(db).stat().st_size
    assert size > backends.WAL_LIMIT_BYTES
    ledger = Ledger.open(db)
    fastpath.defer_settling()
    try:
        ledger.leave_open()
        assert _wal(db).stat().st_size == size  # noted, not made
    finally:
        fastpath.settle_deferred()
    assert _wal(db).stat().st_size == 0
    subprocess.run([sys.executable, "-c", WRITER, db, "200"], check=True)
    ledger.leave_open()  # no longer deferred
    assert _wal(db).stat().st_size == 0
    ledger.close()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM blob_rows").fetchone()[0] == 400
    conn.close()


def test_a_deferred_checkpoint_waits_out_a_reader_a_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader in the WAL at the moment a daemon's child settles (its next spare opening the
    same ledger ahead reads the schema then) kept the deferred checkpoint from truncating:
    the WAL stayed past the limit until a later call. Off the caller's clock, the deferred
    checkpoint now tries again for a moment (``DEFERRED_PATIENCE``); the call's own does not."""
    from onstation.ledger import fastpath

    db = _sqlite_with_rows(tmp_path, 200)
    assert _wal(db).stat().st_size > backends.WAL_LIMIT_BYTES
    reader = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM blob_rows").fetchone()  # a read mark in the WAL
    ledger = Ledger.open(db)
    try:
        ledger.leave_open()  # the call's own checkpoint: never waits, the reader wins
        assert _wal(db).stat().st_size > backends.WAL_LIMIT_BYTES
        fastpath.defer_settling()
        ledger.leave_open()
        real_sleep = fastpath.time.sleep
        paused: list[float] = []

        def pause(seconds: float) -> None:
            # The reader leaves while the checkpoint waits between its tries.
            if not paused:
                reader.execute("COMMIT")
            paused.append(seconds)
            real_sleep(seconds)

        monkeypatch.setattr(fastpath.time, "sleep", pause)
        fastpath.settle_deferred()
        assert paused and _wal(db).stat().st_size == 0
    finally:
        fastpath.settle_deferred()
        ledger.close()
        reader.close()
