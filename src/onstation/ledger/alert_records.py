"""The records of the console's alerts (:mod:`onstation.ledger.alerts`): subscriptions,
alerts, deliveries, attempts and relief endings, and how a webhook URL is checked and shown.

Kept apart from the store so that a command which opens the ledger does not build these
classes (a frozen dataclass costs about an eighth of the interpreter's start-up): the store
imports them when it makes one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from onstation.core.errors import BadInput
from onstation.core.types import Record

MAX_URL_LENGTH = 2048


@dataclass(frozen=True)
class Webhook(Record):
    """A webhook subscription (its secret is never part of the record)."""

    webhook_id: int
    url: str
    format: str
    kinds: list[str]
    created_at: datetime
    created_by: str
    disabled_at: datetime | None
    disabled_by: str | None

    def to_json(self) -> dict[str, Any]:
        """The record with the URL shown as :func:`display_url` does (a Slack URL's path is
        its credential)."""
        return {**super().to_json(), "url": display_url(self.url)}


@dataclass(frozen=True)
class Alert(Record):
    """One alert: a condition an operator must hear about, under a stable id."""

    alert_id: str
    kind: str
    node: str | None
    generation: int | None
    summary: str
    evidence: dict[str, Any]
    at: datetime
    detected_at: datetime | None = None


@dataclass(frozen=True)
class Delivery(Record):
    """What was done to deliver one alert to one subscription."""

    alert_id: str
    webhook_id: int
    attempts: int
    next_attempt_at: datetime | None
    last_status: int | None
    last_error: str | None
    delivered_at: datetime | None
    gave_up_at: datetime | None

    @property
    def state(self) -> str:
        """``delivered``, ``gave_up`` or ``pending``."""
        if self.delivered_at is not None:
            return "delivered"
        return "gave_up" if self.gave_up_at is not None else "pending"

    def to_json(self) -> dict[str, Any]:
        """The record and its :attr:`state`."""
        return {**super().to_json(), "state": self.state}


@dataclass(frozen=True)
class Attempt(Record):
    """One attempt to deliver: the HTTP status (None when no answer came) and the error."""

    alert_id: str
    webhook_id: int
    attempt: int
    at: datetime
    status: int | None
    error: str | None
    delivered: bool


@dataclass(frozen=True)
class DueDelivery:
    """A delivery claimed for one attempt, with what sending it needs."""

    alert: Alert
    webhook_id: int
    url: str
    format: str
    secret: str = field(repr=False)
    attempts: int = 0


@dataclass(frozen=True)
class ReliefEnding(Record):
    """How a relief ended, as detection reads it."""

    relief_id: int
    node: str
    state: str
    verdict: str | None
    from_generation: int
    to_generation: int | None
    cause: str
    finished_at: datetime | None


def check_webhook_url(url: str) -> str:
    """``url`` when it is an absolute http(s) URL with a host; else :class:`BadInput`."""
    from urllib.parse import urlsplit  # not on the hook path, which imports the ledger

    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise BadInput(f"url: must be 1 to {MAX_URL_LENGTH} characters", field="url")
    if not url.isascii() or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise BadInput("url: must be ASCII without spaces or control characters", field="url")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadInput(f"url: not a valid URL ({exc})", field="url") from None
    if parts.scheme not in ("http", "https"):
        raise BadInput("url: must start with http:// or https://", field="url")
    if not parts.hostname:
        raise BadInput("url: names no host", field="url")
    if port == 0:
        raise BadInput("url: port 0 is not a port", field="url")
    return url


def display_url(url: str) -> str:
    """``url`` with what may be a credential hidden: the user info, the query, and the path
    past its first segment (a Slack webhook URL's path is its secret)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    segments = [s for s in parts.path.split("/") if s]
    path = "/" + segments[0] if segments else ""
    if len(segments) > 1 or parts.query:
        path += "/…"
    return f"{parts.scheme}://{netloc}{path}"


__all__ = [
    "MAX_URL_LENGTH",
    "Alert",
    "Attempt",
    "Delivery",
    "DueDelivery",
    "ReliefEnding",
    "Webhook",
    "check_webhook_url",
    "display_url",
]
