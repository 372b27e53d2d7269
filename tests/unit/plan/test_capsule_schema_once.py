"""The same capsule bytes are checked against the schema once (issue 14): sealing what was
just built and verifying what was just sealed re-check nothing already proven, while the
digest and the signatures are still recomputed, and any changed byte is checked again."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from plan_testkit import ISSUED_AT, TRUST, example

from onstation.plan import capsule
from onstation.plan.capsule import CapsuleRejected, schema_passed, seal, unsealed, verify
from onstation.plan.example_key import example_private_key


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every document capsule.py hands to the schema validator."""
    seen: list[Any] = []
    real = capsule.schema_check

    def counting(name: str, instance: Any, base: str = "", **kwargs: Any) -> Any:
        seen.append(copy.deepcopy(instance))
        return real(name, instance, base, **kwargs)

    monkeypatch.setattr(capsule, "schema_check", counting)
    return seen


def _payload(objective: str) -> dict[str, Any]:
    payload = example("resurrection-plan.ready.json")["capsule"]["payload"]
    payload["objective"] = objective  # a payload no other test has sealed
    assert isinstance(payload, dict)
    return payload


def test_sealing_a_built_payload_and_verifying_it_checks_only_the_receipt(
    checks: list[Any],
) -> None:
    payload = _payload("schema once: built, sealed, verified")
    doc = unsealed(payload)
    schema_passed(doc, doc["digest"])  # what build_payload does after its own check
    sealed = seal(payload, example_private_key(), issued_at=ISSUED_AT)
    assert len(checks) == 1 and checks[0]["receipts"]  # only the sealed form was new
    verified = verify(sealed, TRUST)
    assert len(checks) == 1  # the very bytes just sealed
    assert verified.digest == sealed["digest"]


def test_a_changed_byte_is_checked_again_and_refused(checks: list[Any]) -> None:
    sealed = seal(_payload("schema once: tampered"), example_private_key(), issued_at=ISSUED_AT)
    before = len(checks)
    bad = copy.deepcopy(sealed)
    bad["payload"]["subject"]["generation"] = "four"  # the schema wants an integer
    with pytest.raises(CapsuleRejected, match="capsule"):
        verify(bad, TRUST)
    assert len(checks) == before + 1
    extra = copy.deepcopy(sealed)
    extra["unexpected"] = True  # beside the payload: its own bytes differ too
    with pytest.raises(CapsuleRejected):
        verify(extra, TRUST)
    assert len(checks) == before + 2


def test_signatures_and_the_digest_are_still_recomputed(checks: list[Any]) -> None:
    sealed = seal(_payload("schema once: forged"), example_private_key(), issued_at=ISSUED_AT)
    verify(sealed, TRUST)
    forged = copy.deepcopy(sealed)
    forged["receipts"][0]["signature"] = "0" * 128
    with pytest.raises(CapsuleRejected, match="signature"):
        verify(forged, TRUST)
    relabelled = copy.deepcopy(sealed)
    relabelled["digest"] = "0" * 64
    with pytest.raises(CapsuleRejected, match="digest"):
        verify(relabelled, TRUST)
    with pytest.raises(CapsuleRejected, match="not trusted"):
        verify(sealed, {})
