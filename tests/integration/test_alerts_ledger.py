"""The alert records in the ledger, on every backend: subscriptions, alerts once by id,
deliveries per subscription, claims, attempts, the cursor, and detection's inputs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from onstation.api.alerts import AlertRunner
from onstation.api.webhooks import RetryPolicy, SendResult
from onstation.core.errors import BadInput, Conflict
from onstation.ledger import Ledger
from onstation.ledger.alert_records import Alert
from onstation.testing import FakeClock

SECRET = "s" * 32


def _alert(clock: FakeClock, alert_id: str = "breaker.opened:7", kind: str = "breaker.opened",
           node: str | None = "exec-1") -> Alert:  # fmt: skip
    return Alert(alert_id, kind, node, 1, f"{kind} on {node}", {"event_seq": 7}, clock.now)


def test_a_subscription_is_added_listed_and_removed_on_record(ledger: Ledger) -> None:
    made = ledger.add_webhook("https://hooks.example.com/services/T1/B2/xyz", format="slack",
                              kinds=["crash_loop", "breaker.opened"], secret=SECRET,
                              by="ada")  # fmt: skip
    assert (made.format, made.kinds, made.created_by) == (
        "slack", ["breaker.opened", "crash_loop"], "ada")  # fmt: skip
    # The Slack URL's path is its credential: the record shows only the host and the start.
    assert made.to_json()["url"] == "https://hooks.example.com/services/…"
    assert SECRET not in str(made.to_json()) and "secret" not in made.to_json()
    assert [w.webhook_id for w in ledger.webhooks()] == [made.webhook_id]
    gone = ledger.remove_webhook(made.webhook_id, by="bob")
    assert gone.disabled_by == "bob" and gone.disabled_at is not None
    assert ledger.webhooks() == []
    assert [w.webhook_id for w in ledger.webhooks(include_disabled=True)] == [made.webhook_id]
    with pytest.raises(Conflict):
        ledger.remove_webhook(made.webhook_id, by="bob")
    kinds = [e.kind for e in ledger.history() if e.kind.startswith("webhook.")]
    assert kinds == ["webhook.added", "webhook.removed"]


@pytest.mark.parametrize(
    ("url", "fmt", "kinds", "secret"),
    [
        ("ftp://example.com/x", "generic", [], SECRET),
        ("http:///nohost", "generic", [], SECRET),
        ("http://exa mple.com/", "generic", [], SECRET),
        ("http://example.com:99999/", "generic", [], SECRET),
        ("http://example.com/" + "x" * 3000, "generic", [], SECRET),
        ("http://example.com/", "teams", [], SECRET),
        ("http://example.com/", "generic", ["relief.everything"], SECRET),
        ("http://example.com/", "generic", [], "short"),
    ],
)
def test_a_bad_subscription_is_refused_and_changes_nothing(
    ledger: Ledger, url: str, fmt: str, kinds: list[str], secret: str
) -> None:
    before = ledger.history()
    with pytest.raises(BadInput):
        ledger.add_webhook(url, format=fmt, kinds=kinds, secret=secret, by="ada")
    assert ledger.webhooks(include_disabled=True) == []
    assert ledger.history() == before


def test_an_alert_is_recorded_once_and_owed_once_per_matching_subscription(
    ledger: Ledger, clock: FakeClock
) -> None:
    every = ledger.add_webhook("http://127.0.0.1:1/a", secret=SECRET, by="ada")
    only = ledger.add_webhook("http://127.0.0.1:1/b", kinds=["breaker.opened"], secret=SECRET,
                              by="ada")  # fmt: skip
    other = ledger.add_webhook("http://127.0.0.1:1/c", kinds=["crash_loop"], secret=SECRET,
                               by="ada")  # fmt: skip
    clock.advance(seconds=1)
    alert = _alert(clock)
    new = ledger.record_alerts([alert, alert])
    assert [a.alert_id for a in new] == [alert.alert_id]
    assert new[0].detected_at == clock.now
    assert ledger.record_alerts([alert]) == []  # detection ran again: nothing new
    owed = {d.webhook_id: d for d in ledger.deliveries(alert.alert_id)}
    assert set(owed) == {every.webhook_id, only.webhook_id}
    assert other.webhook_id not in owed
    assert all(d.state == "pending" and d.attempts == 0 for d in owed.values())
    assert ledger.alert(alert.alert_id).evidence == {"event_seq": 7}


def test_a_condition_older_than_the_subscription_is_not_sent_to_it(
    ledger: Ledger, clock: FakeClock
) -> None:
    old = _alert(clock)
    clock.advance(minutes=1)
    ledger.add_webhook("http://127.0.0.1:1/a", secret=SECRET, by="ada")
    assert [a.alert_id for a in ledger.record_alerts([old])] == [old.alert_id]
    assert ledger.deliveries(old.alert_id) == []  # recorded, listed, but not replayed


def test_the_cursor_only_moves_forward(ledger: Ledger) -> None:
    assert ledger.alert_cursor() == 0
    ledger.record_alerts([], cursor=12)
    ledger.record_alerts([], cursor=5)  # a slower runner's pass: never back
    assert ledger.alert_cursor() == 12


def test_a_delivery_is_claimed_by_one_runner_only_and_each_attempt_kept(
    make_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    first, second = make_ledger(clock=clock), make_ledger(clock=clock)
    hook = first.add_webhook("http://127.0.0.1:1/a", secret=SECRET, by="ada")
    alert = _alert(clock)
    first.record_alerts([alert])
    claimed = first.claim_due_deliveries(limit=10, hold=timedelta(seconds=40))
    assert [(d.alert.alert_id, d.webhook_id, d.attempts) for d in claimed] == [
        (alert.alert_id, hook.webhook_id, 0)]  # fmt: skip
    assert claimed[0].secret == SECRET and SECRET not in repr(claimed[0])
    assert second.claim_due_deliveries(limit=10, hold=timedelta(seconds=40)) == []
    retry = clock.now + timedelta(seconds=10)
    got = first.record_attempt(claimed[0], delivered=False, status=500, error="HTTP 500",
                               retry_at=retry)  # fmt: skip
    assert got is not None and (got.attempts, got.next_attempt_at, got.last_status) == (
        1, retry, 500)  # fmt: skip
    assert second.claim_due_deliveries(limit=10, hold=timedelta(seconds=40)) == []  # not yet
    clock.advance(seconds=10)
    again = second.claim_due_deliveries(limit=10, hold=timedelta(seconds=40))
    assert [d.attempts for d in again] == [1]
    done = second.record_attempt(again[0], delivered=True, status=200, error=None,
                                 retry_at=None)  # fmt: skip
    assert done is not None and done.state == "delivered" and done.next_attempt_at is None
    # A stale runner recording the first claim again is kept as an attempt, changes nothing.
    assert first.record_attempt(claimed[0], delivered=True, status=200, error=None,
                                retry_at=None) is None  # fmt: skip
    assert first.deliveries(alert.alert_id)[0].attempts == 2
    assert [(a.attempt, a.status, a.delivered) for a in
            first.attempts(alert.alert_id, hook.webhook_id)] == [
        (1, 500, False), (2, 200, True), (1, 200, True)]  # fmt: skip


def test_a_claim_of_a_runner_that_died_lapses(ledger: Ledger, clock: FakeClock) -> None:
    ledger.add_webhook("http://127.0.0.1:1/a", secret=SECRET, by="ada")
    ledger.record_alerts([_alert(clock)])
    assert len(ledger.claim_due_deliveries(limit=5, hold=timedelta(seconds=40))) == 1
    clock.advance(seconds=39)
    assert ledger.claim_due_deliveries(limit=5, hold=timedelta(seconds=40)) == []
    clock.advance(seconds=2)
    assert len(ledger.claim_due_deliveries(limit=5, hold=timedelta(seconds=40))) == 1


def test_a_removed_subscription_gets_nothing_more(ledger: Ledger, clock: FakeClock) -> None:
    hook = ledger.add_webhook("http://127.0.0.1:1/a", secret=SECRET, by="ada")
    ledger.record_alerts([_alert(clock)])
    ledger.remove_webhook(hook.webhook_id, by="ada")
    assert ledger.claim_due_deliveries(limit=5, hold=timedelta(seconds=40)) == []


def test_detection_reads_overdue_leases_and_relief_endings(
    ledger: Ledger, clock: FakeClock
) -> None:
    from onstation.ledger.relief_records import ReliefLedger

    ledger.register_node("exec-1")
    lease = ledger.acquire_lease("exec-1", holder="body-1", ttl=timedelta(minutes=5))
    assert ledger.overdue_leases() == []
    clock.advance(minutes=6)
    assert [x.lease_id for x in ledger.overdue_leases()] == [lease.lease_id]
    relief = ReliefLedger(ledger).open_relief("exec-1", cause="test", by="lead")
    ReliefLedger(ledger).update_relief(relief.relief_id, state="DECIDED", verdict="QUARANTINED")
    ReliefLedger(ledger).update_relief(relief.relief_id, state="NOT_LAUNCHED", finished=True)
    endings = ledger.relief_endings([relief.relief_id, 999])
    assert list(endings) == [relief.relief_id]
    assert (endings[relief.relief_id].state, endings[relief.relief_id].verdict) == (
        "NOT_LAUNCHED", "QUARANTINED")  # fmt: skip


def test_a_pass_of_the_runner_alerts_each_condition_once(ledger: Ledger, clock: FakeClock) -> None:
    """Detection end to end on the ledger: a QUARANTINED relief, an opened breaker, a silent
    body; many passes, one alert each, one delivery each."""
    from onstation.ledger.relief_records import ReliefLedger

    sent: list[str] = []

    def send(url: str, body: bytes, headers: object, timeout: float) -> SendResult:
        sent.append(url)
        return SendResult(True, 200, None)

    ledger.add_webhook("http://127.0.0.1:1/a", secret=SECRET, by="ada")
    ledger.register_node("exec-1")
    ledger.acquire_lease("exec-1", holder="body-1", ttl=timedelta(minutes=5))
    records = ReliefLedger(ledger)
    relief = records.open_relief("exec-1", cause="test", by="lead")
    records.update_relief(relief.relief_id, state="DECIDED", verdict="QUARANTINED")
    runner = AlertRunner(ledger, send=send, jitter=lambda: 0.0, policy=RetryPolicy())
    first = runner.run_once()
    assert first.new_alerts == []  # the relief has not ended yet; the body is in time
    records.update_relief(relief.relief_id, state="NOT_LAUNCHED", finished=True)
    ledger.open_breaker("exec-1", by="ada", why="too many")
    clock.advance(minutes=6)
    second = runner.run_once()
    kinds = sorted(ledger.alert(a).kind for a in second.new_alerts)
    assert kinds == ["breaker.opened", "heartbeat.stopped", "relief.quarantined"]
    assert (second.attempted, second.delivered) == (3, 3)
    for _ in range(3):
        assert runner.run_once().new_alerts == []
    assert len(sent) == 3
    assert second.cursor == ledger.history()[-1].seq  # a pass writes no event of its own
