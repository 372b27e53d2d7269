"""``onstation lease renew`` on the fast path: the heartbeat a running body sends every few
seconds, answered with the standard library and sqlite3 alone.

Only the common case is taken here: a SQLite ledger named by ``--db`` or ``ONSTATION_DB``, in
WAL mode, whose node is at the presented generation with a live, unexpired lease. Then one
``BEGIN IMMEDIATE`` transaction re-checks exactly that and extends the lease, as the full
path's ``renew_lease`` does. Anything else (a stale or fenced generation, an expired lease,
another option, PostgreSQL, a ledger not yet migrated) goes to the full command line, which
records the durable denial a stale body must get: the fast path never denies and never
writes for a body that may not act.

The renewal is committed with ``synchronous=NORMAL`` (a lost renewal, at a power loss only,
ends the lease sooner: the safe direction), and a whole ``onstation lease renew`` process
ends at once after printing, its connection left open: closing the last connection would
checkpoint and delete the WAL (see ``cli/hooks.py`` ``_exit_now``).
"""

from __future__ import annotations

import os
import sys
import time

try:  # the C module alone: the sqlite3 package's Python layer imports datetime
    import _sqlite3 as sqlite3
except ImportError:  # pragma: no cover
    import sqlite3  # type: ignore[no-redef]

#: The longest lease the fast path grants (seconds); a longer ``--ttl`` is the full path's
#: to check (``ledger.base.MAX_LEASE_TTL``, checked equal by a test).
MAX_TTL_SECONDS = 30 * 24 * 3600
#: The full path's default ``--ttl`` (``cli/ledger_commands.py``).
DEFAULT_TTL_SECONDS = 3600

_LEASE = (
    "SELECT n.generation, l.lease_id, l.state, l.expires_at FROM agent_node n "
    "LEFT JOIN body_lease l ON l.node = n.name AND l.generation = n.generation "
    "WHERE n.name = ?"
)
_RENEW = "UPDATE body_lease SET renewed_at = ?, expires_at = ? WHERE lease_id = ?"


def _parse(argv: list[str]) -> tuple[str, int, int, str | None] | None:
    """(node, generation, ttl seconds, --db) of ``lease renew`` arguments the fast path takes
    (no ``--json``, nothing unknown); None for anything else."""
    node = db = None
    generation: int | None = None
    ttl = DEFAULT_TTL_SECONDS
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, inline = arg.partition("=")
        if name in ("--generation", "--ttl", "--db") and arg.startswith("--"):
            value = inline if eq else (args.pop(0) if args else None)
            if value is None:
                return None
            if name == "--db":
                db = value
                continue
            if not value.isdigit():
                return None
            if name == "--generation":
                generation = int(value)
            else:
                ttl = int(value)
        elif arg.startswith("-") or node is not None:
            return None  # --json, --help, a second argument: the full path's
        else:
            node = arg
    if node is None or generation is None or not 1 <= ttl <= MAX_TTL_SECONDS:
        return None
    return node, generation, ttl, db


def try_renew(argv: list[str], *, whole_process: bool | None = None) -> bool:
    """Renew the lease and print what the full path prints (True), or leave the call to the
    full path (False) having written nothing. ``whole_process`` (default: whether the process
    was started as ``onstation lease renew``): end the process once renewed, the connection
    left open."""
    parsed = _parse(argv)
    if parsed is None:
        return False
    node, generation, ttl, db = parsed
    from onstation.relief.hotpath import _sqlite_path, open_wal, settle_wal

    path = _sqlite_path(db or os.environ.get("ONSTATION_DB"))
    if path is None or not os.path.isfile(path):
        return False
    conn = open_wal(path)
    if conn is None:
        return False
    renewed = False
    try:
        conn.execute("BEGIN IMMEDIATE")
        now = time.time_ns() // 1000
        row = conn.execute(_LEASE, (node,)).fetchone()
        if row is None or row[0] != generation or row[2] != "LIVE" or row[3] <= now:
            conn.execute("ROLLBACK")
            return False  # stale, fenced, expired or unknown: denied (durably) there
        expires = now + ttl * 1_000_000
        conn.execute(_RENEW, (now, expires, row[1]))
        conn.execute("COMMIT")
        renewed = True
        settle_wal(conn, path)
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return False
    finally:
        if not renewed:
            conn.close()
    from datetime import UTC, datetime

    from onstation.core.timefmt import human_time

    until = human_time(datetime.fromtimestamp(expires / 1_000_000, UTC))
    sys.stdout.write(f"renewed {node} generation {generation} until {until}\n")
    if whole_process if whole_process is not None else sys.argv[1:3] == ["lease", "renew"]:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(0)
    conn.close()
    return True


__all__ = ["try_renew"]
