"""Ledger URLs: which backend a ``--db`` value names, and the default SQLite file.

Standard library only, and nothing heavy at import: the hook fast path reads it on every
tool call to learn whether the ledger is a SQLite file it may answer from.
"""

from __future__ import annotations

import os

from onstation.core.errors import BadInput


def default_sqlite_file() -> str:
    """``$XDG_STATE_HOME/onstation/ledger.db`` (``~/.local/state/onstation/ledger.db``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "onstation", "ledger.db")


def parse_url(url: str) -> tuple[str, str]:
    """Split a ledger URL into (dialect, target): sqlite paths or postgresql URLs."""
    if not url or "\x00" in url:
        raise BadInput("--db: must be a sqlite path or a postgresql:// URL")
    lowered = url.lower()
    if lowered.startswith(("postgresql://", "postgres://")):
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - parsing the port is the check
        except ValueError as exc:
            raise BadInput(f"--db: not a valid PostgreSQL URL ({exc})", field="--db") from exc
        return "postgres", url
    if lowered.startswith("sqlite:"):
        target = url[len("sqlite:") :]
        if target.startswith("//"):
            target = target[2:]
        if not target:
            raise BadInput("--db: sqlite URL names no file")
    elif "://" in url:
        raise BadInput(f"--db: unsupported scheme in {url.split('://', 1)[0]!r}")
    else:
        target = url
    if target == ":memory:":
        # SQLite's name for a database that vanishes on close: a ledger is a durable file.
        raise BadInput("--db: ':memory:' is not a file; the ledger must be a file",
                       field="--db")  # fmt: skip
    return "sqlite", target


def sqlite_file(url: str | None) -> str | None:
    """The SQLite file a ledger URL names (``None``: the default file); None for PostgreSQL.

    Raises :class:`BadInput` for a URL that names neither.
    """
    if url is None:
        return default_sqlite_file()
    dialect, target = parse_url(url)
    return os.path.expanduser(target) if dialect == "sqlite" else None
