"""Named SQL queries per dialect, read from ``queries/<dialect>.sql``.

Each file holds blocks headed by a name line and a comment saying what the query does::

    -- name: halt_insert
    -- Raise a halt; returns the new row.
    INSERT INTO halt (node, by, why, at) VALUES (?, ?, ?, ?)
    RETURNING halt_id, node, by, why, at, lifted_at, lifted_by;

Parameters are ``?`` in both dialects (the PostgreSQL backend turns them into ``%s``). The
same names exist in every dialect (a test checks it), so an aggregate asks for a query by
name and each backend answers in its own SQL. The aggregates move to named queries one at a
time; :mod:`onstation.ledger.governance` is the first.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

QUERIES_DIR = Path(__file__).parent / "queries"
DIALECTS = ("sqlite", "postgres")


def parse(text: str, origin: str = "queries") -> dict[str, str]:
    """Name -> statement (without its trailing ``;``) for every block of ``text``."""
    found: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []

    def close() -> None:
        if name is None:
            return
        statement = "\n".join(lines).strip().rstrip(";").strip()
        if not statement:
            raise ValueError(f"{origin}: query {name!r} is empty")
        if name in found:
            raise ValueError(f"{origin}: query {name!r} is defined twice")
        found[name] = statement

    for line in text.splitlines():
        if line.startswith("-- name:"):
            close()
            name, lines = line[len("-- name:") :].strip(), []
        elif name is not None and not line.lstrip().startswith("--"):
            lines.append(line)
    close()
    return found


@cache
def queries(dialect: str) -> dict[str, str]:
    """The named queries of one dialect (read once per process)."""
    if dialect not in DIALECTS:
        raise ValueError(f"no named queries for dialect {dialect!r}")
    path = QUERIES_DIR / f"{dialect}.sql"
    return parse(path.read_text(encoding="utf-8"), str(path))
