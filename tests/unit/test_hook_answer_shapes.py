"""Per-host answer shapes: where ``systemMessage`` and ``continue: false`` go (docs/hosts.md)."""

from __future__ import annotations

from onstation.harness.adapters import CLAUDE_CODE, CODEX, FAKE

DENY = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                               "permissionDecisionReason": "fenced"}}  # fmt: skip


def test_codex_pre_tool_use_never_carries_continue_or_stop_reason() -> None:
    # Codex's output_parser rejects both on PreToolUse, and a rejected answer fails open.
    assert CODEX.with_stop("PreToolUse", DENY, "stopped") == DENY
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"):
        out = CODEX.with_stop(event, None, "stopped")
        assert out == {"continue": False, "stopReason": "stopped"}


def test_claude_code_is_stopped_on_every_event_it_answers_and_keeps_the_deny() -> None:
    out = CLAUDE_CODE.with_stop("PreToolUse", DENY, "stopped")
    assert out == {**DENY, "continue": False, "stopReason": "stopped"}
    assert FAKE.with_stop("PostToolUse", None, "x") == {"continue": False, "stopReason": "x"}
    assert CLAUDE_CODE.with_stop("SessionEnd", None, "x") is None


def test_system_message_only_where_the_host_shows_it() -> None:
    for event in ("PreCompact", "PostCompact", "Notification", "SessionEnd"):
        assert CLAUDE_CODE.with_notice(event, None, "note") is None
    assert CLAUDE_CODE.with_notice("PreToolUse", DENY, "note") == {**DENY, "systemMessage": "note"}
    assert CODEX.with_notice("Stop", {"continue": True}, "n") == {
        "continue": True,
        "systemMessage": "n",
    }
    assert len(str(CODEX.with_notice("Stop", None, "n" * 20_000))) < 10_000
