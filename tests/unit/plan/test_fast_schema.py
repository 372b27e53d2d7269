"""The compiled schema path (jsonschema-rs) against the pure-Python one (jsonschema).

On mutated documents (from the shipped examples and a bench-shaped plan) the compiled
validator never accepts what the pure-Python validator rejects, the two agree on
valid/invalid, and ``validate_plan`` reports the same violations with the fast path on and
off.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plan_testkit import TRUST, example, ready_plan, refingerprint, reseal

from onstation.plan import schemas
from onstation.plan.schemas import fast_accepts, schema_violations, validator
from onstation.plan.validator import Report, validate_plan


@contextmanager
def fast_path(on: bool) -> Iterator[None]:
    """The schema layer with the compiled validator on or off (restored afterwards)."""
    saved = schemas.FAST_PATH
    schemas.FAST_PATH = on
    try:
        yield
    finally:
        schemas.FAST_PATH = saved


def bench_shaped_plan(facts: int = 40, effects: int = 12) -> dict[str, Any]:
    """The ready plan grown as bench/bench_plan.py grows it (smaller), re-sealed."""
    plan = ready_plan()
    payload = plan["capsule"]["payload"]
    node = payload["subject"]["node"]
    for i in range(facts):
        payload["facts"].append(
            {
                "id": f"fact-b{i}",
                "type": f"bench.fact-{i % 5}",
                "statement": f"observation {i}",
                "artifact": "test-run-1",
                "trust": "observed",
            }
        )
    for i in range(effects):
        effect = {
            "effectId": "",
            "node": node,
            "generation": 3,
            "operation": "slack.post",
            "destination": "https://slack.example/api",
            "arguments": {"channel": f"#team-{i % 3}", "text": f"status update {i}"},
            "approvalSlot": f"slot-{i}",
            "fingerprint": "",
            "state": "COMMITTED",
        }
        refingerprint(effect)
        effect["effectId"] = "eff-" + effect["fingerprint"][:32]
        payload["effects"].append(effect)
    return reseal(plan)


def _documents() -> list[tuple[str, Any]]:
    ready = ready_plan()
    return [
        ("plan", ready),
        ("plan", example("resurrection-plan.unsafe-ready.json")),
        ("plan", bench_shaped_plan()),
        ("capsule", ready["capsule"]),
        ("capacity", ready["capacity"]["evidence"]),
        ("incident", example("sample-input.json")),
    ]


DOCUMENTS = _documents()
BENCH_PLAN = DOCUMENTS[2][1]

#: Values that break a type, a range, a pattern or an enum somewhere in the schemas.
WRONG_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 3.5, -0.0, 2**53, 2**53 - 1, 2**70, -(2**70), float(2**53),
    math.inf, -math.inf, math.nan, "", "x", "NOT-AN-ENUM", "UPPER", "a..b", "a/b",
    "2026-03-02T09:21:00", "2026-03-02T09:21:00.1234567Z", "g" * 64, "A" * 64, "0" * 63,
    "x" * 5000, "\u00e9t\u00e9", [], [1], ["a", "a"], {}, {"unknown": 1},
]  # fmt: skip


def _containers(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(doc, dict):
        yield path, doc
        for key, value in doc.items():
            yield from _containers(value, (*path, key))
    elif isinstance(doc, list):
        yield path, doc
        for index, value in enumerate(doc):
            yield from _containers(value, (*path, index))


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


@st.composite
def mutated(draw: st.DrawFn, sources: list[tuple[str, Any]] = DOCUMENTS) -> tuple[str, Any]:
    """A shipped document with one to three mutations at random places."""
    name, original = draw(st.sampled_from(sources))
    doc = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 3))):
        spots = list(_containers(doc))
        path, _ = draw(st.sampled_from(spots))
        holder = _at(doc, path)
        keys = list(holder.keys()) if isinstance(holder, dict) else list(range(len(holder)))
        kind = draw(st.sampled_from(["drop", "retype", "unknown", "string", "duplicate"]))
        if kind == "unknown" and isinstance(holder, dict):
            holder[draw(st.sampled_from(["extra", "x-note", "Node", ""]))] = 1
        elif not keys:
            continue
        elif kind == "drop":
            del holder[draw(st.sampled_from(keys))]
        elif kind == "retype":
            # A copy: the shared list and dict values must never be mutated later in this
            # document (or another), nor put inside themselves (a cycle: RecursionError).
            holder[draw(st.sampled_from(keys))] = copy.deepcopy(draw(st.sampled_from(WRONG_VALUES)))
        elif kind == "string":
            key = draw(st.sampled_from(keys))
            if isinstance(holder[key], str):
                edit = draw(st.sampled_from(["upper", "newline", "dots", "empty", "long"]))
                holder[key] = {
                    "upper": holder[key].upper(),
                    "newline": holder[key] + "\n",
                    "dots": holder[key] + "..x",
                    "empty": "",
                    "long": holder[key] * 300,
                }[edit]
        elif isinstance(holder, list):
            holder.append(copy.deepcopy(holder[draw(st.sampled_from(keys))]))
    return name, doc


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_compiled_and_pure_python_agree(case: tuple[str, Any]) -> None:
    name, doc = case
    pure = validator(name).is_valid(doc)
    fast = fast_accepts(name, doc)
    # Never accepts what the pure-Python validator rejects: that would hide violations.
    assert not (fast and not pure)
    # The known disagreements run the other way only: Python's `$` also matches before a
    # final newline, the compiled one's does not; NaN and infinities (not JSON) are numbers
    # to the pure-Python validator only. The pure-Python path then decides.
    if pure and not fast:
        assert _has_string_ending_in_newline(doc) or _has_non_finite(doc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated([d for d in DOCUMENTS if d[0] == "plan"]))
def test_validate_plan_same_report_with_and_without_fast_path(case: tuple[str, Any]) -> None:
    _, plan = case
    with fast_path(True):
        fast: Report = validate_plan(plan, trusted=TRUST)
    with fast_path(False):
        pure: Report = validate_plan(plan, trusted=TRUST)
    assert fast == pure


def _has_string_ending_in_newline(doc: Any) -> bool:
    if isinstance(doc, str):
        return doc.endswith("\n")
    if isinstance(doc, dict):
        return any(_has_string_ending_in_newline(v) for v in doc.values())
    if isinstance(doc, list):
        return any(_has_string_ending_in_newline(v) for v in doc)
    return False


def _has_non_finite(doc: Any) -> bool:
    if isinstance(doc, float):
        return not math.isfinite(doc)
    if isinstance(doc, dict):
        return any(_has_non_finite(v) for v in doc.values())
    if isinstance(doc, list):
        return any(_has_non_finite(v) for v in doc)
    return False


@pytest.mark.parametrize(("name", "doc"), DOCUMENTS)
def test_shipped_documents_take_the_fast_path(name: str, doc: Any) -> None:
    if doc is DOCUMENTS[1][1]:
        # The unsafe example breaks schema guards: the pure-Python path names them.
        assert not fast_accepts(name, doc)
        assert schema_violations(name, doc)
    else:
        assert fast_accepts(name, doc)
        assert schema_violations(name, doc) == []


def test_bench_shaped_plan_is_valid_on_both_paths() -> None:
    for on in (True, False):
        with fast_path(on):
            assert validate_plan(BENCH_PLAN, trusted=TRUST).valid


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param(lambda p: p["capsule"]["payload"].__setitem__("facts", ()), id="tuple"),
        pytest.param(
            lambda p: p["subject"].__setitem__("latestGeneration", Decimal(4)), id="decimal"
        ),
        pytest.param(lambda p: p.__setitem__(1, "x"), id="int-key"),
    ],
)
def test_values_that_are_not_plain_json_take_the_pure_python_path(odd: Any) -> None:
    # The compiled validator reads a tuple as an array and a Decimal as an integer; the
    # pure-Python one does not, and it is the one that decides.
    plan = ready_plan()
    odd(plan)
    assert not fast_accepts("plan", plan)
    assert schema_violations("plan", plan) == sorted(schema_violations_pure("plan", plan))


def schema_violations_pure(name: str, doc: Any) -> list[schemas.Violation]:
    with fast_path(False):
        return schema_violations(name, doc)


def test_deep_documents_skip_the_compiled_validator() -> None:
    plan = ready_plan()
    deep: Any = "leaf"
    for _ in range(schemas.FAST_MAX_DEPTH + 5):
        deep = [deep]
    plan["capsule"]["payload"]["effects"][0]["arguments"] = {"deep": deep}
    assert not fast_accepts("plan", plan)


def test_a_ref_outside_the_shipped_schemas_is_not_fetched() -> None:
    import jsonschema_rs

    with pytest.raises(jsonschema_rs.ValidationError, match=r"[Rr]etriev"):
        jsonschema_rs.Draft202012Validator(
            {"$ref": "https://example.invalid/other.json"},
            registry=schemas._fast_registry(),
            offline=True,
        )
