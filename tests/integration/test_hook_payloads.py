"""Every published Claude Code hook payload (harness-formats section 1.3), answered as
Claude Code expects, through the real hook runner on a real ledger."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from onstation.cli.hooks import hook_main
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger

SAMPLES: dict[str, dict[str, Any]] = {
    "PreToolUse": {"session_id": "abc123", "prompt_id": "550e8400-e29b-41d4-a716-446655440000",
                   "transcript_path": "/home/user/.claude/projects/x/transcript.jsonl",
                   "permission_mode": "default", "hook_event_name": "PreToolUse",
                   "tool_name": "Bash", "tool_input": {"command": "npm test",
                   "description": "Run test suite", "timeout": 120000,
                   "run_in_background": False}, "tool_use_id": "toolu_01ABC123"},
    "PostToolUse": {"session_id": "abc123", "transcript_path": "/Users/x/00893aaf.jsonl",
                    "permission_mode": "default", "hook_event_name": "PostToolUse",
                    "tool_name": "Write", "tool_input": {"file_path": "/path/to/file.txt",
                    "content": "file content"}, "tool_response": {"filePath": "/path/to/file.txt",
                    "success": True}, "tool_use_id": "toolu_01ABC123", "duration_ms": 12},
    "PreCompact": {"session_id": "abc123", "transcript_path": "/Users/x/00893aaf.jsonl",
                   "hook_event_name": "PreCompact", "trigger": "manual",
                   "custom_instructions": None},
    "PostCompact": {"session_id": "abc123", "transcript_path": "...",
                    "hook_event_name": "PostCompact", "trigger": "manual",
                    "compact_summary": "Summary of the compacted conversation..."},
    "SessionStart": {"session_id": "abc123", "transcript_path": "/Users/x/00893aaf.jsonl",
                     "hook_event_name": "SessionStart", "source": "startup",
                     "model": "claude-sonnet-5"},
    "Stop": {"session_id": "abc123", "transcript_path": "~/.claude/projects/x/00893aaf.jsonl",
             "permission_mode": "default", "hook_event_name": "Stop", "stop_hook_active": True,
             "last_assistant_message": "I've completed the refactoring.",
             "background_tasks": [{"id": "task-001", "type": "shell", "status": "running",
                                   "description": "tail logs", "command": "tail -f x"}],
             "session_crons": []},
    "SubagentStop": {"session_id": "abc123", "transcript_path": "~/.claude/projects/x/a.jsonl",
                     "permission_mode": "default", "hook_event_name": "SubagentStop",
                     "stop_hook_active": False, "agent_id": "def456", "agent_type": "Explore",
                     "agent_transcript_path": "~/.claude/projects/x/a/subagents/agent-d.jsonl",
                     "last_assistant_message": "Analysis complete.", "background_tasks": [],
                     "session_crons": []},
    "UserPromptSubmit": {"session_id": "abc123", "transcript_path": "...",
                         "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
                         "prompt": "Write a function to calculate the factorial of a number"},
    "Notification": {"session_id": "abc123", "transcript_path": "...",
                     "hook_event_name": "Notification", "message": "Claude needs your permission",
                     "title": "Permission needed", "notification_type": "permission_prompt"},
    "SessionEnd": {"session_id": "abc123", "transcript_path": "...",
                   "hook_event_name": "SessionEnd", "reason": "other"},
    "StopFailure": {"session_id": "abc123", "transcript_path": "...",
                    "hook_event_name": "StopFailure", "error": "rate_limit"},
}  # fmt: skip


def _call(event: str, payload: dict[str, Any], db: str, capsys: pytest.CaptureFixture[str],
          monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:  # fmt: skip
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    code = hook_main(["claude-code", event, "--db", db])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("event", sorted(SAMPLES))
def test_published_samples_are_answered_in_claude_codes_format(
    event: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    db = str(tmp_path / "ledger.db")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with Ledger.open(db) as ledger:
        ledger.register_node("agent-a")
        HarnessLedger(ledger).bind_workspace(str(workspace), "agent-a", harness="claude-code",
                                             by="test")  # fmt: skip
    payload = {**SAMPLES[event], "cwd": str(workspace)}
    code, out, err = _call(event, payload, db, capsys, monkeypatch)
    assert code == 0, err
    assert err == ""  # no failure note: every published payload is understood
    if out.strip():
        answer = json.loads(out)
        specific = answer.get("hookSpecificOutput")
        if specific is not None:
            assert specific["hookEventName"] == event
        else:
            assert answer.get("decision") == "block"
    if event == "SessionStart":
        assert "body of agent-a" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    with Ledger.open(db) as ledger:
        sessions = HarnessLedger(ledger).sessions("agent-a")
        assert [s.session_id for s in sessions] == ["abc123"]  # the body is known by its id
        if event == "PreCompact":
            assert ledger.history("agent-a")[-1].kind == "hull.precompact"


def test_unmanaged_workspaces_get_no_answer_and_no_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "ledger.db")
    Ledger.open(db).close()
    for event, sample in SAMPLES.items():
        code, out, err = _call(event, {**sample, "cwd": str(tmp_path)}, db, capsys, monkeypatch)
        assert (code, out, err) == (0, "", "")
    with Ledger.open(db) as ledger:
        assert ledger.history() == []
