"""An incident or a plan is schema-checked around a capsule already proven (issue 14): a
relief's sealed capsule passed the capsule schema on the compiled path when it was sealed,
and the incident and the plan that embed that very object do not walk it again. The answer
is the whole schema's whenever the capsule did pass; any capsule not shown to be that very
object, unchanged, is checked as part of the document."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from plan_testkit import ISSUED_AT, TRUST, example
from test_fast_schema import DOCUMENTS, mutated

from onstation.plan import schemas
from onstation.plan.capsule import (
    CAPSULE_SCOPE,
    capsule_digest,
    compiled_schema_passed,
    seal,
    verify,
)
from onstation.plan.example_key import example_private_key
from onstation.plan.incident import resurrect
from onstation.plan.schemas import fast_accepts, schema_violations
from onstation.plan.signing import sign_receipt
from onstation.plan.validator import check_capsule, validate_plan


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which compiled validator each schema check asked: ``name`` for a whole schema,
    ``name~`` for one around its capsule."""
    seen: list[str] = []
    whole, around = schemas.fast_validator, schemas._around_capsule_validator

    def whole_of(name: str) -> Any:
        seen.append(name)
        return whole(name)

    def around_of(name: str) -> Any:
        seen.append(f"{name}~")
        return around(name)

    monkeypatch.setattr(schemas, "fast_validator", whole_of)
    monkeypatch.setattr(schemas, "_around_capsule_validator", around_of)
    return seen


def _sealed_incident(objective: str) -> tuple[dict[str, Any], str]:
    """The shipped incident with its capsule sealed anew, as a relief seals it (with its own
    digest of the payload), and that digest."""
    incident = example("sample-input.json")
    payload = incident["capsule"]["payload"]
    payload["objective"] = objective  # bytes no other test has sealed
    known = capsule_digest(payload)
    incident["capsule"] = seal(
        payload, example_private_key(), issued_at=ISSUED_AT, payload_digest=known
    )
    return incident, known


def test_a_relief_checks_its_capsule_once_and_the_incident_and_plan_around_it(
    asked: list[str],
) -> None:
    incident, known = _sealed_incident("around: a relief's order")
    capsule = incident["capsule"]
    assert compiled_schema_passed(capsule, known)
    check = check_capsule(capsule, TRUST, known)
    assert check.compiled and check.passed_schema(capsule, known)
    asked.clear()
    plan, _ = resurrect(incident, trusted=TRUST, capsule_digest=known, capsule_check=check)
    assert plan["capsule"] is capsule
    report = validate_plan(plan, trusted=TRUST, capsule_digest=known, capsule_check=check)
    assert "incident~" in asked and "plan~" in asked
    assert "incident" not in asked and "plan" not in asked and "capsule" not in asked
    # The same answers as checking everything again.
    assert report == validate_plan(copy.deepcopy(plan), trusted=TRUST)


def test_without_proof_the_capsule_is_checked_with_the_document(asked: list[str]) -> None:
    incident, known = _sealed_incident("around: no proof")
    capsule = incident["capsule"]
    copied = copy.deepcopy(capsule)
    assert not compiled_schema_passed(copied, known)  # an equal copy is another object
    assert not compiled_schema_passed(capsule, None)  # the caller's own digest is needed
    check = check_capsule(copied, TRUST, known)
    assert not check.compiled
    asked.clear()
    resurrect(incident, trusted=TRUST, capsule_digest=known, capsule_check=check)
    assert "incident" in asked and "incident~" not in asked


def test_a_capsule_changed_after_it_passed_is_checked_again(asked: list[str]) -> None:
    incident, known = _sealed_incident("around: changed")
    capsule = incident["capsule"]
    capsule["receipts"][0]["issuedAt"] = "yesterday"  # beside the payload: its bytes differ
    assert not compiled_schema_passed(capsule, known)
    check = check_capsule(capsule, TRUST, known)
    assert not check.compiled and not check.passed_schema(capsule, known)
    plan = example("resurrection-plan.ready.json")
    plan["capsule"] = capsule
    asked.clear()
    found = validate_plan(plan, trusted=TRUST, capsule_digest=known, capsule_check=check)
    assert "plan" in asked and "plan~" not in asked
    assert any(v.pointer.startswith("/capsule/receipts/0/issuedAt") for v in found.violations)


def test_a_capsule_verified_but_not_sealed_here_is_not_held() -> None:
    # A document read from anywhere is verified (and its bytes remembered as passed), but
    # the object is not kept: only what this process sealed is.
    incident, known = _sealed_incident("around: read back")
    read_back = copy.deepcopy(incident["capsule"])
    subject = read_back["payload"]["subject"]
    read_back["receipts"] = [
        sign_receipt(
            example_private_key(), scope=CAPSULE_SCOPE, node=subject["node"],
            generation=subject["generation"], sequence=subject["sequence"], digest_hex=known,
            issued_at="2026-03-02T09:22:00Z",
        )
    ]  # fmt: skip
    verify(read_back, TRUST, payload_digest=known)  # bytes never checked before: checked now
    assert not compiled_schema_passed(read_back, known)
    assert not check_capsule(read_back, TRUST, known).compiled
    assert compiled_schema_passed(incident["capsule"], known)


def test_a_capsule_the_compiled_validator_refused_is_not_held() -> None:
    # Accepted by the pure-Python validator only (its `$` matches before a final newline):
    # not shown to be plain JSON that the compiled validator accepts.
    incident = example("sample-input.json")
    payload = incident["capsule"]["payload"]
    payload["subject"]["node"] += "\n"
    known = capsule_digest(payload)
    sealed = seal(payload, example_private_key(), issued_at=ISSUED_AT, payload_digest=known)
    assert not compiled_schema_passed(sealed, known)
    assert not check_capsule(sealed, TRUST, known).compiled


def test_around_is_ignored_unless_it_is_the_documents_own_capsule(asked: list[str]) -> None:
    plan = example("resurrection-plan.ready.json")
    asked.clear()
    assert fast_accepts("plan", plan, around=copy.deepcopy(plan["capsule"]))
    assert fast_accepts("capacity", plan["capacity"]["evidence"], around=plan["capsule"])
    assert asked == ["plan", "capacity"]


def test_the_around_schemas_keep_their_guards_on_the_capsule() -> None:
    # OS-SCH-011: a ready verdict needs a signed capsule. The guard looks into /capsule, so
    # it holds around a capsule that passed the capsule schema without a receipt.
    plan = example("resurrection-plan.ready.json")
    plan["capsule"]["receipts"] = []
    assert fast_accepts("capsule", plan["capsule"])
    assert not fast_accepts("plan", plan, around=plan["capsule"])
    assert "OS-SCH-011" in {v.rule for v in schema_violations("plan", plan, around=plan["capsule"])}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated([d for d in DOCUMENTS if d[0] in schemas.EMBEDS_CAPSULE]))
def test_around_a_capsule_that_passes_the_answer_is_the_whole_schemas(
    case: tuple[str, Any],
) -> None:
    name, doc = case
    capsule = doc.get("capsule") if isinstance(doc, dict) else None
    if capsule is None or not fast_accepts("capsule", capsule):
        return  # no proof to give: the document is checked whole
    assert fast_accepts(name, doc, around=capsule) == fast_accepts(name, doc)
    assert schema_violations(name, doc, around=capsule) == schema_violations(name, doc)
