"""The respawn governor and the write judgement, as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from onstation.core.governor import RespawnPolicy, decide_respawn
from onstation.core.leases import GuardOutcome, LeaseState, judge_write

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = RespawnPolicy(limit=3, window=timedelta(hours=24))


def test_limit_then_blocked_with_reopening_time() -> None:
    counted = [T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)]
    decision = decide_respawn(POLICY, counted, T0 + timedelta(hours=3), breaker_open=False)
    assert not decision.allowed
    assert decision.reopens_at == T0 + timedelta(hours=24)
    later = decide_respawn(POLICY, counted, T0 + timedelta(hours=24), breaker_open=False)
    assert later.allowed and later.count_in_window == 3


def test_breaker_blocks_regardless_of_count() -> None:
    decision = decide_respawn(POLICY, [], T0, breaker_open=True)
    assert not decision.allowed and "breaker" in decision.reason


def test_future_stamps_still_count_after_a_backward_clock_jump() -> None:
    counted = [T0 + timedelta(hours=5)] * 3
    assert not decide_respawn(POLICY, counted, T0, breaker_open=False).allowed


@given(st.lists(st.integers(min_value=0, max_value=72 * 3600), max_size=60))
def test_no_window_ever_holds_more_than_the_limit(offsets: list[int]) -> None:
    granted: list[datetime] = []
    for offset in sorted(offsets):
        now = T0 + timedelta(seconds=offset)
        if decide_respawn(POLICY, granted, now, breaker_open=False).allowed:
            granted.append(now)
    for start in granted:
        inside = [t for t in granted if start <= t < start + POLICY.window]
        assert len(inside) <= POLICY.limit


def test_judge_write_outcomes() -> None:
    later = T0 + timedelta(minutes=5)
    live = {"lease_state": LeaseState.LIVE, "lease_expires_at": later, "now": T0}
    assert judge_write(presented=2, current=2, **live) is GuardOutcome.ALLOWED  # type: ignore[arg-type]
    assert judge_write(presented=1, current=2, **live) is GuardOutcome.STALE_GENERATION  # type: ignore[arg-type]
    assert judge_write(presented=3, current=2, **live) is GuardOutcome.FUTURE_GENERATION  # type: ignore[arg-type]
    assert (
        judge_write(presented=2, current=2, lease_state=None, lease_expires_at=None, now=T0)
        is GuardOutcome.NO_LIVE_LEASE
    )
    assert (
        judge_write(
            presented=2, current=2, lease_state=LeaseState.LIVE, lease_expires_at=T0, now=T0
        )
        is GuardOutcome.LEASE_EXPIRED
    )
    assert (
        judge_write(
            presented=2, current=2, lease_state=LeaseState.FENCED, lease_expires_at=later, now=T0
        )
        is GuardOutcome.LEASE_FENCED
    )
