"""Launching a successor body: Claude Code, Codex CLI, any command, or the fake harness.

A launcher turns a :class:`LaunchSpec` (identity, generation, session id, workspace, the
successor prompt, the challenge) into a running process, with no effect rights yet: the
successor must answer its challenge first. Every launcher passes the challenge in the
environment (``ONSTATION_NODE``, ``ONSTATION_GENERATION``, ``ONSTATION_CHALLENGE``,
``ONSTATION_SESSION_ID``) and writes the prompt to a file beside the relief's report.
Flags that a harness forgets on resume are given again on every launch.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onstation.core.errors import BadInput

HARNESSES = ("fake", "claude-code", "codex", "command", "interactive")


@dataclass(frozen=True)
class LaunchSpec:
    """Everything a launcher needs for one successor."""

    node: str
    generation: int
    session_id: str
    workspace: str
    prompt: str
    challenge: dict[str, Any]
    db: str | None
    log_dir: str
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    # A native resume: the provider session continues (its transcript grows on).
    resume_transcript: str | None = None


@dataclass(frozen=True)
class LaunchedBody:
    """A started successor process."""

    pid: int
    argv: list[str]
    process: Any  # a subprocess.Popen, or anything with poll() (a simulated body)
    log_path: str
    prompt_path: str


def _onstation() -> str:
    beside = Path(sys.executable).with_name("onstation")
    return str(beside) if beside.exists() else "onstation"


class Launcher:
    """Base launcher: a concrete one only says which argv to run."""

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = "custom"
    harness = "command"
    model: str | None = None
    execution_class = "real-provider"

    def argv(self, spec: LaunchSpec, prompt_path: str) -> list[str]:  # pragma: no cover
        """The successor's command line."""
        raise NotImplementedError

    def launch(self, spec: LaunchSpec) -> LaunchedBody:
        """Start the successor in its workspace, detached from our terminal."""
        logs = Path(spec.log_dir)
        logs.mkdir(parents=True, exist_ok=True)
        prompt_path = logs / f"{spec.node}-g{spec.generation}-prompt.md"
        prompt_path.write_text(spec.prompt, encoding="utf-8")
        log_path = logs / f"{spec.node}-g{spec.generation}.log"
        env = {
            **os.environ,
            **spec.env,
            "ONSTATION_NODE": spec.node,
            "ONSTATION_GENERATION": str(spec.generation),
            "ONSTATION_SESSION_ID": spec.session_id,
            "ONSTATION_CHALLENGE": json.dumps(spec.challenge, sort_keys=True),
        }
        if spec.db is not None:
            env["ONSTATION_DB"] = spec.db
        argv = self.argv(spec, str(prompt_path))
        with log_path.open("ab") as log:
            try:
                process = subprocess.Popen(
                    argv, cwd=spec.workspace, env=env, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                raise BadInput(f"cannot launch {argv[0]}: {exc.strerror}") from exc
        return LaunchedBody(process.pid, argv, process, str(log_path), str(prompt_path))


class FakeLauncher(Launcher):
    """The shipped fake harness (``onstation fake-agent``): no model provider needed."""

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = "fake"
    harness = "claude-code"
    model = "fake-claude"
    execution_class = "fake"

    def argv(self, spec: LaunchSpec, prompt_path: str) -> list[str]:
        resume = ["--transcript", spec.resume_transcript] if spec.resume_transcript else []
        return [_onstation(), "fake-agent", "--workspace", spec.workspace, "--node", spec.node,
                "--session-id", spec.session_id, *resume, *spec.extra_args]  # fmt: skip


class ClaudeLauncher(Launcher):
    """``claude -p`` with the successor prompt, the session id recorded, flags repeated."""

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = "claude-code"
    harness = "claude-code"
    execution_class = "real-provider"

    def __init__(self, model: str | None = None) -> None:
        self.model = model

    def argv(self, spec: LaunchSpec, prompt_path: str) -> list[str]:
        # A native resume continues the provider session; otherwise a fresh one is created
        # under the id onstation chose (and recorded).
        session = ["--resume", spec.session_id] if spec.resume_transcript else [
            "--session-id", spec.session_id]  # fmt: skip
        argv = ["claude", "-p", spec.prompt, *session, "--output-format", "json"]
        if self.model:
            argv += ["--model", self.model]
        return argv + list(spec.extra_args)


class CodexLauncher(Launcher):
    """``codex exec`` in the workspace, with the prompt and the flags given again."""

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = "codex"
    harness = "codex-cli"
    execution_class = "real-provider"

    def __init__(self, model: str | None = None) -> None:
        self.model = model

    def argv(self, spec: LaunchSpec, prompt_path: str) -> list[str]:
        argv = ["codex", "exec", "--json", "-C", spec.workspace]
        if self.model:
            argv += ["-m", self.model]
        return [*argv, *spec.extra_args, spec.prompt]


class CommandLauncher(Launcher):
    """Any command, from a template: ``{node} {generation} {session_id} {workspace}
    {prompt_file}`` are replaced in each argument (no shell is involved)."""

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = "command"
    harness = "claude-code"
    execution_class = "real-provider"

    def __init__(self, template: str, execution_class: str = "real-provider") -> None:
        if not template.strip():
            raise BadInput("--command: the template is empty")
        self.template = shlex.split(template)
        self.execution_class = execution_class

    def argv(self, spec: LaunchSpec, prompt_path: str) -> list[str]:
        values = {"node": spec.node, "generation": str(spec.generation),
                  "session_id": spec.session_id, "workspace": spec.workspace,
                  "prompt_file": prompt_path}  # fmt: skip
        out = []
        for template_arg in self.template:
            arg = template_arg
            for key, value in values.items():
                arg = arg.replace("{" + key + "}", value)
            out.append(arg)
        return out


class InteractiveLauncher(Launcher):
    """No launch: the next Claude Code session started (or cleared) in the workspace takes
    the successor's lease, gets the successor prompt through its SessionStart hook and answers
    the challenge itself."""

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = "interactive"
    harness = "claude-code"
    execution_class = "real-provider"
    interactive = True

    def launch(self, spec: LaunchSpec) -> LaunchedBody:  # pragma: no cover - never called
        raise BadInput("an interactive successor is not launched; a session takes the lease")


def launcher_for(harness: str, *, model: str | None = None, command: str | None = None) -> Launcher:
    """The launcher a ``--harness`` name selects."""
    if harness == "interactive":
        return InteractiveLauncher()
    if harness == "fake":
        return FakeLauncher()
    if harness == "claude-code":
        return ClaudeLauncher(model)
    if harness == "codex":
        return CodexLauncher(model)
    if harness == "command":
        if command is None:
            raise BadInput("--harness command needs --command TEMPLATE")
        return CommandLauncher(command)
    raise BadInput(f"--harness: one of {', '.join(HARNESSES)}, not {harness!r}")
