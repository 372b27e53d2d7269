"""BodyLease states and the rule that decides whether a lease is live at a given instant.

A generation admits at most one BodyLease, ever. A lease is live only while it is in state
LIVE and the ledger's clock has not passed its expiry; a body's own clock counts for nothing.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum


class LeaseState(StrEnum):
    """Lifecycle of one admitted embodiment."""

    LIVE = "LIVE"
    RELEASED = "RELEASED"
    EXPIRED = "EXPIRED"
    FENCED = "FENCED"


def is_live(state: LeaseState, expires_at: datetime, now: datetime) -> bool:
    """True while the lease may still act: LIVE and not past its expiry on the ledger's clock."""
    return state is LeaseState.LIVE and now < expires_at


class GuardOutcome(StrEnum):
    """Why a write on behalf of a body was allowed or denied."""

    ALLOWED = "allowed"
    STALE_GENERATION = "stale generation"
    FUTURE_GENERATION = "generation not yet issued"
    NO_LIVE_LEASE = "no live lease"
    LEASE_EXPIRED = "lease expired"
    LEASE_FENCED = "lease fenced"
    LEASE_RELEASED = "lease released"


def judge_write(
    *,
    presented: int,
    current: int,
    lease_state: LeaseState | None,
    lease_expires_at: datetime | None,
    now: datetime,
) -> GuardOutcome:
    """Decide a guarded write from the node's current generation and that generation's lease."""
    if presented < current:
        return GuardOutcome.STALE_GENERATION
    if presented > current:
        return GuardOutcome.FUTURE_GENERATION
    if lease_state is None or lease_expires_at is None:
        return GuardOutcome.NO_LIVE_LEASE
    if lease_state is LeaseState.FENCED:
        return GuardOutcome.LEASE_FENCED
    if lease_state is LeaseState.RELEASED:
        return GuardOutcome.LEASE_RELEASED
    if lease_state is LeaseState.EXPIRED or not is_live(lease_state, lease_expires_at, now):
        return GuardOutcome.LEASE_EXPIRED
    return GuardOutcome.ALLOWED
