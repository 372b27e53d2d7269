"""One time format for every human message: UTC, ISO 8601, whole seconds, ``Z``.

``human_time(dt)`` is what a person reads in the CLI's lines, tables and reasons
(``2026-12-01T06:30:00Z``). ``--json`` output keeps its own, unchanged formats; this module
is only for text meant to be read. A naive datetime is refused: a time without a zone is
ambiguous, and guessing its zone is how logs end up an hour off.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["human_time", "human_time_text"]


def human_time(moment: datetime) -> str:
    """``moment`` in UTC as ``YYYY-MM-DDTHH:MM:SSZ`` (truncated to whole seconds)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"human_time: a naive datetime has no zone: {moment!r}")
    u = moment.astimezone(UTC)
    # Formatted by hand: strftime's %Y does not pad years before 1000 on every platform.
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}Z"


def human_time_text(text: str) -> str:
    """An ISO 8601 time as text (as ``--json`` carries it) in the human format.

    Text that does not parse as a zoned ISO 8601 time is returned unchanged: a message is
    never lost for its time's sake."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return human_time(moment)
    except ValueError:
        return text
