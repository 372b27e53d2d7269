"""Every loss of one relief, gathered in one place.

The discontinuity report renders these records ("## Losses") and the review's "What is
unknown" takes them in, so a loss the run had cannot be missing from the report: whatever
the relief knew is passed here as plain data (:class:`ReliefFacts`), and :func:`gather`
returns one :class:`Loss` per thing the successor does not get, in a fixed order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: The kinds of loss, in the order the report lists them.
KINDS = (
    "no-brief",
    "brief-fields-missing",
    "late-brief",
    "expired-exchange",
    "ambiguous-effect",
    "capsule-omission",
    "unknown",
    "scratch-not-carried",
    "capacity-contradiction",
)


@dataclass(frozen=True)
class Loss:
    """One thing the successor does not get, or cannot trust."""

    kind: str
    subject: str
    detail: str

    def line(self) -> str:
        return f"{self.kind}: {self.subject}: {self.detail}"


@dataclass(frozen=True)
class Ambiguous:
    """An effect left AMBIGUOUS, and why its destination could not be observed (if known)."""

    effect_id: str
    operation: str
    destination: str
    why: str | None = None


@dataclass
class ReliefFacts:
    """What one relief knew when its report was written (plain data, no ledger).

    ``handover`` is the brief or manifest content the successor is given (None when none);
    ``emergency_brief`` says it was built from evidence alone because no brief arrived
    before the fence. ``plan`` is the verdict engine's plan, when the relief got that far.
    """

    fenced: bool = True
    handover_kind: str | None = None
    handover_path: str | None = None
    handover: dict[str, Any] | None = None
    emergency_brief: bool = False
    late_briefs: list[tuple[int, str]] = field(default_factory=list)
    expired_exchanges: list[tuple[str, str]] = field(default_factory=list)
    ambiguous: list[Ambiguous] = field(default_factory=list)
    scratch_removed: str | None = None
    plan: dict[str, Any] | None = None


def _handover_losses(facts: ReliefFacts) -> list[Loss]:
    if not facts.fenced:
        return []  # nothing was fenced: the body is still live and no hand-over was needed
    missing = [str(m) for m in (facts.handover or {}).get("missing") or []]
    if facts.handover is None or facts.emergency_brief:
        detail = "no brief arrived before the fence"
        if facts.handover is not None:
            detail += (
                f"; the hand-over is an emergency brief built from evidence alone "
                f"({facts.handover_path})"
            )
            if missing:
                detail += f", which could not give: {', '.join(missing)}"
        return [Loss("no-brief", "turnover brief", detail)]
    if not missing:
        return []
    what = facts.handover_kind or "brief"
    return [
        Loss(
            "brief-fields-missing",
            f"{what} {facts.handover_path}",
            f"the agent did not give: {', '.join(missing)}",
        )
    ]


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def capacity_contradictions(plan: dict[str, Any]) -> list[str]:
    """What the capsule and the plan say about capacity that the evidence contradicts."""
    capacity = plan.get("capacity")
    payload = plan.get("capsule", {}).get("payload", {})
    stated = payload.get("capacityState") or {}
    if not isinstance(capacity, dict) or not isinstance(capacity.get("evidence"), dict):
        return []
    evidence = capacity["evidence"]
    used = str(capacity.get("evidenceDigest") or "")
    where = f"evidence {used[:16]} from {evidence.get('producer')}"
    out = []
    cited = stated.get("evidenceDigest")
    if cited is None:
        out.append(
            f"the capsule says capacity is {stated.get('note') or 'unknown'} (no evidence cited) "
            f"while the verdict used {where}"
        )
    elif cited != used:
        out.append(
            f"the capsule cites capacity evidence {str(cited)[:16]}; the verdict used {where}"
        )
    proposal = plan.get("proposal") or {}
    node = plan.get("subject", {}).get("node")
    if evidence.get("node") != node:
        out.append(f"{where} is for node {evidence.get('node')}, not {node}")
    if proposal and evidence.get("harness") != proposal.get("harness"):
        out.append(
            f"{where} is for harness {evidence.get('harness')}, not {proposal.get('harness')}"
        )
    if proposal and evidence.get("executionClass") != proposal.get("executionClass"):
        out.append(
            f"{where} is for {evidence.get('executionClass')} bodies, not "
            f"{proposal.get('executionClass')}"
        )
    until, made = _time(evidence.get("validUntil")), _time(plan.get("createdAt"))
    if evidence.get("freshness") != "fresh" or (
        until is not None and made is not None and until <= made
    ):
        out.append(f"{where} had expired (valid until {evidence.get('validUntil')})")
    return out


def _plan_losses(plan: dict[str, Any], ambiguous: set[str]) -> list[Loss]:
    out = []
    unsupported: list[str] = []
    contradicted = bool(capacity_contradictions(plan))
    for d in plan.get("discontinuities") or []:
        item, detail = str(d.get("item")), str(d.get("detail"))
        if d.get("kind") == "omitted":
            if item == "capacityState" and contradicted:
                continue  # listed as the contradiction it is, below
            out.append(Loss("capsule-omission", item, detail))
        elif d.get("kind") == "unknown":
            if item.startswith("effect ") and item.removeprefix("effect ") in ambiguous:
                continue  # listed with why, as an ambiguous effect
            if item == "unsupported claim":
                unsupported.append(detail)
                continue
            out.append(Loss("unknown", item, detail))
    if unsupported:
        # One line for them all: each is in the capsule's unsupportedClaims and the review.
        shown = "; ".join(c[:120] for c in unsupported[:3])
        more = f"; and {len(unsupported) - 3} more" if len(unsupported) > 3 else ""
        out.append(Loss("unknown", "unsupported claims",
                        f"{len(unsupported)} statement(s) of the agent that no artifact "
                        f"supports, carried as claims, not facts: {shown}{more}"))  # fmt: skip
    return out


def gather(facts: ReliefFacts) -> list[Loss]:
    """Every loss of the relief ``facts`` describes, in :data:`KINDS` order."""
    losses = _handover_losses(facts)
    losses += [
        Loss(
            "late-brief",
            path,
            f"written by generation {generation} after its fence; kept as late, untrusted "
            "evidence, never as the hand-over",
        )
        for generation, path in facts.late_briefs
    ]
    losses += [
        Loss("expired-exchange", subject, detail) for subject, detail in facts.expired_exchanges
    ]
    losses += [
        Loss(
            "ambiguous-effect",
            a.effect_id,
            f"{a.operation} {a.destination}: AMBIGUOUS until observed or compensated; "
            + (
                f"its destination could not be observed: {a.why}"
                if a.why
                else "dispatched with no authoritative result"
            ),
        )
        for a in facts.ambiguous
    ]
    if facts.plan is not None:
        losses += _plan_losses(facts.plan, {a.effect_id for a in facts.ambiguous})
    if facts.scratch_removed is not None:
        manifest = facts.handover if facts.handover_kind == "manifest" else None
        if manifest is None or not str(manifest.get("scratch_state") or "").strip():
            losses.append(
                Loss(
                    "scratch-not-carried",
                    facts.scratch_removed,
                    "the coordinator's scratch file was removed and the manifest has no "
                    "Scratch State: its content is gone",
                )
            )
    if facts.plan is not None:
        losses += [
            Loss("capacity-contradiction", "capacity", text)
            for text in capacity_contradictions(facts.plan)
        ]
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(losses, key=lambda loss: order[loss.kind])


def render(losses: list[Loss]) -> list[str]:
    """The report's "## Losses" section, as Markdown lines."""
    if not losses:
        return ["## Losses", "", "- nothing was lost at this relief"]
    counts: dict[str, int] = {}
    for loss in losses:
        counts[loss.kind] = counts.get(loss.kind, 0) + 1
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    return [
        "## Losses",
        "",
        f"{len(losses)} loss(es): {summary}.",
        "",
        *(f"- {_one_line(loss.line())}" for loss in losses),
    ]


def _one_line(text: str) -> str:
    # Free text (a brief's path, an effect's destination) must not add Markdown structure.
    return " ".join(text.split())


__all__ = [
    "KINDS",
    "Ambiguous",
    "Loss",
    "ReliefFacts",
    "capacity_contradictions",
    "gather",
    "render",
]
