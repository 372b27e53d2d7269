"""``onstation serve`` runs the alerts loop (issue 15): a breaker opened while the service
runs reaches a webhook subscriber as one signed POST, without anyone running
``onstation alerts``; ``--no-alerts`` leaves deliveries to a separate ``alerts run``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from test_serve import ONSTATION, _run, serving

from onstation.api.webhooks import (
    ALERT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    verify_signature,
)
from onstation.ledger import Ledger


@contextmanager
def receiver(secret: list[str]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    got: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            ok = verify_signature(secret[0], timestamp=self.headers.get(TIMESTAMP_HEADER),
                                  signature=self.headers.get(SIGNATURE_HEADER), body=body,
                                  now=datetime.now(UTC))  # fmt: skip
            got.append({"verified": ok, "alert": self.headers.get(ALERT_HEADER),
                        "body": json.loads(body)})  # fmt: skip
            self.send_response(200 if ok else 401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    finally:
        server.shutdown()
        server.server_close()


def _wait_for(got: list[dict[str, Any]], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not got and time.monotonic() < deadline:
        time.sleep(0.1)


def test_serve_delivers_a_signed_alert_for_a_breaker_opened_while_it_runs(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.register_node("exec-1")
    secret: list[str] = []
    with receiver(secret) as (url, got):
        added = _run(ONSTATION, "webhook", "add", url, "--db", db, "--json")
        assert added.returncode == 0, added.stderr
        secret.append(json.loads(added.stdout)["secret"])
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
    secret: list[str] = []
    with receiver(secret) as (url, got):
        added = _run(ONSTATION, "webhook", "add", url, "--db", db, "--json")
        secret.append(json.loads(added.stdout)["secret"])
        with serving(db, "--no-alerts", "--alert-interval", "0.2"):
            assert _run(ONSTATION, "breaker", "open", "exec-1", "--why", "x",
                        "--db", db).returncode == 0  # fmt: skip
            time.sleep(1.5)
        assert got == []
