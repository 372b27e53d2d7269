"""Shared fixtures: ledgers on every backend, a controllable clock, PostgreSQL discovery.

PostgreSQL tests use ``ONSTATION_TEST_PG`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
and give each test its own schema. Where no server answers they are skipped, except in CI
(``CI=true``) or with ``ONSTATION_REQUIRE_PG=1``, where a missing server fails the run: the
PostgreSQL backend must never go untested in CI.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from onstation.ledger import Ledger, open_backend

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


class FakeClock:
    """A settable UTC clock for the ledger (time is passed in, never read behind our back)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


def _pg_base() -> str:
    return os.environ.get("ONSTATION_TEST_PG", DEFAULT_PG)


def _pg_required() -> bool:
    return (
        os.environ.get("CI", "").lower() == "true" or os.environ.get("ONSTATION_REQUIRE_PG") == "1"
    )


_pg_state: dict[str, str | None] = {}


def pg_available() -> str | None:
    """None when PostgreSQL answers, else the reason it does not."""
    if "reason" not in _pg_state:
        try:
            import psycopg

            with psycopg.connect(_pg_base(), connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            _pg_state["reason"] = None
        except Exception as exc:
            _pg_state["reason"] = f"PostgreSQL not reachable at {_pg_base()}: {exc}"
    return _pg_state["reason"]


def _require_pg() -> None:
    reason = pg_available()
    if reason is not None:
        if _pg_required():
            pytest.fail(f"{reason} (required in CI)")
        pytest.skip(reason)


def _with_schema(base: str, schema: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A migrated, empty PostgreSQL ledger in a schema of its own, dropped afterwards."""
    _require_pg()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    url = _with_schema(_pg_base(), schema)
    backend = open_backend(url, require_migrated=False)
    backend.migrate()
    backend.close()
    yield url
    import psycopg

    with psycopg.connect(_pg_base(), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite ledger file path."""
    return str(tmp_path / "ledger.db")


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty ledger, once per backend."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def clock() -> FakeClock:
    """A controllable clock starting at 2026-01-01 12:00 UTC."""
    return FakeClock()


@pytest.fixture
def make_ledger(ledger_url: str) -> Iterator[Callable[..., Ledger]]:
    """Open (possibly several) ledgers on the same database; all are closed afterwards."""
    opened: list[Ledger] = []

    def factory(**kwargs: object) -> Ledger:
        ledger = Ledger.open(ledger_url, **kwargs)  # type: ignore[arg-type]
        opened.append(ledger)
        return ledger

    yield factory
    for ledger in opened:
        ledger.close()


@pytest.fixture
def ledger(make_ledger: Callable[..., Ledger], clock: FakeClock) -> Ledger:
    """An empty ledger on the current backend, on the fake clock."""
    return make_ledger(clock=clock)
