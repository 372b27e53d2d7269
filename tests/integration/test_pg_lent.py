"""Server sessions a daemon holds and lends to its children (``ledger.pg_lent``), against a
real server and real forked children: one child at a time; back clean, lent again to the
next with the same server process; statements never prepared (a child's would clash with
the next child's); a child that left a transaction open, or was killed in one, has its
session discarded and its transaction rolled back; a child's close leaves the session to
the daemon; never encrypted; never older than ``pg_ahead.MAX_AGE``. Through a real daemon:
tests/integration/test_daemon.py."""

from __future__ import annotations

import os
import signal
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from onstation.ledger import Ledger, pg_ahead, pg_lent
from onstation.ledger.pg_backend import PostgresBackend
from onstation.ledger.pg_lent import LentSessions
from onstation.relief import hotpath_pg

#: Connections made ahead in a test are closed and forgotten after it (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("no_connection_left_ahead")


@pytest.fixture
def app() -> str:
    return f"lent-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def env(app: str) -> dict[str, str]:
    return {**os.environ, "PGAPPNAME": app}


@pytest.fixture
def sessions() -> Iterator[LentSessions]:
    held = LentSessions()
    yield held
    held.close()


@pytest.fixture
def now() -> list[float]:
    """The clock of :func:`clocked`'s sessions (monotonic seconds), moved by the test."""
    return [1000.0]


@pytest.fixture
def clocked(now: list[float]) -> Iterator[LentSessions]:
    held = LentSessions(clock=lambda: now[0])
    yield held
    held.close()


def _backends(url: str, app: str) -> list[tuple[int, str]]:
    with psycopg.connect(url.split("?", maxsplit=1)[0], autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid, state FROM pg_stat_activity WHERE application_name = %s", (app,)
        ).fetchall()
    return [(int(pid), str(state)) for pid, state in rows]


def _wait(predicate: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class _Child:
    """A forked child, as a daemon's spare: it waits for the slot it is lent, holds it, runs
    ``body`` on what the call takes (``pg_ahead.take``) and says :func:`pg_lent.state`."""

    def __init__(
        self, sessions: LentSessions, url: str, env: dict[str, str],
        body: Callable[[PostgresBackend | None, int], None],
    ) -> None:  # fmt: skip
        slot_r, self._slot_w = os.pipe()
        self._out_r, out_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                os.close(self._slot_w)
                os.close(self._out_r)
                slot = int(os.read(slot_r, 16).decode())
                if slot >= 0:
                    sessions.adopt(slot)
                body(pg_ahead.take(url, env), out_w)
                os.write(out_w, b"state " + pg_lent.state())
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(slot_r)
        os.close(out_w)

    def lend(self, slot: int | None) -> None:
        os.write(self._slot_w, b"%d" % (-1 if slot is None else slot))
        os.close(self._slot_w)

    def read(self, size: int = 4096) -> bytes:
        return os.read(self._out_r, size)

    def end(self) -> tuple[int, bytes]:
        """(exit code, what it said last)."""
        said = b""
        while chunk := os.read(self._out_r, 4096):
            said += chunk
        os.close(self._out_r)
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status), said


def _call(
    sessions: LentSessions, url: str, env: dict[str, str],
    body: Callable[[PostgresBackend | None, int], None],
) -> tuple[int | None, int, bytes]:  # fmt: skip
    """One call as the daemon runs it: a spare forked holding every session, lent one at
    the hand-over, taken back by what it says: (the slot, its exit code, its words)."""
    inherited = sessions.slots()
    child = _Child(sessions, url, env, body)
    slot = sessions.lend(url, env, child.pid, inherited)
    child.lend(slot)
    code, said = child.end()
    state = said.rpartition(b"state ")[2] if b"state " in said else b""
    sessions.returned(child.pid, state)
    return slot, code, said


def _pid_and_repeats(backend: PostgresBackend | None, out: int) -> None:
    """The server process, after one statement run ten times (twice psycopg's default
    threshold for preparing it on the server)."""
    assert backend is not None
    for _ in range(10):
        backend._conn.execute("SELECT count(*) FROM agent_node WHERE name = %s", ("x",))
    pid = backend._conn.execute("SELECT pg_backend_pid()").fetchone()
    assert pid is not None
    os.write(out, b"pid %d\n" % pid[0])


def test_one_server_session_serves_one_call_after_another(
    pg_url: str, env: dict[str, str], app: str, sessions: LentSessions
) -> None:
    sessions.want(pg_url, env)
    assert sessions.wanted()
    sessions.make_wanted()
    assert not sessions.wanted() and sessions.has(pg_url, env)
    [(held, _state)] = _backends(pg_url, app)
    for n in range(3):
        slot, code, said = _call(sessions, pg_url, env, _pid_and_repeats)
        assert (slot, code) == (0, 0), said
        assert f"pid {held}\n".encode() in said and said.endswith(b"state c")
        assert sessions.lent == n + 1
    assert _backends(pg_url, app) == [(held, "idle")]


def test_a_call_for_another_ledger_or_environment_does_not_take_it(
    pg_url: str, env: dict[str, str], sessions: LentSessions
) -> None:
    sessions.want(pg_url, env)
    sessions.make_wanted()
    other = {**env, "PGAPPNAME": env["PGAPPNAME"] + "-other"}
    assert sessions.lend(pg_url, other, 1, sessions.slots()) is None  # not for that key

    def untaken(backend: PostgresBackend | None, _out: int) -> None:
        assert backend is None  # the call's own environment differs: it connects itself

    inherited = sessions.slots()
    child = _Child(sessions, pg_url, other, untaken)
    child.lend(sessions.lend(pg_url, env, child.pid, inherited))  # guessed by the daemon
    code, said = child.end()
    assert code == 0 and said.endswith(b"state c")  # never touched: clean
    sessions.returned(child.pid, b"c")
    assert sessions.lend(pg_url, env, 2, sessions.slots()) == 0  # free again


def test_one_child_at_a_time_and_one_more_is_made_for_a_second(
    pg_url: str, env: dict[str, str], app: str, sessions: LentSessions
) -> None:
    sessions.want(pg_url, env)
    sessions.make_wanted()
    first = sessions.lend(pg_url, env, 101, sessions.slots())
    assert first == 0
    assert sessions.lend(pg_url, env, 102, sessions.slots()) is None  # lent: not shared
    assert sessions.wanted()  # the second call connected itself; the next finds one
    sessions.make_wanted()
    assert len(_backends(pg_url, app)) == 2
    assert sessions.lend(pg_url, env, 103, frozenset({0})) is None  # forked before it
    assert sessions.lend(pg_url, env, 104, sessions.slots()) == 1
    sessions.returned(101, b"c")
    sessions.returned(104, b"c")
    assert {sessions.lend(pg_url, env, p, sessions.slots()) for p in (105, 106)} == {0, 1}


def test_statements_are_never_prepared_on_a_lent_session(
    pg_url: str, env: dict[str, str], sessions: LentSessions
) -> None:
    """A statement run often enough is prepared on the server under a name the child's
    copy of the connection chose; the daemon's copy never learns it, so the next child
    would prepare the same name again and fail. Lent sessions prepare nothing."""
    sessions.want(pg_url, env)
    sessions.make_wanted()
    for _ in range(2):
        _slot, code, said = _call(sessions, pg_url, env, _pid_and_repeats)
        assert code == 0 and said.endswith(b"state c"), said
    held = sessions._held[0].backend
    prepared = held._conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    assert prepared == (0,)


def _fast_reads_rolled_back(backend: PostgresBackend | None, out: int) -> None:
    """The hook fast path's reads, on its prepared statements, each transaction rolled back."""
    assert backend is not None
    store = hotpath_pg.PgStore(backend)
    for _ in range(3):
        assert store.gather("no such session", "/", "PostToolUse", None) is None
        store.rollback()
    os.write(out, b"read\n")


def test_the_warm_up_prepares_the_fast_paths_statements_and_calls_leave_them(
    pg_url: str, env: dict[str, str], sessions: LentSessions
) -> None:
    """The daemon's warm-up prepares the fast path's statements by name on the session it
    holds (SQL PREPARE, which psycopg does not track); children EXECUTE them, roll back, run
    a statement often, and leave the session with exactly those statements: none of their
    own prepared, none deallocated (psycopg deallocates everything after a ROLLBACK once it
    has prepared a statement itself)."""
    sessions.want(pg_url, env)
    sessions.make_wanted(warm=hotpath_pg.warm)
    held = sessions._held[0].backend
    statements = set(held.prepared.values())
    assert statements >= set(hotpath_pg.PREPARED.values())
    for body in (_fast_reads_rolled_back, _pid_and_repeats, _fast_reads_rolled_back):
        _slot, code, said = _call(sessions, pg_url, env, body)
        assert code == 0 and said.endswith(b"state c"), said
    names = {row[0] for row in held._conn.execute("SELECT name FROM pg_prepared_statements")}
    assert names == statements


def _lock_alpha_and_wait(backend: PostgresBackend | None, out: int) -> None:
    assert backend is not None
    backend._conn.execute("BEGIN")
    backend._conn.execute("UPDATE agent_node SET role = 'changed' WHERE name = 'alpha'")
    os.write(out, b"locked\n")
    time.sleep(60)  # killed before this ends


def _alpha_role(url: str) -> tuple[str, float]:
    """alpha's role, read after taking its row's lock (and how long that took)."""
    ledger = Ledger.open(url)
    try:
        conn = ledger.backend._conn  # type: ignore[attr-defined]
        began = time.monotonic()
        with conn.transaction():
            conn.execute("SET LOCAL lock_timeout = '5s'")
            row = conn.execute("SELECT role FROM agent_node WHERE name = 'alpha' FOR UPDATE")
            role = row.fetchone()[0]
        return str(role), time.monotonic() - began
    finally:
        ledger.close()


def test_a_child_killed_inside_a_transaction_has_its_session_discarded_and_rolled_back(
    pg_url: str, env: dict[str, str], app: str, sessions: LentSessions
) -> None:
    setup = Ledger.open(pg_url)
    setup.register_node("alpha", role="executor")
    setup.close()
    sessions.want(pg_url, env)
    sessions.make_wanted()
    [(held, _state)] = _backends(pg_url, app)
    inherited = sessions.slots()
    child = _Child(sessions, pg_url, env, _lock_alpha_and_wait)
    child.lend(sessions.lend(pg_url, env, child.pid, inherited))
    assert child.read() == b"locked\n"
    os.kill(child.pid, signal.SIGKILL)
    child.end()
    sessions.returned(child.pid, b"")  # no report: nothing it held is trusted
    assert not sessions.has(pg_url, env) and sessions.wanted()
    _wait(lambda: not _backends(pg_url, app), "the discarded session's end")
    role, waited = _alpha_role(pg_url)
    assert role == "executor" and waited < 4  # rolled back, its lock gone
    del held


def test_a_child_that_left_a_transaction_open_says_so_and_it_is_discarded(
    pg_url: str, env: dict[str, str], app: str, sessions: LentSessions
) -> None:
    sessions.want(pg_url, env)
    sessions.make_wanted()

    def left_open(backend: PostgresBackend | None, _out: int) -> None:
        assert backend is not None
        backend._conn.execute("BEGIN")
        backend._conn.execute("SELECT 1")

    _slot, code, said = _call(sessions, pg_url, env, left_open)
    assert code == 0 and said.endswith(b"state x")
    assert not sessions.has(pg_url, env)
    _wait(lambda: not _backends(pg_url, app), "the discarded session's end")


def test_a_childs_close_leaves_the_session_to_the_daemon(
    pg_url: str, env: dict[str, str], app: str, sessions: LentSessions
) -> None:
    sessions.want(pg_url, env)
    sessions.make_wanted()

    def register_and_close(backend: PostgresBackend | None, _out: int) -> None:
        assert backend is not None
        ledger = Ledger(backend)
        ledger.register_node("beta")
        ledger.close()

    _slot, code, said = _call(sessions, pg_url, env, register_and_close)
    assert code == 0 and said.endswith(b"state c")
    assert sessions.has(pg_url, env) and len(_backends(pg_url, app)) == 1
    assert sessions._held[0].backend.answers()  # the daemon's copy: still the same session


def test_an_old_session_is_not_lent_but_made_anew(
    pg_url: str, env: dict[str, str], app: str, now: list[float], clocked: LentSessions
) -> None:
    clocked.want(pg_url, env)
    clocked.make_wanted()
    now[0] += pg_ahead.MAX_AGE + 1
    assert clocked.lend(pg_url, env, 1, clocked.slots()) is None
    assert not clocked.has(pg_url, env) and clocked.wanted()
    _wait(lambda: not _backends(pg_url, app), "the old session's end")
    clocked.make_wanted()
    assert clocked.lend(pg_url, env, 2, clocked.slots()) is not None


def test_an_encrypted_connection_is_never_held(
    pg_url: str, env: dict[str, str], app: str, monkeypatch: pytest.MonkeyPatch,
    now: list[float], clocked: LentSessions,
) -> None:  # fmt: skip
    """TLS (or GSSAPI) state lives in the process using it: such a connection is closed and
    its ledger not tried again (its calls' spares connect ahead as before)."""
    seen: list[bool] = []
    real = pg_lent._encrypted

    def encrypted(backend: Any) -> bool:
        seen.append(real(backend))  # what the server really negotiated here: no TLS
        return True

    monkeypatch.setattr(pg_lent, "_encrypted", encrypted)
    clocked.want(pg_url, env)
    clocked.make_wanted()
    assert seen == [False]
    assert not clocked.has(pg_url, env) and not clocked.wanted()
    _wait(lambda: not _backends(pg_url, app), "the encrypted connection's end")
    for _ in range(2):
        clocked.want(pg_url, env)
        assert not clocked.wanted()  # not again, however long after
        now[0] += 100 * pg_lent.RETRY_AFTER


def test_what_counts_as_encrypted() -> None:
    class _PgConn:
        def __init__(self, ssl: bool, gss: bool) -> None:
            self.ssl_in_use, self.used_gssapi = ssl, gss

    class _Backend:
        def __init__(self, ssl: bool, gss: bool) -> None:
            self._conn = type("C", (), {"pgconn": _PgConn(ssl, gss)})()

    assert not pg_lent._encrypted(_Backend(False, False))  # type: ignore[arg-type]
    assert pg_lent._encrypted(_Backend(True, False))  # type: ignore[arg-type]
    assert pg_lent._encrypted(_Backend(False, True))  # type: ignore[arg-type]


def test_a_ledger_that_cannot_be_reached_is_not_tried_again_at_once(
    env: dict[str, str], now: list[float], clocked: LentSessions
) -> None:
    url = "postgresql://nobody@127.0.0.1:1/none"
    clocked.want(url, env)
    clocked.make_wanted()
    assert not clocked.has(url, env)
    clocked.want(url, env)
    assert not clocked.wanted()
    now[0] += pg_lent.RETRY_AFTER + 1
    clocked.want(url, env)
    assert clocked.wanted()
