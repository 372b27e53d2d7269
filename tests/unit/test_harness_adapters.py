"""The harness adapters: the registry, and hook payloads parsed once into typed calls."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import click
import pytest

from onstation.core.errors import BadInput
from onstation.harness.adapters import (
    ADAPTERS,
    CLAUDE_CODE,
    CODEX,
    FAKE,
    HOOK_HARNESSES,
    HarnessAdapter,
    HookCall,
    adapter,
    find,
)

#: A Claude Code PreToolUse payload as the host sends it (tests/integration/test_hook_payloads).
CLAUDE_PRE_TOOL_USE: dict[str, Any] = {
    "session_id": "abc123", "prompt_id": "550e8400-e29b-41d4-a716-446655440000",
    "transcript_path": "/home/user/.claude/projects/x/transcript.jsonl",
    "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
    "tool_input": {"command": "npm test", "description": "Run test suite", "timeout": 120000,
                   "run_in_background": False},
    "tool_use_id": "toolu_01ABC123",
}  # fmt: skip

#: A Codex UserPromptSubmit payload (tests/e2e/test_statusline_and_codex).
CODEX_PROMPT: dict[str, Any] = {
    "session_id": "thread-1", "cwd": "/work/project", "hook_event_name": "UserPromptSubmit",
    "model": "gpt-5.3-codex", "transcript_path": "/tmp/rollout.jsonl", "turn_id": "t",
    "prompt": "go",
}  # fmt: skip


# -- the registry ---------------------------------------------------------------------------


def test_each_harness_has_its_adapter() -> None:
    assert list(ADAPTERS) == ["fake", "claude-code", "codex"]
    assert adapter("claude-code") is CLAUDE_CODE
    assert adapter("codex") is CODEX
    assert adapter("fake") is FAKE
    assert all(isinstance(a, HarnessAdapter) for a in ADAPTERS.values())


def test_the_harnesses_with_hooks_are_claude_code_and_codex() -> None:
    assert HOOK_HARNESSES == ("claude-code", "codex")
    assert not FAKE.has_hooks
    assert CLAUDE_CODE.hook_events == (
        "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "PreCompact",
        "PostCompact", "SessionEnd", "PostToolUseFailure", "PermissionDenied",
    )  # fmt: skip
    # Codex has no SessionEnd, PostToolUseFailure or PermissionDenied.
    assert CODEX.hook_events == CLAUDE_CODE.hook_events[:-3]


def test_every_event_install_adds_has_a_handler_and_a_codex_label() -> None:
    """An event installed without a handler is a process spawned for nothing; a handler
    without its event (PostCompact, before) never runs. Codex must know each of its events
    by label (its trust hash is keyed on it)."""
    from onstation.harness.codex_trust import EVENT_LABELS
    from onstation.relief.hooks import _HANDLERS

    for host in (CLAUDE_CODE, CODEX):
        assert set(host.hook_events) <= set(_HANDLERS), host.name
    assert set(_HANDLERS) <= set(CLAUDE_CODE.hook_events)
    assert "PostCompact" in CODEX.hook_events
    assert set(CODEX.hook_events) <= set(EVENT_LABELS)


def test_postcompact_notices_follow_each_host() -> None:
    """Claude Code discards systemMessage on PostCompact (hooks reference, "JSON output");
    Codex's post-compact output schema accepts it (post-compact.command.output.schema.json).
    Neither stops the agent on it."""
    assert CLAUDE_CODE.with_notice("PostCompact", None, "note") is None
    assert CODEX.with_notice("PostCompact", None, "note") == {"systemMessage": "note"}
    assert CLAUDE_CODE.with_stop("PostCompact", None, "why") is None
    assert CODEX.with_stop("PostCompact", None, "why") is None
    assert CODEX.no_decision("PostCompact") is None


def test_an_alias_names_its_harness_unless_aliases_are_refused() -> None:
    assert adapter("codex-cli") is CODEX
    assert find("codex-cli") is CODEX
    assert find("codex-cli", aliases=False) is None
    assert CODEX.names() == ("codex", "codex-cli")


@pytest.mark.parametrize("name", ["claude", "Codex", "command", "interactive", "", "codex "])
def test_an_unknown_harness_is_bad_input(name: str) -> None:
    with pytest.raises(BadInput, match="unknown harness"):
        adapter(name)
    assert find(name) is None


@pytest.mark.parametrize("name", [None, 3, ["codex"], {"codex": 1}])
def test_find_takes_any_json_value(name: object) -> None:
    assert find(name) is None


def test_the_facts_that_differ_between_hosts() -> None:
    assert (CLAUDE_CODE.program, CODEX.program, FAKE.program) == ("claude", "codex", None)
    assert CODEX.plan_harness == "codex-cli" and CODEX.source_harness == "codex"
    assert CODEX.session_harness == "codex"
    # The fake agent speaks Claude Code's hooks and is planned as Claude Code.
    assert (FAKE.plan_harness, FAKE.source_harness, FAKE.session_harness) == ("claude-code",) * 3
    assert CLAUDE_CODE.installs_statusline and CLAUDE_CODE.installs_skills
    assert not CODEX.installs_statusline and not CODEX.installs_skills


def test_only_codex_answers_a_stop_with_nothing_to_say() -> None:
    assert CODEX.no_decision("Stop") == {"continue": True}
    assert CODEX.no_decision("PostToolUse") is None
    assert CLAUDE_CODE.no_decision("Stop") is None
    first = CODEX.no_decision("Stop")
    assert first is not None
    first["continue"] = False  # each answer is a fresh dict
    assert CODEX.no_decision("Stop") == {"continue": True}


def test_each_adapter_reads_its_own_transcript_format() -> None:
    from onstation.harness import codex, transcript

    assert CLAUDE_CODE.fill_reader() is transcript.read_fill
    assert FAKE.fill_reader() is transcript.read_fill
    assert CODEX.fill_reader() is codex.read_fill


def test_each_adapter_makes_its_launcher() -> None:
    from onstation.harness.launch import ClaudeLauncher, CodexLauncher, FakeLauncher, launcher_for

    claude = CLAUDE_CODE.launcher("opus")
    assert isinstance(claude, ClaudeLauncher) and claude.model == "opus"
    assert isinstance(CODEX.launcher(), CodexLauncher)
    assert isinstance(FAKE.launcher("ignored"), FakeLauncher)
    for name, host in ADAPTERS.items():
        launcher = launcher_for(name)
        assert launcher.name == name
        assert launcher.harness == host.plan_harness
    with pytest.raises(BadInput, match="--harness: one of fake, claude-code, codex, command"):
        launcher_for("codex-cli")


def test_adapters_are_immutable() -> None:
    with pytest.raises(AttributeError):
        CODEX.program = "other"  # the refusal is what is tested


def test_the_adapters_module_loads_without_typing_or_dataclasses() -> None:
    code = (
        "import sys; import onstation.harness.adapters; "
        "print(sorted(m for m in ('typing', 'dataclasses', 'inspect') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout.replace("'", '"')) == []


# -- one hook call --------------------------------------------------------------------------


def test_a_claude_code_pre_tool_use_payload() -> None:
    call = HookCall.from_payload("claude-code", "PreToolUse", CLAUDE_PRE_TOOL_USE)
    assert call.harness == "claude-code" and call.event == "PreToolUse"
    assert call.session_id == "abc123"
    assert call.cwd is None  # this sample has none
    assert call.transcript_path == "/home/user/.claude/projects/x/transcript.jsonl"
    assert call.tool_name == "Bash"
    assert call.tool_use_id == "toolu_01ABC123"
    assert call.tool_input == CLAUDE_PRE_TOOL_USE["tool_input"]
    assert call.permission_mode == "default"
    assert call.tool_response is None and call.model is None and call.source is None
    assert call.raw is CLAUDE_PRE_TOOL_USE  # every field, the untyped ones included
    assert call.raw["prompt_id"] == "550e8400-e29b-41d4-a716-446655440000"


def test_a_codex_payload() -> None:
    call = HookCall.from_payload("codex", "UserPromptSubmit", CODEX_PROMPT)
    assert (call.session_id, call.cwd, call.model, call.prompt) == (
        "thread-1", "/work/project", "gpt-5.3-codex", "go",
    )  # fmt: skip
    assert call.transcript_path == "/tmp/rollout.jsonl"
    assert call.tool_name is None and call.tool_input is None
    assert call.raw["turn_id"] == "t"


def test_the_other_events_fields() -> None:
    start = HookCall.from_payload("claude-code", "SessionStart", {"source": "compact"})
    end = HookCall.from_payload("claude-code", "SessionEnd", {"reason": "clear"})
    compact = HookCall.from_payload("claude-code", "PreCompact", {"trigger": "auto"})
    post = HookCall.from_payload("claude-code", "PostToolUse", {"tool_response": {"success": True}})
    assert (start.source, end.reason, compact.trigger) == ("compact", "clear", "auto")
    assert post.tool_response == {"success": True}


WRONG_TYPES: dict[str, Any] = {
    "session_id": 123, "cwd": ["/tmp"], "transcript_path": {"p": 1}, "tool_name": None,
    "tool_use_id": 7, "tool_input": "git push", "source": 1, "reason": False, "trigger": 2.5,
    "prompt": ["go"], "model": {"id": "x"}, "permission_mode": 0,
}  # fmt: skip


def test_a_field_of_the_wrong_type_counts_as_absent() -> None:
    call = HookCall.from_payload("codex", "PreToolUse", WRONG_TYPES)
    for name in WRONG_TYPES:
        assert getattr(call, name) is None, name
    assert call.raw is WRONG_TYPES  # as given, for what needs it


def test_an_empty_string_is_kept_for_the_caller_to_judge() -> None:
    call = HookCall.from_payload("claude-code", "PreToolUse", {"session_id": "", "cwd": ""})
    assert (call.session_id, call.cwd) == ("", "")


@pytest.mark.parametrize("response", ["done", 0, False, [1], {"x": 1}])
def test_a_tool_response_is_kept_whatever_its_type(response: Any) -> None:
    call = HookCall.from_payload("claude-code", "PostToolUse", {"tool_response": response})
    assert call.tool_response == response


def test_an_empty_payload_is_a_call_with_nothing_in_it() -> None:
    call = HookCall.from_payload("claude-code", "Stop", {})
    assert call.session_id is None and call.raw == {}


def test_a_hook_call_is_immutable() -> None:
    call = HookCall.from_payload("claude-code", "Stop", {"session_id": "s"})
    with pytest.raises(AttributeError):
        call.session_id = "other"  # the refusal is what is tested
    assert call == HookCall.from_payload("claude-code", "Stop", {"session_id": "s"})
    assert hash(call) == hash(HookCall.from_payload("claude-code", "Stop", {"session_id": "s"}))


# -- the command line offers exactly the harnesses with hooks -------------------------------


def _choices(command: click.Command, param: str) -> list[str]:
    for each in command.params:
        if each.name == param:
            assert isinstance(each.type, click.Choice)
            return list(each.type.choices)
    raise AssertionError(f"{command.name} has no {param}")


def test_install_and_uninstall_offer_the_hook_harnesses() -> None:
    from onstation.cli.harness_commands import install_cmd, uninstall_cmd

    assert _choices(install_cmd, "harness") == list(HOOK_HARNESSES)
    assert _choices(uninstall_cmd, "harness") == list(HOOK_HARNESSES)


def test_relieve_and_supervise_offer_every_adapter_and_the_launch_modes() -> None:
    from onstation.cli.relief_commands import relieve_cmd, supervise_cmd

    relieve = _choices(relieve_cmd, "harness")
    assert relieve == [*HOOK_HARNESSES, "command", "interactive", "fake"]
    assert _choices(supervise_cmd, "harness") == [*HOOK_HARNESSES, "interactive", "fake"]
    assert set(ADAPTERS) <= set(relieve)


def test_the_hook_entry_point_accepts_the_hook_harnesses_only() -> None:
    from onstation.cli.hooks import hook_main

    assert hook_main(["fake", "Stop"]) == 1
    assert hook_main(["codex-cli", "Stop"]) == 1
