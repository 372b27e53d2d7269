"""Webhook delivery against a real receiver on 127.0.0.1 that checks signatures: delivered
exactly once after a retry (both formats), a tampered signature refused, a dead receiver's
failures recorded and bounded, and the loop on its own thread.

Time is the ledger's fake clock: a retry is made due by moving the clock, never by sleeping.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from onstation.api.alerts import AlertRunner, start_background
from onstation.api.webhooks import (
    ALERT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    RetryPolicy,
    http_post,
    verify_signature,
)
from onstation.ledger import Ledger
from onstation.testing import FakeClock

SECRET = "whsec_" + "k" * 40


@dataclass
class Receiver:
    """What the receiver got: every request, verified or not, and its answers to come."""

    clock: Callable[[], datetime]
    answers: list[int] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def accepted(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["verified"] and r["status"] == 200]


def _serve(receiver: Receiver) -> Iterator[Receiver]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            verified = verify_signature(
                SECRET, timestamp=self.headers.get(TIMESTAMP_HEADER),
                signature=self.headers.get(SIGNATURE_HEADER), body=body, now=receiver.clock(),
            )  # fmt: skip
            # A request whose signature fails is refused whatever comes next (401).
            status = (receiver.answers.pop(0) if receiver.answers else 200) if verified else 401
            receiver.requests.append({"body": json.loads(body), "verified": verified,
                                      "status": status, "path": self.path,
                                      "alert": self.headers.get(ALERT_HEADER)})  # fmt: skip
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def receiver(clock: FakeClock) -> Iterator[Receiver]:
    yield from _serve(Receiver(clock))


def _dead_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _breaker_alert(ledger: Ledger) -> None:
    ledger.register_node("exec-1")
    ledger.open_breaker("exec-1", by="ada", why="three crashes")


@pytest.mark.parametrize("fmt", ["generic", "slack"])
def test_an_alert_is_delivered_exactly_once_after_a_retry(
    ledger: Ledger, clock: FakeClock, receiver: Receiver, fmt: str
) -> None:
    hook = ledger.add_webhook(f"{receiver.url}/hook", format=fmt, secret=SECRET, by="ada")
    _breaker_alert(ledger)
    receiver.answers = [500]  # the first attempt fails, the next is answered 200
    runner = AlertRunner(ledger, jitter=lambda: 0.0, policy=RetryPolicy(), timeout=5)
    first = runner.run_once()
    assert (first.attempted, first.delivered, first.failed) == (1, 0, 1)
    [alert_id] = first.new_alerts
    [owed] = ledger.deliveries(alert_id)
    assert (owed.state, owed.attempts, owed.last_status, owed.last_error) == (
        "pending", 1, 500, "HTTP 500")  # fmt: skip
    assert owed.next_attempt_at is not None
    # Not due yet: another pass sends nothing.
    assert runner.run_once().attempted == 0
    clock.now = owed.next_attempt_at
    second = runner.run_once()
    assert (second.attempted, second.delivered) == (1, 1)
    for _ in range(3):
        clock.advance(hours=1)
        assert runner.run_once().attempted == 0
    assert [r["status"] for r in receiver.requests] == [500, 200]
    assert all(r["verified"] and r["alert"] == alert_id for r in receiver.requests)
    [delivered] = receiver.accepted()
    [done] = ledger.deliveries(alert_id)
    assert (done.state, done.attempts, done.webhook_id) == ("delivered", 2, hook.webhook_id)
    assert [(a.status, a.delivered) for a in ledger.attempts(alert_id, hook.webhook_id)] == [
        (500, False), (200, True)]  # fmt: skip
    body = delivered["body"]
    if fmt == "generic":
        assert body["alert"]["alert_id"] == alert_id and body["attempt"] == 2
        assert body["alert"]["kind"] == "breaker.opened" and body["title"] == "Breaker opened"
    else:
        assert set(body) == {"text", "blocks"} and "three crashes" in body["text"]
        assert [b["type"] for b in body["blocks"]] == ["header", "section", "context"]
        assert alert_id in body["blocks"][2]["elements"][0]["text"]


def test_a_tampered_signature_fails_verification(
    ledger: Ledger, clock: FakeClock, receiver: Receiver
) -> None:
    def tamper(url: str, body: bytes, headers: Any, timeout: float) -> Any:
        forged = dict(headers)
        forged[SIGNATURE_HEADER] = forged[SIGNATURE_HEADER][:-4] + "0000"
        return http_post(url, body, forged, timeout)

    hook = ledger.add_webhook(receiver.url, secret=SECRET, by="ada")
    _breaker_alert(ledger)
    report = AlertRunner(ledger, send=tamper, jitter=lambda: 0.0).run_once()
    assert (report.attempted, report.delivered) == (1, 0)
    assert [(r["verified"], r["status"]) for r in receiver.requests] == [(False, 401)]
    [owed] = ledger.deliveries(report.new_alerts[0])
    assert (owed.state, owed.last_status, owed.webhook_id) == ("pending", 401, hook.webhook_id)


def test_a_body_changed_on_the_way_or_signed_with_another_secret_fails(clock: FakeClock) -> None:
    from onstation.api.webhooks import request_headers

    body = b'{"alert":{"kind":"crash_loop"}}'
    headers = request_headers(SECRET, body, now=clock.now, alert_id="a")
    args = {"timestamp": headers[TIMESTAMP_HEADER], "signature": headers[SIGNATURE_HEADER]}
    assert verify_signature(SECRET, body=body, now=clock.now, **args)
    assert not verify_signature(SECRET, body=body.replace(b"crash", b"trash"), now=clock.now,
                                **args)  # fmt: skip
    assert not verify_signature("whsec_other" + "x" * 30, body=body, now=clock.now, **args)
    clock.advance(minutes=6)  # a replay, later than the tolerance
    assert not verify_signature(SECRET, body=body, now=clock.now, **args)


def test_a_dead_receiver_gets_recorded_failures_and_bounded_attempts(
    ledger: Ledger, clock: FakeClock
) -> None:
    hook = ledger.add_webhook(f"http://127.0.0.1:{_dead_port()}/hook", secret=SECRET, by="ada")
    _breaker_alert(ledger)
    runner = AlertRunner(ledger, jitter=lambda: 0.5, policy=RetryPolicy(max_attempts=4),
                         timeout=2)  # fmt: skip
    alert_id = runner.run_once().new_alerts[0]
    for _ in range(20):  # far more passes than attempts allowed
        clock.advance(hours=1)
        runner.run_once()
    [owed] = ledger.deliveries(alert_id)
    assert (owed.state, owed.attempts, owed.next_attempt_at) == ("gave_up", 4, None)
    attempts = ledger.attempts(alert_id, hook.webhook_id)
    assert len(attempts) == 4
    assert all(not a.delivered and a.status is None and a.error for a in attempts)
    assert "Connection" in (attempts[0].error or "")


def test_retries_back_off_exponentially_with_the_jitter_given(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.add_webhook(f"http://127.0.0.1:{_dead_port()}/hook", secret=SECRET, by="ada")
    _breaker_alert(ledger)
    policy = RetryPolicy(max_attempts=5)
    runner = AlertRunner(ledger, jitter=lambda: 0.0, policy=policy, timeout=2)
    alert_id = runner.run_once().new_alerts[0]
    waits = []
    for _ in range(3):
        [owed] = ledger.deliveries(alert_id)
        assert owed.next_attempt_at is not None
        waits.append((owed.next_attempt_at - clock.now).total_seconds())
        clock.now = owed.next_attempt_at
        runner.run_once()
    # jitter 0 gives half of base * 2**(n-1): 5, 10, 20 seconds.
    assert waits == [5.0, 10.0, 20.0]


def test_the_loop_runs_on_its_own_thread_and_stops(ledger_url: str, receiver: Receiver) -> None:
    from datetime import UTC

    receiver.clock = lambda: datetime.now(UTC)
    with Ledger.open(ledger_url) as ledger:
        ledger.add_webhook(receiver.url, secret=SECRET, by="ada")
        _breaker_alert(ledger)
    delivered = threading.Event()
    background = start_background(lambda: Ledger.open(ledger_url), interval=0.05)
    try:
        for _ in range(400):
            if receiver.accepted():
                delivered.set()
                break
            background.thread.join(0.05)
    finally:
        background.stop(timeout=30)
    assert delivered.is_set() and not background.thread.is_alive()
    assert background.last_error is None
