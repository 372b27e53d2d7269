"""Ledger contract, on every backend: ``lease(node, generation)`` reads one generation's lease,
exactly as ``leases(node)`` lists it (issue 14: the relief's challenge polls one generation
instead of reading every lease the identity ever had)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from onstation.core.errors import BadInput
from onstation.core.leases import LeaseState
from onstation.ledger import Ledger
from onstation.testing import FakeClock


def test_each_generation_reads_as_leases_lists_it(ledger: Ledger, clock: FakeClock) -> None:
    ledger.register_node("exec-1", role="executor", spawner="lead")
    assert ledger.lease("exec-1", 1) is None  # registered, never embodied
    ledger.acquire_lease("exec-1", holder="body-1")
    clock.advance(seconds=5)
    ledger.renew_lease("exec-1", generation=1, ttl=timedelta(seconds=60))
    ledger.fence("exec-1", expect_generation=1, reason="relief")
    ledger.acquire_lease("exec-1", holder="body-2")
    listed = {ls.generation: ls for ls in ledger.leases("exec-1")}
    assert set(listed) == {1, 2}
    for generation, expected in listed.items():
        assert ledger.lease("exec-1", generation) == expected
    first = ledger.lease("exec-1", 1)
    assert first is not None and first.state is LeaseState.FENCED
    assert first.renewed_at > first.acquired_at  # the renewal is read, not a stale copy
    assert ledger.lease("exec-1", 3) is None


def test_a_renewal_is_seen_at_the_next_read(ledger: Ledger, clock: FakeClock) -> None:
    ledger.register_node("exec-1", role="executor", spawner="lead")
    ledger.acquire_lease("exec-1", holder="body-1")
    before = ledger.lease("exec-1", 1)
    assert before is not None and before.renewed_at == before.acquired_at
    clock.advance(seconds=7)
    ledger.renew_lease("exec-1", generation=1, ttl=timedelta(seconds=60))
    after = ledger.lease("exec-1", 1)
    assert after is not None and after.renewed_at == before.acquired_at + timedelta(seconds=7)


def test_an_unknown_identity_is_refused(ledger: Ledger) -> None:
    with pytest.raises(BadInput, match="no such node"):
        ledger.lease("nobody", 1)
    with pytest.raises(BadInput):
        ledger.lease("../bad", 1)
