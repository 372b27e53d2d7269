"""The scaffolding the hook end-to-end tests share: a git world and a host that fires hooks.

A git world is a workspace repository with one commit, pushed to a bare ``origin``, and an
environment whose ledger and state live under the test's ``tmp_path``; ``installed_world``
adds ``onstation install claude-code --project``. A ``Host`` plays one running Claude Code:
it runs the command strings of the installed ``.claude/settings.local.json`` through
``sh -c`` with the payload on stdin, as Claude Code does, so the hooks' parent-chain witness
sees a real host process. ``Claude`` is one session of such a host.

Imported as ``hookworld`` by the test modules beside it (pytest puts this folder on
``sys.path``: ``tests/e2e`` has no ``__init__.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ONSTATION = str(Path(sys.executable).with_name("onstation"))
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "t@example.com",
}  # fmt: skip
NODE = "exec-1"


def sh(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, env={**os.environ, **GIT_ENV}, check=True
    )
    return done.stdout.strip()


def git_project(tmp_path: Path) -> tuple[Path, Path]:
    """(workspace, bare origin): ``tmp_path/app`` with one commit pushed to ``origin.git``."""
    origin = tmp_path / "origin.git"
    project = tmp_path / "app"
    sh(tmp_path, "git", "init", "-q", "--bare", "-b", "main", str(origin))
    sh(tmp_path, "git", "init", "-q", "-b", "main", str(project))
    (project / "README.md").write_text("app\n")
    sh(project, "git", "add", "README.md")
    sh(project, "git", "commit", "-q", "-m", "init")
    sh(project, "git", "remote", "add", "origin", str(origin))
    sh(project, "git", "push", "-q", "-u", "origin", "main")
    return project, origin


def commit(project: Path, name: str) -> None:
    """A new file ``name`` committed (not pushed): a push now has something to send."""
    (project / name).write_text(f"{Path(name).stem}\n")
    sh(project, "git", "add", name)
    sh(project, "git", "commit", "-q", "-m", Path(name).stem)


def hook_env(tmp_path: Path, db: str, **extra: str) -> dict[str, str]:
    """The environment of the hooks and the CLI: git identity, ledger, state under tmp_path."""
    return {**os.environ, **GIT_ENV, "ONSTATION_DB": db,
            "XDG_STATE_HOME": str(tmp_path / "state"), **extra}  # fmt: skip


def installed_world(tmp_path: Path, **extra_env: str) -> dict[str, Any]:
    """A git world with ``onstation install claude-code --project`` done for node exec-1."""
    project, origin = git_project(tmp_path)
    db = str(tmp_path / "ledger.db")
    env = hook_env(tmp_path, db, **extra_env)
    done = subprocess.run(
        [ONSTATION, "install", "claude-code", "--project", str(project), "--node", NODE],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {"project": project, "origin": origin, "env": env, "db": db}


def user_env(tmp_path: Path) -> dict[str, str]:
    """A user whose home, Claude and Codex configuration and state are all under tmp_path."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    return {
        **os.environ,
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CODEX_HOME": str(home / ".codex"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "ONSTATION_DB": str(tmp_path / "ledger.db"),
    }


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``onstation ARGS`` as a user runs it."""
    return subprocess.run(
        [ONSTATION, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def hook_commands(project: Path) -> dict[str, str]:
    """Each event's command string, from the settings a project install writes."""
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    return {event: groups[-1]["hooks"][0]["command"] for event, groups in settings["hooks"].items()}


def hook_payload(project: Path, session_id: str, event: str, **fields: Any) -> dict[str, Any]:
    """The fields Claude Code sends every hook, then the event's own."""
    return {
        "session_id": session_id,
        "transcript_path": str(project.parent / f"{session_id}.jsonl"),
        "cwd": str(project),
        "hook_event_name": event,
        "permission_mode": "default",
        **fields,
    }


def answer(stdout: str) -> dict[str, Any] | None:
    """A hook's JSON answer; None where it printed nothing (no decision)."""
    return json.loads(stdout) if stdout.strip() else None


def context_of(out: dict[str, Any] | None) -> str:
    """The ``additionalContext`` an answer gives the model ("" for none)."""
    return "" if out is None else str(out["hookSpecificOutput"].get("additionalContext", ""))


def bash_call(command: str, tool_use_id: str, description: str = "run") -> dict[str, Any]:
    """A PreToolUse payload's fields for one Bash call."""
    return {"tool_name": "Bash", "tool_use_id": tool_use_id,
            "tool_input": {"command": command, "description": description}}  # fmt: skip


# A host process: reads one JSON request per line ({"command", "payload"}), runs the command
# through `sh -c` with the payload on stdin, answers one JSON line (stdout, stderr, code).
HOST = textwrap.dedent(
    """
    import json, subprocess, sys
    for line in sys.stdin:
        request = json.loads(line)
        done = subprocess.run(["/bin/sh", "-c", request["command"]],
                              input=json.dumps(request["payload"]), capture_output=True,
                              text=True, timeout=60)
        print(json.dumps({"stdout": done.stdout, "stderr": done.stderr,
                          "code": done.returncode}), flush=True)
    """
)


class Host:
    """A stand-in for one running Claude Code that fires the installed hook commands.

    With ``own_process`` (the default) the host is a separate process that lives until
    ``close()``; without it the test process itself is the host, so every such ``Host`` of a
    test is the same host process to the witness.
    """

    def __init__(self, project: Path, env: dict[str, str], *, own_process: bool = True) -> None:
        self.project = project
        self.env = env
        self.commands = hook_commands(project)
        self.process: subprocess.Popen[str] | None = None
        if own_process:
            self.process = subprocess.Popen(
                [sys.executable, "-c", HOST], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                text=True, env=env, cwd=project,
            )  # fmt: skip

    def run(
        self, session_id: str, event: str, **fields: Any
    ) -> tuple[dict[str, Any] | None, str, int]:
        """(answer, stderr, exit code) of the event's hook command for this session."""
        payload = hook_payload(self.project, session_id, event, **fields)
        if self.process is None:
            done = subprocess.run(  # noqa: S602 - the command string as Claude Code runs it
                self.commands[event], shell=True, input=json.dumps(payload), capture_output=True,
                text=True, env=self.env, cwd=self.project, timeout=60, check=False,
            )  # fmt: skip
            return answer(done.stdout), done.stderr, done.returncode
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(
            json.dumps({"command": self.commands[event], "payload": payload}) + "\n"
        )
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        return answer(reply["stdout"]), reply["stderr"], reply["code"]

    def fire(self, session_id: str, event: str, **fields: Any) -> dict[str, Any] | None:
        out, err, code = self.run(session_id, event, **fields)
        assert code == 0, err
        return out

    def context(self, session_id: str, event: str, **fields: Any) -> str:
        return context_of(self.fire(session_id, event, **fields))

    def push(self, session_id: str, tool_use_id: str) -> dict[str, Any] | None:
        return self.fire(
            session_id, "PreToolUse", **bash_call("git push origin main", tool_use_id, "push")
        )

    def close(self) -> None:
        if self.process is None:
            return
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        self.process.wait(timeout=30)


class Claude:
    """One Claude Code session whose host is the test process, with its own transcript."""

    def __init__(self, project: Path, env: dict[str, str], session_id: str) -> None:
        self.host = Host(project, env, own_process=False)
        self.project = project
        self.session_id = session_id
        self.commands = self.host.commands
        self.transcript = project.parent / f"{session_id}.jsonl"
        self.transcript.touch()
        self.turn = 0

    def fire(self, event: str, **fields: Any) -> tuple[dict[str, Any] | None, str, int]:
        return self.host.run(self.session_id, event, **fields)

    def context(self, event: str, **fields: Any) -> str:
        return context_of(self.host.fire(self.session_id, event, **fields))

    def bash(self, command: str, tool_use_id: str) -> tuple[dict[str, Any] | None, str]:
        out, err, code = self.fire("PreToolUse", **bash_call(command, tool_use_id))
        assert code == 0, err
        return out, err

    def append(self, line: dict[str, Any]) -> None:
        """One line of the transcript, as Claude Code writes it."""
        with self.transcript.open("a") as fh:
            fh.write(json.dumps(line) + "\n")

    def assistant_turn(self, context_tokens: int) -> None:
        """Append what Claude Code writes for one API call (two streaming lines)."""
        self.turn += 1
        usage = {"input_tokens": 3, "cache_creation_input_tokens": 500,
                 "cache_read_input_tokens": context_tokens - 503, "output_tokens": 80}  # fmt: skip
        for stop in (None, "tool_use"):
            self.append({
                "type": "assistant", "isSidechain": False, "sessionId": self.session_id,
                "uuid": f"u{self.turn}-{stop}", "requestId": f"req_{self.turn}",
                "message": {"id": f"msg_{self.turn}", "role": "assistant",
                            "model": "claude-sonnet-4-5-20250929", "stop_reason": stop,
                            "content": [{"type": "text", "text": "working"}], "usage": usage},
            })  # fmt: skip
