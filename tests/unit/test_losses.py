"""relief/losses.py: every loss of a relief gathered in one place, from plain facts."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from onstation.plan.review import render_review
from onstation.relief.losses import KINDS, Ambiguous, ReliefFacts, gather, render

EXAMPLES = Path(__file__).parents[2] / "src/onstation/plan/examples"


@pytest.fixture
def plan() -> dict[str, Any]:
    """A ready plan with nothing omitted or unknown, whose capsule cites its evidence."""
    ready: dict[str, Any] = json.loads((EXAMPLES / "resurrection-plan.ready.json").read_text())
    ready["discontinuities"] = [
        d for d in ready["discontinuities"] if d["kind"] not in ("omitted", "unknown")
    ]
    ready["capsule"]["payload"]["capacityState"]["evidenceDigest"] = ready["capacity"][
        "evidenceDigest"
    ]
    return ready


def complete_brief() -> dict[str, Any]:
    return {"missing": [], "reason": "hull red"}


def test_a_clean_relief_has_no_loss_and_says_so(plan: dict[str, Any]) -> None:
    facts = ReliefFacts(handover_kind="brief", handover_path="b.md", handover=complete_brief(),
                        plan=plan)  # fmt: skip
    assert gather(facts) == []
    assert render([]) == ["## Losses", "", "- nothing was lost at this relief"]
    review = render_review(plan, losses=[])
    assert "## What is unknown\n\n- none\n" in review


def test_every_kind_is_gathered_with_its_subject(plan: dict[str, Any]) -> None:
    contradicted = copy.deepcopy(plan)
    contradicted["capsule"]["payload"]["capacityState"] = {
        "evidenceDigest": None, "executionClass": None, "note": "unknown"
    }  # fmt: skip
    contradicted["discontinuities"] += [
        {"kind": "omitted", "item": "tests", "detail": "no test results supplied"},
        {"kind": "omitted", "item": "capacityState", "detail": "no capacity evidence supplied"},
        {"kind": "unknown", "item": "unsupported claim", "detail": "it works (source: agent)"},
        {"kind": "unknown", "item": "effect eff-1", "detail": "git.push origin: dispatched"},
    ]
    facts = ReliefFacts(
        handover_kind="manifest", handover_path="m.md",
        handover={"missing": ["next_action"], "scratch_state": None},
        late_briefs=[(1, "/w/.bridge/turnovers/late/x.md")],
        expired_exchanges=[("APPROACH from exec-9 (message 4)", "the exchange expired")],
        ambiguous=[Ambiguous("eff-1", "git.push", "origin main", "remote does not answer")],
        scratch_removed="/w/memory/agents/coords/coord-a-b-scratch.md",
        plan=contradicted,
    )  # fmt: skip
    losses = gather(facts)
    by_kind = {loss.kind: loss for loss in losses}
    assert set(by_kind) == set(KINDS) - {"no-brief"}
    assert by_kind["brief-fields-missing"].detail == "the agent did not give: next_action"
    assert by_kind["late-brief"].subject == "/w/.bridge/turnovers/late/x.md"
    assert by_kind["expired-exchange"].subject == "APPROACH from exec-9 (message 4)"
    assert "remote does not answer" in by_kind["ambiguous-effect"].detail
    assert by_kind["capsule-omission"].subject == "tests"
    # The capacityState omission is the contradiction it is, and the effect is listed once.
    assert [x.subject for x in losses if x.kind == "capsule-omission"] == ["tests"]
    assert [x.subject for x in losses if x.kind == "unknown"] == ["unsupported claims"]
    assert "capacity is unknown" in by_kind["capacity-contradiction"].detail
    assert [x.kind for x in losses] == sorted((x.kind for x in losses), key=KINDS.index)
    lines = render(losses)
    assert lines[2].startswith(f"{len(losses)} loss(es): ")
    review = render_review(contradicted, losses=losses)
    unknown = review.split("## What is unknown")[1].split("## What was lost")[0]
    assert "- none" not in unknown
    for loss in losses:
        assert loss.kind in unknown


def test_no_brief_before_the_fence_is_a_loss_but_not_when_nothing_was_fenced() -> None:
    emergency = ReliefFacts(handover_kind="brief", handover_path="e.md",
                            handover={"missing": ["decisions"]}, emergency_brief=True)  # fmt: skip
    (loss,) = gather(emergency)
    assert loss.kind == "no-brief" and "emergency brief" in loss.detail
    assert "decisions" in loss.detail
    assert gather(ReliefFacts(fenced=False)) == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"node": "someone-else"}, "is for node someone-else"),
        ({"harness": "other-harness"}, "is for harness other-harness"),
        ({"validUntil": "2000-01-01T00:00:00Z"}, "had expired"),
        ({"freshness": "stale"}, "had expired"),
    ],
)
def test_evidence_for_another_body_or_expired_is_a_contradiction(
    plan: dict[str, Any], change: dict[str, Any], said: str
) -> None:
    plan["capacity"]["evidence"] |= change
    (loss,) = gather(ReliefFacts(handover={"missing": []}, plan=plan))
    assert loss.kind == "capacity-contradiction" and said in loss.detail


def test_the_review_names_the_attempts_reservation(plan: dict[str, Any]) -> None:
    review = render_review(plan, losses=[], reservation="res-0123456789abcdef")
    capacity = review.split("## Capacity")[1]
    assert "reservation `res-0123456789abcdef` (made for this attempt" in capacity
    held = plan["capacity"]["evidence"]["reservation"]["reservationId"]
    assert f"own hold `{held}`" in capacity and "not this attempt's reservation" in capacity
