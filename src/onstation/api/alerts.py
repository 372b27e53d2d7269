"""Alerts: what an operator must hear about, found in the ledger and sent to webhooks
(issue 15).

Detection is pure (:func:`detect`): from the history's events, how the reliefs they name
ended, and the LIVE leases past their expiry, it makes
:class:`~onstation.ledger.alert_records.Alert` records under stable ids, so an alert is
recorded, and sent to each subscription, once however often detection runs. The conditions:

- ``relief.quarantined``, ``relief.hibernate``, ``relief.blocked``: a relief that finished
  without a successor (NOT_LAUNCHED, NOT_STARTED or BLOCKED) with that verdict; one alert
  per relief (``relief:<id>``).
- ``relief.birth_failed``: a relief whose successor never became RUNNING (``relief:<id>``).
- ``breaker.opened``: each opening of an identity's breaker (``breaker.opened:<seq>``).
- ``crash_loop``: the respawn governor refused a respawn because the identity used up its
  N respawns in the window (``respawn limit reached``; 3 per 24 h unless configured) — the
  governor's own rule, not a second policy. One alert per lock-out, keyed by the moment the
  window reopens (``crash_loop:<node>:<reopens_at>``), however many requests it refuses.
- ``heartbeat.stopped``: a LIVE lease past its expiry and never released, or a lease the
  ledger ended as EXPIRED; one alert per lease (``heartbeat.stopped:<lease_id>``).
- ``effect.ambiguous``: an effect that became AMBIGUOUS (``effect.ambiguous:<effect_id>``).

:class:`AlertRunner` is the loop around it: detect, record, deliver the due deliveries with
:mod:`onstation.api.webhooks`, record every attempt. It runs on its own (``onstation alerts
run``) or as the service's background thread (:func:`start_background`); it is never called
by a relief or a hook, so a dead receiver never slows a relief down.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from onstation.api.webhooks import (
    RetryPolicy,
    Sender,
    http_post,
    next_attempt_at,
    render,
    request_headers,
)
from onstation.core.types import BodyLease, Event, Record
from onstation.ledger.alert_records import Alert, Delivery, DueDelivery, ReliefEnding
from onstation.ledger.alerts import TEST_KIND

if TYPE_CHECKING:
    from onstation.ledger import Ledger

#: The relief events that finish a relief without a RUNNING successor.
RELIEF_END_EVENTS = {
    "relief.not_launched": "NOT_LAUNCHED",
    "relief.not_started": "NOT_STARTED",
    "relief.blocked": "BLOCKED",
    "relief.birth_failed": "BIRTH_FAILED",
}
#: The verdicts a relief ending without a successor alerts on, and the alert's kind.
VERDICT_KINDS = {
    "QUARANTINED": "relief.quarantined",
    "HIBERNATE": "relief.hibernate",
    "BLOCKED": "relief.blocked",
}
#: The governor's reason when an identity has used up its respawns in the window
#: (:func:`onstation.core.governor.decide_respawn`).
CRASH_LOOP_REASON = "respawn limit reached"


# -- detection (pure) -------------------------------------------------------------------------


def relief_ids(events: Iterable[Event]) -> set[int]:
    """The reliefs whose ending detection must read to judge ``events``."""
    found: set[int] = set()
    for event in events:
        rid = event.detail.get("relief_id")
        if event.kind in RELIEF_END_EVENTS and isinstance(rid, int):
            found.add(rid)
    return found


def _relief_alert(event: Event, endings: Mapping[int, ReliefEnding]) -> Alert | None:
    rid = event.detail.get("relief_id")
    if not isinstance(rid, int) or event.node is None:
        return None
    ending = endings.get(rid)
    state = RELIEF_END_EVENTS[event.kind]
    # The finishing event often carries no verdict (it was given at DECIDED): the relief's
    # record has it.
    verdict = event.detail.get("verdict") or (ending.verdict if ending is not None else None)
    if state == "BIRTH_FAILED":
        kind = "relief.birth_failed"
    elif isinstance(verdict, str) and verdict in VERDICT_KINDS:
        kind = VERDICT_KINDS[verdict]
    else:
        return None
    evidence: dict[str, object] = {"event_seq": event.seq, "relief_id": rid, "state": state,
                                   "verdict": verdict}  # fmt: skip
    if ending is not None:
        evidence.update(cause=ending.cause, from_generation=ending.from_generation,
                        to_generation=ending.to_generation)  # fmt: skip
    if kind == "relief.birth_failed":
        summary = (
            f"relief {rid} of {event.node}: the successor (generation "
            f"{event.generation}) never became RUNNING; no body holds the identity"
        )
    else:
        summary = (f"relief {rid} of {event.node} ended {verdict} ({state}): no successor "
                   "launched; it waits for an operator")  # fmt: skip
    return Alert(f"relief:{rid}", kind, event.node, event.generation, summary, evidence,
                 event.at)  # fmt: skip


def _event_alert(event: Event, endings: Mapping[int, ReliefEnding]) -> Alert | None:
    node, d = event.node, event.detail
    if event.kind in RELIEF_END_EVENTS:
        return _relief_alert(event, endings)
    if event.kind == "breaker.opened":
        return Alert(f"breaker.opened:{event.seq}", "breaker.opened", node, event.generation,
                     f"breaker opened on {node} by {event.actor}: {d.get('why', '')}".strip(),
                     {"event_seq": event.seq, "why": d.get("why")}, event.at)  # fmt: skip
    if event.kind == "respawn.blocked":
        reason = str(d.get("reason") or "")
        reopens = d.get("reopens_at")
        if not reason.startswith(CRASH_LOOP_REASON) or not reopens:
            return None  # an open breaker or respawns switched off: not a loop
        return Alert(f"crash_loop:{node}:{reopens}", "crash_loop", node, event.generation,
                     f"{node} is in a crash loop: {reason}; respawns blocked until {reopens}",
                     {"event_seq": event.seq, "reason": reason, "reopens_at": reopens},
                     event.at)  # fmt: skip
    if event.kind == "effect.ambiguous":
        effect_id = d.get("effect_id")
        if not isinstance(effect_id, str):
            return None
        return Alert(f"effect.ambiguous:{effect_id}", "effect.ambiguous", node,
                     event.generation,
                     f"effect {effect_id} of {node} is AMBIGUOUS: it may or may not have "
                     "happened; an operator must resolve it (observed or compensated)",
                     {"event_seq": event.seq, "effect_id": effect_id,
                      "previous_state": d.get("previous_state")}, event.at)  # fmt: skip
    if event.kind == "lease.expired":
        lease_id = d.get("lease_id")
        if not isinstance(lease_id, int):
            return None
        return Alert(f"heartbeat.stopped:{lease_id}", "heartbeat.stopped", node,
                     event.generation,
                     f"{node} generation {event.generation} stopped heartbeating: lease "
                     f"{lease_id} expired unreleased", {"event_seq": event.seq,
                     "lease_id": lease_id}, event.at)  # fmt: skip
    return None


def _lease_alert(lease: BodyLease, now: datetime) -> Alert | None:
    if lease.state.value != "LIVE" or lease.expires_at >= now:
        return None
    return Alert(f"heartbeat.stopped:{lease.lease_id}", "heartbeat.stopped", lease.node,
                 lease.generation,
                 f"{lease.node} generation {lease.generation} stopped heartbeating: lease "
                 f"{lease.lease_id} expired at {lease.expires_at.isoformat()} and was never "
                 "released",
                 {"lease_id": lease.lease_id, "holder": lease.holder,
                  "renewed_at": lease.renewed_at.isoformat(),
                  "expires_at": lease.expires_at.isoformat()}, lease.expires_at)  # fmt: skip


def detect(
    events: Sequence[Event],
    endings: Mapping[int, ReliefEnding],
    leases: Sequence[BodyLease],
    now: datetime,
) -> list[Alert]:
    """Every alert in ``events`` (oldest first; ``endings`` holds the reliefs
    :func:`relief_ids` names) and in the state of ``leases`` at ``now``: each id once, in
    the order first found."""
    found: dict[str, Alert] = {}
    for event in events:
        alert = _event_alert(event, endings)
        if alert is not None:
            found.setdefault(alert.alert_id, alert)
    for lease in leases:
        alert = _lease_alert(lease, now)
        if alert is not None:
            found.setdefault(alert.alert_id, alert)
    return list(found.values())


def make_test_alert(webhook_id: int, now: datetime, by: str) -> Alert:
    """The alert ``webhook test`` sends to one subscription."""
    stamp = now.strftime("%Y%m%dT%H%M%S.%fZ")
    return Alert(f"webhook.test:{webhook_id}:{stamp}", TEST_KIND, None, None,
                 f"test alert for webhook {webhook_id}, sent by {by}",
                 {"webhook_id": webhook_id}, now)  # fmt: skip


# -- the loop ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunReport(Record):
    """What one pass of :meth:`AlertRunner.run_once` did."""

    cursor: int
    detected: int
    new_alerts: list[str]
    attempted: int
    delivered: int
    failed: int
    gave_up: int


@dataclass(frozen=True)
class DeliveryReport(Record):
    """The attempts of one delivery pass."""

    attempted: int
    delivered: int
    failed: int
    gave_up: int


class AlertRunner:
    """Detect, record and deliver, one pass at a time, over one ledger.

    ``send`` makes the one HTTP request (:func:`~onstation.api.webhooks.http_post` unless a
    test passes another); ``jitter`` gives a number in [0, 1) per retry; the time is the
    ledger's clock. So a test drives retries by moving a fake clock, with no sleep.
    """

    def __init__(
        self, ledger: Ledger, *, send: Sender = http_post,
        jitter: Callable[[], float] = random.random, policy: RetryPolicy | None = None,
        timeout: float = 5.0, batch: int = 500, max_batches: int = 20, deliver_limit: int = 50,
    ) -> None:  # fmt: skip
        if not 0 < timeout <= 300:
            raise ValueError("timeout: must be in (0, 300] seconds")
        self.ledger = ledger
        self.send = send
        self.jitter = jitter
        self.policy = policy or RetryPolicy()
        self.timeout = timeout
        self.batch = batch
        self.max_batches = max_batches
        self.deliver_limit = deliver_limit

    @property
    def _hold(self) -> timedelta:
        # A claim outlives the attempt it covers (a connect and a read, each bounded by the
        # timeout), so only a runner that died leaves it to lapse.
        return timedelta(seconds=2 * self.timeout + 30)

    def detect_once(self) -> tuple[int, int, list[Alert]]:
        """Read the history from the cursor (at most ``max_batches`` batches) and the
        overdue leases; record what is new. Returns (cursor, detected, new alerts)."""
        cursor = self.ledger.alert_cursor()
        detected, new = 0, []
        for _ in range(self.max_batches):
            events = self.ledger.events_after(cursor, limit=self.batch)
            if not events:
                break
            endings = self.ledger.relief_endings(relief_ids(events))
            found = detect(events, endings, [], self.ledger.now())
            detected += len(found)
            cursor = events[-1].seq
            new += self.ledger.record_alerts(found, cursor=cursor)
            if len(events) < self.batch:
                break
        found = detect([], {}, self.ledger.overdue_leases(), self.ledger.now())
        detected += len(found)
        new += self.ledger.record_alerts(found)
        return cursor, detected, new

    def deliver_once(self, *, alert_id: str | None = None) -> DeliveryReport:
        """Attempt every delivery due now (of one alert, with ``alert_id``), once each."""
        claimed = self.ledger.claim_due_deliveries(limit=self.deliver_limit, hold=self._hold,
                                                   alert_id=alert_id)  # fmt: skip
        delivered = failed = gave_up = 0
        for due in claimed:
            outcome = self.attempt(due)
            if outcome is None:
                continue
            if outcome.state == "delivered":
                delivered += 1
            else:
                failed += 1
                gave_up += outcome.state == "gave_up"
        return DeliveryReport(len(claimed), delivered, failed, gave_up)

    def attempt(self, due: DueDelivery) -> Delivery | None:
        """Send one claimed delivery once and record the attempt and what comes next."""
        number = due.attempts + 1
        body = render(due.alert, due.format, webhook_id=due.webhook_id, attempt=number)
        now = self.ledger.now()
        headers = request_headers(due.secret, body, now=now, alert_id=due.alert.alert_id)
        result = self.send(due.url, body, headers, self.timeout)
        retry_at = None
        if not result.delivered and due.alert.kind != TEST_KIND:  # a test is tried once
            retry_at = next_attempt_at(number, self.ledger.now(), self.policy, self.jitter())
        return self.ledger.record_attempt(due, delivered=result.delivered, status=result.status,
                                          error=result.error, retry_at=retry_at)  # fmt: skip

    def run_once(self) -> RunReport:
        """One pass: detect and record, then deliver what is due."""
        cursor, detected, new = self.detect_once()
        sent = self.deliver_once()
        return RunReport(cursor, detected, [a.alert_id for a in new], sent.attempted,
                         sent.delivered, sent.failed, sent.gave_up)  # fmt: skip

    def run(
        self, *, interval: float, stop: threading.Event,
        on_pass: Callable[[RunReport], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:  # fmt: skip
        """Pass after pass, ``interval`` seconds apart, until ``stop`` is set. A pass that
        fails (the database away for a moment) is reported and the loop goes on."""
        while not stop.is_set():
            try:
                report = self.run_once()
            except Exception as exc:
                if on_error is None:
                    raise
                on_error(exc)
            else:
                if on_pass is not None:
                    on_pass(report)
            stop.wait(interval)


class BackgroundAlerts:
    """The alert loop on a thread of its own, with its own ledger connection."""

    def __init__(self, thread: threading.Thread, stop: threading.Event) -> None:
        self.thread = thread
        self._stop = stop
        #: The last error a pass met (the loop goes on), for the service to show.
        self.last_error: str | None = None

    def stop(self, timeout: float | None = None) -> None:
        """Ask the loop to stop and wait for it (an attempt in flight ends by its timeout)."""
        self._stop.set()
        self.thread.join(timeout)


def start_background(
    open_ledger: Callable[[], Ledger], *, interval: float = 10.0, **options: object
) -> BackgroundAlerts:
    """Start the alert loop on a daemon thread (the service calls this at start-up).
    ``open_ledger`` opens the thread's own ledger: a connection is not shared across
    threads. ``options`` go to :class:`AlertRunner`."""
    if interval <= 0:
        raise ValueError("interval: must be positive")
    stop = threading.Event()
    holder: list[BackgroundAlerts] = []

    def remember(exc: Exception) -> None:
        holder[0].last_error = f"{type(exc).__name__}: {exc}"

    def main() -> None:
        ledger = open_ledger()
        try:
            runner = AlertRunner(ledger, **options)  # type: ignore[arg-type]
            runner.run(interval=interval, stop=stop, on_error=remember)
        finally:
            ledger.close()

    thread = threading.Thread(target=main, name="onstation-alerts", daemon=True)
    holder.append(BackgroundAlerts(thread, stop))
    thread.start()
    return holder[0]


__all__ = [
    "AlertRunner",
    "BackgroundAlerts",
    "DeliveryReport",
    "RunReport",
    "detect",
    "make_test_alert",
    "relief_ids",
    "start_background",
]
