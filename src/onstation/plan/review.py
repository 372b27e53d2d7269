"""The operator review: a Markdown report rendered from ``templates/review.md``.

It shows every discontinuity (what survived exactly, what was summarized, narrowed,
omitted, unknown or lost), the verdict and why, and says plainly that a verdict is not
permission to launch. Rendering is pure: the same plan always gives the same text.
Free text from the capsule is flattened to one line and escaped so it cannot add
Markdown structure (headings, tables) to the review.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from string import Template
from typing import Any, Protocol

from onstation.plan.resources import read_text

_NEXT_STEP = {
    "REBODIMENT_READY": "Reserve through the launcher, provision the successor with no effects, "
    "and challenge it with the capsule digest before marking it RUNNING.",
    "NATIVE_RESUME_ELIGIBLE": "Resume the same-family session under the current exclusive lease, "
    "then challenge it with the capsule digest before marking it RUNNING.",
    "HIBERNATE": "Keep the capsule; wait for admissible capacity or a body, then decide again.",
    "QUARANTINED": "Resolve what is ambiguous outside the body, then decide again.",
    "BLOCKED": "Provide the missing capability, authority or capacity, then decide again.",
    "INVALID": "Nothing to do: the request is forbidden for this system.",
}


@functools.cache
def _review_template() -> str:
    """The shipped review template (read once: immutable package data)."""
    return read_text("templates", "review.md")


def _next_step(plan: dict[str, Any]) -> str:
    text = _NEXT_STEP[plan["verdict"]["disposition"]]
    if any(r["code"] == "AMBIGUOUS_EFFECT" for r in plan["verdict"]["reasons"]):
        text += (
            " For each ambiguous effect, establish the outcome from the destination itself, "
            "then record it: `onstation effect resolve EFFECT_ID --as observed|compensated "
            "--by NAME --why EVIDENCE`."
        )
    return text


#: Each Markdown metacharacter (the backslash too) behind a backslash, in one pass.
_ESCAPES = str.maketrans({ch: "\\" + ch for ch in "\\|`*_#<>[]"})


def _clean(text: Any, limit: int = 300) -> str:
    value = " ".join(str(text).split())
    if len(value) > limit:
        value = value[: limit - 3] + "..."
    return value.translate(_ESCAPES)


def _bullets(lines: list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines) if lines else "- none"


class LossLike(Protocol):
    """A loss of the relief (onstation.relief.losses.Loss): what the review must not omit."""

    @property
    def kind(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def detail(self) -> str: ...


def _reservation_lines(ev: dict[str, Any], reservation: str | None) -> list[str]:
    held = ev.get("reservation")
    hold = (
        f"`{_clean(held['reservationId'])}` until {held['expiresAt']}"
        if isinstance(held, dict)
        else "none"
    )
    if reservation is None:
        return [f"reservation {hold}"]
    out = [
        f"reservation `{_clean(reservation)}` (made for this attempt and bound in the "
        "successor's challenge)"
    ]
    if isinstance(held, dict) and held.get("reservationId") != reservation:
        out.append(f"the capacity evidence's own hold {hold} (checked by the verdict; not "
                   "this attempt's reservation)")  # fmt: skip
    return out


def render_review(
    plan: dict[str, Any],
    template: str | None = None,
    *,
    losses: Sequence[LossLike] | None = None,
    reservation: str | None = None,
) -> str:
    """The review of ``plan`` (a schema-valid plan) as Markdown.

    ``losses`` (a relief's, from onstation.relief.losses) replace the plan's own unknowns in
    "What is unknown": they include them, and add what the plan cannot see (a missing or late
    brief, an expired exchange, a contradiction). ``reservation`` is the reservation the
    relief made for this attempt and bound in the successor's challenge; the capacity section
    names it as the reservation, and the evidence's own hold only as the evidence's.
    """
    tpl = Template(template if template is not None else _review_template())
    verdict = plan["verdict"]
    disposition = verdict["disposition"]
    discontinuities = plan["discontinuities"]

    def of(*kinds: str) -> str:
        return _bullets(
            [
                f"{_clean(d['item'])}: {_clean(d['detail'])}"
                for d in discontinuities
                if d["kind"] in kinds
            ]
        )

    reasons = _bullets([f"`{r['code']}` {_clean(r['detail'], 600)}" for r in verdict["reasons"]])
    payload = plan["capsule"]["payload"]
    effects = _bullets(
        [
            f"`{e['effectId']}` {_clean(e['operation'])} {_clean(e['destination'])} "
            f"(generation {e['generation']}): **{e['state']}**"
            for e in payload["effects"]
        ]
    )
    caps = plan["capabilities"]
    capabilities = _bullets(
        [
            f"{t['kind']} {_clean(t['name'])} -> {_clean(t['destination'] or '-')}: "
            f"{t['classification']}{' (required)' if t['required'] else ''}"
            for t in caps["translations"]
        ]
    )
    capacity = plan["capacity"]
    if capacity is None:
        capacity_text = "- no capacity evidence"
    else:
        ev = capacity["evidence"]
        capacity_text = _bullets(
            [
                f"evidence `{capacity['evidenceDigest'][:16]}` from {_clean(ev.get('producer'))}: "
                f"{ev.get('executionClass')} / {_clean(ev.get('harness'))}, "
                f"{ev.get('freshness')}, valid until {ev.get('validUntil')}",
                *_reservation_lines(ev, reservation),
            ]
        )
    proposal = plan["proposal"]
    destination = plan["destination"]
    dest_text = destination["mode"]
    if proposal is not None:
        where = "on" if destination["mode"] != "none" else "proposed body:"
        dest_text += f" ({where} {proposal['harness']}, {proposal['executionClass']})"
    subject = plan["subject"]
    predecessor = plan["predecessor"]
    return tpl.substitute(
        node=_clean(subject["node"]),
        disposition=disposition,
        plan_id=plan["planId"],
        created_at=plan["createdAt"],
        operation=plan["request"]["operation"],
        requested_by=_clean(plan["request"]["requestedBy"]),
        request_reason=_clean(plan["request"]["reason"]),
        incident_kind=plan["incident"]["kind"],
        process_state=plan["incident"]["processState"],
        incident_summary=_clean(plan["incident"]["summary"]),
        episode=_clean(subject["episode"]),
        principal=_clean(subject["principal"]),
        plan_revision=_clean(subject["planRevision"]),
        predecessor_generation=predecessor["generation"],
        predecessor_state=("fenced" if predecessor["fenced"] else "NOT fenced")
        + f", lease {predecessor['leaseState']}",
        latest_generation=subject["latestGeneration"],
        proposed_generation="-" if proposal is None else proposal["generation"],
        capsule_digest=plan["capsule"]["digest"],
        receipt_count=len(plan["capsule"]["receipts"]),
        destination=dest_text,
        reasons=reasons,
        path=" -> ".join(verdict["path"]) or "-",
        exact=of("exact"),
        summarized=of("summarized"),
        narrowed=of("narrowed", "emulated"),
        omitted=of("omitted"),
        unknown=of("unknown")
        if losses is None
        else _bullets(
            [f"{_clean(x.kind)}: {_clean(x.subject)}: {_clean(x.detail, 600)}" for x in losses]
        ),
        lost=of("lost"),
        effects=effects,
        table=caps["table"] or "no table",
        capabilities=capabilities,
        capacity=capacity_text,
        next_step=_next_step(plan),
    )
