"""The fake agent's pace (issue 14): its think time falls between its API calls, its
heartbeat asks for a lease that outlives three beats, and a hook command with no shell syntax
is run without a shell."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from onstation.harness.fake_agent import FakeAgent, HookReply, Hooks, Log, Options, Transcript
from onstation.harness.fake_agent import agent as agent_module
from onstation.harness.fake_agent.control import lease_ttl
from onstation.harness.fake_agent.hooks import plain_argv


def test_a_beat_every_ten_seconds_keeps_a_thirty_second_lease() -> None:
    # The lease outlives three beats and is never shorter than 30 s: beating more often
    # than a third of the lease buys nothing.
    assert lease_ttl(10) == 30
    assert lease_ttl(0.5) == 30 and lease_ttl(1) == 30
    assert lease_ttl(20) == 60 and lease_ttl(10.1) == 31


class _Recorder:
    """Hooks that allow everything and record, with the sleeps, the order things happen."""

    def __init__(self, seen: list[Any]) -> None:
        self.seen = seen

    def fire(self, event: str, **fields: Any) -> HookReply:
        self.seen.append(event)
        return HookReply(event)


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_a_steps_think_time_is_spread_over_its_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _git(tmp_path, "init", "-q", "-b", "main")
    agent = FakeAgent(
        Options(workspace=tmp_path, steps=2, push_every=0, step_seconds=1.0, log=None)
    )
    agent.node, agent.branch = "exec-1", "main"
    agent.transcript = Transcript(tmp_path.parent / "t.jsonl", "s-1", tmp_path, "m", "main")
    seen: list[Any] = []
    agent.hooks = _Recorder(seen)  # type: ignore[assignment]
    # The agent's own sleeps only (subprocess sleeps too, while it waits for git).
    clock = SimpleNamespace(sleep=lambda s: seen.append(("think", s)))
    monkeypatch.setattr(agent_module, "time", clock)
    agent._step(1)
    # Before each call, not all at once before the step: whoever watches the ledger sees
    # time pass between the step's calls as well.
    assert seen == [("think", 0.5), "PreToolUse", "PostToolUse",
                    ("think", 0.5), "PreToolUse", "PostToolUse"]  # fmt: skip
    assert [d.step for d in agent.done] == [1]


def test_plain_words_are_run_without_a_shell_and_shell_syntax_with_one(tmp_path: Path) -> None:
    program = tmp_path / "hook"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    assert plain_argv(f"{program} hook claude-code PreToolUse") == [
        str(program), "hook", "claude-code", "PreToolUse"
    ]  # fmt: skip
    assert plain_argv(f"{program} --db=/x/ledger.db a,b user@host:1 50%") is not None
    for command in (
        f"{program} hook; exit 2", f"{program} $HOME", f"'{program}' hook", f"{program} *",
        f"{program} > out", f"{program}  two-spaces", f"{program} ~", f"{program} # c",
        f"{program} a|b", f"{program} `id`", f"{program}\nid", "hook claude-code Stop",
        f"X=1 {program}", f"{tmp_path / 'missing'} hook", str(tmp_path),
    ):  # fmt: skip
        assert plain_argv(command) is None, command


def test_a_plain_hook_command_runs_as_the_hosts_child_with_no_shell_between(
    tmp_path: Path,
) -> None:
    program = tmp_path / "who-started-me"
    # Answers with the name of the process that started it.
    program.write_text(
        "#!/bin/sh\n"
        'printf \'{"hookSpecificOutput": {"hookEventName": "PostToolUse", '
        '"additionalContext": "%s"}}\' "$(cat /proc/$PPID/comm)"\n'
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    handler = {"type": "command", "command": str(program)}
    settings = {
        "hooks": {
            "PostToolUse": [
                {"matcher": "*", "hooks": [handler]},
                {"hooks": [dict(handler, command=f"{program} ;")]},
            ]
        }
    }
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(settings))
    hooks = Hooks(tmp_path, {"PATH": os.environ["PATH"]}, Log(None), "s-1", tmp_path / "t.jsonl")
    post = hooks.fire("PostToolUse", tool_name="Bash", tool_input={}, tool_response={})
    me = Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    # The plain command is this process's own child; the one with shell syntax a shell's.
    assert [(a.output or {}).get("hookSpecificOutput", {}).get("additionalContext")
            for a in post.answers] == [me, "sh"]  # fmt: skip
