"""The one human time format: UTC, ISO 8601, whole seconds, ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onstation.core.timefmt import human_time, human_time_text

_ZONES = st.builds(
    timezone,
    st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(
        lambda minutes: timedelta(minutes=minutes)
    ),
)
_MOMENTS = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=_ZONES
)


@given(_MOMENTS)
def test_human_time_parses_back_to_the_same_utc_second(moment: datetime) -> None:
    text = human_time(moment)
    assert text.endswith("Z")
    assert len(text) == len("2026-12-01T06:30:00Z")
    back = datetime.fromisoformat(text)
    assert back.utcoffset() == timedelta(0)
    assert back == moment.astimezone(UTC).replace(microsecond=0)


def test_human_time_example() -> None:
    moment = datetime(2026, 12, 1, 7, 30, 0, 999_999, tzinfo=timezone(timedelta(hours=1)))
    assert human_time(moment) == "2026-12-01T06:30:00Z"


def test_human_time_pads_early_years() -> None:
    assert human_time(datetime(5, 1, 2, 3, 4, 5, tzinfo=UTC)) == "0005-01-02T03:04:05Z"


def test_human_time_refuses_naive_datetimes() -> None:
    with pytest.raises(ValueError, match="naive"):
        human_time(datetime(2026, 12, 1, 6, 30))


def test_human_time_text() -> None:
    assert human_time_text("2026-12-01T03:33:13.942732+00:00") == "2026-12-01T03:33:13Z"
    assert human_time_text("2026-12-01T03:33:13Z") == "2026-12-01T03:33:13Z"
    assert human_time_text("never") == "never"
    assert human_time_text("2026-12-01T03:33:13") == "2026-12-01T03:33:13"  # naive: unchanged
