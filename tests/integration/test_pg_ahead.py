"""A PostgreSQL ledger connected ahead by a daemon's spare (``ledger.pg_ahead``), against a
real server: taken once, and only for the same URL and libpq environment, in the process
that made it, while young and alive; made under the call's environment; never creating
anything. The daemon end to end (a spare connecting ahead, a call taking it) is in
tests/integration/test_daemon.py."""

from __future__ import annotations

import os
import uuid
from typing import Any

import psycopg
import pytest

from onstation.ledger import Ledger, open_backend, pg_ahead
from onstation.ledger.pg_backend import PostgresBackend

#: Connections made ahead in a test are closed and forgotten after it (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("no_connection_left_ahead")


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def _backend_pid(backend: Any) -> int:
    return int(backend._conn.info.backend_pid)


def test_a_connection_made_ahead_is_taken_once_for_the_same_url_and_environment(
    pg_url: str,
) -> None:
    env = _env(PGAPPNAME=f"ahead-{uuid.uuid4().hex[:8]}")
    assert pg_ahead.connect_ahead(pg_url, env)
    assert pg_ahead.held() == 1 and not pg_ahead.took_ahead()
    taken = pg_ahead.take(pg_url, env)
    assert isinstance(taken, PostgresBackend) and pg_ahead.took_ahead()
    assert pg_ahead.take(pg_url, env) is None  # once
    ledger = Ledger(taken)
    ledger.register_node("alpha")
    assert ledger.get_node("alpha").node == "alpha"
    ledger.close()


def test_open_backend_takes_it_only_under_the_same_environment(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = f"ahead-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PGAPPNAME", app)
    assert pg_ahead.connect_ahead(pg_url, dict(os.environ))
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    # Another libpq environment (here the application name libpq sends): not taken.
    monkeypatch.setenv("PGAPPNAME", app + "-other")
    other = open_backend(pg_url)
    assert other is not ahead and pg_ahead.held() == 1
    other.close()
    # Another URL (the same server, another schema): not taken either.
    assert pg_ahead.take(pg_url.replace("schema=", "schema=x"), dict(os.environ)) is None
    monkeypatch.setenv("PGAPPNAME", app)
    same = open_backend(pg_url)
    assert same is ahead and pg_ahead.held() == 0
    same.close()


def test_it_is_made_under_the_given_environment_and_leaves_the_process_own(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGAPPNAME", "the-daemons-own")
    monkeypatch.delenv("PGOPTIONS", raising=False)
    app = f"ahead-{uuid.uuid4().hex[:8]}"
    assert pg_ahead.connect_ahead(pg_url, _env(PGAPPNAME=app, PGOPTIONS="-c work_mem=8MB"))
    assert os.environ["PGAPPNAME"] == "the-daemons-own" and "PGOPTIONS" not in os.environ
    backend = pg_ahead.take(pg_url, _env(PGAPPNAME=app, PGOPTIONS="-c work_mem=8MB"))
    assert backend is not None
    row = backend._conn.execute(  # type: ignore[attr-defined]
        "SELECT current_setting('application_name'), current_setting('work_mem')"
    ).fetchone()
    assert row == (app, "8MB")
    backend.close()


def test_one_the_server_ended_is_not_taken(pg_url: str) -> None:
    env = _env()
    assert pg_ahead.connect_ahead(pg_url, env)
    ahead = next(iter(pg_ahead._AHEAD.values()))[0]
    with psycopg.connect(pg_url.split("?", maxsplit=1)[0], autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (_backend_pid(ahead),))
    assert pg_ahead.take(pg_url, env) is None and not pg_ahead.took_ahead()
    fresh = open_backend(pg_url)  # the call connects itself and works
    assert fresh.schema_version() > 0
    fresh.close()


def test_an_old_one_or_another_process_s_is_not_taken(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env()
    assert pg_ahead.connect_ahead(pg_url, env)
    made = next(iter(pg_ahead._AHEAD.values()))[2]
    monkeypatch.setattr(pg_ahead.time, "monotonic", lambda: made + pg_ahead.MAX_AGE + 1)
    assert pg_ahead.take(pg_url, env) is None
    monkeypatch.undo()
    assert pg_ahead.connect_ahead(pg_url, env)
    real_pid = os.getpid()
    monkeypatch.setattr(pg_ahead.os, "getpid", lambda: real_pid + 1)  # a forked copy
    assert pg_ahead.take(pg_url, env) is None and not pg_ahead.took_ahead()


def test_it_never_creates_a_schema_nor_connects_to_an_unmigrated_one(pg_url: str) -> None:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    missing = pg_url.split("?", maxsplit=1)[0] + f"?schema={schema}"
    assert not pg_ahead.connect_ahead(missing, _env())
    assert pg_ahead.held() == 0
    with psycopg.connect(pg_url.split("?", maxsplit=1)[0], autocommit=True) as admin:
        found = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        assert found.fetchone() is None
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            assert not pg_ahead.connect_ahead(missing, _env())  # there, but never migrated
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_the_ledger_a_process_opened_is_the_one_it_reports(pg_url: str) -> None:
    backend = open_backend(pg_url)
    backend.close()
    assert pg_ahead.last_used() == pg_url


def test_the_libpq_environment_is_what_libpq_reads_and_nothing_else() -> None:
    environ = {"PGPASSFILE": "/p", "PGAPPNAME": "a", "HOME": "/h", "KRB5CCNAME": "k",
               "SSL_CERT_FILE": "c", "OPENSSL_CONF": "o", "PATH": "/bin", "LANG": "C",
               "ONSTATION_DB": "postgresql://x", "XPG": "no"}  # fmt: skip
    assert dict(pg_ahead.libpq_environment(environ)) == {
        "PGPASSFILE": "/p", "PGAPPNAME": "a", "HOME": "/h", "KRB5CCNAME": "k",
        "SSL_CERT_FILE": "c", "OPENSSL_CONF": "o"}  # fmt: skip


def test_a_spare_waits_for_the_server_only_briefly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that arrives while its spare connects waits for it: the spare's connection
    gives up after libpq's least timeout, not a call's ten seconds."""
    asked: dict[str, Any] = {}

    def refused(*args: Any, **kwargs: Any) -> Any:
        asked.update(kwargs)
        raise psycopg.OperationalError("refused")

    monkeypatch.setattr(psycopg, "connect", refused)
    assert not pg_ahead.connect_ahead("postgresql://nobody@127.0.0.1:1/none", dict(os.environ))
    assert asked["connect_timeout"] == pg_ahead.CONNECT_TIMEOUT == 2
    assert pg_ahead.held() == 0
