"""The hull integrity tiers as an enum (:class:`Tier`), for the code that works with tiers.

Kept apart from :mod:`onstation.core.hull` so that a hook's fast path, which only needs a
tier's name (:func:`onstation.core.hull.tier_value`), never imports ``enum``: about 1.5 ms of
every such process's start. ``onstation.core.hull.Tier`` is this class, loaded on first use.
"""

from __future__ import annotations

from enum import StrEnum

TYPE_CHECKING = False  # typing costs the status line's process its import time
if TYPE_CHECKING:
    from typing import Final


class Tier(StrEnum):
    """Hull integrity tier, from healthy to emergency."""

    GREEN = "green"
    AMBER = "amber"
    RED = "red"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 for Green up to 3 for Critical; compare tiers by rank, never by string."""
        return _RANK[self]


_RANK: Final = {Tier.GREEN: 0, Tier.AMBER: 1, Tier.RED: 2, Tier.CRITICAL: 3}
