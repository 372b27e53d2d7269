"""Alert detection (pure): which events and lease states are alerts, under which stable ids;
the webhook bodies, signatures and back-off; and that nothing on a relief's or a hook's path
can reach delivery."""

from __future__ import annotations

import ast
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onstation.api.alerts import detect, relief_ids
from onstation.api.webhooks import (
    RetryPolicy,
    backoff,
    next_attempt_at,
    render,
    sign,
    slack_body,
    verify_signature,
)
from onstation.core.leases import LeaseState
from onstation.core.types import BodyLease, Event
from onstation.ledger.alert_records import Alert, ReliefEnding, display_url
from onstation.ledger.alerts import ALERT_KINDS

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SRC = Path(__file__).resolve().parents[2] / "src" / "onstation"


def _event(seq: int, kind: str, node: str | None = "exec-1", generation: int | None = 2,
           **detail: Any) -> Event:  # fmt: skip
    return Event(seq, node, kind, generation, "lead", detail, T0 + timedelta(seconds=seq))


def _ending(rid: int, state: str, verdict: str | None) -> ReliefEnding:
    return ReliefEnding(rid, "exec-1", state, verdict, 1, 2, "crash", T0)


def _lease(lease_id: int, expires: datetime, state: str = "LIVE") -> BodyLease:
    return BodyLease(lease_id, "exec-1", 3, LeaseState(state), "body", T0, T0, expires, None,
                     None)  # fmt: skip


@pytest.mark.parametrize(
    ("event", "ending", "kind", "alert_id"),
    [
        (_event(5, "relief.not_launched", relief_id=1, verdict=None),
         _ending(1, "NOT_LAUNCHED", "QUARANTINED"), "relief.quarantined", "relief:1"),
        (_event(5, "relief.not_launched", relief_id=1, verdict=None),
         _ending(1, "NOT_LAUNCHED", "HIBERNATE"), "relief.hibernate", "relief:1"),
        (_event(5, "relief.not_started", relief_id=2, verdict="BLOCKED"),
         _ending(2, "NOT_STARTED", "BLOCKED"), "relief.blocked", "relief:2"),
        (_event(5, "relief.blocked", relief_id=3, verdict="BLOCKED"),
         _ending(3, "BLOCKED", "BLOCKED"), "relief.blocked", "relief:3"),
        (_event(5, "relief.birth_failed", relief_id=4, verdict=None),
         _ending(4, "BIRTH_FAILED", "REBODIMENT_READY"), "relief.birth_failed", "relief:4"),
        (_event(9, "breaker.opened", why="x"), None, "breaker.opened", "breaker.opened:9"),
        (_event(9, "respawn.blocked", reason="respawn limit reached (3/3 in window)",
                reopens_at="2026-01-02T10:00:00+00:00"), None, "crash_loop",
         "crash_loop:exec-1:2026-01-02T10:00:00+00:00"),
        (_event(9, "effect.ambiguous", effect_id="eff-1", previous_state="DISPATCHED"), None,
         "effect.ambiguous", "effect.ambiguous:eff-1"),
        (_event(9, "lease.expired", lease_id=7, reason="ttl passed"), None,
         "heartbeat.stopped", "heartbeat.stopped:7"),
    ],
)  # fmt: skip
def test_each_condition_is_one_alert_with_its_evidence(
    event: Event, ending: ReliefEnding | None, kind: str, alert_id: str
) -> None:
    endings = {} if ending is None else {ending.relief_id: ending}
    assert relief_ids([event]) == set(endings)
    [alert] = detect([event], endings, [], T0)
    assert (alert.kind, alert.alert_id, alert.node, alert.generation) == (
        kind, alert_id, "exec-1", 2)  # fmt: skip
    assert alert.kind in ALERT_KINDS
    assert alert.evidence["event_seq"] == event.seq
    assert "\n" not in alert.summary and "exec-1" in alert.summary
    assert alert.at == event.at


@pytest.mark.parametrize(
    ("event", "ending"),
    [
        (_event(5, "relief.not_launched", relief_id=1), _ending(1, "NOT_LAUNCHED", "INVALID")),
        (_event(5, "relief.settled", relief_id=1), _ending(1, "SETTLED", "REBODIMENT_READY")),
        (_event(5, "relief.decided", relief_id=1, verdict="QUARANTINED"),
         _ending(1, "DECIDED", "QUARANTINED")),  # not ended yet: the ending event alerts
        (_event(9, "respawn.blocked", reason="breaker open on this identity", reopens_at=None),
         None),  # the breaker's own alert says it
        (_event(9, "respawn.blocked", reason="respawns disabled", reopens_at=None), None),
        (_event(9, "breaker.closed", why="x"), None),
        (_event(9, "effect.committed", effect_id="eff-1"), None),
        (_event(9, "lease.released", lease_id=7), None),
    ],
)  # fmt: skip
def test_what_is_not_an_alert(event: Event, ending: ReliefEnding | None) -> None:
    endings = {} if ending is None else {ending.relief_id: ending}
    assert detect([event], endings, [], T0) == []


def test_a_crash_loop_is_one_alert_per_lock_out_however_often_refused() -> None:
    reason = "respawn limit reached (3/3 in window)"
    refusals = [_event(s, "respawn.blocked", reason=reason, reopens_at="2026-01-02T10:00:00Z")
                for s in range(10, 15)]  # fmt: skip
    later = _event(20, "respawn.blocked", reason=reason, reopens_at="2026-01-03T09:00:00Z")
    alerts = detect([*refusals, later], {}, [], T0)
    assert [a.alert_id for a in alerts] == [
        "crash_loop:exec-1:2026-01-02T10:00:00Z",
        "crash_loop:exec-1:2026-01-03T09:00:00Z",
    ]


def test_a_silent_body_is_alerted_once_per_lease_from_state_or_history() -> None:
    now = T0 + timedelta(hours=1)
    overdue, in_time = _lease(7, now - timedelta(seconds=1)), _lease(8, now + timedelta(hours=1))
    [alert] = detect([], {}, [overdue, in_time], now)
    assert (alert.alert_id, alert.kind, alert.generation) == (
        "heartbeat.stopped:7",
        "heartbeat.stopped",
        3,
    )
    assert alert.at == overdue.expires_at and alert.evidence["lease_id"] == 7
    # The ledger may already have ended it as EXPIRED: the same alert, not a second one.
    expired = _event(30, "lease.expired", lease_id=7)
    assert [a.alert_id for a in detect([expired], {}, [overdue], now)] == ["heartbeat.stopped:7"]
    assert detect([], {}, [_lease(9, T0, state="RELEASED")], now) == []


_KINDS = ["relief.not_launched", "relief.not_started", "relief.blocked", "relief.birth_failed",
          "breaker.opened", "respawn.blocked", "effect.ambiguous", "lease.expired",
          "lease.released", "hull.tier", "node.fenced"]  # fmt: skip


@st.composite
def _histories(draw: st.DrawFn) -> tuple[list[Event], dict[int, ReliefEnding]]:
    n = draw(st.integers(min_value=0, max_value=40))
    events, endings = [], {}
    for seq in range(1, n + 1):
        kind = draw(st.sampled_from(_KINDS))
        rid = draw(st.integers(min_value=1, max_value=6))
        node = draw(st.sampled_from(["a", "b", "c"]))
        detail = {"relief_id": rid, "effect_id": f"eff-{draw(st.integers(1, 6))}",
                  "lease_id": draw(st.integers(1, 6)), "why": "w",
                  "reason": draw(st.sampled_from(["respawn limit reached (3/3)",
                                                  "breaker open"])),
                  "reopens_at": draw(st.sampled_from(["r1", "r2"]))}  # fmt: skip
        events.append(Event(seq, node, kind, draw(st.integers(1, 4)), "x", detail,
                            T0 + timedelta(seconds=seq)))  # fmt: skip
        verdict = draw(st.sampled_from(["QUARANTINED", "HIBERNATE", "BLOCKED", "INVALID"]))
        endings.setdefault(rid, ReliefEnding(rid, node, "NOT_LAUNCHED", verdict, 1, 2, "c", T0))
    return events, endings


@settings(max_examples=200, deadline=None)
@given(_histories(), st.integers(min_value=0, max_value=40))
def test_alert_ids_are_unique_and_stable_however_the_history_is_split(
    history: tuple[list[Event], dict[int, ReliefEnding]], cut: int
) -> None:
    events, endings = history
    whole = detect(events, endings, [], T0)
    ids = [a.alert_id for a in whole]
    assert len(ids) == len(set(ids))  # one alert per condition
    assert all(a.kind in ALERT_KINDS for a in whole)
    # Detection in two passes (the cursor fell anywhere), or run twice, finds the same
    # alerts under the same ids: what the ledger records once is what would be sent once.
    # The ledger keeps the first one recorded under an id.
    first: dict[str, Alert] = {}
    for alert in detect(events[:cut], endings, [], T0) + detect(events[cut:], endings, [], T0):
        first.setdefault(alert.alert_id, alert)
    assert first == {a.alert_id: a for a in whole}
    assert detect(events, endings, [], T0) == whole


# -- bodies, signatures, back-off ------------------------------------------------------------


def _alert(summary: str = "relief 3 of exec-1 ended QUARANTINED") -> Alert:
    return Alert("relief:3", "relief.quarantined", "exec-1", 2, summary, {"relief_id": 3}, T0)


def test_the_slack_body_is_text_and_blocks_with_markup_escaped() -> None:
    body = slack_body(_alert("a <@channel> & <https://evil|click> > here"))
    assert set(body) == {"text", "blocks"}
    text = json.dumps(body)
    assert "<@channel>" not in text and "<https://evil" not in text
    assert "&lt;@channel&gt; &amp; &lt;https://evil|click&gt;" in body["blocks"][1]["text"]["text"]
    assert body["blocks"][0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Relief QUARANTINED"},
    }


def test_the_generic_body_is_the_alert_as_json() -> None:
    body = json.loads(render(_alert(), "generic", webhook_id=4, attempt=2))
    assert body["alert"] == json.loads(json.dumps(_alert().to_json()))
    assert (body["type"], body["version"], body["webhook_id"], body["attempt"]) == (
        "onstation.alert", 1, 4, 2)  # fmt: skip
    with pytest.raises(ValueError, match="unknown webhook format"):
        render(_alert(), "teams", webhook_id=4, attempt=1)


def test_the_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    import hashlib
    import hmac

    body = b'{"a":1}'
    expected = hmac.new(b"secret-secret-secret", b"1767268800." + body, hashlib.sha256)
    assert sign("secret-secret-secret", 1767268800, body) == f"v1={expected.hexdigest()}"
    args = {"timestamp": "1767268800", "body": body, "now": T0}
    good = sign("secret-secret-secret", 1767268800, body)
    assert verify_signature("secret-secret-secret", signature=good, **args)
    assert verify_signature("secret-secret-secret", signature=f"v1=00, {good}", **args)
    for bad in (None, "", "v1=", good.upper(), good[:-1] + "0", "v0=" + good[3:]):
        assert not verify_signature("secret-secret-secret", signature=bad, **args)
    for stamp in (None, "", "-1", "1e9", "1767268800.5", "9" * 40):
        assert not verify_signature("secret-secret-secret", signature=good, timestamp=stamp,
                                    body=body, now=T0)  # fmt: skip


@given(st.integers(min_value=1, max_value=200), st.floats(min_value=0, max_value=0.999))
def test_backoff_doubles_up_to_the_cap_and_stays_in_its_jitter_band(
    attempt: int, jitter: float
) -> None:
    policy = RetryPolicy(max_attempts=200, base=timedelta(seconds=10), cap=timedelta(minutes=30))
    wait = backoff(attempt, policy, jitter)
    full = min(timedelta(seconds=10) * 2 ** min(attempt - 1, 30), policy.cap)
    assert full / 2 <= wait <= full
    assert wait <= policy.cap


def test_no_attempt_after_the_last() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert next_attempt_at(2, T0, policy, 0.0) == T0 + timedelta(seconds=10)
    assert next_attempt_at(3, T0, policy, 0.0) is None
    with pytest.raises(ValueError, match="jitter"):
        backoff(1, policy, 1.0)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.slack.com/services/T0/B0/XXXX", "https://hooks.slack.com/services/…"),
        ("http://user:pw@127.0.0.1:8080/hook", "http://127.0.0.1:8080/hook"),
        ("http://127.0.0.1:8080/hook?token=abc", "http://127.0.0.1:8080/hook/…"),
        ("https://example.com", "https://example.com"),
        ("http://[::1]:9000/x", "http://[::1]:9000/x"),
    ],
)
def test_a_url_is_shown_without_what_may_be_a_credential(url: str, shown: str) -> None:
    assert display_url(url) == shown


# -- a relief never waits for a receiver -----------------------------------------------------


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_nothing_a_relief_or_a_hook_runs_can_reach_delivery() -> None:
    """Delivery lives in onstation.api, which only the service and ``alerts run`` start: no
    module of the relief, the harness (the hooks), the ledger, the core or the hook entry
    points imports it, so no relief step and no hook can ever wait on a receiver."""
    below = [p for layer in ("core", "ledger", "plan", "harness", "relief", "sim")
             for p in (SRC / layer).rglob("*.py")]  # fmt: skip
    below += [SRC / "cli" / name for name in ("hooks.py", "fast_renew.py", "relief_commands.py",
                                               "entry.py", "common.py")]  # fmt: skip
    reaching = {str(p.relative_to(SRC)): sorted(m for m in _imports(p)
                                                if m.startswith("onstation.api"))
                for p in below}  # fmt: skip
    assert {k: v for k, v in reaching.items() if v} == {}
    assert len(below) > 50
