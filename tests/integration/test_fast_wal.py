"""The fast path's connection left open at exit: commits kept, the WAL bounded.

The hook, status line and heartbeat fast paths end their process without closing SQLite
(relief/hotpath.py ``settle_wal``, cli/hooks.py ``_exit_now``), so SQLite never checkpoints
at close; a later fast-path call truncates the WAL once it is past the limit, and never
waits on a reader to do it.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from onstation.relief import hotpath

#: A process that commits ``rows`` rows of 3 KB each and dies without closing, as a
#: fast-path hook call ends.
WRITER = """
import os, sys, _sqlite3
conn = _sqlite3.connect(sys.argv[1], isolation_level=None)
for i in range(int(sys.argv[2])):
    conn.execute("INSERT INTO t VALUES (?)", (os.urandom(3000),))
os._exit(0)
"""


def _ledger(tmp_path: Path) -> Path:
    db = tmp_path / "ledger.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = wal")
    conn.execute("CREATE TABLE t (x BLOB)")
    conn.close()
    return db


def _write_and_die(db: Path, rows: int) -> None:
    subprocess.run([sys.executable, "-c", WRITER, str(db), str(rows)], check=True)


def _wal_size(db: Path) -> int:
    wal = Path(str(db) + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def _rows(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])
    finally:
        conn.close()


def test_a_wal_past_the_limit_is_truncated_and_nothing_is_lost(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    _write_and_die(db, 200)  # about 800 KiB of WAL, never checkpointed at close
    assert _wal_size(db) > hotpath.WAL_LIMIT_BYTES
    conn = hotpath.open_wal(str(db))
    assert conn is not None
    hotpath.settle_wal(conn, str(db))
    assert _wal_size(db) == 0
    conn.close()
    assert _rows(db) == 200


def test_a_small_wal_is_left_alone(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    _write_and_die(db, 5)
    size = _wal_size(db)
    assert 0 < size <= hotpath.WAL_LIMIT_BYTES
    conn = hotpath.open_wal(str(db))
    assert conn is not None
    hotpath.settle_wal(conn, str(db))
    assert _wal_size(db) == size
    conn.close()
    assert _rows(db) == 5


def test_a_reader_in_the_wal_is_not_waited_for(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    _write_and_die(db, 200)
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()  # holds a read mark in the WAL
    try:
        conn = hotpath.open_wal(str(db))
        assert conn is not None
        hotpath.settle_wal(conn, str(db))  # gives up at once: busy_timeout 0
        assert _wal_size(db) > hotpath.WAL_LIMIT_BYTES
        conn.close()
    finally:
        reader.execute("COMMIT")
        reader.close()
    assert _rows(db) == 200


def test_many_writers_that_never_close_keep_the_wal_bounded(tmp_path: Path) -> None:
    """Each process dies after its commit; each settles the WAL the one before it left."""
    db = _ledger(tmp_path)
    settler = (
        "import sys; from onstation.relief import hotpath\n"
        "conn = hotpath.open_wal(sys.argv[1])\n"
        "conn.execute('INSERT INTO t VALUES (randomblob(3000))')\n"
        "hotpath.settle_wal(conn, sys.argv[1])\n"
        "import os; os._exit(0)\n"
    )
    sizes = []
    for _ in range(120):
        subprocess.run([sys.executable, "-c", settler, str(db)], check=True)
        sizes.append(_wal_size(db))
    # Without the truncation the WAL would hold every one of the 120 commits (> 480 KiB).
    assert max(sizes) <= hotpath.WAL_LIMIT_BYTES + 8 * 4096 + 32 * 1024
    assert _rows(db) == 120
