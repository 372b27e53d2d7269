"""The successor launchers' command lines, flag by flag: what each host needs to let the
successor run exactly its challenge command and write the ledger (docs/relief.md, "Launch
flags"), and the challenge command itself, quoted as one shell command."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from onstation.core.errors import BadInput
from onstation.harness.launch import (
    ClaudeLauncher,
    CodexLauncher,
    LaunchSpec,
    challenge_command,
    onstation_argv,
)
from onstation.relief.successor import successor_prompt

CHALLENGE = {"nonce": "n-1", "node": "exec-1", "worktree_head": "abc"}


def spec(tmp_path: Path, **changes: object) -> LaunchSpec:
    base: dict[str, object] = {
        "node": "exec-1",
        "generation": 2,
        "session_id": "0b7d8f0e-4f8c-4c55-9d5e-0d3c1a2b3c4d",
        "workspace": str(tmp_path / "app"),
        "prompt": "p",
        "challenge": CHALLENGE,
        "db": None,
        "log_dir": str(tmp_path / "logs"),
        "ledger": str(tmp_path / "state" / "l.db"),
    }
    base.update(changes)
    return LaunchSpec(**base)  # type: ignore[arg-type]


def test_the_onstation_command_is_absolute() -> None:
    argv = onstation_argv()
    assert os.path.isabs(argv[0])
    assert argv == [str(Path(sys.executable).with_name("onstation"))]


def test_the_challenge_command_is_one_shell_command_whatever_the_quotes() -> None:
    challenge = {**CHALLENGE, "transcript_sink": "/tmp/it's a dir/.bridge/t.jsonl"}
    command = challenge_command("exec-1", 2, challenge, ["/opt/o'n s/bin/onstation"])
    words = shlex.split(command)
    assert words[:6] == [
        "/opt/o'n s/bin/onstation",
        "challenge",
        "answer",
        "exec-1",
        "--generation",
        "2",
    ]
    assert words[6] == "--echo" and json.loads(words[7]) == challenge and len(words) == 8


def test_the_prompt_shows_the_command_the_launcher_allows() -> None:
    capsule = {"payload": {"objective": "o", "effects": [], "transcript": {}}}
    onstation = ["/x y/onstation"]
    prompt = successor_prompt("exec-1", 2, CHALLENGE, None, capsule, onstation=onstation)
    assert f"  {challenge_command('exec-1', 2, CHALLENGE, onstation)}\n" in prompt
    # The host's hooks renew the lease (the heartbeat): the model runs one command only.
    assert "lease renew" not in prompt and prompt.count("run exactly:") == 1


def test_claude_gets_exactly_the_challenge_command_and_the_granted_tools(
    tmp_path: Path,
) -> None:
    launch = spec(tmp_path, tools=("Bash", "Read", "Edit", "Bash(rm *)", "Read", "x y"))
    prompt_path = str(tmp_path / "logs" / "exec-1-g2-prompt.md")
    argv = ClaudeLauncher("opus").argv(launch, prompt_path)
    settings = str(tmp_path / "logs" / "exec-1-g2-settings.json")
    assert argv == [
        "claude",
        "-p",
        "--session-id",
        launch.session_id,
        "--output-format",
        "json",
        "--permission-mode",
        "dontAsk",
        "--settings",
        settings,
        "--model",
        "opus",
    ]
    files = ClaudeLauncher().private_files(launch, prompt_path)
    allow = json.loads(files["exec-1-g2-settings.json"])["permissions"]["allow"]
    # Bare names only (a pattern from the capsule is never turned into a rule), once each.
    assert allow == [f"Bash({challenge_command('exec-1', 2, CHALLENGE)})", "Bash", "Read", "Edit"]
    # The nonce stays off the world-readable command line.
    assert not any("n-1" in arg for arg in argv)


def test_claude_resume_repeats_the_permission_flags(tmp_path: Path) -> None:
    launch = spec(tmp_path, resume_transcript="/t.jsonl")
    argv = ClaudeLauncher().argv(launch, str(tmp_path / "logs" / "p.md"))
    assert argv[:4] == ["claude", "-p", "--resume", launch.session_id]
    assert "--settings" in argv and "dontAsk" in argv


def test_a_star_in_the_challenge_command_is_refused_for_claude(tmp_path: Path) -> None:
    launch = spec(tmp_path, challenge={**CHALLENGE, "transcript_sink": "/w*/t.jsonl"})
    with pytest.raises(BadInput, match="wildcard"):
        ClaudeLauncher().private_files(launch, str(tmp_path / "p.md"))


def test_codex_writes_the_ledger_from_a_workspace_write_sandbox(tmp_path: Path) -> None:
    launch = spec(tmp_path)
    assert CodexLauncher("gpt-5").argv(launch, "p.md") == [
        "codex",
        "exec",
        "--json",
        "-C",
        launch.workspace,
        "--sandbox",
        "workspace-write",
        "--add-dir",
        str(tmp_path / "state"),
        "-m",
        "gpt-5",
        "-",
    ]


def test_codex_needs_no_extra_root_for_a_ledger_inside_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    launch = spec(tmp_path, ledger=f"sqlite:{tmp_path / 'app' / 'l.db'}")
    argv = CodexLauncher().argv(launch, "p.md")
    assert "--add-dir" not in argv and argv[-1] == "-"


def test_codex_gets_network_only_for_a_postgres_ledger(tmp_path: Path) -> None:
    launch = spec(tmp_path, ledger="postgresql://u@127.0.0.1:5432/db")
    assert CodexLauncher().argv(launch, "p.md") == [
        "codex",
        "exec",
        "--json",
        "-C",
        launch.workspace,
        "--sandbox",
        "workspace-write",
        "-c",
        "sandbox_workspace_write.network_access=true",
        "-",
    ]


def test_codex_outside_git_skips_the_repository_check(tmp_path: Path) -> None:
    launch = spec(tmp_path, challenge={**CHALLENGE, "worktree_head": "none"})
    assert "--skip-git-repo-check" in CodexLauncher().argv(launch, "p.md")


def test_a_relative_sqlite_ledger_reaches_the_successor_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    launch = spec(tmp_path, db="rel.db", ledger=None)
    argv = CodexLauncher().argv(launch, "p.md")
    assert argv[argv.index("--add-dir") + 1] == str(tmp_path)
