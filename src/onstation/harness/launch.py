"""Launching a successor body: Claude Code, Codex CLI, any command, or the fake harness.

A launcher turns a :class:`LaunchSpec` (identity, generation, session id, workspace, the
successor prompt, the challenge) into a running process, with no effect rights yet: the
successor must answer its challenge first. Every launcher passes the challenge in the
environment (``ONSTATION_NODE``, ``ONSTATION_GENERATION``, ``ONSTATION_CHALLENGE``,
``ONSTATION_SESSION_ID``) plus a fresh witness marker (``ONSTATION_WITNESS_MARKER``), and
writes the prompt to a file only its owner can read, in a directory only its owner can
enter. The prompt never goes on the command line, where every local user could read it in
``/proc/PID/cmdline``: ``claude -p`` and ``codex exec -`` read it on stdin (that file), a
command template gets the file's path. Flags that a harness forgets on resume are given
again on every launch.

A successor that cannot run its challenge command never reaches RUNNING, so each host is
launched with exactly what that command needs and no more (docs/relief.md, "Launch flags"):
``claude -p`` gets a private ``--settings`` file whose ``permissions.allow`` holds the exact
challenge command and the tools the capsule grants (a print-mode session cannot ask for
permission); ``codex exec`` runs in the ``workspace-write`` sandbox with the ledger's
directory as an extra writable root (``--add-dir``), and with network access in the sandbox
only for a PostgreSQL ledger. The command shown to the successor is absolute
(:func:`onstation_argv`) and shell-quoted as a whole (:func:`challenge_command`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from onstation.core.errors import BadInput
from onstation.harness.adapters import ADAPTERS, CLAUDE_CODE, CODEX, FAKE, HarnessAdapter, find
from onstation.harness.witness import MARKER_ENV

#: A bare tool name (``Read``, ``Bash``) or an MCP tool (``mcp__server__tool``): the only
#: capsule tool names turned into Claude Code allow rules (anything else would be a pattern).
_TOOL_NAME = re.compile(r"(?:[A-Z][A-Za-z0-9]*|mcp__[A-Za-z0-9_-]+)")

#: Launch modes that are no harness of their own: a command template, and the next
#: interactive session started in the workspace.
COMMAND = "command"
INTERACTIVE = "interactive"

#: Every ``--harness`` name a launcher is chosen by: each adapter's, then the two modes.
HARNESSES = (*ADAPTERS, COMMAND, INTERACTIVE)


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
    #: The tool names the capsule grants (its ``capabilityRequirements`` of kind ``tool``).
    tools: tuple[str, ...] = ()
    #: The URL of the ledger the relief wrote (the one the successor's answer must reach).
    ledger: str | None = None


@dataclass(frozen=True)
class LaunchedBody:
    """A started successor process."""

    pid: int
    argv: list[str]
    process: Any  # a subprocess.Popen, or anything with poll() (a simulated body)
    log_path: str
    prompt_path: str
    # The ONSTATION_WITNESS_MARKER value the body was started with (None: a simulated body).
    marker: str | None = None


_PRIVATE_FILE = os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _private_dir(path: Path) -> None:
    """Make ``path`` a directory only its owner can enter (0700), refusing a symlink or a
    directory another user owns: either could expose or swap the prompt written in it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise BadInput(f"log dir {path}: not a directory (a symlink or a file)")
    if info.st_uid != os.geteuid():
        raise BadInput(f"log dir {path}: owned by uid {info.st_uid}, not by this user")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)


def _write_private(path: Path, text: str) -> int:
    """Write ``text`` to ``path`` atomically, mode 0600 from its creation; return a read
    descriptor on the written file, positioned at its start.

    The temp file is created 0600 (never a moment with wider permissions, whatever the
    umask), then renamed over ``path``, so no symlink at ``path`` is followed. The returned
    descriptor is the file just written, not whatever ``path`` names later.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_RDWR | _PRIVATE_FILE, 0o600)
    try:
        data = text.encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _program(host: HarnessAdapter) -> str:
    assert host.program is not None, host.name
    return host.program


def onstation_argv() -> list[str]:
    """The absolute command that runs this onstation: the console script beside the running
    interpreter, else the one on PATH (resolved), else this interpreter running the entry
    module. Never a bare ``onstation`` a successor's shell might not find."""
    beside = Path(sys.executable).with_name("onstation")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("onstation")
    if found:
        return [os.path.realpath(found)]
    return [sys.executable, "-m", "onstation.cli.entry"]


def challenge_command(
    node: str, generation: int, challenge: dict[str, Any], onstation: list[str] | None = None
) -> str:
    """The one shell command a successor runs to answer its challenge, quoted as a whole
    (:func:`shlex.join`): any path or value, a ``'`` or a space included, stays one word."""
    words = [*(onstation if onstation is not None else onstation_argv()), "challenge", "answer",
             node, "--generation", str(generation), "--echo",
             json.dumps(challenge, sort_keys=True)]  # fmt: skip
    return shlex.join(words)


def ledger_target(spec: LaunchSpec) -> tuple[str, str]:
    """(dialect, target) of the ledger the successor writes: the relief's own, else
    ``--db``, else ``ONSTATION_DB``, else the default file; a SQLite path made absolute."""
    from onstation.ledger.urls import default_sqlite_file, parse_url

    url = spec.ledger or spec.db or os.environ.get("ONSTATION_DB") or default_sqlite_file()
    dialect, target = parse_url(url)
    return dialect, (os.path.abspath(target) if dialect == "sqlite" else target)


class Launcher:
    """Base launcher: a concrete one only says which argv to run."""

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = "custom"
    harness = "command"
    model: str | None = None
    execution_class = "real-provider"
    #: The successor reads its prompt on stdin (the prompt file); otherwise stdin is empty.
    prompt_on_stdin = False

    def argv(self, spec: LaunchSpec, prompt_path: str) -> list[str]:  # pragma: no cover
        """The successor's command line. Never the prompt itself: argv is world-readable."""
        raise NotImplementedError

    def private_files(self, spec: LaunchSpec, prompt_path: str) -> dict[str, str]:
        """Files (name -> text) written 0600 beside the prompt before :meth:`argv` runs."""
        return {}

    def launch(self, spec: LaunchSpec) -> LaunchedBody:
        """Start the successor in its workspace, detached from our terminal."""
        logs = Path(spec.log_dir)
        prompt_path = logs / f"{spec.node}-g{spec.generation}-prompt.md"
        log_path = logs / f"{spec.node}-g{spec.generation}.log"
        try:
            _private_dir(logs)
            prompt_fd = _write_private(prompt_path, spec.prompt)
        except OSError as exc:
            raise BadInput(f"cannot write the prompt {prompt_path}: {exc.strerror}") from exc
        marker = secrets.token_hex(16)
        env = {
            **os.environ,
            **spec.env,
            "ONSTATION_NODE": spec.node,
            "ONSTATION_GENERATION": str(spec.generation),
            "ONSTATION_SESSION_ID": spec.session_id,
            "ONSTATION_CHALLENGE": json.dumps(spec.challenge, sort_keys=True),
            # Set last: a marker inherited from our own launch must never pass to the next.
            MARKER_ENV: marker,
        }
        if spec.db is not None:
            # The successor runs in its workspace: a relative SQLite path would name another
            # file there.
            dialect, target = ledger_target(replace(spec, ledger=spec.db))
            env["ONSTATION_DB"] = target if dialect == "sqlite" else spec.db
        try:
            for name, text in self.private_files(spec, str(prompt_path)).items():
                os.close(_write_private(logs / name, text))
            argv = self.argv(spec, str(prompt_path))
            stdin: int = prompt_fd if self.prompt_on_stdin else subprocess.DEVNULL
            # The log holds the successor's answers, which may quote the prompt: owner only.
            try:
                log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                                 | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)  # fmt: skip
            except OSError as exc:
                raise BadInput(f"cannot open the log {log_path}: {exc.strerror}") from exc
            try:
                process = subprocess.Popen(
                    argv, cwd=spec.workspace, env=env, stdin=stdin, stdout=log_fd,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                raise BadInput(f"cannot launch {argv[0]}: {exc.strerror}") from exc
            finally:
                os.close(log_fd)
        finally:
            os.close(prompt_fd)
        return LaunchedBody(process.pid, argv, process, str(log_path), str(prompt_path), marker)


class FakeLauncher(Launcher):
    """The shipped fake harness (``onstation fake-agent``): no model provider needed."""

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = FAKE.name
    harness = FAKE.plan_harness
    model = "fake-claude"
    execution_class = "fake"

    def argv(self, spec: LaunchSpec, prompt_path: str) -> list[str]:
        resume = ["--transcript", spec.resume_transcript] if spec.resume_transcript else []
        return [*onstation_argv(), "fake-agent", "--workspace", spec.workspace, "--node", spec.node,
                "--session-id", spec.session_id, *resume, *spec.extra_args]  # fmt: skip


class ClaudeLauncher(Launcher):
    """``claude -p`` with the successor prompt on stdin, the session id recorded, flags
    repeated. Without a prompt argument ``claude -p`` takes its prompt from stdin (see
    docs/relief.md, Launchers).

    A print-mode session cannot ask for permission, so what it may run is said up front, in
    a ``--settings`` file written 0600 beside the prompt (argv is world-readable and the
    challenge holds its nonce): ``permissions.allow`` lists ``Bash(<the exact challenge
    command>)`` and the bare tool names the capsule grants, and ``--permission-mode dontAsk``
    denies the rest instead of waiting for an answer nobody gives.
    """

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = CLAUDE_CODE.name
    harness = CLAUDE_CODE.plan_harness
    execution_class = "real-provider"
    prompt_on_stdin = True

    def __init__(self, model: str | None = None) -> None:
        self.model = model

    @staticmethod
    def settings_name(spec: LaunchSpec) -> str:
        return f"{spec.node}-g{spec.generation}-settings.json"

    def allow_rules(self, spec: LaunchSpec) -> list[str]:
        """The permission rules the successor runs under: the challenge command exactly, then
        the tools the capsule grants (bare names only: never a wider pattern)."""
        command = challenge_command(spec.node, spec.generation, spec.challenge)
        if "*" in command:
            # In a Bash rule "*" is a wildcard (code.claude.com/docs/en/permissions): the
            # rule would allow more than this one command.
            raise BadInput(
                "the challenge command holds '*', which a Claude Code permission rule reads "
                "as a wildcard; move the workspace to a path without '*'"
            )
        rules = [f"Bash({command})"]
        rules += [t for t in dict.fromkeys(spec.tools) if _TOOL_NAME.fullmatch(t)]
        return rules

    def private_files(self, spec: LaunchSpec, prompt_path: str) -> dict[str, str]:
        settings = {"permissions": {"allow": self.allow_rules(spec)}}
        return {self.settings_name(spec): json.dumps(settings, indent=2) + "\n"}

    def argv(self, spec: LaunchSpec, prompt_path: str) -> list[str]:
        # A native resume continues the provider session; otherwise a fresh one is created
        # under the id onstation chose (and recorded).
        session = ["--resume", spec.session_id] if spec.resume_transcript else [
            "--session-id", spec.session_id]  # fmt: skip
        settings = str(Path(prompt_path).with_name(self.settings_name(spec)))
        argv = [_program(CLAUDE_CODE), "-p", *session, "--output-format", "json",
                "--permission-mode", "dontAsk", "--settings", settings]  # fmt: skip
        if self.model:
            argv += ["--model", self.model]
        return argv + list(spec.extra_args)


class CodexLauncher(Launcher):
    """``codex exec`` in the workspace, the prompt on stdin (``-``), the flags given again.

    ``codex exec`` runs commands in a read-only sandbox by default, where the challenge
    answer cannot write the ledger: it runs in ``--sandbox workspace-write``, with the
    SQLite ledger's directory as an extra writable root (``--add-dir``) when it lies outside
    the workspace, and with ``sandbox_workspace_write.network_access=true`` only for a
    PostgreSQL ledger (the sandbox blocks the network otherwise). Outside a git repository
    ``--skip-git-repo-check`` is added (Codex refuses to run there without it). Codex chooses
    its own session id: its first hook from the launched process (or its child, the native
    program under Codex's npm wrapper) takes the launched lease
    (:meth:`onstation.ledger.bodies.HarnessLedger.admit_session`), and its hooks heartbeat.
    """

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = CODEX.name
    harness = CODEX.plan_harness
    execution_class = "real-provider"
    prompt_on_stdin = True

    def __init__(self, model: str | None = None) -> None:
        self.model = model

    def argv(self, spec: LaunchSpec, prompt_path: str) -> list[str]:
        argv = [_program(CODEX), "exec", "--json", "-C", spec.workspace,
                "--sandbox", "workspace-write"]  # fmt: skip
        dialect, target = ledger_target(spec)
        if dialect == "sqlite":
            # SQLite writes its -wal, -shm and journal files beside the ledger: the directory.
            root = os.path.dirname(target)
            workspace = os.path.realpath(spec.workspace)
            if os.path.commonpath([os.path.realpath(root), workspace]) != workspace:
                argv += ["--add-dir", root]
        else:
            argv += ["-c", "sandbox_workspace_write.network_access=true"]
        if spec.challenge.get("worktree_head") == "none":
            argv.append("--skip-git-repo-check")
        if self.model:
            argv += ["-m", self.model]
        # "-": the prompt is read from stdin (codex-rs/exec/src/cli.rs, PROMPT).
        return [*argv, *spec.extra_args, "-"]


class CommandLauncher(Launcher):
    """Any command, from a template: ``{node} {generation} {session_id} {workspace}
    {prompt_file}`` are replaced in each argument (no shell is involved)."""

    #: The ``--harness`` name that selects this launcher (recorded for the next relief).
    name = COMMAND
    harness = CLAUDE_CODE.plan_harness
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
    name = INTERACTIVE
    harness = CLAUDE_CODE.plan_harness
    execution_class = "real-provider"
    interactive = True

    def launch(self, spec: LaunchSpec) -> LaunchedBody:  # pragma: no cover - never called
        raise BadInput("an interactive successor is not launched; a session takes the lease")


def launcher_for(harness: str, *, model: str | None = None, command: str | None = None) -> Launcher:
    """The launcher a ``--harness`` name selects (a harness's own name, not an alias)."""
    if harness == INTERACTIVE:
        return InteractiveLauncher()
    if harness == COMMAND:
        if command is None:
            raise BadInput("--harness command needs --command TEMPLATE")
        return CommandLauncher(command)
    host = find(harness, aliases=False)
    if host is not None:
        return host.launcher(model)
    raise BadInput(f"--harness: one of {', '.join(HARNESSES)}, not {harness!r}")
