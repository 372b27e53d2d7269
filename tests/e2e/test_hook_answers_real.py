"""What the hooks answer, read as Claude Code and Codex read it (docs/hosts.md).

Payloads as each host sends them, the real ``onstation hook`` command, real git, real
ledgers (SQLite and PostgreSQL):

- a fenced body is stopped, not only told: ``continue: false`` with a ``stopReason`` on every
  answer where the host honours it (Codex rejects both on PreToolUse, and a rejected answer
  fails open, so there the answer is the deny alone), and a ``systemMessage`` for the user;
- a ledger that cannot be reached fails open by default with a notice the user sees, and with
  ``ONSTATION_HOOK_FAIL=closed`` (or ``hook_fail`` in the workspace configuration) an
  effect-capable call is denied while a call without effects goes ahead;
- every text injected into the model is a statement of fact, not an order.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hookworld import ONSTATION, answer, git_project, hook_env, hook_payload

from onstation.ledger import Ledger
from onstation.relief import hook_texts

UNREACHABLE_PG = "postgresql://postgres@127.0.0.1:1/x"

#: Top-level keys each Codex output schema allows (``additionalProperties: false``), from
#: openai/codex codex-rs/hooks/schema/generated/<event>.command.output.schema.json.
_UNIVERSAL = {"continue", "stopReason", "suppressOutput", "systemMessage"}
CODEX_KEYS = {
    "SessionStart": _UNIVERSAL | {"hookSpecificOutput"},
    "PreToolUse": _UNIVERSAL | {"hookSpecificOutput", "decision", "reason"},
    "PostToolUse": _UNIVERSAL | {"hookSpecificOutput", "decision", "reason"},
    "UserPromptSubmit": _UNIVERSAL | {"hookSpecificOutput", "decision", "reason"},
    "Stop": _UNIVERSAL | {"decision", "reason"},
}

#: Orders a prompt-injection defence flags in text arriving from a tool.
IMPERATIVE = re.compile(r"\bSTOP\b|\bMUST\b|(?i:\byou must\b|\bdo not\b|\bimmediately\b)")


class Host:
    """Claude Code's or Codex's hook runner: one payload on stdin, the answer read back."""

    def __init__(self, harness: str, project: Path, env: dict[str, str], session: str) -> None:
        self.harness = harness
        self.project = project
        self.env = env
        self.session = session
        self.transcript = project.parent / f"{session}.jsonl"
        self.transcript.touch()

    def fire(self, event: str, **fields: Any) -> dict[str, Any] | None:
        if self.harness == "codex":  # codex-rs/hooks/src/schema.rs: turn_id and model too
            fields = {"turn_id": "turn-1", "model": "gpt-5.3-codex", **fields}
        payload = hook_payload(self.project, self.session, event, **fields)
        done = subprocess.run(
            [ONSTATION, "hook", self.harness, event], input=json.dumps(payload),
            capture_output=True, text=True, env=self.env, cwd=self.project, timeout=120,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        out = answer(done.stdout)
        if self.harness == "codex" and out is not None:
            assert set(out) <= CODEX_KEYS[event], out  # the schema's additionalProperties
        return out

    def bash(self, command: str, tool_use_id: str) -> dict[str, Any] | None:
        return self.fire("PreToolUse", tool_name="Bash", tool_use_id=tool_use_id,
                         tool_input={"command": command})  # fmt: skip

    def after(self, command: str, tool_use_id: str) -> dict[str, Any] | None:
        response: Any = (
            {"stdout": "", "stderr": "", "interrupted": False}
            if self.harness == "claude-code"
            else "ok"
        )
        return self.fire("PostToolUse", tool_name="Bash", tool_use_id=tool_use_id,
                         tool_input={"command": command}, tool_response=response)  # fmt: skip


def _project(tmp_path: Path, db: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    project, _ = git_project(tmp_path)
    (project / ".onstation").mkdir()
    (project / ".onstation" / "config.json").write_text(
        json.dumps({"node": "exec-1", **(config or {})})
    )
    if db != UNREACHABLE_PG and "broken" not in db:
        with Ledger.open(db) as ledger:
            ledger.register_node("exec-1", role="executor", by="test")
    env = hook_env(tmp_path, db)
    env.pop("ONSTATION_HOOK_FAIL", None)
    return {"project": project, "env": env, "db": db}


def _model_texts(out: dict[str, Any] | None) -> list[str]:
    """The texts of an answer that reach the model."""
    if out is None:
        return []
    specific = out.get("hookSpecificOutput") or {}
    found = [specific.get("additionalContext"), specific.get("permissionDecisionReason"),
             out.get("reason")]  # fmt: skip
    return [t for t in found if isinstance(t, str)]


def _stopped(harness: str, event: str, out: dict[str, Any] | None) -> None:
    assert out is not None
    assert "generation 2" in out["systemMessage"] and "fenced" in out["systemMessage"]
    if harness == "codex" and event == "PreToolUse":
        # Codex's parser rejects continue:false and stopReason on PreToolUse ("unsupported"),
        # and a rejected answer decides nothing: the deny must stand alone.
        assert "continue" not in out and "stopReason" not in out
        return
    assert out["continue"] is False
    assert "generation 2" in out["stopReason"] and "stopped" in out["stopReason"]


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_a_fenced_body_is_stopped_on_every_answer(
    tmp_path: Path, ledger_url: str, harness: str
) -> None:
    world = _project(tmp_path, ledger_url)
    host = Host(harness, world["project"], world["env"], "sess-old")
    start = host.fire("SessionStart", source="startup")
    assert start is not None and "continue" not in start  # the live body goes on
    assert host.bash("ls", "t-0") is None
    with Ledger.open(world["db"]) as ledger:
        ledger.fence("exec-1", expect_generation=1, by="operator", reason="relieved")
    told: list[str] = []

    push = host.bash("git push origin main", "t-push")
    _stopped(harness, "PreToolUse", push)
    assert push is not None and push["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "has been relieved" in push["hookSpecificOutput"]["permissionDecisionReason"]
    told += _model_texts(push)
    inert = host.bash("ls", "t-ls")
    _stopped(harness, "PreToolUse", inert)
    assert inert is not None and inert["hookSpecificOutput"]["permissionDecision"] == "deny"

    for event, out in (
        ("PostToolUse", host.after("ls", "t-ls")),
        ("UserPromptSubmit", host.fire("UserPromptSubmit", prompt="go on")),
        ("Stop", host.fire("Stop", stop_hook_active=False, last_assistant_message="done")),
        ("SessionStart", host.fire("SessionStart", source="resume")),
    ):
        _stopped(harness, event, out)
        told += _model_texts(out)
    assert told and not [t for t in told if IMPERATIVE.search(t)], told


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_a_refused_session_is_told_where_the_user_sees_it(tmp_path: Path, harness: str) -> None:
    world = _project(tmp_path, str(tmp_path / "ledger.db"))
    first = Host(harness, world["project"], world["env"], "sess-one")
    second = Host(harness, world["project"], world["env"], "sess-two")
    first.fire("SessionStart", source="startup")
    start = second.fire("SessionStart", source="startup")
    assert start is not None and "not the body of exec-1" in start["systemMessage"]
    out = second.bash("git push origin main", "t-push")
    assert out is not None and out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "not the body of exec-1" in out["systemMessage"]
    assert "continue" not in out  # refused, not fenced: only the call is denied
    assert second.bash("ls", "t-ls") is None


def _unreachable(tmp_path: Path, ledger: str) -> str:
    """A ledger URL the hooks cannot use: a closed PostgreSQL port, or an unreadable file."""
    if ledger == "postgres":
        return UNREACHABLE_PG
    path = tmp_path / "broken.db"
    path.write_bytes(b"this is not an SQLite database, it only has the name of one\n" * 64)
    return str(path)


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
@pytest.mark.parametrize("ledger", ["postgres", "sqlite"])
def test_an_unreachable_ledger_fails_open_with_a_notice(
    tmp_path: Path, harness: str, ledger: str
) -> None:
    world = _project(tmp_path, _unreachable(tmp_path, ledger))
    host = Host(harness, world["project"], world["env"], "sess-a")
    for out in (host.bash("git push origin main", "t-push"), host.bash("ls", "t-ls")):
        assert out is not None and "hookSpecificOutput" not in out  # no decision
        assert "went ahead unrecorded" in out["systemMessage"]
        assert "continue" not in out and "decision" not in out
    after = host.after("ls", "t-ls")
    assert after is not None and "went ahead unrecorded" in after["systemMessage"]
    stop = host.fire("Stop", stop_hook_active=False, last_assistant_message="done")
    assert stop is not None and "went ahead unrecorded" in stop["systemMessage"]
    assert stop.get("continue", True) is True  # Codex's Stop JSON: still no decision


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
@pytest.mark.parametrize("ledger", ["postgres", "sqlite"])
def test_fail_closed_denies_effect_capable_calls_only(
    tmp_path: Path, harness: str, ledger: str
) -> None:
    world = _project(tmp_path, _unreachable(tmp_path, ledger))
    host = Host(harness, world["project"], {**world["env"], "ONSTATION_HOOK_FAIL": "closed"},
                "sess-a")  # fmt: skip
    push = host.bash("git push origin main", "t-push")
    assert push is not None
    specific = push["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    assert "hook failure mode: closed" in specific["permissionDecisionReason"]
    assert "hook failure mode: closed" in push["systemMessage"]
    assert not IMPERATIVE.search(specific["permissionDecisionReason"])
    inert = host.bash("ls", "t-ls")
    assert inert is not None and "hookSpecificOutput" not in inert  # no decision: it runs
    assert "went ahead unrecorded" in inert["systemMessage"]


def test_fail_closed_from_the_workspace_configuration(tmp_path: Path) -> None:
    world = _project(tmp_path, UNREACHABLE_PG, {"hook_fail": "closed"})
    host = Host("claude-code", world["project"], world["env"], "sess-a")
    push = host.bash("git push origin main", "t-push")
    assert push is not None and push["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert host.bash("ls", "t-ls") is not None  # only a notice
    # A misspelt mode is taken as the safe one.
    env = {**world["env"], "ONSTATION_HOOK_FAIL": "clsoed"}
    (world["project"] / ".onstation" / "config.json").write_text(json.dumps({"node": "x"}))
    other = Host("claude-code", world["project"], env, "sess-b")
    denied = other.bash("git push origin main", "t-push-2")
    assert denied is not None and denied["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_misspelt_mode_in_the_configuration_is_taken_as_closed(tmp_path: Path) -> None:
    world = _project(tmp_path, UNREACHABLE_PG, {"hook_fail": "maybe"})
    done = subprocess.run(
        [ONSTATION, "hook", "claude-code", "PreToolUse"], capture_output=True, text=True,
        env=world["env"], cwd=world["project"], timeout=120, check=False,
        input=json.dumps({"session_id": "s", "cwd": str(world["project"]),
                          "hook_event_name": "PreToolUse", "tool_name": "Bash",
                          "tool_input": {"command": "git push origin main"}}),
    )  # fmt: skip
    assert done.returncode == 0
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "hook_fail='maybe' is not open or closed" in done.stderr


def test_every_injected_text_is_a_statement_not_an_order() -> None:
    texts = hook_texts.samples()
    assert len(texts) >= 20
    flagged = [t for t in texts if IMPERATIVE.search(t)]
    assert flagged == []
    # The scan itself finds what it is there to find.
    assert IMPERATIVE.search("This body may not act; STOP here.")
    assert IMPERATIVE.search("write the turnover brief immediately")
    assert IMPERATIVE.search("You must not continue")
    assert IMPERATIVE.search("Do not push")
