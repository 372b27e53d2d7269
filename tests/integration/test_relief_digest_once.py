"""A relief computes its capsule's digest once (issue 14): it builds the payload, seals it,
verifies it for the verdict and validates the plan that carries it, all over the one object
it built and held, and each step checks the stated digest and the signature against that
digest instead of canonicalizing the payload again."""

from __future__ import annotations

from typing import Any

import pytest
from test_relief_batched_writes import relief  # noqa: F401 - the fixture

from onstation.ledger import Ledger
from onstation.plan import capsule
from onstation.plan.capsule import CAPSULE_SCOPE
from onstation.relief.relieve import Relief


def test_a_relief_digests_its_capsule_once(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger, run = relief
    scopes: list[str] = []
    real = capsule.digest

    def counting(scope: str, value: Any) -> str:
        scopes.append(scope)
        return real(scope, value)

    monkeypatch.setattr(capsule, "digest", counting)
    outcome = run.run()
    assert outcome.state == "SETTLED", outcome
    assert scopes.count(CAPSULE_SCOPE) == 1
    from onstation.ledger.relief_records import ReliefLedger

    [record] = ReliefLedger(ledger).reliefs("agent-1")
    assert not record.detail.get("plan_violations"), record.detail
