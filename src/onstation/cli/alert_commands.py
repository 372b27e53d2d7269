"""The alert commands of the operator's console (issue 15): ``webhook`` subscriptions
(``add``, ``list``, ``remove``, ``test``) and ``alerts`` (``list``, and ``run``, the detect
and deliver loop that also runs inside ``onstation serve``).

Each is imported by the root group (:mod:`onstation.cli.main`) when it is first used.
"""

from __future__ import annotations

import secrets
from typing import Any

import click

from onstation.cli.common import (
    Options,
    command_options,
    emit,
    open_ledger,
    operator_name,
    positive_int,
)
from onstation.core.errors import BadInput, OnstationError

#: Every alert kind, as ``--kinds`` takes them (kept equal to the ledger's list by a test).
_KINDS_HELP = (
    "relief.quarantined, relief.hibernate, relief.blocked, relief.birth_failed, "
    "breaker.opened, crash_loop, heartbeat.stopped, effect.ambiguous"
)


def _kinds(values: tuple[str, ...]) -> list[str]:
    from onstation.ledger.alerts import ALERT_KINDS

    chosen = [k.strip() for v in values for k in v.split(",") if k.strip()]
    for kind in chosen:
        if kind not in ALERT_KINDS:
            raise BadInput(f"--kinds: unknown alert kind {kind!r} (one of {_KINDS_HELP})",
                           field="kinds")  # fmt: skip
    return chosen


def _webhook_id(value: int) -> int:
    return positive_int(value, "ID")


def _seconds(value: float, field: str, maximum: float) -> float:
    if not 0 < value <= maximum:
        raise BadInput(f"{field}: must be more than 0 and at most {maximum:g} seconds",
                       field=field)  # fmt: skip
    return value


@click.group()
def webhook() -> None:
    """Webhook subscriptions for alerts (signed with HMAC-SHA256)."""


@webhook.command("add")
@click.argument("url")
@click.option("--format", "fmt", type=click.Choice(["generic", "slack"]), default="generic",
              show_default=True, help="generic: the alert as JSON; slack: a Slack "
              "incoming-webhook message.")  # fmt: skip
@click.option("--kinds", "kinds", multiple=True, metavar="KIND[,KIND...]",
              help=f"Only these alert kinds (default: every kind): {_KINDS_HELP}.")  # fmt: skip
@click.option("--by", "by", default=None, help="Operator (default: the current user).")
@command_options
def webhook_add(url: str, fmt: str, kinds: tuple[str, ...], by: str | None, opts: Options) -> None:
    """Subscribe URL to alerts; prints the signing secret once (it is not shown again)."""
    from onstation.ledger.alert_records import check_webhook_url

    check_webhook_url(url)
    chosen = _kinds(kinds)
    secret = "whsec_" + secrets.token_urlsafe(32)
    with open_ledger(opts) as ledger:
        made = ledger.add_webhook(url, format=fmt, kinds=chosen, secret=secret,
                                  by=by or operator_name())  # fmt: skip
    data = {**made.to_json(), "secret": secret}
    emit(opts, data, lambda: (
        f"webhook {made.webhook_id}: {data['url']} ({made.format}; "
        f"{', '.join(made.kinds) or 'every kind'})\n"
        f"secret: {secret}\n"
        "Keep the secret: it signs every request (X-Onstation-Signature) and is not shown "
        "again."
    ))  # fmt: skip


def _webhook_line(hook: dict[str, Any]) -> str:
    kinds = ", ".join(hook["kinds"]) or "every kind"
    gone = (
        f" — removed {hook['disabled_at']} by {hook['disabled_by']}" if hook["disabled_at"] else ""
    )
    return f"webhook {hook['webhook_id']}: {hook['url']} ({hook['format']}; {kinds}){gone}"


@webhook.command("list")
@click.option("--all", "show_all", is_flag=True, help="Removed subscriptions too.")
@command_options
def webhook_list(show_all: bool, opts: Options) -> None:
    """The webhook subscriptions (URLs shown without their secret parts)."""
    with open_ledger(opts, create=False) as ledger:
        hooks = [h.to_json() for h in ledger.webhooks(include_disabled=show_all)]
    emit(opts, {"webhooks": hooks},
         lambda: "\n".join(_webhook_line(h) for h in hooks) or "no webhook")  # fmt: skip


@webhook.command("remove")
@click.argument("webhook_id", metavar="ID", type=int)
@click.option("--by", "by", default=None, help="Operator (default: the current user).")
@command_options
def webhook_remove(webhook_id: int, by: str | None, opts: Options) -> None:
    """Remove a subscription: nothing more is sent to it (it stays on record)."""
    _webhook_id(webhook_id)
    with open_ledger(opts, create=False) as ledger:
        gone = ledger.remove_webhook(webhook_id, by=by or operator_name())
    emit(opts, gone.to_json(), f"webhook {gone.webhook_id} removed")


@webhook.command("test")
@click.argument("webhook_id", metavar="ID", type=int)
@click.option("--timeout", "timeout", type=float, default=5.0, show_default=True,
              help="Seconds to wait for the receiver.")  # fmt: skip
@command_options
def webhook_test(webhook_id: int, timeout: float, opts: Options) -> None:
    """Send a signed test alert to one subscription now (exit 1 if it is not delivered)."""
    from onstation.api.alerts import AlertRunner, make_test_alert

    _webhook_id(webhook_id)
    _seconds(timeout, "--timeout", 300)
    with open_ledger(opts, create=False) as ledger:
        ledger.webhook(webhook_id)
        alert = ledger.record_test_alert(
            webhook_id, make_test_alert(webhook_id, ledger.now(), operator_name())
        )
        AlertRunner(ledger, timeout=timeout).deliver_once(alert_id=alert.alert_id)
        got = ledger.deliveries(alert.alert_id)
    outcome = got[0].to_json() if got else {}
    if not got or got[0].state != "delivered":
        why = (got[0].last_error if got else None) or "not sent"
        raise OnstationError(f"webhook {webhook_id}: test alert not delivered: {why}",
                             webhook_id=webhook_id, alert_id=alert.alert_id)  # fmt: skip
    emit(opts, {"alert_id": alert.alert_id, **outcome},
         f"webhook {webhook_id}: test alert delivered (HTTP {got[0].last_status})")  # fmt: skip


@click.group()
def alerts() -> None:
    """Alerts: what an operator must hear about, and their webhook deliveries."""


def _alert_lines(rows: list[dict[str, Any]]) -> str:
    lines = []
    for a in rows:
        states = (
            ", ".join(
                f"webhook {d['webhook_id']} {d['state']} ({d['attempts']} attempt(s)"
                + (f"; {d['last_error']}" if d["last_error"] and d["state"] != "delivered" else "")
                + ")"
                for d in a["deliveries"]
            )
            or "no subscriber"
        )
        lines.append(f"{a['detected_at']} {a['kind']} {a['alert_id']}: {a['summary']}")
        lines.append(f"    {states}")
    return "\n".join(lines) or "no alert"


@alerts.command("list")
@click.option("--limit", "limit", type=int, default=20, show_default=True,
              help="How many of the newest alerts.")  # fmt: skip
@command_options
def alerts_list(limit: int, opts: Options) -> None:
    """The newest alerts and the state of each delivery."""
    positive_int(limit, "--limit", 10_000)
    with open_ledger(opts, create=False) as ledger:
        rows = [{**a.to_json(), "deliveries": [d.to_json() for d in ledger.deliveries(a.alert_id)]}
                for a in ledger.alerts(limit=limit)]  # fmt: skip
    emit(opts, {"alerts": rows}, lambda: _alert_lines(rows))


@alerts.command("run")
@click.option("--once", is_flag=True, help="One pass, then exit.")
@click.option("--interval", "interval", type=float, default=10.0, show_default=True,
              help="Seconds between passes.")  # fmt: skip
@click.option("--timeout", "timeout", type=float, default=5.0, show_default=True,
              help="Seconds to wait for a receiver.")  # fmt: skip
@click.option("--max-attempts", "max_attempts", type=int, default=8, show_default=True,
              help="Attempts per delivery before giving up.")  # fmt: skip
@command_options
def alerts_run(
    once: bool, interval: float, timeout: float, max_attempts: int, opts: Options
) -> None:
    """Detect alerts in the ledger and deliver them to the webhooks, pass after pass."""
    import threading

    from onstation.api.alerts import AlertRunner, RunReport
    from onstation.api.webhooks import RetryPolicy

    _seconds(interval, "--interval", 86_400)
    _seconds(timeout, "--timeout", 300)
    positive_int(max_attempts, "--max-attempts", 100)

    def say(report: RunReport) -> None:
        emit(opts, report.to_json(), lambda: (
            f"cursor {report.cursor}: {len(report.new_alerts)} new alert(s); "
            f"{report.attempted} attempt(s), {report.delivered} delivered, {report.failed} "
            f"failed, {report.gave_up} given up"
        ))  # fmt: skip

    def warn(exc: Exception) -> None:
        message = exc.message if isinstance(exc, OnstationError) else f"{type(exc).__name__}: {exc}"
        click.echo(f"onstation: error: alert pass failed: {message}", err=True)

    with open_ledger(opts, create=False) as ledger:
        runner = AlertRunner(ledger, timeout=timeout,
                             policy=RetryPolicy(max_attempts=max_attempts))  # fmt: skip
        if once:
            say(runner.run_once())
            return
        stop = threading.Event()
        try:
            runner.run(interval=interval, stop=stop, on_pass=say, on_error=warn)
        except KeyboardInterrupt:
            stop.set()
