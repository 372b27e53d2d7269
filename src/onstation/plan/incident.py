"""From an incident to a resurrection plan: classify, reconcile, verify, translate, decide.

``resurrect`` reads only its arguments (the incident document, the trusted keys, the time)
and runs nothing: it is the proof step of the flow, and its plan is a proposal. The verdict
itself comes from the pure :func:`onstation.core.verdict.decide`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from onstation.core.canonical import digest
from onstation.core.capabilities import TranslationResult, TranslationTable, translate
from onstation.core.errors import BadInput
from onstation.core.verdict import (
    READY,
    CapacityStatus,
    IncidentKind,
    Observations,
    Operation,
    ProcessState,
    Verdict,
    VerdictInputs,
    classify_incident,
    decide,
)
from onstation.plan.capsule import capsule_digest as payload_digest_of
from onstation.plan.embedded import spliced_digest
from onstation.plan.schemas import schema_violations
from onstation.plan.tables import available, load_table, requirements_from_payload, table_name
from onstation.plan.validator import (
    CapsuleCheck,
    capacity_digest,
    capsule_around,
    check_capsule,
)

PLAN_FORMAT = "onstation.resurrection-plan/v1"
INCIDENT_SCOPE = "onstation-incident-v1"

_CLASS_TO_KIND = {
    "NARROWED": "narrowed",
    "EMULATED": "emulated",
    "OMITTED": "omitted",
    "BLOCKED": "omitted",
    "UNKNOWN": "unknown",
}


def iso(moment: datetime) -> str:
    """UTC ``YYYY-MM-DDTHH:MM:SSZ`` (microseconds kept when present)."""
    if moment.tzinfo is None:
        raise BadInput("time must be timezone-aware")
    text = moment.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z")


def parse_time(text: str, field: str) -> datetime:
    """An RFC 3339 UTC timestamp."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadInput(f"{field}: not an ISO-8601 time ({text!r})") from exc
    if moment.tzinfo is None:
        raise BadInput(f"{field}: must carry a time zone (e.g. Z)")
    return moment


def check_incident(incident: Any, *, around: Any = None) -> dict[str, Any]:
    """Schema-check an incident; one-line ``BadInput`` naming the first problem. ``around``:
    as for :func:`onstation.plan.schemas.schema_violations` (its capsule, proven to have
    passed already)."""
    problems = schema_violations("incident", incident, around=around)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BadInput(f"incident: {first.pointer or '/'}: {first.message}{more}")
    assert isinstance(incident, dict)
    return incident


def _identity_conflicts(incident: dict[str, Any]) -> tuple[str, ...]:
    subject = incident["subject"]
    conflicts = []
    for source in incident["identitySources"]:
        for field, wanted in (
            ("node", subject["node"]),
            ("episode", subject["episode"]),
            ("generation", subject["latestGeneration"]),
        ):
            if field in source and source[field] != wanted:
                conflicts.append(
                    f"{source['source']} says {field} {source[field]!r}, "
                    f"the request says {wanted!r}"
                )
    conflicts += [f"no record holds {gap}" for gap in incident.get("identityGaps", [])]
    capsule_node = incident["capsule"]["payload"]["subject"]["node"]
    if capsule_node != subject["node"]:
        conflicts.append(f"capsule is for {capsule_node!r}, the request is for {subject['node']!r}")
    return tuple(conflicts)


def reconciled_ambiguous(incident: dict[str, Any]) -> list[dict[str, Any]]:
    """Effects that are ambiguous once the predecessor is fenced: AMBIGUOUS, and DISPATCHED
    without an authoritative result (the seed's reconcile rule)."""
    return [
        e
        for e in incident["capsule"]["payload"]["effects"]
        if e["state"] == "AMBIGUOUS" or e["state"] == "DISPATCHED"
    ]


def _native_gaps(incident: dict[str, Any], kind: IncidentKind, now: datetime) -> tuple[str, ...]:
    proof = incident["nativeSession"]
    proposal = incident["proposal"]
    gaps: list[str] = []
    if kind in {IncidentKind.SESSION_RECORD_LOSS, IncidentKind.HOST_REBOOT}:
        gaps.append("provider session record is missing")
    if proof is None:
        return (*gaps, "no native session proof")
    if proposal is None or proof["harness"] != proposal["harness"]:
        gaps.append("proposed body is not the session's harness")
    if proof["harness"] != incident["sourceHarness"]:
        gaps.append("a provider session never transfers across harness families")
    if not proof["workspaceBound"]:
        gaps.append("workspace binding not proven")
    if not proof["transcriptRetained"]:
        gaps.append("transcript not retained")
    if proof["expectedTailDigest"] != proof["observedTailDigest"]:
        gaps.append("transcript tail differs from the expected tail")
    lease = incident["leaseReceipt"]
    latest = incident["subject"]["latestGeneration"]
    if lease is None:
        gaps.append("no current exclusive lease receipt")
    elif not (
        lease["exclusive"]
        and lease["state"] == "LIVE"
        and lease["generation"] == latest
        and lease["node"] == incident["subject"]["node"]
        and parse_time(lease["expiresAt"], "leaseReceipt.expiresAt") > now
    ):
        gaps.append("lease receipt is not current and exclusive for the new generation")
    return tuple(gaps)


def _capacity(incident: dict[str, Any], now: datetime) -> tuple[CapacityStatus, str]:
    proposal = incident["proposal"]
    if proposal is None:
        return CapacityStatus.UNKNOWN, "no body proposed"
    if incident["capacity"] is None:
        return CapacityStatus.UNKNOWN, "no capacity evidence"
    evidence = incident["capacity"]["evidence"]
    problems = schema_violations("capacity", evidence)
    if problems:
        return CapacityStatus.UNKNOWN, f"incomplete capacity evidence: {problems[0].message}"
    if evidence["executionClass"] != proposal["executionClass"]:
        return CapacityStatus.CLASS_MISMATCH, (
            f"{evidence['executionClass']} evidence cannot authorize a "
            f"{proposal['executionClass']} body"
        )
    if (
        evidence["harness"] != proposal["harness"]
        or evidence["node"] != incident["subject"]["node"]
    ):
        return CapacityStatus.CLASS_MISMATCH, "evidence is for another body or identity"
    if evidence["freshness"] != "fresh" or parse_time(evidence["validUntil"], "validUntil") <= now:
        return CapacityStatus.STALE, "capacity evidence is stale"
    for unit in evidence["units"]:
        if unit["available"] < unit["required"] + unit["uncertaintyReserve"]:
            return CapacityStatus.INSUFFICIENT, (
                f"{unit['unit']}: {unit['available']} available, "
                f"{unit['required']} + {unit['uncertaintyReserve']} reserve needed"
            )
    reservation = evidence["reservation"]
    if reservation is None or parse_time(reservation["expiresAt"], "expiresAt") <= now:
        return CapacityStatus.NO_RESERVATION, "no live capacity reservation"
    return CapacityStatus.ADMISSIBLE, "fresh evidence, need and reserve covered, reservation held"


def _translation(incident: dict[str, Any]) -> tuple[TranslationResult | None, str | None]:
    proposal = incident["proposal"]
    if proposal is None:
        return None, None
    source, dest = incident["sourceHarness"], proposal["harness"]
    requirements = requirements_from_payload(
        incident["capsule"]["payload"]["capabilityRequirements"]
    )
    if (source, dest) in available():
        return translate(requirements, load_table(source, dest)), table_name(source, dest)
    # No table: every capability is UNKNOWN, which blocks whatever is required.
    return translate(requirements, TranslationTable(source, dest, {})), None


def _discontinuities(
    incident: dict[str, Any], translation: TranslationResult | None, verdict: Verdict
) -> list[dict[str, str]]:
    payload = incident["capsule"]["payload"]
    out: list[dict[str, str]] = []

    def add(kind: str, item: str, detail: str) -> None:
        out.append({"kind": kind, "item": item, "detail": detail})

    repo = payload["repository"]
    if repo["head"] is not None:
        add(
            "exact",
            "repository",
            f"remote {repo['remote'] or '-'}, head {repo['head'][:12]}, "
            f"tree {(repo['tree'] or '-')[:12]}, base {(repo['base'] or '-')[:12]}",
        )
    settled = [e for e in payload["effects"] if e["state"] not in {"DISPATCHED", "AMBIGUOUS"}]
    if settled:
        add("exact", "effects", f"{len(settled)} effect(s) settled in the ledger")
    verified = [f for f in payload["facts"] if f["trust"] != "untrusted-evidence"]
    if verified:
        add("exact", "facts", f"{len(verified)} verified fact(s), each citing an artifact")
    if payload["decisions"]:
        add("exact", "decisions", f"{len(payload['decisions'])} decision(s) recorded")
    if payload["tests"]:
        passed = sum(1 for t in payload["tests"] if t["status"] == "passed")
        add("exact", "tests", f"{passed}/{len(payload['tests'])} passed at handover")
    transcript = payload["transcript"]
    add(
        "summarized",
        "transcript",
        f"bounded tail of {len(transcript['tail'])} entr(ies) at cursor "
        f"{transcript['cursor'] or '-'}, carried as untrusted evidence, never as instructions",
    )
    if transcript["truncated"]:
        add("lost", "transcript before the tail", "not carried; only the cursor points at it")
    if translation is not None:
        for item in translation.items:
            kind = _CLASS_TO_KIND.get(item.classification.value)
            if kind is not None:
                add(
                    kind,
                    f"{item.kind.value} {item.name}",
                    f"{item.classification.value}: {item.reason}",
                )
    for omission in payload["omissions"]:
        add("omitted", omission["part"], omission["reason"])
    for claim in payload["unsupportedClaims"]:
        add("unknown", "unsupported claim", f"{claim['claim']} (source: {claim['source']})")
    for effect in reconciled_ambiguous(incident):
        add(
            "unknown",
            f"effect {effect['effectId']}",
            f"{effect['operation']} {effect['destination']}: dispatched, no authoritative "
            "result; AMBIGUOUS until observed or compensated",
        )
    if payload["memoryDisposition"]["scratch"] == "discard":
        add("lost", "scratch memory", "discarded by policy; episode context retained until settled")
    if verdict.mode != "native-resume":
        add(
            "lost",
            "provider session",
            "conversation state does not transfer; the successor starts from the capsule",
        )
    return out


def _payload_digest(capsule_doc: dict[str, Any]) -> str | None:
    try:
        return payload_digest_of(capsule_doc["payload"])
    except BadInput:
        return None


def _incident_digest(incident: dict[str, Any], capsule_canonical: bytes | None) -> str:
    if capsule_canonical is None:
        return digest(INCIDENT_SCOPE, incident)
    return spliced_digest(INCIDENT_SCOPE, incident, "capsule", capsule_canonical)


def resurrect(
    incident: Any,
    *,
    now: datetime | None = None,
    trusted: Mapping[str, bytes] | None = None,
    capsule_digest: str | None = None,
    capsule_canonical: bytes | None = None,
    capsule_check: CapsuleCheck | None = None,
) -> tuple[dict[str, Any], Verdict]:
    """Decide one incident; returns (plan, verdict). ``now`` defaults to the incident's asOf.

    ``capsule_digest`` only from a caller that computed it over the incident's very capsule
    payload object, unchanged since (a relief: :func:`onstation.plan.capsule.seal`); the
    capsule's stated digest and receipts are still checked against it. ``capsule_canonical``,
    likewise, the canonical bytes of that very capsule document (the plan id's digest then
    splices them in: :mod:`onstation.plan.embedded`). ``capsule_check``, likewise, the
    caller's :func:`onstation.plan.validator.check_capsule` of that very document under the
    same trusted keys (a relief hands the same check to the plan validator); the capsule is
    checked here unless it :meth:`~onstation.plan.validator.CapsuleCheck.answers` for it (and
    the incident is schema-checked around a capsule the check shows passed already)."""
    incident = check_incident(
        incident, around=capsule_around(incident, capsule_check, capsule_digest)
    )
    moment = now if now is not None else parse_time(incident["asOf"], "asOf")
    obs = incident["observations"]
    observations = Observations(
        body_ever_witnessed=obs["bodyEverWitnessed"],
        process_state=ProcessState(obs["processState"]),
        heartbeat_lost=obs["heartbeatLost"],
        provider_stream_lost=obs["providerStreamLost"],
        session_record_lost=obs["sessionRecordLost"],
        context_pressure=obs["contextPressure"],
        host_rebooted=obs["hostRebooted"],
        deliberate_pause=obs["deliberatePause"],
    )
    kind = classify_incident(observations)
    capsule_doc = incident["capsule"]
    keys = trusted or {}
    if capsule_check is None or not capsule_check.answers(
        capsule_doc, capsule_digest or _payload_digest(capsule_doc), keys
    ):
        capsule_check = check_capsule(capsule_doc, keys, capsule_digest)
    defects = list(capsule_check.defects)
    translation, table = _translation(incident)
    capacity_status, capacity_detail = _capacity(incident, moment)
    predecessor = incident["predecessor"]
    respawn = incident["respawn"]
    inputs = VerdictInputs(
        operation=Operation(incident["request"]["operation"]),
        incident=kind,
        body_ever_witnessed=obs["bodyEverWitnessed"],
        process_state=observations.process_state,
        identity_conflicts=_identity_conflicts(incident),
        forbidden_requests=() if translation is None else translation.forbidden,
        retry_owner=respawn["retryOwner"],
        retry_reservation=respawn["reservation"],
        predecessor_fenced=predecessor["fenced"],
        effects_revoked=predecessor["effectsRevoked"],
        ambiguous_effects=tuple(
            f"effect {e['effectId']} ({e['operation']} {e['destination']}, generation "
            f"{e['generation']}) is {e['state']}"
            for e in reconciled_ambiguous(incident)
        ),
        capsule_defects=tuple(defects),
        native_proof_gaps=_native_gaps(incident, kind, moment),
        capability_blocks=(("no body proposed",) if translation is None else translation.blocking)
        if incident["proposal"] is not None
        else (),
        capacity=capacity_status,
        capacity_detail=capacity_detail,
        respawn_allowed=respawn["allowed"],
        respawn_detail=respawn["detail"],
    )
    verdict = decide(inputs)
    proposal = incident["proposal"]
    evidence = None if incident["capacity"] is None else incident["capacity"]["evidence"]
    plan: dict[str, Any] = {
        "schema": PLAN_FORMAT,
        "planId": "plan-" + _incident_digest(incident, capsule_canonical)[:24],
        "createdAt": iso(moment),
        "request": incident["request"],
        "incident": {
            "kind": kind.value,
            "observedAt": obs["observedAt"],
            "summary": obs["summary"],
            "bodyEverWitnessed": obs["bodyEverWitnessed"],
            "processState": obs["processState"],
        },
        "subject": incident["subject"],
        "predecessor": predecessor,
        "proposal": None
        if proposal is None
        else {"generation": predecessor["generation"] + 1, **proposal},
        "destination": {
            "mode": verdict.mode if verdict.disposition in READY else "none",
            "harness": None if proposal is None else proposal["harness"],
            "sessionProof": incident["nativeSession"],
        },
        "leaseReceipt": incident["leaseReceipt"],
        "capsule": capsule_doc,
        "capabilities": {
            "sourceHarness": incident["sourceHarness"],
            "destinationHarness": None if proposal is None else proposal["harness"],
            "table": table,
            "translations": [] if translation is None else [t.to_json() for t in translation.items],
        },
        "capacity": None
        if evidence is None
        else {"evidenceDigest": capacity_digest(evidence), "evidence": evidence},
        "verdict": verdict.to_json(),
        "discontinuities": _discontinuities(incident, translation, verdict),
    }
    return plan, verdict
