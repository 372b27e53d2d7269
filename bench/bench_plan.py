"""Plan validation and capsule seal+verify throughput.

Figures, for a large plan (1,000 facts, 200 effects) and the shipped example capsule:

- baseline: the pure-Python ``jsonschema`` Draft 2020-12 validator doing the schema check
  alone on the same document (compiled once, as a user of that library would);
- ``validate_plan`` (schema, then every semantic rule), its ratio to the baseline and the
  issue-14 target (>= 10x), PASS or MISS; the same with signature checks; the schema layer
  alone (compiled ``jsonschema-rs`` first) and the semantic rules alone;
- capsule seal + verify per second (JCS digest, Ed25519 sign, strict verification).

Each call validates from scratch: nothing is cached between calls but compiled schemas.
Run standalone: ``.venv/bin/python bench/bench_plan.py`` (about 25 s).
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from onstation.core.effects import effect_id_for, fingerprint
from onstation.plan.capsule import seal, verify
from onstation.plan.resources import read_json
from onstation.plan.schemas import schema_violations, validator
from onstation.plan.signing import key_id, public_raw
from onstation.plan.validator import semantic_violations, validate_plan

BUDGET_SECONDS = 2.5
#: Issue 14: validate_plan at least ten times the pure-Python schema check.
TARGET_RATIO = 10.0
KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"bench key").digest())
TRUST = {key_id(public_raw(KEY)): public_raw(KEY)}
ISSUED_AT = "2026-03-02T09:21:00Z"


def large_plan(facts: int = 1000, effects: int = 200) -> dict[str, Any]:
    """The shipped ready plan grown to ``facts`` facts and ``effects`` effects, re-sealed."""
    plan = copy.deepcopy(read_json("examples", "resurrection-plan.ready.json"))
    payload = plan["capsule"]["payload"]
    node = payload["subject"]["node"]
    for i in range(facts - len(payload["facts"])):
        payload["facts"].append(
            {
                "id": f"fact-b{i}",
                "type": f"bench.fact-{i % 50}",
                "statement": f"observation {i} " + "x" * 80,
                "artifact": "test-run-1",
                "trust": "observed",
            }
        )
    for i in range(effects - len(payload["effects"])):
        args = {"channel": f"#team-{i % 7}", "text": f"status update {i}"}
        print_ = fingerprint(
            node=node,
            operation="slack.post",
            destination="https://slack.example/api",
            arguments=args,
            approval_slot=f"slot-{i}",
        )
        payload["effects"].append(
            {
                "effectId": effect_id_for(print_),
                "node": node,
                "generation": 3,
                "operation": "slack.post",
                "destination": "https://slack.example/api",
                "arguments": args,
                "approvalSlot": f"slot-{i}",
                "fingerprint": print_,
                "state": "COMMITTED",
            }
        )
    plan["capsule"] = seal(payload, KEY, issued_at=ISSUED_AT)
    return plan


def rate(label: str, func: Callable[[], object]) -> float:
    """Calls per second of ``func`` over about :data:`BUDGET_SECONDS`."""
    func()  # warm caches (compiled schemas, imports)
    count = 0
    start = time.perf_counter()
    while True:
        func()
        count += 1
        elapsed = time.perf_counter() - start
        if elapsed >= BUDGET_SECONDS and count >= 3:
            break
    per_second = count / elapsed
    print(f"  {label:<52} {per_second:>10.1f} /s   ({count} runs, {elapsed:.2f} s)")
    return per_second


def main() -> None:
    """Print the figures and ratios."""
    plan = large_plan()
    payload = plan["capsule"]["payload"]
    report = validate_plan(plan, trusted=TRUST)
    assert report.valid, [v.line() for v in report.violations]
    print(f"plan validation: {len(payload['facts'])} facts, {len(payload['effects'])} effects")
    schema_validator = validator("plan")
    baseline = rate(
        "baseline: jsonschema Draft202012Validator (schema only)",
        lambda: schema_validator.is_valid(plan),
    )
    full = rate("onstation validate_plan (schema + semantics)", lambda: validate_plan(plan))
    signed = rate(
        "onstation validate_plan + signature check", lambda: validate_plan(plan, trusted=TRUST)
    )
    schema_only = rate("onstation schema layer only", lambda: schema_violations("plan", plan))
    semantic = rate("onstation semantic rules only", lambda: semantic_violations(plan))
    ratio = full / baseline
    verdict = "PASS" if ratio >= TARGET_RATIO else "MISS"
    print(f"  validate_plan / baseline: {ratio:.1f}x (target >= {TARGET_RATIO:.0f}x): {verdict}")
    print(
        f"  with signatures / baseline: {signed / baseline:.1f}x; schema layer / baseline: "
        f"{schema_only / baseline:.1f}x; semantic rules / baseline: {semantic / baseline:.1f}x"
    )

    print("capsule seal + verify")
    example = read_json("examples", "resurrection-plan.ready.json")["capsule"]["payload"]
    for label, body in (("example capsule", example), ("large capsule", payload)):

        def round_trip(body: dict[str, Any] = body) -> None:
            verify(seal(body, KEY, issued_at=ISSUED_AT), TRUST)

        rate(f"seal+verify, {label}", round_trip)
    print(
        "  (baseline for seal+verify: none in the pure-Python ecosystem; Ed25519 runs in "
        "OpenSSL, JCS in pure Python)"
    )


if __name__ == "__main__":
    main()
