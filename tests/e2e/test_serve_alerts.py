"""``onstation serve`` runs the alerts loop (issue 15): a breaker opened while the service
runs reaches a webhook subscriber as one signed POST, without anyone running
``onstation alerts``; ``--no-alerts`` leaves deliveries to a separate ``alerts run``."""

from __future__ import annotations

import json
import time
from pathlib import Path

from test_serve import ONSTATION, _run, serving
from webhook_receiver import receiving

from onstation.ledger import Ledger


def _wait_for(got: list[dict[str, object]], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not got and time.monotonic() < deadline:
        time.sleep(0.1)


def test_serve_delivers_a_signed_alert_for_a_breaker_opened_while_it_runs(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.register_node("exec-1")
    with receiving() as hook:
        added = _run(ONSTATION, "webhook", "add", hook.url, "--db", db, "--json")
        assert added.returncode == 0, added.stderr
        hook.secret = json.loads(added.stdout)["secret"]
        got = hook.got
        with serving(db, "--alert-interval", "0.2"):
            opened = _run(ONSTATION, "breaker", "open", "exec-1", "--why", "crash loop",
                          "--db", db)  # fmt: skip
            assert opened.returncode == 0, opened.stderr
            _wait_for(got)
            time.sleep(1.0)  # a second detection round must not send it again
        assert len(got) == 1, got
        assert got[0]["verified"]
        assert got[0]["body"]["alert"]["kind"] == "breaker.opened"
        assert got[0]["body"]["alert"]["node"] == "exec-1"


def test_serve_without_alerts_sends_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.register_node("exec-1")
    with receiving() as hook:
        added = _run(ONSTATION, "webhook", "add", hook.url, "--db", db, "--json")
        hook.secret = json.loads(added.stdout)["secret"]
        got = hook.got
        with serving(db, "--no-alerts", "--alert-interval", "0.2"):
            assert _run(ONSTATION, "breaker", "open", "exec-1", "--why", "x",
                        "--db", db).returncode == 0  # fmt: skip
            time.sleep(1.5)
        assert got == []
