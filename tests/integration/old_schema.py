"""A SQLite ledger as an older onstation left it: the migrations below a version applied."""

from __future__ import annotations

import sqlite3

from onstation.ledger.backends import _migrations, _split_sql


def migrate_below(conn: sqlite3.Connection, version: int) -> None:
    """Apply the shipped SQLite migrations older than ``version`` to an empty database, each
    recorded in ``schema_version`` as the ledger records it; the next open migrates on."""
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER "
                 "NOT NULL)")  # fmt: skip
    for number, script in _migrations("sqlite"):
        if number >= version:
            break
        for statement in _split_sql(script):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, 0)", (number,))
