"""The validator's rules on the proposed body: capacity evidence (OS-CAPY-*), native resume
(OS-NAT-*) and capability translation (OS-XLT-*). The catalogue is
:data:`onstation.plan.validator.RULES`."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Any

from onstation.core.canonical import digest
from onstation.core.capabilities import ABSENT, Classification, classify
from onstation.core.errors import BadInput
from onstation.core.verdict import Disposition
from onstation.plan.rule_context import _Ctx, _list, _obj, _time, _v
from onstation.plan.schemas import Violation, schema_violations

CAPACITY_SCOPE = "onstation-capacity-evidence-v1"


def _evidence(c: _Ctx) -> dict[str, Any] | None:
    if c.capacity is None:
        return None
    evidence = c.capacity.get("evidence")
    return evidence if isinstance(evidence, dict) else None


def capacity_digest(evidence: Any) -> str:
    """The content address of a capacity-evidence artifact."""
    return digest(CAPACITY_SCOPE, evidence)


def _capy_001(c: _Ctx) -> Iterator[Violation]:
    evidence = _evidence(c)
    if evidence is None or c.capacity is None:
        return
    try:
        recomputed = capacity_digest(evidence)
    except BadInput:
        yield _v("/capacity/evidence", "OS-CAPY-001", "the evidence has no canonical form")
        return
    stated = c.capacity.get("evidenceDigest")
    if not isinstance(stated, str) or not hmac.compare_digest(
        stated.encode("ascii", "replace"), recomputed.encode("ascii")
    ):
        yield _v(
            "/capacity/evidenceDigest",
            "OS-CAPY-001",
            f"evidence digest differs from the recomputed {recomputed}",
        )
    cited = _obj(c.payload.get("capacityState")).get("evidenceDigest")
    if isinstance(cited, str) and cited != recomputed:
        yield _v(
            "/capsule/payload/capacityState/evidenceDigest",
            "OS-CAPY-001",
            "the capsule cites other capacity evidence than the plan carries",
        )


def _capy_002(c: _Ctx) -> Iterator[Violation]:
    evidence = _evidence(c)
    if c.capacity is None:
        return
    if evidence is None:
        yield _v("/capacity/evidence", "OS-CAPY-002", "the capacity artifact is missing")
        return
    for problem in schema_violations("capacity", evidence, "/capacity/evidence"):
        yield _v(problem.pointer, "OS-CAPY-002", f"incomplete capacity artifact: {problem.message}")


def _capy_003(c: _Ctx) -> Iterator[Violation]:
    evidence = _evidence(c)
    if evidence is None or c.proposal is None:
        return
    got, wanted = evidence.get("executionClass"), c.proposal.get("executionClass")
    if got != wanted:
        why = (
            "fake or replay evidence can never authorize a real-provider body"
            if wanted == "real-provider"
            else "evidence must be of the proposed body's execution class"
        )
        yield _v(
            "/capacity/evidence/executionClass",
            "OS-CAPY-003",
            f"evidence is {got!r}, the proposed body is {wanted!r}: {why}",
        )
    if evidence.get("harness") != c.proposal.get("harness"):
        yield _v(
            "/capacity/evidence/harness",
            "OS-CAPY-003",
            f"evidence is for harness {evidence.get('harness')!r}, the proposed body runs "
            f"{c.proposal.get('harness')!r}",
        )


def _capy_004(c: _Ctx) -> Iterator[Violation]:
    evidence = _evidence(c)
    if not c.ready or evidence is None:
        return
    if evidence.get("freshness") != "fresh":
        yield _v(
            "/capacity/evidence/freshness",
            "OS-CAPY-004",
            f"capacity evidence is {evidence.get('freshness')!r}: stale or unknown capacity "
            "hibernates",
        )
    observed, until = _time(evidence.get("observedAt")), _time(evidence.get("validUntil"))
    if c.created_at is not None and until is not None and until <= c.created_at:
        yield _v(
            "/capacity/evidence/validUntil",
            "OS-CAPY-004",
            "capacity evidence expired before the plan was made",
        )
    if c.created_at is not None and observed is not None and observed > c.created_at:
        yield _v(
            "/capacity/evidence/observedAt",
            "OS-CAPY-004",
            "capacity evidence claims to be observed after the plan was made",
        )


def _capy_005(c: _Ctx) -> Iterator[Violation]:
    evidence = _evidence(c)
    if not c.ready or evidence is None:
        return
    for i, raw_unit in enumerate(_list(evidence.get("units"))):
        unit = _obj(raw_unit)
        try:
            need = float(unit["required"]) + float(unit["uncertaintyReserve"])
            have = float(unit["available"])
        except (KeyError, TypeError, ValueError):
            continue
        if have < need:
            yield _v(
                f"/capacity/evidence/units/{i}",
                "OS-CAPY-005",
                f"{unit.get('unit')}: {have:g} available < {need:g} required with the "
                "uncertainty reserve",
            )
    reservation = evidence.get("reservation")
    if not isinstance(reservation, dict):
        yield _v(
            "/capacity/evidence/reservation",
            "OS-CAPY-005",
            "no capacity reservation for the new attempt",
        )
        return
    expires = _time(reservation.get("expiresAt"))
    if c.created_at is not None and expires is not None and expires <= c.created_at:
        yield _v(
            "/capacity/evidence/reservation/expiresAt",
            "OS-CAPY-005",
            "the reservation expired before the plan was made",
        )


def _nat_001(c: _Ctx) -> Iterator[Violation]:
    mode_native = c.destination.get("mode") == "native-resume"
    verdict_native = c.disposition == Disposition.NATIVE_RESUME_ELIGIBLE.value
    if mode_native and not verdict_native:
        yield _v(
            "/destination/mode",
            "OS-NAT-001",
            f"native-resume proposed under verdict {c.disposition}",
        )
    elif verdict_native and not mode_native:
        yield _v(
            "/verdict/disposition",
            "OS-NAT-001",
            f"NATIVE_RESUME_ELIGIBLE with destination mode {c.destination.get('mode')!r}",
        )


def _nat_002(c: _Ctx) -> Iterator[Violation]:
    if not c.native:
        return
    lease = c.plan.get("leaseReceipt")
    if not isinstance(lease, dict):
        yield _v("/leaseReceipt", "OS-NAT-002", "native resume without a lease receipt")
        return
    problems = []
    if lease.get("exclusive") is not True:
        problems.append("not exclusive")
    if lease.get("state") != "LIVE":
        problems.append(f"state {lease.get('state')}")
    wanted_gen = c.proposal.get("generation") if c.proposal else c.subject.get("latestGeneration")
    if lease.get("generation") != wanted_gen:
        problems.append(f"generation {lease.get('generation')} is not {wanted_gen}")
    issued, expires = _time(lease.get("issuedAt")), _time(lease.get("expiresAt"))
    if c.created_at is not None:
        if expires is not None and expires <= c.created_at:
            problems.append("expired")
        if issued is not None and issued > c.created_at:
            problems.append("issued after the plan")
    if problems:
        yield _v(
            "/leaseReceipt",
            "OS-NAT-002",
            f"lease receipt is not current and exclusive: {'; '.join(problems)}",
        )


def _nat_003(c: _Ctx) -> Iterator[Violation]:
    if not c.native:
        return
    proof = c.destination.get("sessionProof")
    if not isinstance(proof, dict):
        yield _v("/destination/sessionProof", "OS-NAT-003", "native resume without session proof")
        return
    families = {
        "session proof": proof.get("harness"),
        "destination": c.destination.get("harness"),
        "source": c.capabilities.get("sourceHarness"),
    }
    if c.proposal is not None:
        families["proposal"] = c.proposal.get("harness")
    if len(set(families.values())) != 1:
        yield _v(
            "/destination/sessionProof/harness",
            "OS-NAT-003",
            "a provider session never transfers across harness families: "
            + ", ".join(f"{k} {v}" for k, v in families.items()),
        )
    gaps = []
    if proof.get("workspaceBound") is not True:
        gaps.append("workspace binding not proven")
    if proof.get("transcriptRetained") is not True:
        gaps.append("transcript not retained")
    if proof.get("expectedTailDigest") != proof.get("observedTailDigest"):
        gaps.append("observed transcript tail differs from the expected tail")
    if gaps:
        yield _v("/destination/sessionProof", "OS-NAT-003", "; ".join(gaps))


def _translations(c: _Ctx) -> Iterator[tuple[int, dict[str, Any]]]:
    for i, item in enumerate(_list(c.capabilities.get("translations"))):
        if isinstance(item, dict):
            yield i, item


def _grants(item: dict[str, Any], key: str) -> frozenset[str]:
    return frozenset(g for g in _list(item.get(key)) if isinstance(g, str))


def _xlt_001(c: _Ctx) -> Iterator[Violation]:
    for i, item in _translations(c):
        extra = _grants(item, "destinationGrants") - _grants(item, "sourceGrants")
        if extra and item.get("classification") != Classification.BLOCKED.value:
            yield _v(
                f"/capabilities/translations/{i}/destinationGrants",
                "OS-XLT-001",
                f"{item.get('name')}: destination is wider than the source "
                f"(+{', +'.join(sorted(extra))}) yet classified "
                f"{item.get('classification')}",
            )


def _xlt_002(c: _Ctx) -> Iterator[Violation]:
    if not c.ready:
        return
    absent = {a.value for a in ABSENT}
    for i, item in _translations(c):
        cls = item.get("classification")
        if (item.get("required") is True and cls in absent) or cls == "BLOCKED":
            yield _v(
                f"/capabilities/translations/{i}/classification",
                "OS-XLT-002",
                f"{item.get('name')}: {cls} blocks the proposal",
            )


def _xlt_003(c: _Ctx) -> Iterator[Violation]:
    for i, item in _translations(c):
        src, dst = _grants(item, "sourceGrants"), _grants(item, "destinationGrants")
        if dst - src:
            continue  # a widening is OS-XLT-001's
        try:
            declared = Classification(str(item.get("classification")))
        except ValueError:
            continue
        dest_name = item.get("destination")
        computed = classify(
            declared,
            source_name=str(item.get("name")),
            destination_name=dest_name if isinstance(dest_name, str) else None,
            source_grants=src,
            destination_grants=dst,
        )
        if computed is not declared:
            yield _v(
                f"/capabilities/translations/{i}/classification",
                "OS-XLT-003",
                f"{item.get('name')}: classified {declared.value}, but its grants and "
                f"destination make it {computed.value}",
            )


def _xlt_004(c: _Ctx) -> Iterator[Violation]:
    if c.capabilities.get("destinationHarness") is None:
        return
    translated = {(item.get("kind"), item.get("name")): item for _, item in _translations(c)}
    for i, raw_req in enumerate(_list(c.payload.get("capabilityRequirements"))):
        req = _obj(raw_req)
        item = translated.get((req.get("kind"), req.get("name")))
        where = f"/capsule/payload/capabilityRequirements/{i}"
        if item is None:
            yield _v(
                where, "OS-XLT-004", f"{req.get('kind')} {req.get('name')!r} is not translated"
            )
        elif item.get("required") != req.get("required") or _grants(item, "sourceGrants") != (
            frozenset(_list(req.get("grants")))
        ):
            yield _v(
                where,
                "OS-XLT-004",
                f"{req.get('name')!r}: the translation does not state the requirement as the "
                "capsule does (required flag or grants differ)",
            )
