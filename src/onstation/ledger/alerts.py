"""Alerts of the operator's console in the ledger: webhook subscriptions, detected alerts,
their deliveries and every delivery attempt, and the detection cursor (issue 15).

The ledger only keeps records here. What is an alert is decided by the pure detection in
:mod:`onstation.api.alerts`; sending, signing and the back-off schedule are in
:mod:`onstation.api.webhooks`. Nothing here is called by a relief or a hook: delivery runs
in its own loop, so a dead receiver can never slow a relief down.

An alert is recorded once under its stable id however often detection sees its condition;
a delivery is owed once per (alert, subscription), only to subscriptions in force that were
created before the condition arose (an old ledger's history is not replayed to a new
subscriber). A delivery is claimed for one attempt by a compare-and-swap on its due time, so
two runners never send the same attempt; each attempt is kept, failed or not.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from onstation.core.errors import BadInput, Conflict
from onstation.core.names import validate_free_text
from onstation.ledger.backends import Row, Tx
from onstation.ledger.base import LedgerBase, _at, from_us, to_us

TYPE_CHECKING = False  # the records are built only when a method makes one
if TYPE_CHECKING:
    from onstation.core.types import BodyLease
    from onstation.ledger.alert_records import (
        Alert,
        Attempt,
        Delivery,
        DueDelivery,
        ReliefEnding,
        Webhook,
    )

#: Every kind of alert detection raises (``webhook add --kinds`` chooses among them).
ALERT_KINDS = (
    "relief.quarantined",
    "relief.hibernate",
    "relief.blocked",
    "relief.birth_failed",
    "breaker.opened",
    "crash_loop",
    "heartbeat.stopped",
    "effect.ambiguous",
)
#: The kind of the alert ``webhook test`` sends (to the one subscription tested).
TEST_KIND = "webhook.test"
WEBHOOK_FORMATS = ("generic", "slack")
MIN_SECRET_LENGTH = 16


def _check_kinds(kinds: Iterable[str]) -> list[str]:
    chosen = sorted(set(kinds))
    unknown = [k for k in chosen if k not in ALERT_KINDS]
    if unknown:
        raise BadInput(
            f"--kinds: unknown alert kind {unknown[0]!r} (one of {', '.join(ALERT_KINDS)})",
            field="kinds",
        )
    return chosen


def _check_id(value: int, field: str = "webhook id") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**63 - 1:
        raise BadInput(f"{field}: must be a positive integer", field=field)
    return value


def _webhook(r: Row) -> Webhook:
    from onstation.ledger.alert_records import Webhook

    return Webhook(int(r[0]), str(r[1]), str(r[2]), list(json.loads(r[3])), _at(r[4]),
                   str(r[5]), from_us(r[6]), r[7])  # fmt: skip


def _alert(r: Row) -> Alert:
    from onstation.ledger.alert_records import Alert

    return Alert(str(r[0]), str(r[1]), r[2], None if r[3] is None else int(r[3]), str(r[4]),
                 json.loads(r[5]), _at(r[6]), from_us(r[7]))  # fmt: skip


def _delivery(r: Row) -> Delivery:
    from onstation.ledger.alert_records import Delivery

    return Delivery(str(r[0]), int(r[1]), int(r[2]), from_us(r[3]),
                    None if r[4] is None else int(r[4]), r[5], from_us(r[6]),
                    from_us(r[7]))  # fmt: skip


def _attempt(r: Row) -> Attempt:
    from onstation.ledger.alert_records import Attempt

    return Attempt(str(r[0]), int(r[1]), int(r[2]), _at(r[3]),
                   None if r[4] is None else int(r[4]), r[5], bool(r[6]))  # fmt: skip


class AlertStore(LedgerBase):
    """Webhook subscriptions, alerts, deliveries and attempts, and the detection cursor."""

    # -- subscriptions ----------------------------------------------------------------------

    def add_webhook(
        self, url: str, *, format: str = "generic", kinds: Sequence[str] = (), secret: str,
        by: str,
    ) -> Webhook:  # fmt: skip
        """Subscribe ``url`` to alerts of ``kinds`` (every kind when empty), signed with
        ``secret`` (the caller makes it; it is returned by nothing here)."""
        from onstation.ledger.alert_records import check_webhook_url, display_url

        check_webhook_url(url)
        if format not in WEBHOOK_FORMATS:
            raise BadInput(f"--format: must be generic or slack, not {format!r}", field="format")
        chosen = _check_kinds(kinds)
        if (
            not isinstance(secret, str)
            or len(secret) < MIN_SECRET_LENGTH
            or not (secret.isascii() and secret.isprintable())
        ):
            raise BadInput(
                f"secret: at least {MIN_SECRET_LENGTH} printable ASCII characters", field="secret"
            )
        validate_free_text(by, "by", 256)

        def body(tx: Tx, now: int) -> Webhook:
            row = tx.one(self._q("webhook_insert"),
                         (url, format, secret, json.dumps(chosen), now, by))  # fmt: skip
            assert row is not None
            made = _webhook(row)
            self._event(tx, now, node=None, kind="webhook.added", generation=None, actor=by,
                        webhook_id=made.webhook_id, url=display_url(url), format=format,
                        kinds=chosen)  # fmt: skip
            return made

        return self._write(body)

    def webhooks(self, *, include_disabled: bool = False) -> list[Webhook]:
        """The subscriptions in force (with ``include_disabled``, removed ones too)."""
        sql = self._q("webhook_list_all" if include_disabled else "webhook_list_enabled")
        return [_webhook(r) for r in self._read_single(lambda tx, _now: tx.all(sql))]

    def webhook(self, webhook_id: int) -> Webhook:
        """One subscription by id (removed or not)."""
        _check_id(webhook_id)
        row = self._read_single(lambda tx, _now: tx.one(self._q("webhook_by_id"), (webhook_id,)))
        if row is None:
            raise BadInput(f"no such webhook {webhook_id}", webhook_id=webhook_id)
        return _webhook(row)

    def remove_webhook(self, webhook_id: int, *, by: str) -> Webhook:
        """Remove a subscription: nothing more is sent to it (kept, disabled, on record)."""
        _check_id(webhook_id)
        validate_free_text(by, "by", 256)

        def body(tx: Tx, now: int) -> Webhook:
            if tx.one(self._q("webhook_by_id"), (webhook_id,)) is None:
                raise BadInput(f"no such webhook {webhook_id}", webhook_id=webhook_id)
            if tx.one(self._q("webhook_disable"), (now, by, webhook_id)) is None:
                raise Conflict(f"webhook {webhook_id} is already removed", webhook_id=webhook_id)
            self._event(tx, now, node=None, kind="webhook.removed", generation=None, actor=by,
                        webhook_id=webhook_id)  # fmt: skip
            row = tx.one(self._q("webhook_by_id"), (webhook_id,))
            assert row is not None
            return _webhook(row)

        return self._write(body)

    # -- detection's inputs and its cursor --------------------------------------------------

    def alert_cursor(self) -> int:
        """The last event seq detection has looked at."""
        row = self._read_single(lambda tx, _now: tx.one(self._q("alert_cursor_get")))
        return 0 if row is None else int(row[0])

    def relief_endings(self, relief_ids: Iterable[int]) -> dict[int, ReliefEnding]:
        """How each of ``relief_ids`` stands (those that exist), read together."""
        from onstation.ledger.alert_records import ReliefEnding

        wanted = sorted(set(relief_ids))

        def body(tx: Tx, _now: int) -> dict[int, ReliefEnding]:
            found: dict[int, ReliefEnding] = {}
            for rid in wanted:
                r = tx.one(self._q("alert_relief_outcome"), (rid,))
                if r is not None:
                    found[rid] = ReliefEnding(int(r[0]), str(r[1]), str(r[2]), r[3], int(r[4]),
                                              None if r[5] is None else int(r[5]), str(r[6]),
                                              from_us(r[7]))  # fmt: skip
            return found

        return self._read(body)

    def overdue_leases(self) -> list[BodyLease]:
        """LIVE leases past their expiry now: bodies that stopped heartbeating unreleased."""

        def body(tx: Tx, now: int) -> list[BodyLease]:
            return [self._lease(r) for r in tx.all(self._q("alert_overdue_leases"), (now,))]

        return self._read_single(body)

    # -- alerts -----------------------------------------------------------------------------

    def record_alerts(self, alerts: Sequence[Alert], *, cursor: int | None = None) -> list[Alert]:
        """Record ``alerts`` (each once, by id) and owe their deliveries; move the detection
        cursor to ``cursor`` (never back). Returns the alerts that were new, as recorded."""
        for alert in alerts:
            _check_alert(alert)
        if cursor is not None and cursor < 0:
            raise BadInput("cursor: must be at least 0", field="cursor")

        def body(tx: Tx, now: int) -> list[Alert]:
            subscribed = [_webhook(r) for r in tx.all(self._q("webhook_list_enabled"))]
            new: list[Alert] = []
            for alert in alerts:
                if self._insert_alert(tx, now, alert) is None:
                    continue
                for hook in subscribed:
                    if hook.kinds and alert.kind not in hook.kinds:
                        continue
                    if hook.created_at > alert.at:
                        continue  # the condition arose before this subscription existed
                    tx.run(self._q("alert_delivery_insert"),
                           (alert.alert_id, hook.webhook_id, now))  # fmt: skip
                new.append(_with_detection(alert, now))
            if cursor is not None:
                tx.run(self._q("alert_cursor_advance"), (cursor, cursor))
            return new

        return self._write(body)

    def record_test_alert(self, webhook_id: int, alert: Alert) -> Alert:
        """Record a ``webhook.test`` alert owed to one subscription only, due now."""
        _check_id(webhook_id)
        _check_alert(alert, test=True)

        def body(tx: Tx, now: int) -> Alert:
            row = tx.one(self._q("webhook_by_id"), (webhook_id,))
            if row is None:
                raise BadInput(f"no such webhook {webhook_id}", webhook_id=webhook_id)
            if row[6] is not None:
                raise Conflict(f"webhook {webhook_id} is removed", webhook_id=webhook_id)
            if self._insert_alert(tx, now, alert) is None:
                raise Conflict(f"alert {alert.alert_id} is already on record")
            tx.run(self._q("alert_delivery_insert"), (alert.alert_id, webhook_id, now))
            return _with_detection(alert, now)

        return self._write(body)

    def _insert_alert(self, tx: Tx, now: int, alert: Alert) -> Row | None:
        return tx.one(
            self._q("alert_insert"),
            (alert.alert_id, alert.kind, alert.node, alert.generation, alert.summary,
             json.dumps(alert.evidence, sort_keys=True, default=str), to_us(alert.at), now),
        )  # fmt: skip

    def alerts(self, *, limit: int = 50) -> list[Alert]:
        """The newest alerts by detection time, newest first."""
        if limit < 1:
            raise BadInput("--limit: must be at least 1", field="limit")
        rows = self._read_single(lambda tx, _now: tx.all(self._q("alert_recent"), (limit,)))
        return [_alert(r) for r in rows]

    def alert(self, alert_id: str) -> Alert:
        """One alert by id."""
        validate_free_text(alert_id, "alert id", 256)
        row = self._read_single(lambda tx, _now: tx.one(self._q("alert_by_id"), (alert_id,)))
        if row is None:
            raise BadInput(f"no such alert {alert_id!r}", alert_id=alert_id)
        return _alert(row)

    def deliveries(self, alert_id: str) -> list[Delivery]:
        """The deliveries of one alert, by subscription."""
        rows = self._read_single(
            lambda tx, _now: tx.all(self._q("alert_deliveries_of_alert"), (alert_id,))
        )
        return [_delivery(r) for r in rows]

    def attempts(self, alert_id: str, webhook_id: int) -> list[Attempt]:
        """Every attempt to deliver one alert to one subscription, oldest first."""
        rows = self._read_single(lambda tx, _now: tx.all(self._q("alert_attempts_of_delivery"),
                                                  (alert_id, webhook_id)))  # fmt: skip
        return [_attempt(r) for r in rows]

    # -- delivery ---------------------------------------------------------------------------

    def claim_due_deliveries(
        self, *, limit: int, hold: timedelta, alert_id: str | None = None
    ) -> list[DueDelivery]:
        """Claim up to ``limit`` deliveries due now (of one alert, with ``alert_id``) for one
        attempt each. A claim lapses after ``hold``: a runner that died mid-attempt leaves
        its delivery due again then."""
        if limit < 1:
            raise BadInput("limit: must be at least 1", field="limit")
        if hold <= timedelta(0):
            raise BadInput("hold: must be positive", field="hold")
        from onstation.ledger.alert_records import Alert, DueDelivery

        def body(tx: Tx, now: int) -> list[DueDelivery]:
            until = now + int(hold.total_seconds() * 1_000_000)
            claimed: list[DueDelivery] = []
            if alert_id is None:
                rows = tx.all(self._q("alert_deliveries_due"), (now, limit))
            else:
                rows = tx.all(self._q("alert_deliveries_due_of_alert"), (alert_id, now, limit))
            for r in rows:
                got = tx.one(self._q("alert_delivery_claim"),
                             (until, r[0], r[1], r[3], r[2]))  # fmt: skip
                if got is None:
                    continue  # another runner claimed it first
                alert = Alert(str(r[0]), str(r[7]), r[8], None if r[9] is None else int(r[9]),
                              str(r[10]), json.loads(r[11]), _at(r[12]),
                              from_us(r[13]))  # fmt: skip
                claimed.append(DueDelivery(alert, int(r[1]), str(r[4]), str(r[5]), str(r[6]),
                                           int(r[2])))  # fmt: skip
            return claimed

        return self._write(body)

    def record_attempt(
        self, due: DueDelivery, *, delivered: bool, status: int | None, error: str | None,
        retry_at: datetime | None,
    ) -> Delivery | None:  # fmt: skip
        """Keep one attempt of a claimed delivery and its outcome: delivered, due again at
        ``retry_at``, or given up (not delivered and no ``retry_at``). None when the claim
        had lapsed and another runner recorded an attempt first (this one is still kept)."""
        if error is not None:
            error = error[:500]

        def body(tx: Tx, now: int) -> Delivery | None:
            key = (due.alert.alert_id, due.webhook_id)
            tx.run(self._q("alert_attempt_insert"),
                   (*key, due.attempts + 1, now, status, error, 1 if delivered else 0))  # fmt: skip
            next_at = None if delivered or retry_at is None else to_us(retry_at)
            gave_up = now if not delivered and retry_at is None else None
            row = tx.one(self._q("alert_delivery_record"),
                         (next_at, status, error, now if delivered else None, gave_up, *key,
                          due.attempts))  # fmt: skip
            return None if row is None else _delivery(row)

        return self._write(body)


def _check_alert(alert: Alert, *, test: bool = False) -> None:
    validate_free_text(alert.alert_id, "alert id", 256)
    if not alert.alert_id:
        raise BadInput("alert id: must not be empty", field="alert_id")
    if (alert.kind == TEST_KIND) != test or (not test and alert.kind not in ALERT_KINDS):
        raise BadInput(f"alert kind: {alert.kind!r} is not recorded here", field="kind")
    validate_free_text(alert.summary, "summary", 1000)


def _with_detection(alert: Alert, now: int) -> Alert:
    from onstation.ledger.alert_records import Alert

    return Alert(alert.alert_id, alert.kind, alert.node, alert.generation, alert.summary,
                 alert.evidence, alert.at, _at(now))  # fmt: skip


__all__ = ["ALERT_KINDS", "TEST_KIND", "WEBHOOK_FORMATS", "AlertStore"]
