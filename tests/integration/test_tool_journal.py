"""Every tool call's outcome is journaled (issue 13): payloads exactly as Claude Code and Codex
send them, through the real hook runner on a real ledger (both backends), then the capsule
parts a relief makes of the journal (relief/tool_journal.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from onstation.harness.adapters import HookCall
from onstation.harness.config import WorkspaceConfig
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.plan.resources import read_json
from onstation.relief.hooks import HookRunner
from onstation.relief.tool_journal import journal_parts

SECRET = "sk-ant-api03-" + "Q" * 40

DECLINED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
    "was a file edit, the new_string was NOT written to the file). STOP what you are doing and "
    "wait for the user to tell you how to proceed."
)


class Host:
    """One host session of one harness, firing hooks at the runner as the host would."""

    def __init__(self, ledger: Ledger, harness: str, node: str, cwd: Path, session: str) -> None:
        self.runner = HookRunner(ledger, harness, WorkspaceConfig(node=node))
        self.harness, self.cwd, self.session = harness, cwd, session

    def fire(self, event: str, **fields: Any) -> Any:
        payload: dict[str, Any] = {"session_id": self.session, "cwd": str(self.cwd),
                                   "transcript_path": str(self.cwd / "none.jsonl"),
                                   "permission_mode": "default", "hook_event_name": event,
                                   **fields}  # fmt: skip
        if self.harness == "codex":
            payload.setdefault("model", "gpt-5.3-codex")
            if event != "SessionStart":
                payload.setdefault("turn_id", "turn-1")
        return self.runner.handle(HookCall.from_payload(self.harness, event, payload))

    def bash_ok(self, tool_use_id: str, command: str) -> Any:
        """Claude Code: a Bash command that exited 0."""
        return self.fire("PostToolUse", tool_name="Bash", tool_use_id=tool_use_id,
                         tool_input={"command": command, "description": "run"},
                         tool_response={"stdout": "ok\n", "stderr": "", "interrupted": False,
                                        "isImage": False})  # fmt: skip

    def bash_failed(self, tool_use_id: str, command: str, error: str, **more: Any) -> Any:
        """Claude Code: a Bash command that failed (non-zero exit, declined, interrupted)."""
        return self.fire("PostToolUseFailure", tool_name="Bash", tool_use_id=tool_use_id,
                         tool_input={"command": command, "description": "run"}, error=error,
                         **more)  # fmt: skip


def _schema_for(part: str) -> Draft202012Validator:
    schema = read_json("schemas", "resurrection-capsule.schema.json")
    sub = schema["$defs"]["payload"]["properties"][part]
    return Draft202012Validator({"$defs": schema["$defs"], **sub})


@pytest.fixture
def claude(ledger: Ledger, tmp_path: Path) -> Host:
    ledger.register_node("exec-1")
    host = Host(ledger, "claude-code", "exec-1", tmp_path, "sess-claude")
    host.fire("SessionStart", source="startup")
    return host


def test_claude_codes_calls_are_journaled_with_their_outcomes(ledger: Ledger, claude: Host) -> None:
    claude.bash_ok("toolu_01", "cd app && pytest -q")
    failure = "Command exited with non-zero status code 1"
    claude.bash_failed("toolu_02", "pytest -q tests/unit", failure, is_interrupt=False)
    claude.fire("PermissionDenied", tool_name="Bash", tool_use_id="toolu_03",
                tool_input={"command": "rm -rf build"},
                reason="Auto mode classifier: destructive command")  # fmt: skip
    claude.bash_failed("toolu_04", "npm test", DECLINED)
    claude.bash_failed("toolu_05", "cargo test", "Interrupted by user", is_interrupt=True)
    claude.bash_ok("toolu_06", f"curl -H 'x-api-key: {SECRET}' https://api.example.com/v1")
    claude.fire("PostToolUse", tool_name="Edit", tool_use_id="toolu_07",
                tool_input={"file_path": "/w/app/a.py", "old_string": "a", "new_string": "b"},
                tool_response={"filePath": "/w/app/a.py", "success": True})  # fmt: skip
    claude.fire("PostToolUse", tool_name="Grep", tool_use_id="toolu_08",
                tool_input={"pattern": "def main", "path": "src"},
                tool_response={"numFiles": 1, "filenames": ["src/a.py"]})  # fmt: skip
    claude.fire("PostToolUse", tool_name="mcp__github__create_issue", tool_use_id="toolu_09",
                tool_input={"title": "t"},
                tool_response=[{"type": "text", "text": "#1"}])  # fmt: skip
    claude.fire("PostToolUse", tool_name="Bash", tool_use_id="toolu_10",
                tool_input={"command": "pytest -x", "run_in_background": True},
                tool_response={"stdout": "", "stderr": "", "interrupted": False,
                               "isImage": False, "backgroundTaskId": "bash_1"})  # fmt: skip

    rows = HarnessLedger(ledger).tool_outcomes("exec-1", generation=1)
    got = [(r.tool_use_id, r.tool, r.call_summary, r.outcome, r.exit_code) for r in rows]
    assert got[:5] == [
        ("toolu_01", "Bash", "cd app && pytest -q", "succeeded", 0),
        ("toolu_02", "Bash", "pytest -q tests/unit", "failed", 1),
        ("toolu_03", "Bash", "rm -rf build", "denied", None),
        ("toolu_04", "Bash", "npm test", "denied", None),
        ("toolu_05", "Bash", "cargo test", "interrupted", None),
    ]
    assert rows[1].detail == "Command exited with non-zero status code 1"
    assert rows[2].detail == "Auto mode classifier: destructive command"
    assert SECRET not in rows[5].call_summary and "[redacted: " in rows[5].call_summary
    assert rows[5].call_summary.startswith("curl -H 'x-api-key: ")
    assert [r.call_summary for r in rows[6:9]] == [
        "/w/app/a.py", "def main in src", "mcp github/create_issue"]  # fmt: skip
    assert (rows[9].outcome, rows[9].exit_code) == ("succeeded", None)  # still running

    parts = journal_parts(HarnessLedger(ledger), "exec-1", 1)
    assert [(t["name"], t["status"]) for t in parts["tests"]] == [
        ("pytest -q", "passed"), ("pytest -q tests/unit", "failed"), ("npm test", "skipped"),
        ("cargo test", "unknown"), ("pytest -x", "unknown")]  # fmt: skip
    assert [p["callId"] for p in parts["toolPairs"]] == [f"toolu_{i:02}" for i in range(1, 11)]
    assert parts["toolPairs"][1]["result"]["exitCode"] == 1
    assert SECRET not in json.dumps(parts)
    (artifact,) = parts["artifacts"]
    assert (artifact["id"], artifact["kind"]) == ("hook-journal", "ledger")
    assert artifact["ref"] == "tool calls of exec-1 generation 1"
    for name in ("toolPairs", "tests", "artifacts"):
        errors = list(_schema_for(name).iter_errors(parts[name]))
        assert not errors, (name, [e.message for e in errors])
    # The digest binds the journal: the same rows give the same digest, one more does not.
    assert journal_parts(HarnessLedger(ledger), "exec-1", 1)["artifacts"] == [artifact]
    claude.bash_ok("toolu_11", "ls")
    assert journal_parts(HarnessLedger(ledger), "exec-1", 1)["artifacts"] != [artifact]


def test_a_fenced_body_journals_nothing_and_an_empty_journal_gives_no_parts(
    ledger: Ledger, claude: Host
) -> None:
    assert journal_parts(HarnessLedger(ledger), "exec-1", 1) == {}
    claude.bash_ok("toolu_01", "pytest")
    ledger.fence("exec-1", expect_generation=1)
    denials = len(ledger.denials("exec-1"))
    answer = claude.bash_ok("toolu_02", "git push --force")
    assert answer.output is not None  # the fenced body is told, and stopped
    claude.bash_failed("toolu_03", "pytest", "Command exited with non-zero status code 2")
    rows = HarnessLedger(ledger).tool_outcomes("exec-1", generation=1)
    assert [r.tool_use_id for r in rows] == ["toolu_01"]
    assert len(ledger.denials("exec-1")) == denials  # nothing was even attempted
    assert journal_parts(HarnessLedger(ledger), "exec-1", 2) == {}


def test_a_call_id_the_capsule_cannot_name_falls_back_to_the_row(
    ledger: Ledger, claude: Host
) -> None:
    claude.bash_ok("toolu/../01", "pytest")
    claude.bash_ok("toolu_dup", "pytest a")
    claude.bash_ok("toolu_dup", "pytest b")
    rows = HarnessLedger(ledger).tool_outcomes("exec-1", generation=1)
    ids = [p["callId"] for p in journal_parts(HarnessLedger(ledger), "exec-1", 1)["toolPairs"]]
    assert ids == [f"call-{rows[0].id}", "toolu_dup", f"call-{rows[2].id}"]


def test_codex_calls_are_journaled_from_its_own_payloads(ledger: Ledger, tmp_path: Path) -> None:
    """Codex sends shell commands as Bash with the output as a plain string and no exit code
    (openai/codex codex-rs/core/tests/suite/hooks.rs): the run's status is unknown."""
    ledger.register_node("exec-2")
    codex = Host(ledger, "codex", "exec-2", tmp_path, "0199a213-81c0-7800-8aa1-bbab2a035a53")
    codex.fire("SessionStart", source="startup")
    codex.fire("PostToolUse", tool_name="Bash", tool_use_id="call_Zx1",
               tool_input={"command": "pytest -q"},
               tool_response="3 passed in 0.12s\n")  # fmt: skip
    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-a\n+b\n*** Add File: b.py\n+x\n"
    output = "Success. Updated the following files:\nM src/a.py\nA b.py\n"
    codex.fire("PostToolUse", tool_name="apply_patch", tool_use_id="call_Zx2",
               tool_input={"command": patch + "*** End Patch\n"},
               tool_response=output)  # fmt: skip
    # A build that gives an exit code in its response.
    codex.fire("PostToolUse", tool_name="Bash", tool_use_id="call_Zx3",
               tool_input={"command": "go test ./..."},
               tool_response={"exit_code": 1, "output": "FAIL"})  # fmt: skip
    rows = HarnessLedger(ledger).tool_outcomes("exec-2", generation=1)
    assert [(r.call_summary, r.outcome, r.exit_code) for r in rows] == [
        ("pytest -q", "succeeded", None),
        ("apply_patch src/a.py, b.py", "succeeded", None),
        ("go test ./...", "failed", 1),
    ]
    tests = journal_parts(HarnessLedger(ledger), "exec-2", 1)["tests"]
    assert [(t["name"], t["status"]) for t in tests] == [
        ("pytest -q", "unknown"), ("go test ./...", "failed")]  # fmt: skip


def test_journaling_never_fails_the_hook(ledger: Ledger, claude: Host) -> None:
    """The body is fenced between its admission and the journal's write: the write is denied
    (with its receipt), and the hook still answers, with a note."""
    from onstation.ledger.tool_outcomes import ToolOutcomes

    real = ToolOutcomes.record_tool_outcome

    def fenced_first(self: Any, node: str, **kwargs: Any) -> None:
        ledger.fence(node, expect_generation=kwargs["generation"])
        real(self, node, **kwargs)

    ToolOutcomes.record_tool_outcome = fenced_first  # type: ignore[method-assign]
    try:
        answer = claude.bash_ok("toolu_01", "pytest")
    finally:
        ToolOutcomes.record_tool_outcome = real  # type: ignore[method-assign]
    assert any(n.startswith("tool outcome not journaled: exec-1 generation 1 may not act")
               for n in answer.notes)  # fmt: skip
    assert HarnessLedger(ledger).tool_outcomes("exec-1", generation=1) == []
    assert ledger.denials("exec-1")[-1].action == "tool outcome Bash"
