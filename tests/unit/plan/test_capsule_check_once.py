"""A relief checks its sealed capsule once (issue 14): the verdict's check (defects, the
signature verification) is handed to the plan validator, which reuses its effect
fingerprints and verified signatures only for that very document, unchanged, under the
same keys. Anything else is checked again, so every report equals the one without it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from plan_testkit import TRUST, example
from test_fast_schema import BENCH_PLAN, mutated

from onstation.plan import capsule as capsule_module
from onstation.plan import incident as incident_module
from onstation.plan import validator as validator_module
from onstation.plan.capsule import capsule_digest
from onstation.plan.incident import resurrect
from onstation.plan.signing import key_id, public_raw
from onstation.plan.validator import check_capsule, validate_plan


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many receipts each layer verified and how many fingerprints the rules computed."""
    seen = {"verify": 0, "validator-verify": 0, "prints": 0}

    def counting(name: str, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen[name] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(
        capsule_module, "verify_receipt", counting("verify", capsule_module.verify_receipt)
    )
    monkeypatch.setattr(
        validator_module,
        "verify_receipt",
        counting("validator-verify", validator_module.verify_receipt),
    )
    monkeypatch.setattr(
        validator_module, "fingerprint", counting("prints", validator_module.fingerprint)
    )
    return seen


def _plan() -> dict[str, Any]:
    return copy.deepcopy(BENCH_PLAN)


def test_the_validator_reuses_the_check_of_the_very_capsule(counts: dict[str, int]) -> None:
    plan = _plan()
    effects = len(plan["capsule"]["payload"]["effects"])
    check = check_capsule(plan["capsule"], TRUST)
    assert check.defects == ()
    assert counts == {"verify": 1, "validator-verify": 0, "prints": effects}
    report = validate_plan(plan, trusted=TRUST, capsule_check=check)
    assert report.valid
    # Nothing recomputed: no fingerprint, no signature.
    assert counts == {"verify": 1, "validator-verify": 0, "prints": effects}
    assert validate_plan(plan, trusted=TRUST) == report
    assert counts == {"verify": 1, "validator-verify": 1, "prints": 2 * effects}


def test_an_equal_copy_is_checked_again(counts: dict[str, int]) -> None:
    plan = _plan()
    check = check_capsule(copy.deepcopy(plan["capsule"]), TRUST)
    before = dict(counts)
    assert validate_plan(plan, trusted=TRUST, capsule_check=check).valid
    assert counts["validator-verify"] == before["validator-verify"] + 1
    assert counts["prints"] > before["prints"]


def test_a_receipt_changed_after_the_check_is_verified_again() -> None:
    plan = _plan()
    check = check_capsule(plan["capsule"], TRUST)
    receipt = plan["capsule"]["receipts"][0]
    signature = receipt["signature"]
    receipt["signature"] = signature[:-2] + ("00" if signature[-2:] != "00" else "01")
    found = validate_plan(plan, trusted=TRUST, capsule_check=check)
    assert "OS-RCPT-002" in found.rules()
    assert found == validate_plan(plan, trusted=TRUST)


def test_an_effect_changed_after_the_check_is_fingerprinted_again() -> None:
    plan = _plan()
    check = check_capsule(plan["capsule"], TRUST)
    plan["capsule"]["payload"]["effects"][0]["destination"] = "https://elsewhere.example/"
    # Without a digest from the caller the payload's is recomputed: it differs from the
    # check's, so no fingerprint of the check is used.
    found = validate_plan(plan, trusted=TRUST, capsule_check=check)
    assert {"OS-EFF-001", "OS-CAPS-001"} <= found.rules()
    assert found == validate_plan(plan, trusted=TRUST)


def test_a_signature_is_reused_only_under_the_same_key() -> None:
    plan = _plan()
    check = check_capsule(plan["capsule"], TRUST)
    kid = plan["capsule"]["receipts"][0]["keyId"]
    other = public_raw(Ed25519PrivateKey.generate())
    # The same key id trusted with other key bytes: the signature must be checked (and
    # refused: the key id does not derive from those bytes).
    swapped = {**TRUST, kid: other}
    found = validate_plan(plan, trusted=swapped, capsule_check=check)
    assert "OS-RCPT-002" in found.rules()
    assert found == validate_plan(plan, trusted=swapped)


def test_a_check_under_other_keys_does_not_answer_for_the_verdict() -> None:
    incident = example("sample-input.json")
    stranger = public_raw(Ed25519PrivateKey.generate())
    untrusting = check_capsule(incident["capsule"], {key_id(stranger): stranger})
    assert untrusting.defects[0].startswith("capsule not verified")
    assert not untrusting.answers(incident["capsule"], None, TRUST)
    _, alone = resurrect(copy.deepcopy(incident), trusted=TRUST)
    _, given = resurrect(incident, trusted=TRUST, capsule_check=untrusting)
    assert given == alone


def test_resurrect_uses_a_check_that_answers(
    monkeypatch: pytest.MonkeyPatch, counts: dict[str, int]
) -> None:
    incident = example("sample-input.json")
    known = capsule_digest(incident["capsule"]["payload"])
    check = check_capsule(incident["capsule"], TRUST, known)
    calls: list[Any] = []
    real = incident_module.check_capsule

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(incident_module, "check_capsule", recording)
    plan, verdict = resurrect(incident, trusted=TRUST, capsule_digest=known, capsule_check=check)
    assert calls == []
    assert (plan, verdict) == resurrect(copy.deepcopy(incident), trusted=TRUST)
    assert len(calls) == 1


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated([("capsule", BENCH_PLAN["capsule"])]))
def test_a_check_never_changes_a_report(case: tuple[str, Any]) -> None:
    """The capsule changed in place after its check (the same object): the report with the
    check equals the report without it."""
    _, changed = case
    plan = _plan()
    check = check_capsule(plan["capsule"], TRUST)
    plan["capsule"].clear()
    plan["capsule"].update(changed)
    assert validate_plan(plan, trusted=TRUST, capsule_check=check) == validate_plan(
        copy.deepcopy(plan), trusted=TRUST
    )
