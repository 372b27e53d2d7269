"""The resurrection-plan validator: schema first, then the cross-field safety rules.

A schema-valid plan is not necessarily semantically safe, and neither result authorizes
execution. Semantic rules run even when the schema fails (each rule skips the parts it
cannot read), so one run reports every reason a plan is unsafe. Every violation carries a
JSON pointer and a stable rule id; :data:`RULES` is the catalogue (documented in
``docs/plan.md``). Rules marked "ready" apply only when the verdict is REBODIMENT_READY or
NATIVE_RESUME_ELIGIBLE; the others apply to every plan.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from onstation.core.canonical import digest
from onstation.core.capabilities import ABSENT, Classification, classify
from onstation.core.effects import fingerprint
from onstation.core.errors import BadInput
from onstation.core.verdict import FORBIDDEN, READY, Disposition
from onstation.plan.capsule import capsule_digest
from onstation.plan.schemas import Violation, schema_violations
from onstation.plan.signing import SignatureRejected, verify_receipt

CAPACITY_SCOPE = "onstation-capacity-evidence-v1"

#: rule id -> (applies to, what it checks)
RULES: dict[str, tuple[str, str]] = {
    "OS-SCH-001": ("all", "the plan's structure matches resurrection-plan.schema.json"),
    "OS-SCH-010": ("ready", "schema guard: the predecessor is fenced and its effects revoked"),
    "OS-SCH-011": ("ready", "schema guard: the capsule carries at least one signature receipt"),
    "OS-SCH-012": ("ready", "schema guard: no DISPATCHED or AMBIGUOUS effect in the capsule"),
    "OS-SCH-013": ("ready", "schema guard: a proposed body and capacity evidence are present"),
    "OS-SCH-014": ("ready", "schema guard: only rebodiment/takeover, with a proposed mode"),
    "OS-SCH-015": ("all", "schema guard: native resume carries a session proof and lease"),
    "OS-GEN-001": ("all", "latest and proposed generations follow the fenced predecessor's"),
    "OS-GEN-002": ("all", "the capsule is the fenced predecessor generation's capsule"),
    "OS-GEN-003": ("all", "no effect belongs to a generation after the predecessor's"),
    "OS-ID-001": ("all", "capsule, effects, lease receipt and capacity name the subject node"),
    "OS-CAPS-001": ("all", "the capsule digest equals the digest recomputed from its payload"),
    "OS-RCPT-001": (
        "all",
        "each receipt binds the recomputed digest, scope, node, generation and sequence",
    ),
    "OS-RCPT-002": (
        "all",
        "each receipt's Ed25519 signature verifies under a trusted key "
        "(only when trusted keys are given)",
    ),
    "OS-FACT-001": ("ready", "every required fact type is covered by a verified, cited fact"),
    "OS-FACT-002": ("all", "every citation (facts, decisions, tests) names a capsule artifact"),
    "OS-FACT-003": ("all", "no verified fact rests on untrusted evidence (transcript text)"),
    "OS-TOOL-001": ("ready", "every tool call has its result (no split tool pair)"),
    "OS-EFF-001": ("all", "each effect fingerprint equals the recomputed fingerprint"),
    "OS-EFF-002": ("all", "no logical effect appears twice (recomputed fingerprints unique)"),
    "OS-EFF-003": ("ready", "no unresolved AMBIGUOUS (or DISPATCHED) effect"),
    "OS-CAPY-001": ("all", "the capacity evidence digest is recomputed and matches its address"),
    "OS-CAPY-002": ("all", "the referenced capacity artifact is complete and schema-valid"),
    "OS-CAPY-003": ("all", "the evidence's executionClass and harness bind the proposed body"),
    "OS-CAPY-004": ("ready", "the capacity evidence is fresh at plan time"),
    "OS-CAPY-005": ("ready", "capacity covers need plus uncertainty, with a live reservation"),
    "OS-NAT-001": ("all", "destination.mode native-resume iff verdict NATIVE_RESUME_ELIGIBLE"),
    "OS-NAT-002": ("all", "native resume requires a current exclusive lease receipt"),
    "OS-NAT-003": ("all", "native resume requires a same-family session proof that matches"),
    "OS-XLT-001": ("all", "no translation is wider than its source unless it is BLOCKED"),
    "OS-XLT-002": ("ready", "no blocking translation (required and unrepresentable)"),
    "OS-XLT-003": ("all", "each classification is the one its grants support"),
    "OS-XLT-004": ("all", "every capability requirement is translated, as stated in the capsule"),
    "OS-INV-001": (
        "all",
        "identity resurrection, credential transfer and self-supervision requests are INVALID",
    ),
}


@dataclass(frozen=True)
class Report:
    """The validator's result: schema violations, then semantic ones."""

    schema: list[Violation] = field(default_factory=list)
    semantic: list[Violation] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """True when neither layer found anything."""
        return not self.schema and not self.semantic

    @property
    def violations(self) -> list[Violation]:
        """Schema violations first, then semantic ones."""
        return [*self.schema, *self.semantic]

    def rules(self) -> set[str]:
        """The distinct rule ids violated."""
        return {v.rule for v in self.violations}

    def to_json(self) -> dict[str, Any]:
        """``{"valid", "violations": [...]}``."""
        return {"valid": self.valid, "violations": [v.to_json() for v in self.violations]}


def validate_plan(plan: Any, *, trusted: Mapping[str, bytes] | None = None) -> Report:
    """Schema first, then semantics; both always run."""
    return Report(schema_violations("plan", plan), semantic_violations(plan, trusted=trusted))


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class _Ctx:
    """The plan's parts, read defensively (the schema reports what is malformed)."""

    def __init__(self, plan: dict[str, Any], trusted: Mapping[str, bytes] | None) -> None:
        self.plan = plan
        self.trusted = trusted
        self.verdict = _obj(plan.get("verdict"))
        self.disposition = self.verdict.get("disposition")
        self.ready = self.disposition in {d.value for d in READY}
        self.created_at = _time(plan.get("createdAt"))
        self.subject = _obj(plan.get("subject"))
        self.node = self.subject.get("node")
        self.predecessor = _obj(plan.get("predecessor"))
        self.proposal = plan.get("proposal") if isinstance(plan.get("proposal"), dict) else None
        self.destination = _obj(plan.get("destination"))
        self.capsule = _obj(plan.get("capsule"))
        self.payload = _obj(self.capsule.get("payload"))
        self.capsule_subject = _obj(self.payload.get("subject"))
        self.capacity = plan.get("capacity") if isinstance(plan.get("capacity"), dict) else None
        self.capabilities = _obj(plan.get("capabilities"))
        self._capsule_digest: str | bool | None = False
        self._prints: dict[int, str | None] = {}
        self.native = (
            self.destination.get("mode") == "native-resume"
            or self.disposition == Disposition.NATIVE_RESUME_ELIGIBLE.value
        )


Rule = Callable[[_Ctx], Iterator[Violation]]


def _v(pointer: str, rule: str, message: str) -> Violation:
    return Violation(pointer=pointer, rule=rule, message=message, layer="semantic")


def _gen_001(c: _Ctx) -> Iterator[Violation]:
    pred = c.predecessor.get("generation")
    if not isinstance(pred, int):
        return
    fenced = c.predecessor.get("fenced") is True
    latest = c.subject.get("latestGeneration")
    expected_latest = pred + 1 if fenced else pred
    if isinstance(latest, int) and latest != expected_latest:
        state = "fenced" if fenced else "unfenced"
        yield _v(
            "/subject/latestGeneration",
            "OS-GEN-001",
            f"latest generation {latest} does not follow the {state} predecessor generation "
            f"{pred} (expected {expected_latest})",
        )
    if c.proposal is not None:
        proposed = c.proposal.get("generation")
        if isinstance(proposed, int) and proposed != pred + 1:
            yield _v(
                "/proposal/generation",
                "OS-GEN-001",
                f"proposed generation {proposed} is not the predecessor's {pred} + 1",
            )


def _gen_002(c: _Ctx) -> Iterator[Violation]:
    pred = c.predecessor.get("generation")
    got = c.capsule_subject.get("generation")
    if isinstance(pred, int) and isinstance(got, int) and got != pred:
        yield _v(
            "/capsule/payload/subject/generation",
            "OS-GEN-002",
            f"capsule is generation {got}'s, not the fenced predecessor's ({pred})",
        )


def _gen_003(c: _Ctx) -> Iterator[Violation]:
    pred = c.predecessor.get("generation")
    if not isinstance(pred, int):
        return
    for i, eff in enumerate(_list(c.payload.get("effects"))):
        gen = _obj(eff).get("generation")
        if isinstance(gen, int) and gen > pred:
            yield _v(
                f"/capsule/payload/effects/{i}/generation",
                "OS-GEN-003",
                f"effect of generation {gen}, after the predecessor's {pred}: a successor "
                "starts with no effects",
            )


def _id_001(c: _Ctx) -> Iterator[Violation]:
    node = c.node
    if not isinstance(node, str):
        return
    named: list[tuple[str, Any]] = [
        ("/capsule/payload/subject/node", c.capsule_subject.get("node"))
    ]
    named += [
        (f"/capsule/payload/effects/{i}/node", _obj(e).get("node"))
        for i, e in enumerate(_list(c.payload.get("effects")))
    ]
    lease = c.plan.get("leaseReceipt")
    if isinstance(lease, dict):
        named.append(("/leaseReceipt/node", lease.get("node")))
    if c.capacity is not None:
        named.append(("/capacity/evidence/node", _obj(c.capacity.get("evidence")).get("node")))
    for where, value in named:
        if isinstance(value, str) and value != node:
            yield _v(where, "OS-ID-001", f"names {value!r}, but the plan's subject is {node!r}")


def _recomputed_capsule_digest(c: _Ctx) -> str | None:
    # Several rules need it; canonicalizing a large payload is the costly step, so once.
    if c._capsule_digest is False:
        try:
            c._capsule_digest = capsule_digest(c.payload) if c.payload else None
        except BadInput:
            c._capsule_digest = None
    cached = c._capsule_digest
    return cached if isinstance(cached, str) else None


def _caps_001(c: _Ctx) -> Iterator[Violation]:
    if not c.payload:
        return
    recomputed = _recomputed_capsule_digest(c)
    stated = c.capsule.get("digest")
    if recomputed is None:
        yield _v("/capsule/payload", "OS-CAPS-001", "the payload has no canonical form")
    elif not isinstance(stated, str) or not hmac.compare_digest(
        stated.encode("ascii", "replace"), recomputed.encode("ascii")
    ):
        yield _v(
            "/capsule/digest",
            "OS-CAPS-001",
            f"stated digest differs from the recomputed {recomputed}",
        )


def _receipt_binding(c: _Ctx, receipt: dict[str, Any], recomputed: str) -> list[str]:
    wrong = []
    bound = receipt.get("digest")
    if not isinstance(bound, str) or not hmac.compare_digest(
        bound.encode("ascii", "replace"), recomputed.encode("ascii")
    ):
        wrong.append("digest")
    if receipt.get("scope") != c.capsule.get("scope"):
        wrong.append("scope")
    for field_name in ("node", "generation", "sequence"):
        if receipt.get(field_name) != c.capsule_subject.get(field_name):
            wrong.append(field_name)
    return wrong


def _rcpt_001(c: _Ctx) -> Iterator[Violation]:
    recomputed = _recomputed_capsule_digest(c)
    if recomputed is None:
        return
    for i, receipt in enumerate(_list(c.capsule.get("receipts"))):
        wrong = _receipt_binding(c, _obj(receipt), recomputed)
        if wrong:
            yield _v(
                f"/capsule/receipts/{i}",
                "OS-RCPT-001",
                f"receipt is not bound to this capsule: {', '.join(wrong)} differ",
            )


def _rcpt_002(c: _Ctx) -> Iterator[Violation]:
    recomputed = _recomputed_capsule_digest(c)
    if c.trusted is None or recomputed is None:
        return
    for i, receipt in enumerate(_list(c.capsule.get("receipts"))):
        if not isinstance(receipt, dict) or _receipt_binding(c, receipt, recomputed):
            continue
        try:
            verify_receipt(
                receipt,
                scope=str(c.capsule.get("scope")),
                node=c.capsule_subject["node"],
                generation=c.capsule_subject["generation"],
                sequence=c.capsule_subject["sequence"],
                digest_hex=recomputed,
                trusted=c.trusted,
            )
        except (SignatureRejected, KeyError) as exc:
            message = exc.message if isinstance(exc, SignatureRejected) else str(exc)
            yield _v(f"/capsule/receipts/{i}/signature", "OS-RCPT-002", message)


def _artifacts(c: _Ctx) -> dict[str, dict[str, Any]]:
    return {
        a["id"]: a
        for a in _list(c.payload.get("artifacts"))
        if isinstance(a, dict) and isinstance(a.get("id"), str)
    }


_UNTRUSTED = "untrusted-evidence"


def _fact_001(c: _Ctx) -> Iterator[Violation]:
    if not c.ready:
        return
    artifacts = _artifacts(c)
    covered = {
        f.get("type")
        for f in _list(c.payload.get("facts"))
        if isinstance(f, dict)
        and f.get("trust") != _UNTRUSTED
        and f.get("artifact") in artifacts
        and _obj(artifacts[f["artifact"]]).get("kind") != "transcript"
    }
    for i, wanted in enumerate(_list(c.payload.get("requiredFacts"))):
        if wanted not in covered:
            yield _v(
                f"/capsule/payload/requiredFacts/{i}",
                "OS-FACT-001",
                f"required fact {wanted!r} is not covered by a verified, cited fact",
            )


def _fact_002(c: _Ctx) -> Iterator[Violation]:
    artifacts = _artifacts(c)
    for part in ("facts", "decisions", "tests"):
        for i, item in enumerate(_list(c.payload.get(part))):
            cited = _obj(item).get("artifact")
            if isinstance(cited, str) and cited not in artifacts:
                yield _v(
                    f"/capsule/payload/{part}/{i}/artifact",
                    "OS-FACT-002",
                    f"cites artifact {cited!r}, which the capsule does not list",
                )


def _fact_003(c: _Ctx) -> Iterator[Violation]:
    artifacts = _artifacts(c)
    for i, raw_fact in enumerate(_list(c.payload.get("facts"))):
        fact = _obj(raw_fact)
        cited = _obj(artifacts.get(str(fact.get("artifact"))))
        if fact.get("trust") == _UNTRUSTED or cited.get("kind") == "transcript":
            yield _v(
                f"/capsule/payload/facts/{i}",
                "OS-FACT-003",
                "a verified fact rests on transcript text; transcript is untrusted evidence "
                "and belongs in unsupportedClaims",
            )


def _tool_001(c: _Ctx) -> Iterator[Violation]:
    if not c.ready:
        return
    for i, pair in enumerate(_list(c.payload.get("toolPairs"))):
        if isinstance(pair, dict) and pair.get("result") is None:
            yield _v(
                f"/capsule/payload/toolPairs/{i}/result",
                "OS-TOOL-001",
                f"tool call {pair.get('callId')!r} has no result: a split tool pair "
                "quarantines the capsule",
            )


def _effect_print(effect: dict[str, Any]) -> str | None:
    try:
        return fingerprint(
            node=effect["node"],
            operation=effect["operation"],
            destination=effect["destination"],
            arguments=effect["arguments"],
            approval_slot=effect["approvalSlot"],
        )
    except (BadInput, KeyError, TypeError, AttributeError):
        return None


def _print_of(c: _Ctx, index: int, effect: dict[str, Any]) -> str | None:
    if index not in c._prints:
        c._prints[index] = _effect_print(effect)
    return c._prints[index]


def _eff_001(c: _Ctx) -> Iterator[Violation]:
    for i, raw_eff in enumerate(_list(c.payload.get("effects"))):
        eff = _obj(raw_eff)
        if not eff:
            continue
        recomputed = _print_of(c, i, eff)
        stated = eff.get("fingerprint")
        if recomputed is None:
            yield _v(
                f"/capsule/payload/effects/{i}",
                "OS-EFF-001",
                "the effect's fingerprint cannot be recomputed from its fields",
            )
        elif not isinstance(stated, str) or not hmac.compare_digest(
            stated.encode("ascii", "replace"), recomputed.encode("ascii")
        ):
            yield _v(
                f"/capsule/payload/effects/{i}/fingerprint",
                "OS-EFF-001",
                f"stated fingerprint differs from the recomputed {recomputed}",
            )


def _eff_002(c: _Ctx) -> Iterator[Violation]:
    seen_print: dict[str, int] = {}
    seen_id: dict[str, int] = {}
    for i, raw_eff in enumerate(_list(c.payload.get("effects"))):
        eff = _obj(raw_eff)
        recomputed = _print_of(c, i, eff)
        if recomputed is not None:
            if recomputed in seen_print:
                yield _v(
                    f"/capsule/payload/effects/{i}",
                    "OS-EFF-002",
                    f"the same logical effect as effects/{seen_print[recomputed]} "
                    "(recomputed fingerprints are equal)",
                )
            else:
                seen_print[recomputed] = i
        eid = eff.get("effectId")
        if isinstance(eid, str):
            if eid in seen_id:
                yield _v(
                    f"/capsule/payload/effects/{i}/effectId",
                    "OS-EFF-002",
                    f"effect id {eid!r} repeats effects/{seen_id[eid]}",
                )
            else:
                seen_id[eid] = i


def _eff_003(c: _Ctx) -> Iterator[Violation]:
    if not c.ready:
        return
    for i, eff in enumerate(_list(c.payload.get("effects"))):
        state = _obj(eff).get("state")
        if state in {"AMBIGUOUS", "DISPATCHED"}:
            yield _v(
                f"/capsule/payload/effects/{i}/state",
                "OS-EFF-003",
                f"{state} effect under a ready verdict: observe or compensate it first, "
                "never repeat it",
            )


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


def _inv_001(c: _Ctx) -> Iterator[Violation]:
    operation = _obj(c.plan.get("request")).get("operation")
    if operation in {o.value for o in FORBIDDEN} and c.disposition != Disposition.INVALID.value:
        yield _v(
            "/verdict/disposition",
            "OS-INV-001",
            f"{operation} is forbidden; the verdict must be INVALID, not {c.disposition}",
        )


RULE_FUNCTIONS: tuple[Rule, ...] = (
    _gen_001,
    _gen_002,
    _gen_003,
    _id_001,
    _caps_001,
    _rcpt_001,
    _rcpt_002,
    _fact_001,
    _fact_002,
    _fact_003,
    _tool_001,
    _eff_001,
    _eff_002,
    _eff_003,
    _capy_001,
    _capy_002,
    _capy_003,
    _capy_004,
    _capy_005,
    _nat_001,
    _nat_002,
    _nat_003,
    _xlt_001,
    _xlt_002,
    _xlt_003,
    _xlt_004,
    _inv_001,
)


def semantic_violations(
    plan: Any, *, trusted: Mapping[str, bytes] | None = None
) -> list[Violation]:
    """Every cross-field safety rule over ``plan``; rules skip parts the schema rejects."""
    if not isinstance(plan, dict):
        return []
    ctx = _Ctx(plan, trusted)
    found: list[Violation] = []
    for rule in RULE_FUNCTIONS:
        try:
            found.extend(rule(ctx))
        except (KeyError, TypeError, ValueError, AttributeError):
            # A shape the rule cannot read is a schema violation, reported by that layer.
            continue
    return sorted(set(found))


#: The rules that judge a capsule on its own (the verdict's "capsule verified" step).
CAPSULE_RULES: tuple[Rule, ...] = (
    _caps_001, _rcpt_001, _fact_001, _fact_002, _fact_003, _tool_001, _eff_001, _eff_002,
)  # fmt: skip


def capsule_defects(capsule_doc: Any) -> list[Violation]:
    """Defects that quarantine a capsule: digest, binding, fact coverage, citations,
    split tool pairs, fingerprints. Judged as if a ready verdict rested on it."""
    plan = {"verdict": {"disposition": Disposition.REBODIMENT_READY.value}, "capsule": capsule_doc}
    ctx = _Ctx(plan, None)
    found: list[Violation] = []
    for rule in CAPSULE_RULES:
        try:
            found.extend(rule(ctx))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return sorted(set(found))
