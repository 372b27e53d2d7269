"""Helpers for testing code that uses onstation's ledger: a settable clock and scratch ledgers.

The project's own tests use them; so can any library user's::

    from onstation.testing import FakeClock, scratch_ledger

    clock = FakeClock()
    with scratch_ledger(clock=clock) as ledger:    # a fresh SQLite file in a temp directory
        ledger.register_node("exec-1")
        clock.advance(minutes=5)

``scratch_ledger(pg="postgresql://...")`` gives a migrated, empty PostgreSQL ledger in a
schema of its own, dropped afterwards.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onstation.ledger import Ledger

__all__ = ["FakeClock", "scratch_ledger", "scratch_postgres_url", "with_schema"]


class FakeClock:
    """A settable UTC clock for the ledger (time is passed in, never read behind its back)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        """Move the clock forward by a :class:`~datetime.timedelta`'s keyword arguments."""
        self.now += timedelta(**kwargs)


def with_schema(base: str, schema: str) -> str:
    """A PostgreSQL ledger URL that keeps the ledger in ``schema``."""
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


@contextmanager
def scratch_postgres_url(base: str) -> Iterator[str]:
    """The URL of a migrated, empty PostgreSQL ledger in a fresh schema, dropped afterwards."""
    import psycopg

    from onstation.ledger import open_backend

    schema = f"t_{uuid.uuid4().hex[:16]}"
    url = with_schema(base, schema)
    backend = open_backend(url, require_migrated=False)
    try:
        backend.migrate()
    finally:
        backend.close()
    try:
        yield url
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def scratch_ledger(*, pg: str | None = None, **options: Any) -> Iterator[Ledger]:
    """An empty ledger, closed and removed afterwards: SQLite in a temporary directory, or
    PostgreSQL in a schema of its own when ``pg`` gives a server's URL. ``options`` go to
    :meth:`Ledger.open` (``clock=``, ``respawn_policy=``, ...)."""
    from onstation.ledger import Ledger

    if pg is not None:
        with scratch_postgres_url(pg) as url, Ledger.open(url, **options) as ledger:
            yield ledger
        return
    # The directory is private to this user (mkdtemp makes it 0700), as a ledger's must be.
    with (
        tempfile.TemporaryDirectory(prefix="onstation-") as directory,
        Ledger.open(str(Path(directory) / "ledger.db"), **options) as ledger,
    ):
        yield ledger
