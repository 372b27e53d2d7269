"""A relief's decision does each piece of work once (issue 14): the body's session is read
once for the capsule's parts and the incident's sourceHarness, and the sealed capsule's
signature is verified once and its effects fingerprinted once, for the verdict and the
plan validator both, which still find the plan valid."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from test_relief_batched_writes import relief  # noqa: F401 - the fixture

from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.plan import capsule as capsule_module
from onstation.plan import validator as validator_module
from onstation.relief.relieve import Relief


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, seen: list[str]) -> None:
    real = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen.append(f"{name} < {sys._getframe(1).f_code.co_name}")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)


def test_a_relief_decides_with_each_check_once(
    relief: tuple[Ledger, Relief],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger, run = relief
    # Two settled effects for the capsule to carry (and the checks to fingerprint).
    for n in range(2):
        effect, _ = ledger.intend_effect("agent-1", generation=1, operation="slack.post",
                                         destination="https://slack.example/api",
                                         arguments={"text": f"update {n}"})  # fmt: skip
        ledger.dispatch_effect(effect.effect_id, generation=1)
        ledger.observe_effect(effect.effect_id, generation=1, result={"ok": True})
        ledger.commit_effect(effect.effect_id, generation=1)
    seen: list[str] = []
    _counting(monkeypatch, HarnessLedger, "sessions", seen)
    _counting(monkeypatch, capsule_module, "verify_receipt", seen)
    _counting(monkeypatch, validator_module, "verify_receipt", seen)
    _counting(monkeypatch, validator_module, "fingerprint", seen)
    plans: list[Any] = []
    real_validate = validator_module.validate_plan

    def validating(plan: Any, **kwargs: Any) -> Any:
        report = real_validate(plan, **kwargs)
        plans.append((plan, kwargs, report))
        return report

    monkeypatch.setattr(validator_module, "validate_plan", validating)
    outcome = run.run()
    assert outcome.state == "SETTLED", outcome
    # One session read in the decision (the others: the native candidate and the launch).
    assert seen.count("sessions < _body_session") == 1, seen
    # The sealed capsule's one receipt, verified once; the plan validator reused it.
    assert [s for s in seen if s.startswith("verify_receipt")] == ["verify_receipt < verify"]
    [(plan, kwargs, report)] = plans
    assert report.valid
    effects = len(plan["capsule"]["payload"]["effects"])
    assert effects == 2
    assert seen.count("fingerprint < _effect_print") == effects
    # Without the check, the validator verifies and fingerprints again, and agrees.
    seen.clear()
    trusted = kwargs["trusted"]
    assert real_validate(plan, trusted=trusted) == report
    assert seen.count("verify_receipt < _rcpt_002") == 1
    assert seen.count("fingerprint < _effect_print") == effects
