"""Relief records on every backend: one relief in progress per identity; an abandoned one
(its controller died mid-way) is taken over once it is stale, and stays on record."""

from __future__ import annotations

from datetime import timedelta

import pytest

from onstation.core.errors import Conflict
from onstation.ledger import Ledger
from onstation.ledger.relief_records import ReliefLedger
from onstation.testing import FakeClock


def test_one_relief_at_a_time_and_abandoned_ones_are_taken_over(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.register_node("exec-1")
    relief = ReliefLedger(ledger)
    first = relief.open_relief("exec-1", cause="red", by="lead-a", stale_after=timedelta(hours=1))
    with pytest.raises(Conflict, match="already in progress"):
        relief.open_relief("exec-1", cause="red", by="lead-b", stale_after=timedelta(hours=1))
    clock.advance(hours=2)  # lead-a crashed mid-relief and never came back
    second = relief.open_relief("exec-1", cause="red", by="lead-b",
                                stale_after=timedelta(hours=1))  # fmt: skip
    states = {r.relief_id: r.state for r in relief.reliefs("exec-1")}
    assert states == {first.relief_id: "ABANDONED", second.relief_id: "REQUESTED"}
    assert "relief.abandoned" in [e.kind for e in ledger.history("exec-1")]
