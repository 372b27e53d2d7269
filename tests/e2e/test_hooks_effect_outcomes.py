"""An effect is dispatched only when the tool ran (issue 12): payload sequences as Claude Code
sends them, through the installed hook commands, against a real bare git remote.

Claude Code runs PreToolUse before its permission prompt, its deny rules and the user's
interrupt; what it then does with the call reaches the hooks as PostToolUse,
PostToolUseFailure or PermissionDenied, or only the transcript (a declined prompt).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from hookworld import ONSTATION, Claude, commit, installed_world, sh

from onstation.core.effects import EffectState
from onstation.ledger import Ledger

DECLINED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). STOP what you are doing and "
    "wait for the user to tell you how to proceed."
)


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    world = installed_world(tmp_path)
    commit(world["project"], "a.txt")
    claude = Claude(world["project"], world["env"], "sess-1")
    claude.context("SessionStart", source="startup")
    return {**world, "claude": claude}


def _tool_use(claude: Claude, tool_use_id: str, command: str) -> None:
    """What Claude Code writes before it runs the hooks: the assistant's tool_use."""
    claude.append({"type": "assistant", "sessionId": claude.session_id, "message": {
        "role": "assistant", "content": [{"type": "tool_use", "id": tool_use_id, "name": "Bash",
                                          "input": {"command": command}}]}})  # fmt: skip


def _user(claude: Claude, content: list[dict[str, Any]]) -> None:
    claude.append({"type": "user", "sessionId": claude.session_id,
                   "message": {"role": "user", "content": content}})  # fmt: skip


def _effects(world: dict[str, Any]) -> list[Any]:
    with Ledger.open(world["db"]) as ledger:
        return ledger.effects("exec-1")


def _pre(claude: Claude, tool_use_id: str, command: str) -> dict[str, Any] | None:
    _tool_use(claude, tool_use_id, command)
    out, _ = claude.bash(command, tool_use_id)
    return out


def test_a_declined_push_leaves_nothing_dispatched_and_its_retry_is_journaled(
    world: dict[str, Any],
) -> None:
    claude: Claude = world["claude"]
    assert _pre(claude, "toolu_01", "git push") is None  # allowed; then the prompt is declined
    _user(claude, [{"type": "tool_result", "content": DECLINED, "is_error": True,
                    "tool_use_id": "toolu_01"}])  # fmt: skip
    # The model tries again: the same push, a new call.
    assert _pre(claude, "toolu_02", "git push") is None  # not refused as a repeat
    with Ledger.open(world["db"]) as ledger:
        (call,) = ledger.dispatched_calls("exec-1", generation=1)
    assert call.tool_use_id == "toolu_02"  # journaled again, for the retry
    sh(world["project"], "git", "push", "-q")
    claude.context("PostToolUse", tool_name="Bash", tool_use_id="toolu_02",
                   tool_input={"command": "git push", "description": "run"},
                   tool_response={"stdout": "", "stderr": "", "interrupted": False})  # fmt: skip
    (effect,) = _effects(world)
    assert effect.state is EffectState.COMMITTED
    with Ledger.open(world["db"]) as ledger:
        kinds = [e.kind for e in ledger.history("exec-1") if e.kind.startswith("effect.")]
    assert kinds == ["effect.intended", "effect.dispatched", "effect.not_executed",
                     "effect.reintended", "effect.dispatched", "effect.observed",
                     "effect.committed"]  # fmt: skip


def test_a_declined_push_is_closed_by_the_next_hook_call_of_the_body(
    world: dict[str, Any],
) -> None:
    claude: Claude = world["claude"]
    assert _pre(claude, "toolu_01", "git push") is None
    _user(claude, [{"type": "tool_result", "content": DECLINED, "is_error": True,
                    "tool_use_id": "toolu_01"}])  # fmt: skip
    claude.context("UserPromptSubmit", prompt="do not push yet")
    (effect,) = _effects(world)
    assert effect.state is EffectState.NOT_EXECUTED
    assert isinstance(effect.result, dict)
    assert effect.result["not_executed"]["transcript"]["transcript"] == "declined"


def test_an_interrupted_push_is_settled_by_its_remote_not_by_the_rejection_text(
    world: dict[str, Any],
) -> None:
    claude: Claude = world["claude"]
    assert _pre(claude, "toolu_01", "git push") is None
    sh(world["project"], "git", "push", "-q")  # it ran before the user pressed Esc
    _user(claude, [{"type": "tool_result", "content": DECLINED, "is_error": True,
                    "tool_use_id": "toolu_01"}])  # fmt: skip
    _user(claude, [{"type": "text", "text": "[Request interrupted by user for tool use]"}])
    claude.context("UserPromptSubmit", prompt="go on")
    (effect,) = _effects(world)
    assert effect.state is EffectState.COMMITTED


def test_permission_denied_closes_the_push(world: dict[str, Any]) -> None:
    claude: Claude = world["claude"]
    assert _pre(claude, "toolu_01", "git push") is None
    out, err, code = claude.fire(
        "PermissionDenied", tool_name="Bash", tool_use_id="toolu_01",
        tool_input={"command": "git push", "description": "run"},
        reason="Auto mode denied: pushes need a review", permission_mode="auto",
    )  # fmt: skip
    assert code == 0, err
    assert out is None or "retry" not in out.get("hookSpecificOutput", {})
    (effect,) = _effects(world)
    assert effect.state is EffectState.NOT_EXECUTED
    assert _pre(claude, "toolu_02", "git push") is None  # the retry is allowed


def _failure(claude: Claude, tool_use_id: str, command: str, **extra: Any) -> None:
    out, err, code = claude.fire(
        "PostToolUseFailure", tool_name="Bash", tool_use_id=tool_use_id,
        tool_input={"command": command, "description": "run"},
        error="Command exited with non-zero status code 1", **extra,
    )  # fmt: skip
    assert code == 0, err
    assert out is None or "decision" not in out  # never blocks: the failure stands as it is


def test_a_failed_push_whose_remote_did_not_move_is_not_executed(world: dict[str, Any]) -> None:
    claude: Claude = world["claude"]
    assert _pre(claude, "toolu_01", "git push") is None
    _failure(claude, "toolu_01", "git push", is_interrupt=False)
    (effect,) = _effects(world)
    assert effect.state is EffectState.NOT_EXECUTED
    refs = effect.result["not_executed"]["refs"]["refs/heads/main"]
    assert refs["now"] == refs["before"] != refs["intended"]
    assert effect.result["not_executed"]["failure"]["error"].startswith("Command exited")


def test_a_failed_call_whose_push_reached_the_remote_is_committed(world: dict[str, Any]) -> None:
    claude: Claude = world["claude"]
    assert _pre(claude, "toolu_01", "git push && false") is None
    sh(world["project"], "git", "push", "-q")  # the push ran; `false` failed the command
    _failure(claude, "toolu_01", "git push && false", is_interrupt=False)
    (effect,) = _effects(world)
    assert effect.state is EffectState.COMMITTED
    assert effect.result["observed"]["asked"] == "git ls-remote"


def test_a_failed_call_that_cannot_be_asked_is_ambiguous(world: dict[str, Any]) -> None:
    claude: Claude = world["claude"]
    command = "curl -sS -X POST http://127.0.0.1:9/items -d name=x"
    assert _pre(claude, "toolu_01", command) is None
    _failure(claude, "toolu_01", command, is_interrupt=True)
    (effect,) = _effects(world)
    assert effect.state is EffectState.AMBIGUOUS
    assert effect.result["uncertain"]["is_interrupt"] is True


def test_a_post_tool_use_without_tool_use_id_closes_its_effect(world: dict[str, Any]) -> None:
    claude: Claude = world["claude"]
    tool_input = {"command": "git push", "description": "run"}
    out, err, code = claude.fire("PreToolUse", tool_name="Bash", tool_input=tool_input)
    assert code == 0 and out is None, err
    sh(world["project"], "git", "push", "-q")
    _, err, code = claude.fire("PostToolUse", tool_name="Bash", tool_input=tool_input,
                                 tool_response={"stdout": "", "stderr": ""})  # fmt: skip
    assert code == 0, err
    (effect,) = _effects(world)
    assert effect.state is EffectState.COMMITTED


def test_a_push_observed_on_the_remote_resolves_itself_at_reconcile(
    world: dict[str, Any],
) -> None:
    claude: Claude = world["claude"]
    assert _pre(claude, "toolu_01", "git push") is None
    sh(world["project"], "git", "push", "-q")
    # The body dies here: no PostToolUse. The lead fences and reconciles.
    env = world["env"]
    for argv in (["lease", "fence", "exec-1", "--expect-generation", "1"],
                 ["effect", "reconcile", "exec-1"]):  # fmt: skip
        done = subprocess.run([ONSTATION, *argv], capture_output=True, text=True, env=env,
                              check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert "ambiguous" not in done.stdout.lower()
    (effect,) = _effects(world)
    assert effect.state is EffectState.COMMITTED
