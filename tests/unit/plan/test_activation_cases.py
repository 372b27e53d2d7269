"""The shipped activation cases: which requests start the continuity procedure."""

from __future__ import annotations

from typing import Any

import pytest
from plan_testkit import example

from onstation.core.verdict import Disposition, IncidentKind, Operation, activation

CASES = example("activation-cases.json")["items"]


def test_cases_cover_both_answers() -> None:
    assert {c["activates"] for c in CASES} == {True, False}
    assert any(c["answer"] == "INVALID" for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_activation_case(case: dict[str, Any]) -> None:
    operation = None if case["operation"] is None else Operation(case["operation"])
    incident = None if case["incident"] is None else IncidentKind(case["incident"])
    got = activation(operation, incident)
    assert got.activates is case["activates"]
    expected = None if case["answer"] is None else Disposition(case["answer"])
    assert got.disposition is expected
