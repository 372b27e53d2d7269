"""Webhook bodies, signatures, the retry schedule and the one HTTP POST (issue 15).

Everything but :func:`http_post` is pure: the time and the jitter are passed in, so tests
and the simulation drive them without sleeping.

A request carries ``X-Onstation-Timestamp`` (Unix seconds) and ``X-Onstation-Signature:
v1=<hex>``, the HMAC-SHA256, keyed with the subscription's secret, of the bytes
``<timestamp>.<body>``. A receiver recomputes it over the raw body it got, compares in
constant time and refuses a timestamp too far from its own clock (a replay); see
:func:`verify_signature`, which a Python receiver may import as it is. Delivery is at least
once: a receiver that must act once keys on ``X-Onstation-Alert`` (the alert's stable id).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from onstation.ledger.alert_records import Alert

SIGNATURE_HEADER = "X-Onstation-Signature"
TIMESTAMP_HEADER = "X-Onstation-Timestamp"
ALERT_HEADER = "X-Onstation-Alert"
#: The version tag of the signature scheme, the ``v1=`` of the signature header.
SCHEME = "v1"
#: How far a receiver's clock may be from the timestamp before it refuses the request.
DEFAULT_TOLERANCE = timedelta(minutes=5)
USER_AGENT = "onstation-alerts/1"

#: A short title per alert kind, for people (the Slack header, the generic body's ``title``).
TITLES = {
    "relief.quarantined": "Relief QUARANTINED",
    "relief.hibernate": "Relief HIBERNATE",
    "relief.blocked": "Relief BLOCKED",
    "relief.birth_failed": "Successor BIRTH_FAILED",
    "breaker.opened": "Breaker opened",
    "crash_loop": "Crash loop",
    "heartbeat.stopped": "Heartbeat stopped",
    "effect.ambiguous": "AMBIGUOUS effect",
    "webhook.test": "Test alert",
}


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how late a delivery is tried again: exponential back-off from ``base``
    doubling per attempt up to ``cap``, each delay scaled by a jitter in [0.5, 1), and no
    attempt after the ``max_attempts``-th."""

    max_attempts: int = 8
    base: timedelta = timedelta(seconds=10)
    cap: timedelta = timedelta(minutes=30)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts: must be at least 1")
        if self.base <= timedelta(0) or self.cap < self.base:
            raise ValueError("base must be positive and cap at least base")


@dataclass(frozen=True)
class SendResult:
    """What one POST got: delivered (a 2xx answer), the status, or why it failed."""

    delivered: bool
    status: int | None
    error: str | None


#: Sends one request: ``(url, body, headers, timeout seconds) -> SendResult``; never raises.
Sender = Callable[[str, bytes, Mapping[str, str], float], SendResult]


def backoff(attempt: int, policy: RetryPolicy, jitter: float) -> timedelta:
    """The wait after failed attempt number ``attempt`` (1 is the first): ``base * 2**(n-1)``
    capped, times ``0.5 + jitter / 2`` (jitter in [0, 1), so retries of many deliveries
    spread instead of arriving together)."""
    if attempt < 1:
        raise ValueError("attempt: must be at least 1")
    if not 0.0 <= jitter < 1.0:
        raise ValueError("jitter: must be in [0, 1)")
    # Beyond 2**30 the cap has long been reached; the exponent stays small.
    raw: timedelta = policy.base * (2 ** min(attempt - 1, 30))
    wait: timedelta = min(raw, policy.cap) * (0.5 + jitter / 2)
    return wait


def next_attempt_at(
    attempt: int, now: datetime, policy: RetryPolicy, jitter: float
) -> datetime | None:
    """When to try again after failed attempt ``attempt``; None when it was the last."""
    if attempt >= policy.max_attempts:
        return None
    return now + backoff(attempt, policy, jitter)


# -- bodies -----------------------------------------------------------------------------------


def _dumps(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str).encode("utf-8")  # fmt: skip


def generic_body(alert: Alert, *, webhook_id: int, attempt: int) -> dict[str, Any]:
    """The generic JSON body: the alert as ``alerts list --json`` shows it, its title, and
    which subscription and attempt this request is."""
    return {
        "type": "onstation.alert",
        "version": 1,
        "title": TITLES.get(alert.kind, alert.kind),
        "alert": alert.to_json(),
        "webhook_id": webhook_id,
        "attempt": attempt,
    }


def _mrkdwn(text: str) -> str:
    # Slack reads &, < and > as its own markup: escaped, ledger text stays text.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(alert: Alert) -> dict[str, Any]:
    """A Slack incoming-webhook body: ``text`` (the notification's fallback) and Block Kit
    ``blocks`` (a header, the summary, and the alert's id, identity and time)."""
    title = TITLES.get(alert.kind, alert.kind)
    who = alert.node or "the ledger"
    if alert.generation is not None:
        who += f" (generation {alert.generation})"
    context = f"alert `{alert.alert_id}` · {who} · {alert.at.isoformat()}"
    return {
        "text": _mrkdwn(f"onstation: {title}: {alert.summary}")[:3000],
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": _mrkdwn(alert.summary)[:3000]}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": _mrkdwn(context)[:3000]}]},
        ],
    }


def render(alert: Alert, fmt: str, *, webhook_id: int, attempt: int) -> bytes:
    """The request body for a subscription of format ``fmt`` (``generic`` or ``slack``)."""
    if fmt == "slack":
        return _dumps(slack_body(alert))
    if fmt == "generic":
        return _dumps(generic_body(alert, webhook_id=webhook_id, attempt=attempt))
    raise ValueError(f"unknown webhook format {fmt!r}")


# -- signatures -------------------------------------------------------------------------------


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value: ``v1=`` and the hex HMAC-SHA256 of ``<ts>.<body>``."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body, hashlib.sha256)
    return f"{SCHEME}={mac.hexdigest()}"


def request_headers(secret: str, body: bytes, *, now: datetime, alert_id: str) -> dict[str, str]:
    """Every header of one request, the signature made at ``now``."""
    timestamp = int(now.timestamp())
    return {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": USER_AGENT,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(secret, timestamp, body),
        ALERT_HEADER: alert_id,
    }


def verify_signature(
    secret: str, *, timestamp: str | None, signature: str | None, body: bytes, now: datetime,
    tolerance: timedelta = DEFAULT_TOLERANCE,
) -> bool:  # fmt: skip
    """Whether a request's signature is this secret's over this very body, made within
    ``tolerance`` of ``now``. Any header missing or malformed is simply False."""
    if not timestamp or not signature or not timestamp.isdigit() or len(timestamp) > 12:
        return False
    if abs(now.timestamp() - int(timestamp)) > tolerance.total_seconds():
        return False
    expected = sign(secret, int(timestamp), body)
    # More than one signature may be offered (a secret being rotated): any one may match.
    offered = [s.strip() for s in signature.split(",")]
    return any(hmac.compare_digest(expected.encode(), s.encode()) for s in offered if s.isascii())


# -- the one side effect ----------------------------------------------------------------------


def http_post(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> SendResult:
    """POST ``body`` to ``url`` with the standard library, no redirects followed, every
    socket operation bounded by ``timeout`` seconds. Never raises: a failure is a result."""
    import base64
    import http.client
    import ssl
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    connection: http.client.HTTPConnection
    try:
        host, port = parts.hostname or "", parts.port
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                host, port, timeout=timeout, context=ssl.create_default_context()
            )
        else:
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
        sent = dict(headers)
        if parts.username is not None:
            creds = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            sent["Authorization"] = "Basic " + base64.b64encode(creds.encode()).decode()
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            connection.request("POST", path, body=body, headers=sent)
            response = connection.getresponse()
            response.read(65536)  # the answer is not used; read a little so the socket closes
            status = int(response.status)
        finally:
            connection.close()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return SendResult(False, None, f"{type(exc).__name__}: {exc}"[:500])
    if 200 <= status < 300:
        return SendResult(True, status, None)
    return SendResult(False, status, f"HTTP {status}")


__all__ = [
    "ALERT_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "RetryPolicy",
    "SendResult",
    "Sender",
    "backoff",
    "generic_body",
    "http_post",
    "next_attempt_at",
    "render",
    "request_headers",
    "sign",
    "slack_body",
    "verify_signature",
]
