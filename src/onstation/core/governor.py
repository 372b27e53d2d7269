"""The respawn governor: at most N counted respawns per identity per window.

The window opens at the first counted respawn that is still inside it, so the count is a
sliding one: no stretch of ``window`` ever holds more than ``limit`` respawns, which is what
the crash-loop simulation checks against the event history. Past the limit the answer is
BLOCKED with the instant the oldest counted respawn leaves the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from onstation.core.errors import BadInput


@dataclass(frozen=True)
class RespawnPolicy:
    """How many respawns one identity may have inside one window."""

    limit: int = 3
    window: timedelta = timedelta(hours=24)

    def __post_init__(self) -> None:
        if self.limit < 0:
            raise BadInput("respawn limit: must not be negative")
        if self.window <= timedelta(0):
            raise BadInput("respawn window: must be positive")


@dataclass(frozen=True)
class RespawnDecision:
    """The governor's answer for one request."""

    allowed: bool
    count_in_window: int
    limit: int
    window_started_at: datetime | None
    reopens_at: datetime | None
    reason: str


def decide_respawn(
    policy: RespawnPolicy,
    counted: Sequence[datetime],
    now: datetime,
    *,
    breaker_open: bool,
) -> RespawnDecision:
    """Decide one respawn request from the instants of the respawns counted so far."""
    since = now - policy.window
    # Respawns stamped in the future (a clock that jumped back) still count: never fewer.
    in_window = sorted(t for t in counted if t > since)
    started = in_window[0] if in_window else None
    if breaker_open:
        return RespawnDecision(
            False, len(in_window), policy.limit, started, None, "breaker open on this identity"
        )
    if len(in_window) >= policy.limit:
        if policy.limit == 0:
            return RespawnDecision(False, len(in_window), 0, started, None, "respawns disabled")
        # The request succeeds again once enough of the oldest respawns have left the window.
        pivot = in_window[len(in_window) - policy.limit]
        return RespawnDecision(
            False,
            len(in_window),
            policy.limit,
            started,
            pivot + policy.window,
            f"respawn limit reached ({len(in_window)}/{policy.limit} in window)",
        )
    return RespawnDecision(
        True,
        len(in_window) + 1,
        policy.limit,
        started or now,
        None,
        f"respawn {len(in_window) + 1}/{policy.limit}",
    )
