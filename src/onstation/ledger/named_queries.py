"""Named SQL queries per dialect, read from ``queries/<dialect>.sql``.

Each file holds blocks headed by a name line and a comment saying what the query does::

    -- name: halt_insert
    -- Raise a halt; returns the new row.
    INSERT INTO halt (node, by, why, at) VALUES (?, ?, ?, ?)
    RETURNING halt_id, node, by, why, at, lifted_at, lifted_by;

Parameters are ``?`` in both dialects (the PostgreSQL backend turns them into ``%s``).
Portable statements are written once, in ``queries/common.sql``; ``queries/<dialect>.sql``
holds only the blocks whose SQL differs in that dialect, each replacing the common block of
the same name. Every dialect so answers to the same names (a test checks it): an aggregate
asks for a query by name and each backend runs its own SQL. The aggregates move to named
queries one at a time; :mod:`onstation.ledger.governance` is the first.
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
    """The named queries of one dialect: the common ones, with the dialect's own in their
    place (read once per process)."""
    if dialect not in DIALECTS:
        raise ValueError(f"no named queries for dialect {dialect!r}")
    common = QUERIES_DIR / "common.sql"
    own = QUERIES_DIR / f"{dialect}.sql"
    found = parse(common.read_text(encoding="utf-8"), str(common))
    found.update(parse(own.read_text(encoding="utf-8"), str(own)))
    return found
