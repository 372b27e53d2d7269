"""The status line command (with a wrapped user command) and the Codex hooks, as installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from onstation.ledger import Ledger

ONSTATION = str(Path(sys.executable).with_name("onstation"))

STATUS = {
    "cwd": "", "session_id": "sess-status", "transcript_path": "/nonexistent.jsonl",
    "model": {"id": "claude-opus-5", "display_name": "Opus"}, "version": "2.1.240",
    "context_window": {"total_input_tokens": 69000, "total_output_tokens": 1200,
                       "context_window_size": 200000, "used_percentage": 34.5,
                       "remaining_percentage": 65.5,
                       "current_usage": {"input_tokens": 8500, "output_tokens": 1200,
                                         "cache_creation_input_tokens": 5000,
                                         "cache_read_input_tokens": 55500}},
}  # fmt: skip


def _install(
    tmp_path: Path, harness: str, settings: dict[str, Any] | None = None
) -> dict[str, str]:
    project = tmp_path / "proj"
    project.mkdir()
    if settings is not None:
        (project / ".claude").mkdir()
        (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    env = {**os.environ, "ONSTATION_DB": str(tmp_path / "l.db")}
    done = subprocess.run(
        [ONSTATION, "install", harness, "--project", str(project), "--node", "solo"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {"project": str(project), **env}


def test_statusline_records_telemetry_and_wraps_the_users_line(tmp_path: Path) -> None:
    env = _install(tmp_path, "claude-code",
                   {"statusLine": {"type": "command", "command": "echo my-line"}})  # fmt: skip
    project = env["project"]
    settings = json.loads((Path(project) / ".claude" / "settings.local.json").read_text())
    command = settings["statusLine"]["command"]
    payload = {**STATUS, "cwd": project}
    done = subprocess.run(  # noqa: S602 - run as Claude Code runs the status line
        command, shell=True, input=json.dumps(payload), capture_output=True, text=True,
        env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "my-line"
    assert "solo gen 1" in lines[1] and "Red 34.5% of 200k" in lines[1]
    with Ledger.open(env["ONSTATION_DB"]) as ledger:
        tiers = [e.detail["tier"] for e in ledger.history("solo") if e.kind == "hull.tier"]
    assert tiers == ["red"]


def test_statusline_never_fails(tmp_path: Path) -> None:
    env = _install(tmp_path, "claude-code")
    for stdin in ("", "nonsense", "[]", json.dumps({"session_id": "s", "cwd": "/"})):
        done = subprocess.run(
            [ONSTATION, "statusline"], input=stdin, capture_output=True, text=True, env=env,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0
        assert done.stdout.strip().startswith("onstation")


def test_codex_hooks_answer_in_codex_format(tmp_path: Path) -> None:
    env = _install(tmp_path, "codex")
    project = env["project"]
    hooks = json.loads((Path(project) / ".codex" / "hooks.json").read_text())["hooks"]
    rollout = tmp_path / "rollout.jsonl"
    line = {"timestamp": "2026-05-14T10:00:00.000Z", "type": "event_msg",
            "payload": {"type": "token_count",
                        "info": {"model_context_window": 258400,
                                 "last_token_usage": {"input_tokens": 90000,
                                                      "cached_input_tokens": 500,
                                                      "output_tokens": 300,
                                                      "reasoning_output_tokens": 200,
                                                      "total_tokens": 90300}}}}  # fmt: skip
    rollout.write_text(json.dumps(line) + "\n")

    def fire(event: str, **extra: Any) -> dict[str, Any] | None:
        payload = {"session_id": "thread-1", "cwd": project, "hook_event_name": event,
                   "model": "gpt-5.3-codex", "transcript_path": str(rollout), "turn_id": "t",
                   **extra}  # fmt: skip
        done = subprocess.run(  # noqa: S602 - the command string as the host runs it
            hooks[event][0]["hooks"][0]["command"], shell=True, input=json.dumps(payload),
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    assert fire("SessionStart", source="startup") is not None
    out = fire("UserPromptSubmit", prompt="go")  # 90300 / 258400 = 34.9 %: Red
    assert out is not None
    assert "Hull integrity Red" in out["hookSpecificOutput"]["additionalContext"]
    stop = fire("Stop", stop_hook_active=False, last_assistant_message=None)
    assert stop is not None and stop["decision"] == "block"
    stop_again = fire("Stop", stop_hook_active=True, last_assistant_message=None)
    assert stop_again == {"continue": True}  # Codex needs JSON on every Stop
