"""Shared builders for the plan tests (imported by module name; no package needed)."""

from __future__ import annotations

import copy
from typing import Any

from onstation.core.effects import fingerprint
from onstation.plan.capsule import seal
from onstation.plan.example_key import example_private_key, example_trust
from onstation.plan.resources import read_json
from onstation.plan.validator import capacity_digest

ISSUED_AT = "2026-03-02T09:21:00Z"
TRUST = example_trust()


def example(name: str) -> Any:
    """A shipped example, freshly parsed (safe to mutate)."""
    return copy.deepcopy(read_json("examples", name))


def ready_plan() -> dict[str, Any]:
    """The shipped safe REBODIMENT_READY plan."""
    plan = example("resurrection-plan.ready.json")
    assert isinstance(plan, dict)
    return plan


def refingerprint(effect: dict[str, Any]) -> None:
    """Make an effect's stated fingerprint the recomputed one."""
    effect["fingerprint"] = fingerprint(
        node=effect["node"],
        operation=effect["operation"],
        destination=effect["destination"],
        arguments=effect["arguments"],
        approval_slot=effect["approvalSlot"],
    )


def reseal(plan: dict[str, Any]) -> dict[str, Any]:
    """Re-seal the plan's capsule after its payload changed (digest and receipt follow)."""
    plan["capsule"] = seal(plan["capsule"]["payload"], example_private_key(), issued_at=ISSUED_AT)
    return plan


def readdress_capacity(plan: dict[str, Any]) -> dict[str, Any]:
    """Recompute the capacity address after the evidence changed, and the capsule's citation."""
    address = capacity_digest(plan["capacity"]["evidence"])
    plan["capacity"]["evidenceDigest"] = address
    plan["capsule"]["payload"]["capacityState"]["evidenceDigest"] = address
    return reseal(plan)


def native_plan() -> dict[str, Any]:
    """The ready plan turned into a consistent NATIVE_RESUME_ELIGIBLE claude-code plan."""
    plan = ready_plan()
    plan["verdict"] = {
        "disposition": "NATIVE_RESUME_ELIGIBLE",
        "reasons": [{"code": "NATIVE_PROOF_CURRENT", "detail": "proof current"}],
        "path": ["A", "B", "D", "F", "G", "I", "J", "K", "M", "N"],
    }
    plan["proposal"]["harness"] = "claude-code"
    plan["destination"] = {
        "mode": "native-resume",
        "harness": "claude-code",
        "sessionProof": {
            "harness": "claude-code",
            "sessionId": "3f1c2a9e-0000-4000-8000-000000000001",
            "workspaceBound": True,
            "transcriptRetained": True,
            "expectedTailDigest": "a" * 64,
            "observedTailDigest": "a" * 64,
            "checkedAt": "2026-03-02T09:29:00Z",
        },
    }
    plan["leaseReceipt"] = {
        "node": "executor-7",
        "generation": 5,
        "leaseId": 31,
        "exclusive": True,
        "state": "LIVE",
        "issuedAt": "2026-03-02T09:28:00Z",
        "expiresAt": "2026-03-02T10:28:00Z",
    }
    plan["capabilities"]["destinationHarness"] = "claude-code"
    plan["capabilities"]["table"] = "claude-code->claude-code"
    for item in plan["capabilities"]["translations"]:
        item["classification"] = "EXACT"
        item["destination"] = item["name"]
        item["destinationGrants"] = list(item["sourceGrants"])
        item["reason"] = "same harness"
    plan["capacity"]["evidence"]["harness"] = "claude-code"
    plan["capacity"]["evidence"]["provider"] = "anthropic"
    return readdress_capacity(plan)
