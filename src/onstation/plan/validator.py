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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from onstation.core.canonical import canonical_bytes
from onstation.core.effects import fingerprint
from onstation.core.errors import BadInput
from onstation.core.verdict import FORBIDDEN, Disposition
from onstation.plan.body_rules import (
    CAPACITY_SCOPE,
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
    capacity_digest,
)
from onstation.plan.capsule import (
    CapsuleRejected,
    capsule_digest,
    compiled_schema_passed,
    verify,
)
from onstation.plan.rule_context import Rule, _Ctx, _list, _obj, _v
from onstation.plan.schemas import Violation, schema_violations
from onstation.plan.signing import SignatureRejected, verify_receipt

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


def validate_plan(
    plan: Any,
    *,
    trusted: Mapping[str, bytes] | None = None,
    capsule_digest: str | None = None,
    capsule_check: CapsuleCheck | None = None,
) -> Report:
    """Schema first, then semantics; both always run. ``capsule_digest`` and
    ``capsule_check``: see :func:`semantic_violations`."""
    return Report(
        schema_violations("plan", plan, around=capsule_around(plan, capsule_check, capsule_digest)),
        semantic_violations(
            plan, trusted=trusted, capsule_digest=capsule_digest, capsule_check=capsule_check
        ),
    )


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
        kid, raw = receipt.get("keyId"), c.trusted.get(str(receipt.get("keyId")))
        if raw is not None and (i, kid, bytes(raw)) in c.signed:
            continue  # these bytes verified under this very key in this relief's check
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
#: What the agent itself stated, supported by a cited artifact: carried as a claim with its
#: trust class, never counted as a verified fact.
_AGENT_STATED = "agent-stated"


def _fact_001(c: _Ctx) -> Iterator[Violation]:
    if not c.ready:
        return
    artifacts = _artifacts(c)
    covered = {
        f.get("type")
        for f in _list(c.payload.get("facts"))
        if isinstance(f, dict)
        and f.get("trust") not in (_UNTRUSTED, _AGENT_STATED)
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
    for part in ("facts", "decisions", "tests", "planFrontier"):
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
    plan: Any,
    *,
    trusted: Mapping[str, bytes] | None = None,
    capsule_digest: str | None = None,
    capsule_check: CapsuleCheck | None = None,
) -> list[Violation]:
    """Every cross-field safety rule over ``plan``; rules skip parts the schema rejects.

    ``capsule_digest`` only from a caller that computed it over the plan's very capsule
    payload object, unchanged since (:func:`onstation.plan.capsule.seal`); a plan read from
    anywhere has its capsule's digest recomputed. ``capsule_check``: the
    :func:`check_capsule` of the plan's very capsule document, by the same caller (a
    relief); its effect fingerprints and verified signatures are reused only when it
    :meth:`~CapsuleCheck.covers` that document, every other rule runs as without it."""
    if not isinstance(plan, dict):
        return []
    ctx = _Ctx(plan, trusted, capsule_digest)
    if capsule_check is not None and capsule_check.covers(
        plan.get("capsule"), _recomputed_capsule_digest(ctx)
    ):
        ctx._prints.update(capsule_check.prints)
        ctx.signed = capsule_check.signed
    return _run(RULE_FUNCTIONS, ctx)


def _run(rules: tuple[Rule, ...], ctx: _Ctx) -> list[Violation]:
    found: list[Violation] = []
    for rule in rules:
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


def capsule_defects(capsule_doc: Any, payload_digest: str | None = None) -> list[Violation]:
    """Defects that quarantine a capsule: digest, binding, fact coverage, citations,
    split tool pairs, fingerprints. Judged as if a ready verdict rested on it.
    ``payload_digest``: as :func:`semantic_violations`'s ``capsule_digest``."""
    return _run(CAPSULE_RULES, _capsule_ctx(capsule_doc, payload_digest))


def _capsule_ctx(capsule_doc: Any, payload_digest: str | None) -> _Ctx:
    plan = {"verdict": {"disposition": Disposition.REBODIMENT_READY.value}, "capsule": capsule_doc}
    return _Ctx(plan, None, payload_digest)


def _rest_bytes(capsule_doc: Any) -> bytes | None:
    """The canonical bytes of a capsule document beside its payload (scope, stated digest,
    receipts), or None when it has none."""
    if not isinstance(capsule_doc, dict):
        return None
    try:
        return canonical_bytes({k: v for k, v in capsule_doc.items() if k != "payload"})
    except (BadInput, TypeError, ValueError, RecursionError):
        return None


@dataclass(frozen=True)
class CapsuleCheck:
    """One check of one sealed capsule document (issue 14): the defects and the signature
    verification a verdict rests on (:func:`onstation.plan.incident.resurrect`), and what a
    second check of the same document by the same caller need not recompute (the plan
    validator's: each effect's fingerprint, each receipt's Ed25519 signature).

    It applies only to the very document it checked (:meth:`covers`): the same object,
    whose payload has the digest the check ran against (the caller's own, as for
    ``capsule_digest``, or recomputed) and whose other members (scope, stated digest,
    receipts) have the same canonical bytes. A signature is reused only for the same
    receipt under the same trusted public key bytes. ``compiled``: the document passed the
    capsule schema on the compiled path (:func:`onstation.plan.capsule.compiled_schema_passed`),
    so an incident or a plan embedding it is schema-checked around it (:meth:`passed_schema`)."""

    document: Any = field(repr=False, compare=False)
    digest: str | None
    rest: bytes | None
    trusted: tuple[tuple[str, bytes], ...]
    defects: tuple[str, ...]
    prints: tuple[tuple[int, str | None], ...]
    signed: frozenset[tuple[int, str, bytes]]
    compiled: bool = False

    def passed_schema(self, capsule_doc: Any, payload_digest: str | None) -> bool:
        """Whether ``capsule_doc`` is this check's document and passed the capsule schema on
        the compiled path: the ``around`` of :func:`onstation.plan.schemas.schema_violations`
        for a document embedding it."""
        return self.compiled and self.covers(capsule_doc, payload_digest)

    def covers(self, capsule_doc: Any, payload_digest: str | None) -> bool:
        """Whether this check is of ``capsule_doc``, whose payload has ``payload_digest``."""
        return (
            capsule_doc is self.document
            and self.digest is not None
            and payload_digest == self.digest
            and self.rest is not None
            and _rest_bytes(capsule_doc) == self.rest
        )

    def answers(
        self, capsule_doc: Any, payload_digest: str | None, trusted: Mapping[str, bytes]
    ) -> bool:
        """Whether :attr:`defects` are ``capsule_doc``'s under ``trusted`` (the same keys)."""
        return self.covers(capsule_doc, payload_digest) and self.trusted == _trust_of(trusted)


def capsule_around(
    document: Any, capsule_check: CapsuleCheck | None, payload_digest: str | None
) -> Any:
    """The ``around`` of :func:`onstation.plan.schemas.schema_violations` for ``document`` (an
    incident, a plan): its capsule when ``capsule_check`` shows that very capsule passed the
    capsule schema already (:meth:`CapsuleCheck.passed_schema`), else None."""
    capsule_doc = document.get("capsule") if isinstance(document, dict) else None
    if capsule_check is not None and capsule_check.passed_schema(capsule_doc, payload_digest):
        return capsule_doc
    return None


def _trust_of(trusted: Mapping[str, bytes]) -> tuple[tuple[str, bytes], ...]:
    return tuple(sorted((str(k), bytes(v)) for k, v in trusted.items()))


def check_capsule(
    capsule_doc: Any, trusted: Mapping[str, bytes], payload_digest: str | None = None
) -> CapsuleCheck:
    """The capsule's defects (:func:`capsule_defects`) and its verification
    (:func:`onstation.plan.capsule.verify`) under ``trusted``, as one line each, the failed
    verification first. ``payload_digest``: as :func:`semantic_violations`'s
    ``capsule_digest``."""
    ctx = _capsule_ctx(capsule_doc, payload_digest)
    defects = [f"{d.rule} {d.pointer}: {d.message}" for d in _run(CAPSULE_RULES, ctx)]
    # The digest the rules used: the caller's, or recomputed just now from this payload.
    digest = _recomputed_capsule_digest(ctx)
    signed: frozenset[tuple[int, str, bytes]] = frozenset()
    try:
        verified = verify(capsule_doc, trusted, payload_digest=digest)
    except CapsuleRejected as exc:
        defects.insert(0, f"capsule not verified: {exc.message}")
    else:
        # verify checked every receipt, in order, against this digest: receipt i is signed
        # by key_ids[i].
        signed = frozenset((i, kid, bytes(trusted[kid])) for i, kid in enumerate(verified.key_ids))
    return CapsuleCheck(
        document=capsule_doc,
        digest=digest,
        rest=_rest_bytes(capsule_doc),
        trusted=_trust_of(trusted),
        defects=tuple(defects),
        prints=tuple(ctx._prints.items()),
        signed=signed,
        compiled=compiled_schema_passed(capsule_doc, digest),
    )


__all__ = [
    "CAPACITY_SCOPE",
    "CAPSULE_RULES",
    "RULES",
    "RULE_FUNCTIONS",
    "CapsuleCheck",
    "Report",
    "capacity_digest",
    "capsule_around",
    "capsule_defects",
    "check_capsule",
    "semantic_violations",
    "validate_plan",
]
