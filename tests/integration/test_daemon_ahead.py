"""The ledger a daemon's spare opens ahead of its call (ledger/fastpath.py ``open_ahead``,
cli/daemon.py): taken only for the very file, never creating one, never keeping a deleted or
replaced ledger alive; and, through a real daemon, held by the waiting spare."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onstation.cli import daemon_client, daemon_pages
from onstation.ledger import fastpath


@pytest.fixture(autouse=True)
def _nothing_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastpath, "_AHEAD", {})


def _wal_ledger(path: Path) -> str:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = wal")
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    return str(path)


def test_a_ledger_opened_ahead_is_taken_once_for_the_same_file(tmp_path: Path) -> None:
    db = _wal_ledger(tmp_path / "ledger.db")
    assert fastpath.open_ahead(db)
    other = _wal_ledger(tmp_path / "other.db")
    assert fastpath.take_ahead(other) is None  # another file
    os.symlink(tmp_path, tmp_path / "via")
    conn = fastpath.take_ahead(str(tmp_path / "via" / "ledger.db"))  # the same file
    assert conn is not None
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL, as open_wal's
    assert fastpath.take_ahead(db) is None  # once
    conn.close()


def test_open_ahead_never_creates_a_ledger_and_skips_one_not_in_wal_mode(tmp_path: Path) -> None:
    assert not fastpath.open_ahead(str(tmp_path / "absent.db"))
    assert not (tmp_path / "absent.db").exists()
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("CREATE TABLE t (x)").connection.close()
    assert not fastpath.open_ahead(str(plain))
    assert fastpath.take_ahead(str(plain)) is None


def test_a_replaced_or_deleted_ledger_is_not_taken_and_is_stale(tmp_path: Path) -> None:
    db = _wal_ledger(tmp_path / "ledger.db")
    assert fastpath.open_ahead(db)
    assert not fastpath.ahead_stale()
    os.rename(db, tmp_path / "old.db")
    _wal_ledger(tmp_path / "ledger.db")  # another file at the same path
    assert fastpath.ahead_stale()
    assert fastpath.take_ahead(db) is None


def test_a_ledger_deleted_while_it_is_opened_ahead_is_held_as_stale_never_kept_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file goes between the first look at it and the connection's set-up: the spare
    # used to hold that connection with nothing to watch, waiting for a call forever with
    # the deleted ledger open (test_the_spare_holds_the_ledger_... timed out in CI).
    db = _wal_ledger(tmp_path / "ledger.db")
    real = fastpath.fast_settings

    def deleted_meanwhile(conn: Any) -> bool:
        wal = real(conn)
        for suffix in ("", "-wal", "-shm"):
            Path(db + suffix).unlink(missing_ok=True)
        return wal

    monkeypatch.setattr(fastpath, "fast_settings", deleted_meanwhile)
    assert fastpath.open_ahead(db)  # a connection is held: the spare must watch it
    assert fastpath.ahead_stale()
    assert fastpath.take_ahead(db) is None


REPORTED = """
import sqlite3, sys
from onstation.cli import daemon_pages
from onstation.ledger import fastpath
used, untaken = sys.argv[1:3]
assert fastpath.open_ahead(untaken)
assert fastpath.open_ledger_of() is None
conn = sqlite3.connect(used, isolation_level=None)
conn.execute("SELECT * FROM t").fetchall()  # a WAL-mode connection has its -wal open
assert fastpath.open_ledger_of() == used
assert daemon_pages.read_report(daemon_pages.report(learn=False)) == (used, None, False, b"-")
assert fastpath.take_ahead(untaken) is not None
assert daemon_pages.read_report(daemon_pages.report(learn=False))[2] is True
"""


def test_the_ledger_reported_is_the_one_used_not_one_left_untaken(tmp_path: Path) -> None:
    used = _wal_ledger(tmp_path / "used.db")
    untaken = _wal_ledger(tmp_path / "untaken.db")
    # In a process of its own: this one holds the other tests' connections.
    subprocess.run([sys.executable, "-c", REPORTED, used, untaken], check=True)


def test_the_ledger_a_callers_environment_names(tmp_path: Path) -> None:
    db = _wal_ledger(tmp_path / "ledger.db")
    state = tmp_path / "state" / "onstation"
    state.mkdir(parents=True)
    default = _wal_ledger(state / "ledger.db")
    named = daemon_pages.named_ledger
    assert named([b"ONSTATION_DB=" + os.fsencode(db), b"HOME=/nowhere"]) == db
    assert named([b"ONSTATION_DB=sqlite://" + os.fsencode(db)]) == db
    assert named([b"XDG_STATE_HOME=" + os.fsencode(tmp_path / "state")]) == default
    assert named([b"ONSTATION_DB=relative.db"]) is None
    assert named([b"ONSTATION_DB=postgresql://u@h/d"]) is None
    assert named([b"ONSTATION_DB=" + os.fsencode(tmp_path / "absent.db")]) is None


# -- through a real daemon ----------------------------------------------------------------


def _onstation() -> str:
    return str(Path(sys.executable).with_name("onstation"))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    directory = tempfile.mkdtemp(prefix="osa-")  # a short socket path
    os.chmod(directory, 0o700)
    env = {k: v for k, v in os.environ.items() if k != "ONSTATION_DAEMON"}
    env["ONSTATION_DAEMON_SOCKET"] = os.path.join(directory, "d.sock")
    env["ONSTATION_DB"] = str(tmp_path / "ledger.db")
    started = subprocess.run([_onstation(), "daemon", "start", "--json"], env=env,
                             capture_output=True, text=True, check=True)  # fmt: skip
    env["_PID"] = str(json.loads(started.stdout)["pid"])
    try:
        yield env
    finally:
        subprocess.run([_onstation(), "daemon", "stop"], env=env, capture_output=True,
                       check=False)  # fmt: skip
        shutil.rmtree(directory, ignore_errors=True)


def _held(daemon_pid: str, but: int | None = None) -> list[str]:
    """The files the daemon's children (other than ``but``) hold open."""
    return [path for child in _children(daemon_pid) if but is None or int(child) != but
            for path in _held_by(child)]  # fmt: skip


def _held_by(pid: str) -> list[str]:
    """The files process ``pid`` holds open."""
    held: list[str] = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return held
    for fd in fds:
        try:
            held.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return held


def _wait(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_the_spare_holds_the_ledger_and_lets_a_deleted_one_go(served: dict[str, str]) -> None:
    db = served["ONSTATION_DB"]
    run = [_onstation(), "node", "register"]
    subprocess.run([*run, "a"], env=served, check=True, capture_output=True)
    subprocess.run([*run, "b"], env=served, check=True, capture_output=True)
    # The spare waiting now opened the ledger the last calls' environment names: a command
    # that closes its own connection then leaves the WAL (it is not the last connection).
    _wait(lambda: db in _held(served["_PID"]), "the spare to open the ledger ahead")
    subprocess.run([*run, "c"], env=served, check=True, capture_output=True)
    assert os.path.exists(db + "-wal")
    # Deleted: the spare ends rather than keep it alive, and its successor holds nothing.
    for suffix in ("", "-wal", "-shm"):
        os.unlink(db + suffix)
    _wait(lambda: not any(f.startswith(db) for f in _held(served["_PID"])),
          "the spare to let the deleted ledger go")  # fmt: skip


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_a_served_call_still_truncates_a_wal_past_the_limit(served: dict[str, str]) -> None:
    """A daemon's child makes its call's WAL checkpoint once the client has the outcome
    (``fastpath.defer_settling``): made all the same, nothing lost."""
    db = served["ONSTATION_DB"]
    for argv in (["node", "register", "w"], ["lease", "acquire", "w", "--holder", "h"]):
        subprocess.run([_onstation(), *argv], env=served, check=True, capture_output=True)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE blob_rows (x BLOB)")
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # the WAL grows past the limit here
    for _ in range(200):
        conn.execute("INSERT INTO blob_rows VALUES (?)", (os.urandom(3000),))
    assert os.path.getsize(db + "-wal") > fastpath.WAL_LIMIT_BYTES
    done = subprocess.run([_onstation(), "lease", "renew", "w", "--generation", "1"],
                          env=served, capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.startswith("renewed w generation 1")
    _wait(lambda: os.path.getsize(db + "-wal") == 0, "the child's checkpoint")
    assert conn.execute("SELECT count(*) FROM blob_rows").fetchone()[0] == 200
    conn.close()


class _HeldCall:
    """A call handed to the daemon and held before its go-ahead: in flight for up to 2 s
    (``CLIENT_TIMEOUT``), never run; :meth:`drop` hangs up, which ends it."""

    def __init__(self, socket_path: str, argv: list[str]) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(socket_path)
        null = os.open(os.devnull, os.O_RDWR)
        cwd = os.open(".", os.O_RDONLY)
        try:
            self.sock.sendmsg([daemon_client.request(argv)], [(
                socket.SOL_SOCKET, socket.SCM_RIGHTS,
                daemon_client._int32s((null, null, null, cwd)))])  # fmt: skip
            line = self.sock.recv(64)
        finally:
            os.close(null)
            os.close(cwd)
        assert line.startswith(b"ok ")
        self.child = int(line[3:].split(b"\n")[0])

    def in_flight(self) -> bool:
        return Path(f"/proc/{self.child}").exists()

    def drop(self) -> None:
        self.sock.close()


def _never_held_beside(env: dict[str, str], held: list[_HeldCall], seconds: float) -> None:
    """For up to ``seconds`` while the held calls are in flight, no other child of the
    daemon holds the ledger (looked at least once: a held call ends by itself after 2 s)."""
    deadline = time.monotonic() + seconds
    looks = 0
    while time.monotonic() < deadline:
        if not all(h.in_flight() for h in held):
            break
        others = set(_children(env["_PID"])) - {str(h.child) for h in held}
        holding = [c for c in others if env["ONSTATION_DB"] in _held_by(c)]
        if not all(h.in_flight() for h in held):
            break  # a call ended meanwhile: what was seen may be the warm-up after it
        assert not holding, f"{holding} opened the ledger beside calls in flight"
        looks += 1
        time.sleep(0.02)
    assert looks, "the held calls ended before they could be looked at"


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_the_next_spare_is_made_and_warmed_only_once_the_calls_in_flight_have_ended(
    served: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone call's next spare is forked once that call has ended, and a spare forked while
    calls overlap warms up (opens the ledger ahead, copies pages) once those have ended:
    on two cores the fork and the warm-up used to run beside the call just handed over, which
    then waited for a core (a PostgreSQL session start through the daemon about 1.5x
    ``python -c pass``, 1.3x without)."""
    db = served["ONSTATION_DB"]
    for name in ("a", "b"):  # the second call's spare knows the ledger the first made
        subprocess.run([_onstation(), "node", "register", name], env=served, check=True,
                       capture_output=True)  # fmt: skip
    _wait(lambda: db in _held(served["_PID"]), "the spare to open the ledger ahead")
    path = served["ONSTATION_DAEMON_SOCKET"]
    # The held calls' frames carry this process's environment: it names the test's ledger
    # (else the daemon would guess the user's default one for the next spare).
    monkeypatch.setenv("ONSTATION_DB", db)
    lone = _HeldCall(path, ["node", "register", "never"])
    try:
        # Before, a spare was forked at the hand-over and opened the ledger at once.
        _never_held_beside(served, [lone], 0.5)
        assert _children(served["_PID"]) == [str(lone.child)]  # no spare beside it
    finally:
        lone.drop()  # the client gone: its call is ended, nothing ran
    _wait(lambda: db in _held(served["_PID"], but=lone.child), "the next spare's warm-up")
    first = _HeldCall(path, ["node", "register", "never"])
    second = _HeldCall(path, ["node", "register", "never"])
    try:
        # Overlapping calls: a spare is ready for a third at once, and waits to warm up.
        _wait(lambda: len(_children(served["_PID"])) >= 3, "a spare beside two calls")
        _never_held_beside(served, [first, second], 0.5)
    finally:
        first.drop()
        second.drop()
    _wait(lambda: any(db in _held_by(c) for c in _children(served["_PID"])
                      if c not in (str(first.child), str(second.child))),
          "the spare's warm-up once the calls ended")  # fmt: skip
    listed = subprocess.run([_onstation(), "node", "list", "--json"], env=served, check=True,
                            capture_output=True, text=True)  # fmt: skip
    assert "never" not in listed.stdout


def _children(daemon_pid: str) -> list[str]:
    try:
        return Path(f"/proc/{daemon_pid}/task/{daemon_pid}/children").read_text().split()
    except OSError:
        return []


def test_a_spare_that_cannot_be_forked_leaves_the_daemon_serving(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The daemon forks a lone call's next spare in its loop once the call has ended: a fork
    refused there (a process limit, no memory) used to end the daemon with the OSError;
    now it says so in its log (once), keeps no descriptor of the attempt and tries again."""
    import errno

    from onstation.cli.daemon import Daemon

    directory = tempfile.mkdtemp(prefix="osf-")
    os.chmod(directory, 0o700)
    d = Daemon(os.path.join(directory, "d.sock"))
    try:
        d.bind()

        def refused() -> int:
            raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))

        monkeypatch.setattr(os, "fork", refused)
        fds = set(os.listdir("/proc/self/fd"))
        d._turn()  # nothing to serve: the turn tries to make a spare, and goes on
        assert d.spare is None and not d.stopping
        assert set(os.listdir("/proc/self/fd")) == fds
        assert "spare not forked: Resource temporarily unavailable" in capsys.readouterr().err
        d._turn()  # still refused: tried again, said once
        assert d.spare is None and capsys.readouterr().err == ""
    finally:
        d._close_listener()
        os.close(d._wake_r)
        os.close(d._wake_w)
        shutil.rmtree(directory, ignore_errors=True)
