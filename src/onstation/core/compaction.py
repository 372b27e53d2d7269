"""The host's compaction point, and which configured tiers lie past it; what reading to refuse.

A host compacts a body's context on its own (Claude Code's auto-compaction, Codex's
``model_auto_compact_token_limit``). A tier that lies past that point never fires before the
host compacts: the body loses its context without the brief. These functions say where the
point lies and which tiers of a policy are past it, and which readings are impossible and must
be refused (never acted on).

Pure: no I/O, no clock, no environment. :mod:`onstation.harness.compaction` reads the host's
settings and passes them in.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False  # on the hook hot path: typing (and enum) cost import time
if TYPE_CHECKING:
    from typing import Final

    from onstation.core.hull import FillReading, TierPolicy
    from onstation.core.tiers import Tier

CLAUDE_RESERVE_TOKENS: Final = 33_000
"""What Claude Code keeps free below its auto-compact window: it compacts at the window less
this reserve. The model-config docs give Sonnet 5's default as "about 967K" of its 1M window
(1_000_000 - 33_000); on a 200k window that is 167k, 83.5 %."""

CLAUDE_MIN_AUTO_COMPACT_WINDOW: Final = 100_000
"""The smallest auto-compact window Claude Code accepts (env-vars docs: 100000 to 1000000)."""


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def claude_compaction_point(
    window: int,
    *,
    auto_compact_window: int | None = None,
    pct_override: float | None = None,
    disabled: bool = False,
) -> float | None:
    """Where Claude Code auto-compacts, in percent of ``window``; None when it never does.

    ``auto_compact_window`` (``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` or the ``autoCompactWindow``
    setting) is clamped to 100k and to the model's window; compaction comes at that window
    less :data:`CLAUDE_RESERVE_TOKENS`. ``pct_override`` (``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``,
    1-100 of the auto-compact window) can only lower the point. ``disabled``
    (``DISABLE_AUTO_COMPACT`` or ``DISABLE_COMPACT``): no automatic compaction.
    """
    size = _positive(window)
    if disabled or size is None:
        return None
    effective = size
    chosen = _positive(auto_compact_window)
    if chosen is not None:
        effective = min(max(chosen, float(CLAUDE_MIN_AUTO_COMPACT_WINDOW)), size)
    point = max(effective - CLAUDE_RESERVE_TOKENS, 0.0)
    pct = _positive(pct_override)
    if pct is not None and pct <= 100:
        point = min(point, effective * pct / 100)
    return point * 100 / size


def codex_compaction_point(window: int, auto_compact_token_limit: int | None) -> float | None:
    """Where Codex compacts, in percent of ``window``: its ``model_auto_compact_token_limit``
    over the window; None when no limit is known."""
    size = _positive(window)
    limit = _positive(auto_compact_token_limit)
    if size is None or limit is None:
        return None
    return min(limit, size) * 100 / size


def _names_past(policy: TierPolicy, point: float | None) -> tuple[str, ...]:
    """The names of the tiers of ``policy`` whose lower bound lies at or past ``point``,
    lowest first (by name: the status line asks on every call, and the Tier enum would cost
    its process the import of enum)."""
    if point is None or not math.isfinite(point):
        return ()
    return tuple(name for name in ("amber", "red", "critical") if getattr(policy, name) >= point)


def tiers_past_compaction(policy: TierPolicy, point: float | None) -> tuple[Tier, ...]:
    """The tiers of ``policy`` whose lower bound lies at or past the host's compaction point
    (percent of the window), lowest first; none when the host never compacts."""
    from onstation.core.tiers import Tier

    return tuple(Tier(name) for name in _names_past(policy, point))


def compaction_warning(policy: TierPolicy, point: float | None) -> str | None:
    """One line saying which configured tiers the host's compaction comes before, or None.

    Only Red (the brief) and Critical matter: a body must hear Red before its host compacts.
    """
    past = [name for name in _names_past(policy, point) if name != "amber"]
    if not past or point is None:
        return None
    names = " and ".join(f"{name.capitalize()} ({getattr(policy, name):g}%)" for name in past)
    verb = "lies" if len(past) == 1 else "lie"
    return (
        f"tier policy {policy.name}: {names} {verb} past the host's compaction point "
        f"({point:.1f}% of the window); the host compacts before onstation asks for the brief"
    )


def reject_reason(reading: FillReading) -> str | None:
    """Why a reading is impossible (and must not be acted on), or None when it is credible.

    Impossible: a percent that is not a finite number between 0 and 100, a negative count,
    or more tokens used than the window holds.
    """
    percent = reading.percent
    if isinstance(percent, bool) or not isinstance(percent, int | float):
        return f"{reading.source}: percent is not a number"
    if not math.isfinite(percent) or percent < 0:
        return f"{reading.source}: percent {percent!r} is impossible"
    if percent > 100:
        return f"{reading.source}: {percent:.0f}% of the window is over 100%"
    used = reading.used_tokens
    if used is not None and (used < 0 or used > reading.window_tokens):
        return f"{reading.source}: {used} tokens do not fit a window of {reading.window_tokens}"
    return None
