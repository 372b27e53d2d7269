"""The alert commands as an operator uses them: ``webhook add|list|remove|test`` and
``alerts list|run``, against a real receiver on 127.0.0.1; and a real relief that ends
BLOCKED while its subscriber hangs: the relief does not wait for it, nor even call it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from webhook_receiver import Receiver, receiving

from onstation.ledger import Ledger

ONSTATION = str(Path(sys.executable).with_name("onstation"))
GIT = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "T",
       "GIT_COMMITTER_EMAIL": "t@e"}  # fmt: skip


def run(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ONSTATION, *args], capture_output=True, text=True, env=env,
                          input=stdin, timeout=120, check=False)  # fmt: skip


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {**os.environ, "ONSTATION_DB": str(tmp_path / "ledger.db")}
    for var in ("ONSTATION_NODE", "ONSTATION_GENERATION"):
        out.pop(var, None)
    return out


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as state:
        yield state


def _add(env: dict[str, str], *args: str) -> dict[str, Any]:
    done = run(env, "webhook", "add", *args, "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_add_prints_the_secret_once_and_list_never_shows_it(env: dict[str, str]) -> None:
    assert run(env, "node", "register", "exec-1").returncode == 0
    done = run(env, "webhook", "add", "https://hooks.slack.com/services/T0/B0/SECRETPATH",
               "--format", "slack", "--kinds", "crash_loop,breaker.opened")  # fmt: skip
    assert done.returncode == 0, done.stderr
    secret = next(line.split(": ", 1)[1] for line in done.stdout.splitlines()
                  if line.startswith("secret: "))  # fmt: skip
    assert secret.startswith("whsec_") and len(secret) > 40
    assert "SECRETPATH" not in done.stdout
    for args in (["webhook", "list"], ["webhook", "list", "--json", "--all"],
                 ["history"], ["history", "--json"]):  # fmt: skip
        shown = run(env, *args)
        assert secret not in shown.stdout and "SECRETPATH" not in shown.stdout
    listed = json.loads(run(env, "webhook", "list", "--json").stdout)["webhooks"]
    assert [(w["format"], w["kinds"], w["url"]) for w in listed] == [
        ("slack", ["breaker.opened", "crash_loop"], "https://hooks.slack.com/services/…")
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["webhook", "add", "file:///etc/passwd"], "url: must start with http"),
        (["webhook", "add", "http://127.0.0.1:1/", "--kinds", "everything"], "--kinds"),
        (["webhook", "add", "http://127.0.0.1:1/", "--format", "teams"], "--format"),
        (["webhook", "remove", "0"], "ID: must be at least 1"),
        (["webhook", "remove", "77"], "no such webhook 77"),
        (["webhook", "test", "77"], "no such webhook 77"),
        (["alerts", "run", "--once", "--interval", "0"], "--interval"),
        (["alerts", "run", "--once", "--timeout", "nan"], "nan"),
        (["alerts", "list", "--limit", "0"], "--limit"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    env: dict[str, str], args: list[str], message: str
) -> None:
    assert run(env, "node", "register", "exec-1").returncode == 0
    before = run(env, "history", "--json").stdout
    done = run(env, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and message in done.stderr
    assert run(env, "history", "--json").stdout == before
    assert json.loads(run(env, "webhook", "list", "--json", "--all").stdout) == {"webhooks": []}
    as_json = run(env, *args, "--json")
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["error"] == "bad_input"


def test_remove_twice_is_a_conflict(env: dict[str, str]) -> None:
    made = _add(env, "http://127.0.0.1:1/hook")
    assert run(env, "webhook", "remove", str(made["webhook_id"])).returncode == 0
    again = run(env, "webhook", "remove", str(made["webhook_id"]))
    assert again.returncode == 5 and "already removed" in again.stderr
    assert run(env, "webhook", "list").stdout.strip() == "no webhook"


def test_webhook_test_reaches_a_receiver_and_reports_a_dead_one(
    env: dict[str, str], receiver: Receiver
) -> None:
    made = _add(env, receiver.url)
    receiver.secret = made["secret"]
    done = run(env, "webhook", "test", str(made["webhook_id"]))
    assert done.returncode == 0, done.stderr
    assert "delivered (HTTP 200)" in done.stdout
    assert [(g["verified"], g["body"]["alert"]["kind"]) for g in receiver.got] == [
        (True, "webhook.test")]  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    gone = _add(env, f"http://127.0.0.1:{dead}/hook")
    failed = run(env, "webhook", "test", str(gone["webhook_id"]), "--timeout", "2")
    assert failed.returncode == 1 and "not delivered" in failed.stderr
    assert failed.stderr.count("\n") == 1


def test_alerts_run_delivers_after_a_retry_and_alerts_list_shows_it(
    env: dict[str, str], receiver: Receiver
) -> None:
    made = _add(env, receiver.url, "--kinds", "breaker.opened")
    receiver.secret = made["secret"]
    assert run(env, "node", "register", "exec-1").returncode == 0
    assert run(env, "breaker", "open", "exec-1", "--why", "three crashes").returncode == 0
    receiver.answers = [503]
    first = run(env, "alerts", "run", "--once", "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert (len(report["new_alerts"]), report["attempted"], report["failed"]) == (1, 1, 1)
    [alert_id] = report["new_alerts"]
    listed = json.loads(run(env, "alerts", "list", "--json").stdout)["alerts"]
    assert [(a["alert_id"], a["deliveries"][0]["state"], a["deliveries"][0]["last_status"])
            for a in listed] == [(alert_id, "pending", 503)]  # fmt: skip
    # The retry is due after its back-off: make it due now, as the clock would.
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(env["ONSTATION_DB"])) as conn, conn:
        conn.execute("UPDATE alert_delivery SET next_attempt_at = 0")
    second = json.loads(run(env, "alerts", "run", "--once", "--json").stdout)
    assert (second["new_alerts"], second["delivered"]) == ([], 1)
    third = json.loads(run(env, "alerts", "run", "--once", "--json").stdout)
    assert third["attempted"] == 0
    assert [g["status"] for g in receiver.got] == [503, 200]
    human = run(env, "alerts", "list").stdout
    assert "breaker.opened" in human and "delivered (2 attempt(s))" in human


# -- a relief never waits on a receiver -----------------------------------------------------


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                   env={**os.environ, **GIT})  # fmt: skip


class _Hanging:
    """A receiver that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"

    def close(self) -> None:
        for conn in self.accepted:
            conn.close()
        self.sock.close()


def test_a_relief_is_not_slowed_by_a_hanging_receiver(env: dict[str, str], tmp_path: Path) -> None:
    """The relief ends BLOCKED (its respawn cap is used up) while the only subscriber hangs:
    it finishes without one connection to the receiver; ``alerts run`` then makes the one
    attempt, bounded by its timeout, and records the failure."""
    hanging = _Hanging()
    try:
        app = tmp_path / "app"
        app.mkdir()
        _git(app, "init", "-q", "-b", "main")
        (app / "README.md").write_text("work\n")
        _git(app, "add", "README.md")
        _git(app, "commit", "-q", "-m", "work")
        env = {**env, **GIT, "ONSTATION_KEYS_DIR": str(tmp_path / "keys")}
        assert run(env, "node", "register", "app", "--spawner", "lead").returncode == 0
        assert run(env, "install", "claude-code", "--project", str(app), "--node",
                   "app").returncode == 0  # fmt: skip
        hook = run(env, "hook", "claude-code", "SessionStart", stdin=json.dumps(
            {"session_id": "s-1", "cwd": str(app), "hook_event_name": "SessionStart",
             "source": "startup"}))  # fmt: skip
        assert hook.returncode == 0, hook.stderr
        _add(env, hanging.url)
        for _ in range(3):
            assert run(env, "respawn", "request", "app").returncode == 0
        relief = run(env, "relieve", "app", "--harness", "command", "--execution-class", "fake",
                     "--command", "true", "--brief-wait", "0", "--json")  # fmt: skip
        assert relief.returncode == 4, relief.stdout + relief.stderr
        assert json.loads(relief.stdout)["verdict"] == "BLOCKED"
        # The relief is over and nothing reached the receiver, nothing was attempted.
        assert hanging.accepted == []
        with Ledger.open(env["ONSTATION_DB"]) as ledger:
            assert ledger.alerts() == []  # detection has not even run
        done = run(env, "alerts", "run", "--once", "--timeout", "1", "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert (report["attempted"], report["failed"]) == (1, 1)
        assert len(hanging.accepted) == 1
        with Ledger.open(env["ONSTATION_DB"]) as ledger:
            [alert] = ledger.alerts()
            assert (alert.kind, alert.node) == ("relief.blocked", "app")
            [owed] = ledger.deliveries(alert.alert_id)
            assert owed.state == "pending" and "timed out" in (owed.last_error or "")
    finally:
        hanging.close()
