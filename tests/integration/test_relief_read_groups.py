"""A relief's groups of reads with no write or wait between them share one read transaction
(issue 14: one BEGIN and ROLLBACK each instead of one pair per read), and see what a read of
its own would have seen."""

from __future__ import annotations

from typing import Any

import pytest
from test_relief_batched_writes import relief  # noqa: F401 - the fixture

from onstation.ledger import Ledger
from onstation.relief.relieve import Relief


@pytest.fixture
def read_transactions(relief: tuple[Ledger, Relief], monkeypatch: pytest.MonkeyPatch) -> list[str]:  # noqa: F811
    """How each read transaction was opened: "reading" (a group) or "_read" (one read)."""
    import sys

    ledger, _run = relief
    opened: list[str] = []
    backend = ledger.backend
    real = backend.read

    def counting() -> Any:
        opened.append(sys._getframe(1).f_code.co_name)
        return real()

    monkeypatch.setattr(backend, "read", counting)
    return opened


def test_building_a_payload_reads_in_one_transaction(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    read_transactions: list[str],
) -> None:
    from onstation.plan.build import build_payload
    from onstation.plan.evidence import GitEvidence

    ledger, _run = relief
    read_transactions.clear()
    evidence = GitEvidence(workspace="/nowhere", repository=False)
    payload = build_payload(ledger, "agent-1", evidence=evidence, agent=None, now=ledger.now())
    assert read_transactions == ["reading"]
    assert payload["subject"]["generation"] == 1
    assert payload["subject"]["sequence"] == ledger.history("agent-1")[-1].seq


def test_a_relief_opens_far_fewer_read_transactions_than_it_reads(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    read_transactions: list[str],
) -> None:
    _ledger, run = relief
    outcome = run.run()
    assert outcome.state == "SETTLED", outcome
    # preflight, cause, brief lookup, brief, agent parts, payload, incident
    assert read_transactions.count("reading") >= 7, read_transactions
