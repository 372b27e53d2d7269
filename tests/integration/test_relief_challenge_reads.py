"""The challenge wait reads the successor's birth and, once answered, its lease in one read
transaction per poll (issue 14: two before), so both describe one moment."""

from __future__ import annotations

from typing import Any

import pytest
from test_relief_batched_writes import relief  # noqa: F401 - the fixture

from onstation.ledger import Ledger
from onstation.ledger.relief_records import ReliefLedger
from onstation.relief.relieve import Relief


def test_each_poll_reads_the_birth_and_its_lease_together(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger, run = relief
    reads: list[tuple[str, int | None, bool]] = []  # (what, the unit's id, answered)
    real_birth, real_lease = ReliefLedger.birth, Ledger.lease

    def unit() -> int | None:
        current = ledger._unit
        return id(current) if current is not None and current.read_only else None

    def birth(self: ReliefLedger, node: str, generation: int) -> Any:
        found = real_birth(self, node, generation)
        answered = found is not None and found.answered_at is not None
        reads.append(("birth", unit(), answered))
        return found

    def lease(self: Ledger, node: str, generation: int) -> Any:
        reads.append(("lease", unit(), True))
        return real_lease(self, node, generation)

    monkeypatch.setattr(ReliefLedger, "birth", birth)
    monkeypatch.setattr(Ledger, "lease", lease)
    outcome = run.run()
    assert outcome.state == "SETTLED", outcome
    leases = [i for i, (what, _, _) in enumerate(reads) if what == "lease"]
    assert leases, reads  # the echo came: its lease was read
    for i in leases:
        what, group, _ = reads[i - 1]
        # Right after an answered birth, inside the same read transaction.
        assert (what, reads[i - 1][2]) == ("birth", True) and group is not None, reads
        assert reads[i][1] == group, reads
