"""Drive the installed hook commands exactly as Claude Code would: real payloads on stdin,
the command strings taken from the settings.json that `onstation install` wrote."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hookworld import ONSTATION, Claude, commit, installed_world, sh

from onstation.core.effects import EffectState
from onstation.ledger import Ledger


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    return installed_world(tmp_path)


def test_green_to_critical_messages_stop_block_and_brief(world: dict[str, Any]) -> None:
    claude = Claude(world["project"], world["env"], "sess-alpha")
    assert "body of exec-1, generation 1" in claude.context("SessionStart", source="startup")

    claude.assistant_turn(20_000)  # 10 %: Green
    assert claude.context("PostToolUse", tool_name="Read", tool_input={}, tool_use_id="t1") == ""
    claude.assistant_turn(54_000)  # 27 %: Amber
    amber = claude.context("PostToolUse", tool_name="Read", tool_input={}, tool_use_id="t2")
    assert "Hull integrity Amber" in amber
    claude.assistant_turn(56_000)  # still Amber: no second message
    assert claude.context("PostToolUse", tool_name="Read", tool_input={}, tool_use_id="t3") == ""
    out, _, code = claude.fire("Stop", stop_hook_active=False, last_assistant_message="ok")
    assert code == 0 and out is None  # no relief requested yet: no block

    claude.assistant_turn(68_000)  # 34 %: Red
    red = claude.context("UserPromptSubmit", prompt="continue")
    assert "Hull integrity Red: a turnover brief is requested." in red
    # The instruction names the body's generation: its brief is a write of that generation.
    assert "onstation brief write exec-1 --generation 1" in red

    blocked, _, code = claude.fire("Stop", stop_hook_active=False, last_assistant_message="x")
    assert code == 0 and blocked is not None and blocked["decision"] == "block"
    assert "turnover brief" in blocked["reason"]
    again, _, _ = claude.fire("Stop", stop_hook_active=True, last_assistant_message="x")
    assert again is None  # blocks once only

    claude.assistant_turn(78_000)  # 39 %: Critical
    critical = claude.context("PostToolUse", tool_name="Edit", tool_input={}, tool_use_id="t4")
    assert "Hull integrity Critical" in critical

    (world["project"] / "login.py").write_text("def login(): ...\n")
    done = subprocess.run(
        [ONSTATION, "brief", "write", "exec-1", "--generation", "1", "--task",
         "build the login page",
         "--status", "in_progress", "--completed", "login.py — form handler stub",
         "--remaining", "wire the session cookie", "--decision", "bcrypt: the team standard",
         "--json"],
        capture_output=True, text=True, env=world["env"], cwd=world["project"], check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    brief = json.loads(done.stdout)
    path = Path(brief["path"])
    assert path.parent == world["project"] / ".bridge" / "turnovers"
    text = path.read_text()
    assert "## Turnover Brief — exec-1" in text
    assert "**Context Used**: 39.0%" in text and "Hull integrity Critical" in text
    assert "login.py" in brief["files_modified"]
    assert "important_context" in brief["missing"]  # not supplied: marked, not invented
    assert "*missing: not supplied by the agent*" in text

    reinjected = claude.context("SessionStart", source="compact")
    assert "## Turnover Brief — exec-1" in reinjected and "untrusted evidence" in reinjected

    with Ledger.open(world["db"]) as ledger:
        tiers = [
            (e.detail["tier"], e.generation) for e in ledger.history("exec-1")
            if e.kind == "hull.tier"
        ]  # fmt: skip
        assert tiers == [("green", 1), ("amber", 1), ("red", 1), ("critical", 1)]
        kinds = Counter(e.kind for e in ledger.history("exec-1"))
        assert kinds["brief.written"] == 1 and kinds["session.admitted"] == 1


def test_second_session_is_refused_and_a_fenced_body_is_denied(world: dict[str, Any]) -> None:
    first = Claude(world["project"], world["env"], "sess-one")
    second = Claude(world["project"], world["env"], "sess-two")
    first.context("SessionStart", source="startup")
    refused = second.context("SessionStart", source="startup")
    assert "not the body of exec-1" in refused and "sess-one" in refused

    out, _ = second.bash("git push", "t-refused")
    assert out is not None
    decision = out["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert (
        "onstation lease fence exec-1 --expect-generation 1" in decision["permissionDecisionReason"]
    )
    ok, _ = second.bash("ls -la", "t-ls")
    assert ok is None  # not effect-capable: allowed

    with Ledger.open(world["db"]) as ledger:
        ledger.fence("exec-1", expect_generation=1, by="operator", reason="take over")
    # The old body may do nothing at all now; the waiting session is admitted.
    out, _ = first.bash("ls", "t-old")
    assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "relieved" in out["hookSpecificOutput"]["permissionDecisionReason"]
    admitted = second.context("SessionStart", source="startup")
    assert "body of exec-1, generation 2" in admitted
    with Ledger.open(world["db"]) as ledger:
        assert ledger.live_lease("exec-1").holder == "claude-code session sess-two"  # type: ignore[union-attr]


def test_git_push_is_journaled_and_never_repeated(world: dict[str, Any]) -> None:
    project = world["project"]
    claude = Claude(project, world["env"], "sess-push")
    claude.context("SessionStart", source="startup")
    commit(project, "a.txt")

    out, _ = claude.bash("git push", "t-push-1")
    assert out is None  # allowed, journaled as INTENDED then DISPATCHED
    sh(project, "git", "push", "-q")
    claude.context("PostToolUse", tool_name="Bash", tool_use_id="t-push-1",
                   tool_input={"command": "git push"},
                   tool_response={"stdout": "", "stderr": "", "interrupted": False})  # fmt: skip
    with Ledger.open(world["db"]) as ledger:
        (effect,) = ledger.effects("exec-1")
        assert effect.state is EffectState.COMMITTED and effect.operation == "git.push"

    out, _ = claude.bash("git push origin main", "t-push-2")  # the same commit, spelled out
    assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "not repeating" in out["hookSpecificOutput"]["permissionDecisionReason"]

    commit(project, "b.txt")
    out, _ = claude.bash("git push origin main", "t-push-3")  # new commit: a new effect
    assert out is None
    # The body dies here: no PostToolUse ever comes for t-push-3.
    with Ledger.open(world["db"]) as ledger:
        ledger.fence("exec-1", expect_generation=1, by="team-lead", reason="relief")
        report = ledger.reconcile("exec-1", by="team-lead")
        assert len(report.ambiguous) == 1
        states = sorted(e.state.value for e in ledger.effects("exec-1"))
        assert states == ["AMBIGUOUS", "COMMITTED"]
    successor = Claude(project, world["env"], "sess-successor")
    successor.context("SessionStart", source="startup")
    out, _ = successor.bash("git push", "t-push-4")
    assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "AMBIGUOUS" in out["hookSpecificOutput"]["permissionDecisionReason"]


@pytest.mark.parametrize(
    "stdin",
    ["", "not json", "[1, 2]", '{"session_id": 7}', '{"session_id": "s", "cwd": "/nonexistent"}'],
)
def test_malformed_input_fails_open(world: dict[str, Any], stdin: str) -> None:
    command = Claude(world["project"], world["env"], "sess-x").commands["PreToolUse"]
    done = subprocess.run(  # noqa: S602 - the command string as the host runs it
        command, shell=True, input=stdin, capture_output=True, text=True, env=world["env"],
        check=False,
    )  # fmt: skip
    assert done.returncode == 0
    # No decision: only the notice the host shows the user (systemMessage), nothing else.
    out = json.loads(done.stdout) if done.stdout.strip() else {}
    assert set(out) <= {"systemMessage"}
    if not stdin.startswith('{"session_id"'):  # unreadable: the user is told it went ahead
        assert "went ahead unrecorded" in out["systemMessage"]
    assert len(done.stderr.strip().splitlines()) <= 1
