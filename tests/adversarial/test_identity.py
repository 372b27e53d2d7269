"""A session is bound to one identity for its whole life (on every backend).

Regression (issue 10): a session refused for one identity that moved to another identity's
workspace was told it is the body of the first, took the second's lease, and its `git push`
from the second workspace was journaled under the first identity's live generation.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from onstation.cli.hooks import hook_main
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger


def test_a_session_refused_for_one_identity_is_not_admitted_for_another(ledger: Ledger) -> None:
    ledger.register_node("alpha")
    ledger.register_node("beta")
    records = HarnessLedger(ledger)
    assert records.admit_session("s1", harness="claude-code", node="alpha", workspace=None).admitted
    refused = records.admit_session("s2", harness="claude-code", node="alpha", workspace=None)
    assert not refused.admitted
    moved = records.admit_session("s2", harness="claude-code", node="beta", workspace=None)
    assert not moved.admitted and not moved.fenced
    assert "bound to alpha" in moved.reason
    assert moved.session.node == "alpha"
    assert ledger.live_lease("beta") is None  # beta's generation was not taken
    # beta is still free for a session of its own.
    assert records.admit_session("s3", harness="claude-code", node="beta", workspace=None).admitted


def test_an_admitted_body_is_not_admitted_for_another_identity(ledger: Ledger) -> None:
    ledger.register_node("alpha")
    ledger.register_node("beta")
    records = HarnessLedger(ledger)
    assert records.admit_session("s1", harness="claude-code", node="alpha", workspace=None).admitted
    there = records.admit_session("s1", harness="claude-code", node="beta", workspace=None)
    assert not there.admitted and "bound to alpha" in there.reason
    assert ledger.live_lease("beta") is None


def _hook(event: str, payload: dict[str, object], db: str, monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> dict[str, object] | None:  # fmt: skip
    monkeypatch.setenv("ONSTATION_DB", db)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    code = hook_main(["claude-code", event])
    out = capsys.readouterr().out
    assert code == 0
    return json.loads(out) if out.strip() else None


def test_a_push_from_another_identitys_workspace_is_denied_and_never_journaled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "ledger.db")
    spaces = {}
    with Ledger.open(db) as ledger:
        records = HarnessLedger(ledger)
        for node in ("alpha", "beta"):
            ledger.register_node(node)
            spaces[node] = tmp_path / node
            spaces[node].mkdir()
            records.bind_workspace(str(spaces[node]), node, harness="claude-code", by="test")
    start = {"hook_event_name": "SessionStart", "source": "startup"}
    _hook("SessionStart", {**start, "session_id": "s1", "cwd": str(spaces["alpha"])}, db,
          monkeypatch, capsys)  # fmt: skip
    _hook("SessionStart", {**start, "session_id": "s2", "cwd": str(spaces["alpha"])}, db,
          monkeypatch, capsys)  # fmt: skip
    push = {"hook_event_name": "PreToolUse", "session_id": "s2", "cwd": str(spaces["beta"]),
            "tool_name": "Bash", "tool_input": {"command": "git push origin main"},
            "tool_use_id": "t1"}  # fmt: skip
    answer = _hook("PreToolUse", push, db, monkeypatch, capsys)
    assert answer is not None
    decision = answer["hookSpecificOutput"]  # type: ignore[index]
    assert decision["permissionDecision"] == "deny"  # type: ignore[index]
    with Ledger.open(db) as ledger:
        assert ledger.effects("alpha") == [] and ledger.effects("beta") == []
        assert ledger.live_lease("beta") is None
