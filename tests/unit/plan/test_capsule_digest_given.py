"""A capsule digest the caller computed itself (issue 14: once per relief) replaces only the
recomputation: the stated digest, every receipt's binding and signature are still checked
against it, so a wrong digest or a bad signature is refused as before."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from plan_testkit import ISSUED_AT, TRUST, example, ready_plan

from onstation.plan import capsule
from onstation.plan.capsule import CapsuleRejected, capsule_digest, seal, verify
from onstation.plan.example_key import example_private_key
from onstation.plan.validator import capsule_defects, validate_plan


def _payload() -> dict[str, Any]:
    payload = example("resurrection-plan.ready.json")["capsule"]["payload"]
    assert isinstance(payload, dict)
    return payload


@pytest.fixture
def digests(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The scope of every digest capsule.py computes."""
    seen: list[str] = []
    real = capsule.digest

    def counting(scope: str, value: Any) -> str:
        seen.append(scope)
        return real(scope, value)

    monkeypatch.setattr(capsule, "digest", counting)
    return seen


def test_a_given_digest_is_not_recomputed(digests: list[str]) -> None:
    payload = _payload()
    known = capsule_digest(payload)
    digests.clear()
    sealed = seal(payload, example_private_key(), issued_at=ISSUED_AT, payload_digest=known)
    verified = verify(sealed, TRUST, payload_digest=known)
    assert not capsule_defects(sealed, known)
    assert digests == []
    assert sealed["digest"] == verified.digest == known
    verify(sealed, TRUST)  # without it: recomputed, and the same
    assert digests == [capsule.CAPSULE_SCOPE]


def test_a_wrong_given_digest_is_refused() -> None:
    payload = _payload()
    sealed = seal(payload, example_private_key(), issued_at=ISSUED_AT)
    other = copy.deepcopy(payload)
    other["objective"] = "another objective"
    wrong = capsule_digest(other)
    with pytest.raises(CapsuleRejected, match="digest differs"):
        verify(sealed, TRUST, payload_digest=wrong)
    assert {d.rule for d in capsule_defects(sealed, wrong)} >= {"OS-CAPS-001", "OS-RCPT-001"}


def test_a_given_digest_still_has_every_signature_checked() -> None:
    payload = _payload()
    known = capsule_digest(payload)
    stranger = Ed25519PrivateKey.generate()
    sealed = seal(payload, stranger, issued_at=ISSUED_AT, payload_digest=known)
    with pytest.raises(CapsuleRejected, match="not trusted"):
        verify(sealed, TRUST, payload_digest=known)
    forged = seal(payload, example_private_key(), issued_at=ISSUED_AT, payload_digest=known)
    forged["receipts"][0]["signature"] = sealed["receipts"][0]["signature"]
    with pytest.raises(CapsuleRejected):
        verify(forged, TRUST, payload_digest=known)


def test_the_validator_compares_a_given_digest_with_the_stated_one() -> None:
    plan = ready_plan()
    known = capsule_digest(plan["capsule"]["payload"])
    assert validate_plan(plan, trusted=TRUST, capsule_digest=known).valid
    other = copy.deepcopy(plan["capsule"]["payload"])
    other["objective"] = "another objective"
    report = validate_plan(plan, trusted=TRUST, capsule_digest=capsule_digest(other))
    assert "OS-CAPS-001" in report.rules()
