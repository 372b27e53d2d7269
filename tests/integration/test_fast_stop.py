"""Stop on the hook fast path (issue 14): a quiet Stop is answered there with what the full
path answers (silence for Claude Code; the JSON Codex requires for Stop), and a Stop that may
have to be blocked (relief requested, not blocked yet) is left to the full path, which blocks
it once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onstation.harness.adapters import HookCall, adapter
from onstation.harness.config import WorkspaceConfig
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.relief import hotpath
from onstation.relief.hooks import HookRunner


def stop(harness: str, cwd: Path) -> HookCall:
    payload = {"session_id": "s1", "cwd": str(cwd), "hook_event_name": "Stop",
               "stop_hook_active": False}  # fmt: skip
    if harness == "codex":
        payload |= {"turn_id": "t1", "model": "gpt-5.3-codex"}
    return HookCall.from_payload(harness, "Stop", payload)


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_a_quiet_stop_is_answered_there_as_the_full_path_answers(
    harness: str, tmp_path: Path
) -> None:
    db = str(tmp_path / "ledger.db")
    project = tmp_path / "app"
    (project / ".onstation").mkdir(parents=True)
    (project / ".onstation" / "config.json").write_text(json.dumps({"node": "n1"}))
    with Ledger.open(db) as ledger:
        ledger.register_node("n1")
        runner = HookRunner(ledger, harness, WorkspaceConfig(node="n1"))
        runner.handle(HookCall.from_payload(harness, "SessionStart", {
            "session_id": "s1", "cwd": str(project), "hook_event_name": "SessionStart",
            "source": "startup"}))  # fmt: skip
        full = runner.handle(stop(harness, project)).output
    fast = hotpath.try_fast(stop(harness, project), db)
    assert fast is not hotpath.NOT_HANDLED and fast == full
    assert fast == adapter(harness).no_decision("Stop")
    with Ledger.open(db) as ledger:
        HarnessLedger(ledger).set_session_flag("s1", "relief_requested_at")
    # Relief requested and the Stop not blocked yet: the full path decides (and blocks once).
    assert hotpath.try_fast(stop(harness, project), db) is hotpath.NOT_HANDLED
    with Ledger.open(db) as ledger:
        answer = HookRunner(ledger, harness, WorkspaceConfig(node="n1")).handle(
            stop(harness, project))  # fmt: skip
        assert (answer.output or {}).get("decision") == "block"
    assert hotpath.try_fast(stop(harness, project), db) == full  # blocked once: quiet again


def test_a_first_post_tool_use_at_amber_goes_to_the_full_path_having_written_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No reading stored yet, and the call's reading is Amber: a first tier with a message
    for the body, the full path's to record. The fast path reads the transcript once, hands
    the call over having written nothing, and answers the next call once the full path has
    recorded it. (A first Green reading it records itself:
    tests/integration/test_fast_first_reading.py.)"""
    db = str(tmp_path / "ledger.db")
    project = tmp_path / "app"
    (project / ".onstation").mkdir(parents=True)
    (project / ".onstation" / "config.json").write_text(json.dumps({"node": "n1"}))
    transcript = tmp_path / "s1.jsonl"
    usage = {"input_tokens": 3, "cache_read_input_tokens": 60_000, "output_tokens": 5}
    transcript.write_text(json.dumps({"type": "assistant", "uuid": "u1", "message": {
        "id": "m1", "role": "assistant", "model": "claude-sonnet-4-5", "usage": usage,
        "content": [{"type": "text", "text": "ok"}]}}) + "\n")  # fmt: skip

    def post(tool_use_id: str) -> HookCall:
        return HookCall.from_payload("claude-code", "PostToolUse", {
            "session_id": "s1", "cwd": str(project), "hook_event_name": "PostToolUse",
            "transcript_path": str(transcript), "tool_name": "Read", "tool_input": {},
            "tool_use_id": tool_use_id, "tool_response": {}})  # fmt: skip

    with Ledger.open(db) as ledger:
        ledger.register_node("n1")
        runner = HookRunner(ledger, "claude-code", WorkspaceConfig(node="n1"))
        runner.handle(HookCall.from_payload("claude-code", "SessionStart", {
            "session_id": "s1", "cwd": str(project), "hook_event_name": "SessionStart",
            "source": "startup"}))  # fmt: skip
    reads: list[str] = []
    real = hotpath._read_transcript

    def counted(call: HookCall, *rest: object) -> object:
        reads.append(str(call.tool_use_id))
        return real(call, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(hotpath, "_read_transcript", counted)
    assert hotpath.try_fast(post("t1"), db) is hotpath.NOT_HANDLED
    assert reads == ["t1"]
    with Ledger.open(db) as ledger:
        assert HarnessLedger(ledger).latest_fill("n1") is None  # nothing written there
    with Ledger.open(db) as ledger:  # the full path records the first reading and its tier
        HookRunner(ledger, "claude-code", WorkspaceConfig(node="n1")).handle(post("t1"))
    assert hotpath.try_fast(post("t2"), db) is None  # answered there, the transcript read
    assert reads == ["t1", "t2"]
