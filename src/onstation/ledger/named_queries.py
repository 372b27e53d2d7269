"""Named SQL queries per aggregate and dialect, read from ``queries/``.

Each file holds blocks headed by a name line and a comment saying what the query does::

    -- name: halt_insert
    -- Raise a halt; returns the new row.
    INSERT INTO halt (node, by, why, at) VALUES (?, ?, ?, ?)
    RETURNING halt_id, node, by, why, at, lifted_at, lifted_by;

Parameters are ``?`` in both dialects (the PostgreSQL backend turns them into ``%s``).
Portable statements are written once, in ``queries/<aggregate>.sql`` (one file per ledger
module: ``nodes.sql`` beside ``nodes.py``); ``queries/<dialect>/<aggregate>.sql`` holds only
the blocks whose SQL differs in that dialect (a row lock, an upsert), each replacing the
portable block of the same name. Every dialect so answers to the same portable names (a test
checks it): an aggregate asks for a query by name and each backend runs its own SQL. A
dialect may also hold statements with no portable form at all (PostgreSQL's data-modifying
``WITH``, run on a branch only that backend takes): their names carry the dialect's prefix
(:data:`OWN_PREFIX`, ``pg_`` for PostgreSQL), so that a call site says it is dialect-only. A
name is unique across all files, so a query is found by grepping its name.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

QUERIES_DIR = Path(__file__).parent / "queries"
DIALECTS = ("sqlite", "postgres")
#: The prefix of a dialect's own statements, which have no portable counterpart.
OWN_PREFIX = {"sqlite": "sqlite_", "postgres": "pg_"}


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


def _read_all(files: list[Path]) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(files):
        for name, statement in parse(path.read_text(encoding="utf-8"), str(path)).items():
            if name in found:
                raise ValueError(f"{path}: query {name!r} is also defined in another file")
            found[name] = statement
    return found


@cache
def portable() -> dict[str, str]:
    """The portable queries, every aggregate's (read once per process)."""
    return _read_all(list(QUERIES_DIR.glob("*.sql")))


@cache
def overrides(dialect: str) -> dict[str, str]:
    """One dialect's own versions of portable queries."""
    if dialect not in DIALECTS:
        raise ValueError(f"no named queries for dialect {dialect!r}")
    own = _read_all(list((QUERIES_DIR / dialect).glob("*.sql")))
    strays = {n for n in set(own) - set(portable()) if not n.startswith(OWN_PREFIX[dialect])}
    if strays:
        raise ValueError(
            f"{dialect}: overrides name no portable query (and lack the dialect's own prefix "
            f"{OWN_PREFIX[dialect]!r}): {sorted(strays)}"
        )
    return own


@cache
def queries(dialect: str) -> dict[str, str]:
    """The named queries of one dialect: the portable ones, with the dialect's own in their
    place (read once per process)."""
    return {**portable(), **overrides(dialect)}
