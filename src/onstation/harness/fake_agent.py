"""The fake harness: a real program that behaves toward onstation as a Claude Code session.

``onstation fake-agent`` needs no model provider. It works on a real git repository (one
file and one commit per step, a push every few steps), writes a transcript JSONL whose
usage grows like a real session's (two streaming lines per API call sharing ``message.id``
and ``requestId``), and runs the hook commands Claude Code would run, with the payloads
Claude Code sends: SessionStart, UserPromptSubmit, PreToolUse/PostToolUse around every
tool call, Stop. It obeys the answers: a denied tool call is not run; "Hull integrity Red"
(or Critical, or "Prepare turnover brief" from its lead) makes it write its turnover brief and
stop. Launched as a successor (``ONSTATION_CHALLENGE`` in its environment) it answers the
challenge first and heartbeats. It can be told to crash, hang, or wake up after being
fenced, which is what the end-to-end tests of the failure rules need.

It is a stand-in, so it never touches a user's work: it commits and pushes only in a
repository marked as scratch (:func:`mark_scratch_workspace`, or ``--scratch-workspace``), and
pushes only to a bare repository on this machine. Anything else is refused before it writes.

Exit codes: 0 done or relieved, 2 bad input, 3 denied (fenced, or never made RUNNING),
4 blocked (not a scratch workspace, or a push target that is not a local bare repository;
nothing written), 1 anything unexpected (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TextIO

from onstation.core.errors import BadInput

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_DENIED = 3
EXIT_BLOCKED = 4
EXIT_CONFLICT = 5

PROG = "onstation fake-agent"
MODEL_200K = "claude-sonnet-4-5-20250929"
MODEL_1M = MODEL_200K + "[1m]"
WINDOWS = {200_000: MODEL_200K, 1_000_000: MODEL_1M}
CLAUDE_VERSION = "2.1.240"
GIT_IDENTITY = ["-c", "user.name=fake-agent", "-c", "user.email=fake@onstation.invalid"]
GIT_IDENTITY_ENV = frozenset(
    {"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}
)

#: What in an additionalContext asks this body to hand over.
RELIEF_RE = re.compile(r"Hull integrity (?:Red|Critical)|Prepare turnover brief")
#: The hooks' words for a body whose generation was fenced (see relief/hooks.py).
FENCED_MARK = "has been relieved"
#: Denials that waiting cannot cure: retrying them for the challenge would only waste time.
FINAL_DENIALS = (FENCED_MARK, "not repeating an effect", "AMBIGUOUS")
ADMITTED_RE = re.compile(r"is the body of (\S+), generation (\d+)")

#: Bounded wait for a launched successor to be made RUNNING (its first effect-capable call).
RUNNING_RETRIES = 30
RUNNING_RETRY_DELAY = 0.2
FENCE_POLL = 0.2

#: Kept in the repository's git directory, never in its work tree: it is never committed,
#: cloned or shown by ``git status``, so a clone of a scratch repository is not scratch.
SCRATCH_MARKER = "onstation-scratch-workspace"
SCRATCH_FLAG = "--scratch-workspace"


class AgentError(Exception):
    """Something unexpected: exit 1 with one line on stderr."""


class AgentDenied(Exception):
    """This body may not act (fenced, or never made RUNNING): exit 3."""


class AgentRefused(Exception):
    """Not a repository a stand-in may touch, or a push that would leave this machine: exit 4."""


# ------------------------------------------------------------------------------------------
# options


@dataclass
class Options:
    """What the fake agent was told to do (see ``onstation fake-agent --help``)."""

    workspace: Path
    node: str | None = None
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    steps: int = 12
    tokens_per_step: int = 8000
    start_tokens: int = 15000
    window: int = 200_000
    push_every: int = 4
    db: str | None = None
    crash_at: int | None = None
    crash_after_dispatch: int | None = None
    hang_at: int | None = None
    wake_after_fence: int | None = None
    fence_wait: float = 600.0
    heartbeat: float | None = None
    log: Path | None = None
    transcript: Path | None = None
    prompt: str | None = None
    coordinator: str | None = None
    step_seconds: float = 0.0
    scratch_workspace: bool = False


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _positive(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def _non_negative(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative (got {value})")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds (got {text})")
    return value


def _window(text: str) -> int:
    value = _int(text)
    if value not in WINDOWS:
        raise argparse.ArgumentTypeError("must be 200000 or 1000000 (the real windows)")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, but bad input is one line naming the option (exit 2), not the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{PROG}: bad input: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (shared by ``main`` and ``onstation fake-agent``)."""
    p = _Parser(
        prog=PROG,
        description="A fake Claude Code session for demos and end-to-end tests: real git, "
        "real hook calls, a transcript with growing usage; no model provider.",
        epilog="Exit codes: 0 done or relieved, 2 bad input, 3 denied (fenced, or never made "
        "RUNNING), 4 blocked (not a scratch workspace, or a push target that is not a bare "
        "repository on this machine; nothing written), 1 anything else.",
    )
    p.add_argument(
        "--workspace",
        required=True,
        type=Path,
        metavar="DIR",
        help="A git repository bound to the node (onstation install claude-code).",
    )
    p.add_argument(
        SCRATCH_FLAG,
        action="store_true",
        help="The workspace is a throwaway repository: commit and push in it although it "
        "carries no scratch marker. Pushes still go only to a bare repository on this machine.",
    )
    p.add_argument(
        "--node",
        default=None,
        help="Identity (default: ONSTATION_NODE, else the workspace's config).",
    )
    p.add_argument(
        "--session-id",
        default=None,
        help="Session id (default: ONSTATION_SESSION_ID, else a fresh uuid4).",
    )
    p.add_argument("--steps", type=_positive, default=12, help="Steps of work (default 12).")
    p.add_argument(
        "--tokens-per-step",
        type=_non_negative,
        default=8000,
        metavar="K",
        help="Context each step adds (default 8000).",
    )
    p.add_argument(
        "--start-tokens",
        type=_non_negative,
        default=15000,
        metavar="T",
        help="Context before the first step (default 15000).",
    )
    p.add_argument(
        "--window",
        type=_window,
        default=200_000,
        metavar="W",
        help="Model window, 200000 or 1000000 (written as the model id).",
    )
    p.add_argument(
        "--push-every",
        type=_non_negative,
        default=4,
        metavar="N",
        help="Push to origin every N steps and after the last (0: never).",
    )
    p.add_argument("--db", default=None, metavar="URL", help="Ledger (default: ONSTATION_DB).")
    p.add_argument(
        "--crash-at",
        type=_positive,
        default=None,
        metavar="STEP",
        help="SIGKILL itself at the start of STEP.",
    )
    p.add_argument(
        "--crash-after-dispatch",
        type=_positive,
        default=None,
        metavar="STEP",
        help="At STEP's push: PreToolUse, run git push, SIGKILL before PostToolUse.",
    )
    p.add_argument(
        "--hang-at",
        type=_positive,
        default=None,
        metavar="STEP",
        help="Stop heartbeating and sleep forever at the start of STEP.",
    )
    p.add_argument(
        "--wake-after-fence",
        type=_positive,
        nargs="?",
        const=1,
        default=None,
        metavar="STEP",
        help="After STEP (default 1), sleep until the ledger fences "
        "this generation, then try to commit, push and message (all must be denied).",
    )
    p.add_argument(
        "--fence-wait",
        type=_seconds,
        default=600.0,
        metavar="SECONDS",
        help="Longest wait for the fence in wake mode (default 600).",
    )
    p.add_argument(
        "--heartbeat",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="Renew the lease every SECONDS (default 1 when launched with "
        "ONSTATION_GENERATION; else off).",
    )
    p.add_argument(
        "--log", type=Path, default=None, metavar="FILE", help="JSON lines of what it did."
    )
    p.add_argument(
        "--transcript",
        type=Path,
        default=None,
        metavar="FILE",
        help="Transcript JSONL (default: the challenge's transcript_sink when launched, "
        "else WORKSPACE/../SESSION.jsonl).",
    )
    p.add_argument("--prompt", default=None, help="The user prompt it starts with.")
    p.add_argument(
        "--step-seconds",
        type=float,
        default=0.0,
        metavar="S",
        help="Think for S seconds before each step (the heartbeat goes on), as a model would.",
    )
    p.add_argument(
        "--coordinator",
        default=None,
        metavar="L3:PUN",
        help="Act as coordinator coord-L3-PUN: at Red, write a continuation manifest, tell "
        "the spawner (respawn_triggered) and stop, instead of writing a turnover brief.",
    )
    return p


def parse_args(argv: list[str]) -> Options:
    """Parse ``argv``; argparse exits 2 on bad input."""
    ns = build_parser().parse_args(argv)
    return Options(
        workspace=ns.workspace,
        node=ns.node,
        session_id=ns.session_id or os.environ.get("ONSTATION_SESSION_ID") or str(uuid.uuid4()),
        steps=ns.steps,
        tokens_per_step=ns.tokens_per_step,
        start_tokens=ns.start_tokens,
        window=ns.window,
        push_every=ns.push_every,
        db=ns.db,
        crash_at=ns.crash_at,
        crash_after_dispatch=ns.crash_after_dispatch,
        hang_at=ns.hang_at,
        wake_after_fence=ns.wake_after_fence,
        fence_wait=ns.fence_wait,
        heartbeat=ns.heartbeat,
        log=ns.log,
        transcript=ns.transcript,
        prompt=ns.prompt,
        coordinator=ns.coordinator,
        step_seconds=max(0.0, ns.step_seconds),
        scratch_workspace=ns.scratch_workspace,
    )


# ------------------------------------------------------------------------------------------
# small helpers


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def onstation_argv() -> list[str]:
    """How to run the onstation CLI: the script beside this interpreter, else ``-m``."""
    beside = Path(sys.executable).with_name("onstation")
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-m", "onstation.cli.entry"]


def _die_by_sigkill() -> NoReturn:
    os.kill(os.getpid(), signal.SIGKILL)
    while True:  # pragma: no cover - SIGKILL cannot be caught
        time.sleep(1)


# ------------------------------------------------------------------------------------------
# whose repository: a stand-in works only in scratch ones, and pushes only to this machine


def _git_out(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str | None:
    """stdout of a read-only git command, None when it fails."""
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60,
        check=False,
    )  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else None


def _toplevel_and_git_dir(workspace: Path, env: dict[str, str] | None) -> tuple[Path, Path]:
    out = _git_out(workspace, "rev-parse", "--show-toplevel", "--absolute-git-dir", env=env)
    lines = (out or "").splitlines()
    if len(lines) != 2:
        raise BadInput(f"--workspace: {workspace} is not a git repository with a work tree")
    return Path(os.path.realpath(lines[0])), Path(lines[1])


def mark_scratch_workspace(workspace: Path) -> Path:
    """Mark a repository its creator made as a throwaway one; returns the marker's path.

    For the demo and the tests, which create the repositories the fake agent works in. The
    marker names the work tree it was written for, so a copied git directory does not carry
    the permission elsewhere. Written atomically, never through a symlink.
    """
    top, git_dir = _toplevel_and_git_dir(workspace, None)
    marker = git_dir / SCRATCH_MARKER
    body = {"workspace": str(top), "why": "a scratch repository: onstation fake-agent may "
            "commit and push here"}  # fmt: skip
    temporary = git_dir / f".{SCRATCH_MARKER}.{os.getpid()}.tmp"
    temporary.unlink(missing_ok=True)
    with temporary.open("x", encoding="utf-8") as fh:
        fh.write(json.dumps(body) + "\n")
    os.replace(temporary, marker)
    return marker


def is_scratch_workspace(workspace: Path, env: dict[str, str] | None = None) -> bool:
    """Whether the repository at ``workspace`` carries a scratch marker written for it."""
    try:
        top, git_dir = _toplevel_and_git_dir(workspace, env)
    except BadInput:
        return False
    marker = git_dir / SCRATCH_MARKER
    try:
        if not marker.is_file() or marker.is_symlink():
            return False
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("workspace") == str(top)


def local_bare_repository(url: str, cwd: Path, env: dict[str, str] | None = None) -> str | None:
    """None when ``url`` is a bare repository on this machine (a path or a ``file://`` URL);
    else why it is not. Follows git's own reading of a remote URL, so nothing git would send
    over a network is taken for a path."""
    if url.lower().startswith("file://"):
        parts = urllib.parse.urlsplit(url)
        if parts.netloc:
            return f"{url!r} is a file:// URL naming host {parts.netloc!r}"
        raw = urllib.parse.unquote(parts.path)
    elif ":" in url.split("/", 1)[0]:
        # git reads a colon before the first slash as SCHEME://, HOST:PATH (ssh) or
        # TRANSPORT::ADDRESS (a remote helper): all of them may leave this machine.
        return f"{url!r} is not a path on this machine"
    else:
        raw = url
    if not raw:
        return "the URL is empty"
    path = Path(raw) if os.path.isabs(raw) else cwd / raw
    if not path.is_dir():
        return f"{url!r} is not a directory on this machine"
    bare = _git_out(path, "--git-dir", str(path), "rev-parse", "--is-bare-repository", env=env)
    if bare != "true":
        # A non-bare repository is somebody's checkout: pushing into it touches their work.
        return f"{url!r} is not a bare git repository"
    return None


def push_refusal(workspace: Path, remote: str, env: dict[str, str] | None = None) -> str | None:
    """None when every URL ``git push REMOTE`` may use (url and pushurl, after git's
    insteadOf rewriting) is a bare repository on this machine; else one line saying why."""
    urls: list[str] = []
    for push in (False, True):
        out = _git_out(workspace, "remote", "get-url", "--all", *(["--push"] if push else []),
                       remote, env=env)  # fmt: skip
        # With no such remote git takes the name itself for a URL (a path).
        for url in out.splitlines() if out is not None else [remote]:
            if url not in urls:
                urls.append(url)
    for url in urls:
        why = local_bare_repository(url, workspace, env)
        if why is not None:
            return f"remote {remote} pushes to {why}"
    return None


class Log:
    """JSON lines of what the agent did; each line is flushed so a SIGKILL loses none.

    The file is opened at the first event, not before: a run refused before it writes
    anything must not have created a file, possibly inside the repository it refused.
    """

    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._fh: TextIO | None = None
        self._closed = False
        self.path = path

    def __call__(self, event: str, **fields: Any) -> None:
        if self.path is None:
            return
        line = json.dumps({"at": _now(), "event": event, **fields}, default=str)
        # Under the lock: the heartbeat thread may log while the main thread closes.
        with self._lock:
            if self._closed:
                return
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = self.path.open("a", encoding="utf-8")
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._fh is not None:
                self._fh.close()
                self._fh = None


class Transcript:
    """Writes the session JSONL as Claude Code does: envelope + Anthropic Messages lines."""

    def __init__(self, path: Path, session_id: str, cwd: Path, model: str, branch: str | None):
        self.path = path
        self.session_id = session_id
        self.cwd = str(cwd)
        self.model = model
        self.branch = branch
        self.parent: str | None = None
        self.calls = 0
        self.last_tokens: int | None = None
        self.last_text = ""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def _envelope(self, kind: str) -> dict[str, Any]:
        line_id = str(uuid.uuid4())
        line = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": CLAUDE_VERSION,
            "gitBranch": self.branch or "",
            "type": kind,
            "uuid": line_id,
            "timestamp": _now(),
        }
        self.parent = line_id
        return line

    def _append(self, *lines: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(line) + "\n" for line in lines))

    def user_prompt(self, text: str) -> None:
        line = self._envelope("user")
        line["message"] = {"role": "user", "content": text}
        self._append(line)

    def assistant(self, tokens: int, content: list[dict[str, Any]], stop_reason: str) -> None:
        """One API call: two streaming lines sharing message.id and requestId."""
        self.calls += 1
        suffix = uuid.uuid4().hex[:20]
        input_tokens = min(3, tokens)
        creation = min(500, tokens - input_tokens)
        usage = {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": tokens - input_tokens - creation,
            "output_tokens": 120,
            "service_tier": "standard",
        }
        lines = []
        # The first line streams the text, the last one carries the tool call and stop reason.
        for part, stop in ((content[:1], None), (content, stop_reason)):
            line = self._envelope("assistant")
            line["message"] = {
                "id": f"msg_{suffix}",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": part,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            }
            line["requestId"] = f"req_{suffix}"
            lines.append(line)
        self._append(*lines)
        self.last_tokens = tokens
        self.last_text = next((c["text"] for c in content if c.get("type") == "text"), "")

    def tool_result(
        self, tool_use_id: str, text: str, is_error: bool, result: dict[str, Any]
    ) -> None:
        line = self._envelope("user")
        line["message"] = {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tool_use_id,
                    "content": text,
                    "is_error": is_error,
                }
            ],
        }
        line["toolUseResult"] = result
        self._append(line)


@dataclass
class HookReply:
    """The merged answer of every handler configured for one event."""

    event: str
    outputs: list[dict[str, Any]] = field(default_factory=list)
    blocking_errors: list[str] = field(default_factory=list)  # exit 2: stderr is the reason

    @property
    def deny_reason(self) -> str | None:
        for out in self.outputs:
            specific = out.get("hookSpecificOutput")
            if isinstance(specific, dict) and specific.get("permissionDecision") == "deny":
                return str(specific.get("permissionDecisionReason") or "denied")
            if out.get("decision") == "block" and self.event == "PreToolUse":
                return str(out.get("reason") or "blocked")
        if self.blocking_errors and self.event == "PreToolUse":
            return self.blocking_errors[0]
        return None

    @property
    def block_reason(self) -> str | None:
        for out in self.outputs:
            if out.get("decision") == "block":
                return str(out.get("reason") or "blocked")
        return self.blocking_errors[0] if self.blocking_errors else None

    @property
    def context(self) -> str:
        parts = []
        for out in self.outputs:
            specific = out.get("hookSpecificOutput")
            if isinstance(specific, dict) and specific.get("additionalContext"):
                parts.append(str(specific["additionalContext"]))
        return "\n\n".join(parts)


def _matches(matcher: Any, value: str | None) -> bool:
    """Claude Code's matcher rule: empty/"*" = all; a plain name list = exact; else regex."""
    if matcher in (None, "", "*") or value is None:
        return True
    if not isinstance(matcher, str):
        return False
    if re.fullmatch(r"[A-Za-z0-9_ ,|-]+", matcher):
        return value in {m.strip() for m in re.split(r"[|,]", matcher) if m.strip()}
    try:
        return re.search(matcher, value) is not None
    except re.error:
        return False


class Hooks:
    """Runs the hook commands of the workspace's ``.claude/settings.json``, as Claude Code."""

    def __init__(self, workspace: Path, env: dict[str, str], log: Log) -> None:
        self.workspace = workspace
        self.env = env
        self.log = log
        self.settings: dict[str, Any] | None = None
        path = workspace / ".claude" / "settings.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise AgentError(f"{path}: not readable JSON ({exc})") from exc
            hooks = data.get("hooks") if isinstance(data, dict) else None
            self.settings = hooks if isinstance(hooks, dict) else None

    @property
    def source(self) -> str:
        return "settings" if self.settings else "direct"

    def commands(self, event: str, tool: str | None) -> list[list[str] | str]:
        """Shell strings from settings.json; without any, the CLI itself as an argv list."""
        if self.settings is None:
            return [[*onstation_argv(), "hook", "claude-code", event]]
        found: list[list[str] | str] = []
        for group in self.settings.get(event) or []:
            if not isinstance(group, dict) or not _matches(group.get("matcher"), tool):
                continue
            for handler in group.get("hooks") or []:
                if isinstance(handler, dict) and handler.get("type") == "command":
                    command = handler.get("command")
                    if isinstance(command, str) and command not in found:
                        found.append(command)  # identical handlers run once
        return found

    def fire(self, payload: dict[str, Any]) -> HookReply:
        event = str(payload["hook_event_name"])
        tool = payload.get("tool_name") if isinstance(payload.get("tool_name"), str) else None
        reply = HookReply(event)
        raw = json.dumps(payload)
        for command in self.commands(event, tool):
            try:
                # A configured handler is a shell string, run by a shell as Claude Code does.
                done = subprocess.run(
                    command,
                    shell=isinstance(command, str),
                    input=raw,
                    capture_output=True,
                    text=True,
                    env=self.env,
                    cwd=self.workspace,
                    timeout=120,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                self.log("hook_error", hook=event, error="timed out (fails open)")
                continue
            out: dict[str, Any] | None = None
            text = done.stdout.strip()
            if done.returncode == 0 and text.startswith("{"):
                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = None
                out = parsed if isinstance(parsed, dict) else None
            if out is not None:
                reply.outputs.append(out)
            if done.returncode == 2:
                reply.blocking_errors.append(done.stderr.strip() or "blocked by hook")
            self.log(
                "hook",
                hook=event,
                tool=tool,
                tool_use_id=payload.get("tool_use_id"),
                exit_code=done.returncode,
                answer=out,
                stderr=done.stderr.strip()[:500] or None,
            )
        return reply


class Heartbeat:
    """Renews the lease every few seconds in a thread; notices when it is denied."""

    def __init__(self, cli: CLI, node: str, generation: int, every: float, log: Log) -> None:
        self.cli = cli
        self.node = node
        self.generation = generation
        self.every = every
        self.log = log
        self.denied = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self.beats = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def _run(self) -> None:
        # A short lease so that a body that stops beating loses it soon.
        ttl = str(max(30, int(self.every * 30)))
        while not self._stop.is_set():
            code, _out, err = self.cli.run(
                "lease", "renew", self.node, "--generation", str(self.generation), "--ttl", ttl
            )
            self.beats += 1
            if code != 0:
                self.log("heartbeat", ok=False, exit_code=code, error=err.strip()[:300])
                if code == EXIT_DENIED:
                    self.denied.set()
                    return
            elif self.beats == 1:
                self.log("heartbeat", ok=True, generation=self.generation, ttl=int(ttl))
            self._stop.wait(self.every)


class CLI:
    """The onstation command line, run as its own process with the agent's ledger."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env = env
        self.cwd = cwd
        self.argv = onstation_argv()

    def command(self, *args: str) -> list[str]:
        return [*self.argv, *args]

    def run(self, *args: str) -> tuple[int, str, str]:
        done = subprocess.run(
            self.command(*args),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.cwd,
            timeout=120,
            check=False,
        )
        return done.returncode, done.stdout, done.stderr

    def generation(self, node: str) -> int:
        code, out, err = self.run("node", "show", node, "--json")
        if code != 0:
            raise AgentError(f"onstation node show {node} failed: {err.strip() or out.strip()}")
        try:
            return int(json.loads(out)["generation"])
        except (ValueError, KeyError, TypeError) as exc:
            raise AgentError(f"onstation node show {node}: unexpected output") from exc


# ------------------------------------------------------------------------------------------
# the agent


@dataclass
class Done:
    """One step this body committed."""

    step: int
    path: str
    commit: str
    pushed: bool = False


class FakeAgent:
    """One fake Claude Code session working for one node."""

    def __init__(self, options: Options) -> None:
        self.o = options
        self.log = Log(options.log)
        self.workspace = options.workspace.resolve()
        # Commits are the fake agent's own (-c user.name/email); the environment's identity
        # variables would override those, so they are dropped.
        self.env = {k: v for k, v in os.environ.items() if k not in GIT_IDENTITY_ENV}
        if options.db:
            self.env["ONSTATION_DB"] = options.db
        self.env.update(
            GIT_TERMINAL_PROMPT="0",
            CLAUDECODE="1",
            CLAUDE_PROJECT_DIR=str(self.workspace),
            CLAUDE_CODE_SESSION_ID=options.session_id,
        )
        self.cli = CLI(self.env, self.workspace)
        self.node = ""
        self.generation: int | None = None
        self.challenge: str | None = os.environ.get("ONSTATION_CHALLENGE") or None
        self.awaiting_running = self.challenge is not None
        self.heartbeat: Heartbeat | None = None
        self.done: list[Done] = []
        self.first_step = 1
        self.relief: str | None = None  # the text that asked for relief
        self.brief_path: str | None = None
        self.tokens = options.start_tokens
        self.transcript: Transcript | None = None
        self.hooks: Hooks | None = None
        self.branch: str | None = None
        self.toplevel: Path | None = None

    # -- plumbing -----------------------------------------------------------------------------

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["git", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.workspace,
            timeout=120,
            check=False,
        )
        if check and done.returncode != 0:
            raise AgentError(f"git {args[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
        return done

    def payload(self, event: str, **fields: Any) -> dict[str, Any]:
        assert self.transcript is not None
        return {
            "session_id": self.o.session_id,
            "transcript_path": str(self.transcript.path),
            "cwd": str(self.workspace),
            "permission_mode": "default",
            "hook_event_name": event,
            **fields,
        }

    def fire(self, event: str, **fields: Any) -> HookReply:
        assert self.hooks is not None
        reply = self.hooks.fire(self.payload(event, **fields))
        text = reply.context
        if text and self.relief is None and RELIEF_RE.search(text):
            self.relief = text
            self.log("relief_requested", hook=event, text=text[:1000])
        return reply

    # -- setup --------------------------------------------------------------------------------

    def _setup(self) -> None:
        if not self.workspace.is_dir():
            raise BadInput(f"--workspace: {self.workspace} is not a directory")
        top = self.git("rev-parse", "--show-toplevel", check=False)
        if top.returncode != 0:
            raise BadInput(f"--workspace: {self.workspace} is not a git repository")
        node = self.o.node or os.environ.get("ONSTATION_NODE")
        if not node:
            from onstation.harness.config import load_config

            node = load_config(self.workspace).node
        if not node:
            raise BadInput("--node: not given, no ONSTATION_NODE, no node in the workspace")
        from onstation.core.names import validate_name

        self.node = validate_name(node, "--node")
        validate_name(self.o.session_id, "--session-id")  # it names the transcript file
        launched = os.environ.get("ONSTATION_GENERATION")
        if launched:
            try:
                self.generation = int(launched)
            except ValueError as exc:
                raise BadInput(f"ONSTATION_GENERATION: not a number ({launched!r})") from exc
        head = self.git("symbolic-ref", "--short", "-q", "HEAD", check=False)
        self.branch = head.stdout.strip() or None
        # Work already committed (by an earlier body) is evidence: continue after it.
        listed = self.git("ls-tree", "--name-only", "HEAD", "work/", check=False)
        found = [int(m.group(1)) for m in re.finditer(r"step-(\d+)\.txt", listed.stdout)]
        self.first_step = max(found, default=0) + 1
        self._refuse_foreign_repository(Path(os.path.realpath(top.stdout.strip())))
        path = self.o.transcript or self._challenge_sink()
        path = path or self.workspace.parent / f"{self.o.session_id}.jsonl"
        self.transcript = Transcript(
            path.resolve(), self.o.session_id, self.workspace, WINDOWS[self.o.window], self.branch
        )
        self.hooks = Hooks(self.workspace, self.env, self.log)
        self.log(
            "start",
            session_id=self.o.session_id,
            node=self.node,
            pid=os.getpid(),
            workspace=str(self.workspace),
            transcript=str(path),
            steps=self.o.steps,
            first_step=self.first_step,
            hooks=self.hooks.source,
            generation=self.generation,
            challenge=self.challenge is not None,
        )

    def _refuse_foreign_repository(self, top: Path) -> None:
        """Refuse, before the first write, a repository a stand-in must not touch.

        Run on a user's repository, a fake agent would commit "fake work" to their branch and
        push it to their origin; only the creator of a scratch repository can say it is one.
        """
        self.toplevel = top
        if not (self.o.scratch_workspace or is_scratch_workspace(self.workspace, self.env)):
            raise AgentRefused(
                f"{top} is not a scratch workspace (no {SCRATCH_MARKER} marker in its git "
                "directory): a stand-in never commits or pushes in a repository it did not "
                f"create; pass {SCRATCH_FLAG} if this repository is a throwaway one"
            )
        if self._may_push():
            self._refuse_foreign_push()

    def _may_push(self) -> bool:
        return bool(self.o.push_every or self.o.crash_after_dispatch or self.o.wake_after_fence)

    def _refuse_foreign_push(self) -> None:
        """Pushes go only to a bare repository on this machine, whatever the flags say."""
        why = push_refusal(self.workspace, "origin", self.env)
        if why is not None:
            raise AgentRefused(
                f"{self.toplevel}: {why}; a stand-in pushes only to a bare repository on "
                f"this machine ({SCRATCH_FLAG} does not change that)"
            )

    def _log_outside_repository(self) -> bool:
        path = self.log.path
        if path is None or self.toplevel is None:
            return False
        return not Path(os.path.realpath(path)).is_relative_to(self.toplevel)

    def _challenge_sink(self) -> Path | None:
        """The transcript path a launched successor's challenge binds it to, if any."""
        try:
            sink = json.loads(self.challenge or "{}").get("transcript_sink")
        except (ValueError, AttributeError):
            return None  # a malformed challenge is the challenge answer's to refuse
        return Path(sink) if isinstance(sink, str) and os.path.isabs(sink) else None

    # -- the session --------------------------------------------------------------------------

    def run(self) -> int:
        try:
            self._setup()
            return self._session()
        except AgentDenied as exc:
            self.log("exit", code=EXIT_DENIED, reason=str(exc))
            sys.stderr.write(f"{PROG}: denied: {exc}\n")
            return EXIT_DENIED
        except AgentRefused as exc:
            if self._log_outside_repository():  # a refused repository gets no file
                self.log("exit", code=EXIT_BLOCKED, reason=f"blocked: {exc}")
            sys.stderr.write(f"{PROG}: blocked: {exc}\n")
            return EXIT_BLOCKED
        finally:
            if self.heartbeat is not None:
                self.heartbeat.stop()
            self.log.close()

    def _session(self) -> int:
        assert self.transcript is not None
        start = self.fire("SessionStart", source="startup", model=self.transcript.model)
        match = ADMITTED_RE.search(start.context)
        if match and match.group(1) == self.node:
            self.generation = int(match.group(2))
        self.log(
            "session_start",
            admitted=bool(match),
            generation=self.generation,
            context=start.context[:1000],
        )
        if self.challenge is not None:
            self._answer_challenge()
        self._start_heartbeat()
        prompt = self.o.prompt or (
            f"Do the fake work: steps {self.first_step} to {self.o.steps}, one committed file "
            f"per step under work/, pushing every {self.o.push_every} steps."
        )
        self.transcript.user_prompt(prompt)
        self.fire("UserPromptSubmit", prompt=prompt)
        self.transcript.assistant(
            self.tokens, [{"type": "text", "text": "Starting the fake work."}], "end_turn"
        )
        if self.first_step > self.o.steps:
            self.log("nothing_to_do", first_step=self.first_step, steps=self.o.steps)
        for step in range(self.first_step, self.o.steps + 1):
            self._step(step)
            if self.relief is not None:
                return self._hand_over(step)
            if self.o.wake_after_fence == step:
                return self._wake_after_fence(step)
        return self._stop("done", self.o.steps)

    def _answer_challenge(self) -> None:
        assert self.challenge is not None
        if self.generation is None:
            raise AgentError("ONSTATION_CHALLENGE without ONSTATION_GENERATION")
        code, out, err = self.cli.run(
            "challenge",
            "answer",
            self.node,
            "--generation",
            str(self.generation),
            "--echo",
            self.challenge,
        )
        self.log(
            "challenge_answer", exit_code=code, stdout=out.strip()[:500], stderr=err.strip()[:500]
        )
        if code in (EXIT_DENIED, EXIT_CONFLICT):  # stale generation, or the echo refused
            raise AgentDenied(f"challenge answer refused (exit {code}): {err.strip()}")
        if code != 0:
            raise AgentError(f"onstation challenge answer failed (exit {code}): {err.strip()}")

    def _start_heartbeat(self) -> None:
        every = self.o.heartbeat
        if every is None and os.environ.get("ONSTATION_GENERATION"):
            every = 1.0  # a launched successor beats by default
        if every is None:
            return
        if self.generation is None:
            self.log("heartbeat", ok=False, error="no generation known; not heartbeating")
            return
        self.heartbeat = Heartbeat(self.cli, self.node, self.generation, every, self.log)
        self.heartbeat.start()

    # -- tool calls ---------------------------------------------------------------------------

    def _usage_for(self, step: int, index: int, calls: int) -> int:
        """Context at the index-th of ``calls`` API calls of ``step``.

        A body starts at ``--start-tokens`` and each of its own steps adds K, so its last call
        of a step is at start + K * (steps this body has done, this one included).
        """
        before = self.o.start_tokens + (step - self.first_step) * self.o.tokens_per_step
        return before + (self.o.tokens_per_step * (index + 1)) // calls

    def tool(
        self,
        step: int,
        name: str,
        tool_input: dict[str, Any],
        tokens: int,
        text: str,
        action: Any,
        *,
        crash_after_dispatch: bool = False,
    ) -> dict[str, Any] | None:
        """One tool call as Claude Code makes it; returns the tool's response, None if denied."""
        assert self.transcript is not None
        tool_use_id = "toolu_" + uuid.uuid4().hex[:24]
        self.tokens = tokens
        self.transcript.assistant(
            tokens,
            [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input},
            ],
            "tool_use",
        )
        attempts = 0
        while True:
            pre = self.fire(
                "PreToolUse", tool_name=name, tool_input=tool_input, tool_use_id=tool_use_id
            )
            reason = pre.deny_reason
            if reason is None:
                break
            self.log("denied", step=step, tool=name, input=_short(tool_input), reason=reason)
            if FENCED_MARK in reason:
                raise AgentDenied(f"this body was relieved (fenced): {reason}")
            if not self.awaiting_running or any(m in reason for m in FINAL_DENIALS):
                self.transcript.tool_result(tool_use_id, reason, True, {"denied": reason})
                if crash_after_dispatch:  # told to die here: it does, dispatched or not
                    self.log("crash", step=step, kind="after-dispatch", denied=True)
                    _die_by_sigkill()
                return None
            attempts += 1  # a launched successor is not RUNNING yet: wait, bounded
            if attempts >= RUNNING_RETRIES:
                self.log(
                    "gave_up",
                    step=step,
                    tool=name,
                    attempts=attempts,
                    reason="not made RUNNING: every effect-capable call denied",
                )
                raise AgentDenied(f"not made RUNNING after {attempts} attempts: {reason}")
            time.sleep(RUNNING_RETRY_DELAY)
        if name == "Bash" and _is_push(tool_input):
            self.awaiting_running = False  # an effect was allowed: this body is RUNNING
        response, ok = action()
        self.log(
            "tool", step=step, tool=name, input=_short(tool_input), ok=ok, response=_short(response)
        )
        if crash_after_dispatch:
            self.log("crash", step=step, kind="after-dispatch", tool_use_id=tool_use_id)
            _die_by_sigkill()
        shown = str(response.get("stdout") or response.get("filePath") or "ok")
        self.transcript.tool_result(tool_use_id, shown, not ok, response)
        if ok:
            self.fire(
                "PostToolUse",
                tool_name=name,
                tool_input=tool_input,
                tool_response=response,
                tool_use_id=tool_use_id,
                duration_ms=5,
            )
        else:
            self.fire(
                "PostToolUseFailure",
                tool_name=name,
                tool_input=tool_input,
                tool_use_id=tool_use_id,
                error=shown[-500:],
            )
        return response if ok else None

    def _bash(self, *argvs: list[str]) -> Any:
        """An action running argv lists in order (``&&``), returning a Bash tool response."""

        def action() -> tuple[dict[str, Any], bool]:
            out, err, code = [], [], 0
            for argv in argvs:
                done = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    env=self.env,
                    cwd=self.workspace,
                    timeout=300,
                    check=False,
                )
                out.append(done.stdout)
                err.append(done.stderr)
                code = done.returncode
                if code != 0:
                    break
            response = {
                "stdout": "".join(out).strip(),
                "stderr": "".join(err).strip(),
                "interrupted": False,
                "isImage": False,
                "exitCode": code,
            }
            return response, code == 0

        return action

    # -- one step -----------------------------------------------------------------------------

    def _pushes_at(self, step: int) -> bool:
        if self.o.crash_after_dispatch == step:
            return True
        every = self.o.push_every
        return every > 0 and (step % every == 0 or step == self.o.steps)

    def _step(self, step: int) -> None:
        if self.o.crash_at == step:
            self.log("crash", step=step, kind="at-step-start")
            _die_by_sigkill()
        if self.o.hang_at == step:
            if self.heartbeat is not None:
                self.heartbeat.stop()  # a hung body beats no more either
            self.log("hang", step=step)
            while True:
                time.sleep(3600)
        if self.o.step_seconds:
            time.sleep(self.o.step_seconds)
        pushing = self._pushes_at(step)
        calls = 3 if pushing else 2
        relative = f"work/step-{step}.txt"
        target = self.workspace / relative
        content = f"fake work: step {step} of {self.o.steps}\nsession {self.o.session_id}\n"

        def write() -> tuple[dict[str, Any], bool]:
            target.parent.mkdir(parents=True, exist_ok=True)
            kind = "update" if target.exists() else "create"
            target.write_text(content, encoding="utf-8")
            return {"type": kind, "filePath": str(target), "success": True}, True

        wrote = self.tool(
            step,
            "Write",
            {"file_path": str(target), "content": content},
            self._usage_for(step, 0, calls),
            f"Writing {relative}.",
            write,
        )
        if wrote is None:
            self.log("step", step=step, tokens=self.tokens, committed=False)
            return
        message = f"fake work: step {step} of {self.o.steps}"
        add = ["git", "add", "--", relative]
        commit = ["git", *GIT_IDENTITY, "commit", "-q", "-m", message]
        committed = self.tool(
            step,
            "Bash",
            {
                "command": f"{shlex.join(add)} && {shlex.join(commit)}",
                "description": f"Commit step {step}",
            },
            self._usage_for(step, 1, calls),
            f"Committing {relative}.",
            self._bash(add, commit),
        )
        if committed is not None:
            head = self.git("rev-parse", "HEAD").stdout.strip()
            self.done.append(Done(step, relative, head))
        if pushing:
            self._push(step, self._usage_for(step, 2, calls))
        self.log(
            "step",
            step=step,
            tokens=self.tokens,
            committed=committed is not None,
            percent=round(self.tokens * 100 / self.o.window, 2),
        )

    def _push(self, step: int, tokens: int) -> None:
        if self.branch is None:
            self.log("push_skipped", step=step, reason="detached HEAD: no branch to push")
            return
        argv = ["git", "push", "origin", self.branch]
        self._refuse_foreign_push()  # the remote may have changed since start-up
        pushed = self.tool(
            step,
            "Bash",
            {"command": shlex.join(argv), "description": "Push to origin"},
            tokens,
            f"Pushing {self.branch} to origin.",
            self._bash(argv),
            crash_after_dispatch=self.o.crash_after_dispatch == step,
        )
        if pushed is not None:
            for item in self.done:
                item.pushed = True

    # -- endings ------------------------------------------------------------------------------

    def _stop(self, why: str, step: int) -> int:
        assert self.transcript is not None
        for active in (False, True):
            reply = self.fire(
                "Stop", stop_hook_active=active, last_assistant_message=self.transcript.last_text
            )
            reason = reply.block_reason
            if reason is None:
                break
            self.log("stop_blocked", reason=reason)
            if self.brief_path is None and "brief" in reason:
                self._write_brief(step, reason)  # what a real session does when told to
        # The host ends the session as Claude Code does when a print-mode run finishes.
        self.fire("SessionEnd", reason="other")
        self.log(
            "exit",
            code=EXIT_OK,
            reason=why,
            step=step,
            tokens=self.tokens,
            commits=len(self.done),
            brief=self.brief_path,
        )
        return EXIT_OK

    def _hand_over(self, step: int) -> int:
        assert self.relief is not None
        if self.o.coordinator:
            self._respawn_self(step)
        else:
            self._write_brief(step, self.relief)
        return self._stop("relieved", step)

    def _cli_tool(self, step: int, args: list[str], description: str) -> dict[str, Any]:
        """Run an onstation command as a Bash tool call through the hooks; its JSON output."""
        assert self.transcript is not None
        argv = self.cli.command(*args)
        result: dict[str, Any] = {}

        def action() -> tuple[dict[str, Any], bool]:
            done = subprocess.run(
                argv, capture_output=True, text=True, env=self.env, cwd=self.workspace,
                timeout=120, check=False,
            )  # fmt: skip
            result["code"], result["stdout"] = done.returncode, done.stdout
            return {"stdout": done.stdout.strip()[:2000], "stderr": done.stderr.strip(),
                    "interrupted": False, "isImage": False,
                    "exitCode": done.returncode}, done.returncode == 0  # fmt: skip

        tokens = self.transcript.last_tokens or self.tokens
        response = self.tool(step, "Bash", {"command": shlex.join(argv),
                                            "description": description}, tokens,
                             f"{description}.", action)  # fmt: skip
        if response is None:
            raise AgentError(f"{description} failed: {result.get('stdout', '').strip()[:200]}")
        try:
            data = json.loads(result["stdout"])
        except (ValueError, KeyError) as exc:
            raise AgentError(f"{description}: unexpected output") from exc
        return data if isinstance(data, dict) else {}

    def _generation_args(self) -> list[str]:
        """A body's writes carry its generation (told by the hooks, or by its launcher)."""
        return [] if self.generation is None else ["--generation", str(self.generation)]

    def _respawn_self(self, step: int) -> None:
        """The coordinator procedure: manifest, tell the spawner, stop (the lead respawns)."""
        l3, _, pun = str(self.o.coordinator).partition(":")
        total = self.o.steps
        args = ["manifest", "write", self.node, "--l3", l3, "--pun", pun or "coord",
                "--l3-task", f"coordinate {total} steps of fake work",
                "--scratch", f"{len(self.done)} of {total} steps committed"]  # fmt: skip
        for item in self.done:
            args += ["--completed", f"step {item.step}: committed {item.commit[:12]}"]
        for n in range(step + 1, total + 1):
            args += ["--not-started", f"step {n}: write work/step-{n}.txt and commit it"]
        args += ["--next", f"continue from step {step + 1}", "--json"]
        args += self._generation_args()
        # manifest write also tells the spawner (COORD_RESPAWN TRIGGERED, the procedure's
        # message), as a real coordinator's call does.
        manifest = self._cli_tool(step, args, "Write the continuation manifest")
        path = str(manifest.get("path"))
        node = self._cli_tool(step, ["node", "show", self.node, "--json"], "Find my spawner")
        spawner = node.get("spawner") or "team-lead"
        self.brief_path = path
        self.log("respawn_triggered", step=step, manifest=path, spawner=spawner)

    def _write_brief(self, step: int, why: str) -> None:
        assert self.transcript is not None
        total = self.o.steps
        tier = re.search(r"Hull integrity (Red|Critical)", why)
        trigger = f"hull integrity {tier.group(1)}" if tier else "a relief request"
        args = [
            "brief",
            "write",
            self.node,
            "--task",
            f"fake work: step {step} of {total}",
            "--status",
            "in_progress",
        ]
        for item in self.done:
            state = "pushed to origin" if item.pushed else "not yet pushed"
            args += [
                "--completed",
                f"{item.path} — step {item.step} of {total}, committed {item.commit[:12]}, {state}",
            ]
        remaining = list(range(step + 1, total + 1))
        for n in remaining[:10]:
            args += ["--remaining", f"step {n} of {total}: write work/step-{n}.txt and commit it"]
        if len(remaining) > 10:
            args += ["--remaining", f"steps {remaining[10]} to {total}: the same, one each"]
        if any(not item.pushed for item in self.done) and self.o.push_every:
            args += ["--remaining", "push the unpushed commits to origin"]
        args += [
            "--decision",
            f"stop after step {step}: {trigger}; a fresh body continues from "
            f"step {step + 1} with a clean context",
            "--decision",
            f"push every {self.o.push_every} steps: each push is one journaled "
            "effect, so a batch is never pushed twice",
            "--context",
            "completed steps are the work/step-N.txt files at HEAD; continue after the highest",
            "--handoff",
            f"onstation fake-agent --workspace {self.workspace} --node {self.node} --steps {total}",
            "--json",
            *self._generation_args(),
        ]
        written = self._cli_tool(step, args, "Write turnover brief")
        if not isinstance(written.get("path"), str):
            raise AgentError("onstation brief write: unexpected output")
        self.brief_path = str(written["path"])
        self.log("brief", step=step, path=self.brief_path, trigger=trigger)

    def _wake_after_fence(self, step: int) -> int:
        """Sleep until this generation is fenced; then every attempt to act must be denied."""
        if self.generation is None:
            raise AgentError("wake mode: this session was never admitted (no generation)")
        mine = self.generation
        self.log("sleeping_until_fenced", step=step, generation=mine)
        deadline = time.monotonic() + self.o.fence_wait
        while True:
            current = self.cli.generation(self.node)
            if current != mine:
                break
            if time.monotonic() > deadline:
                raise AgentError(f"wake mode: not fenced within {self.o.fence_wait:g} s")
            time.sleep(FENCE_POLL)
        self.log("woke", generation=mine, current_generation=current)
        if self.heartbeat is not None:
            self.heartbeat.stop()
        allowed = []
        nxt = step + 1
        relative = f"work/step-{nxt}.txt"
        target = self.workspace / relative
        add = ["git", "add", "--", relative]
        commit = ["git", *GIT_IDENTITY, "commit", "-q", "-m", f"fake work: step {nxt} (woken)"]
        push = ["git", "push", "origin", self.branch or "HEAD"]
        send = self.cli.command(
            "message",
            "send",
            "--from",
            self.node,
            "--to",
            "team-lead",
            "--kind",
            "status",
            "--body",
            f"{self.node} generation {mine} woke up and continues",
        )
        attempts: list[tuple[str, str, dict[str, Any], list[list[str]]]] = [
            ("git commit", "Write", {"file_path": str(target), "content": "woken\n"}, []),
            (
                "git commit",
                "Bash",
                {"command": f"{shlex.join(add)} && {shlex.join(commit)}", "description": "commit"},
                [add, commit],
            ),
            ("git push", "Bash", {"command": shlex.join(push), "description": "push"}, [push]),
            (
                "message send",
                "Bash",
                {"command": shlex.join(send), "description": "message"},
                [send],
            ),
        ]
        assert self.transcript is not None
        for action, name, tool_input, argvs in attempts:
            tool_use_id = "toolu_" + uuid.uuid4().hex[:24]
            self.transcript.assistant(
                self.tokens,
                [
                    {"type": "text", "text": f"Woke up; trying {action}."},
                    {"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input},
                ],
                "tool_use",
            )
            pre = self.fire(
                "PreToolUse", tool_name=name, tool_input=tool_input, tool_use_id=tool_use_id
            )
            reason = pre.deny_reason
            if reason is None:
                # The hooks let a fenced body act: do what a real session would, and say so.
                allowed.append(f"{name} ({action})")
                if name == "Write":
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text("woken\n", encoding="utf-8")
                else:
                    if push in argvs:
                        self._refuse_foreign_push()
                    self._bash(*argvs)()
                self.log("wake_attempt", action=action, tool=name, denied=False)
            else:
                self.log(
                    "wake_attempt", action=action, tool=name, denied=True, by="hook", reason=reason
                )
                self.transcript.tool_result(tool_use_id, reason, True, {"denied": reason})
            # The body also asks the ledger itself, as a script would: the refusal is recorded.
            code, _out, err = self.cli.run(
                "guard", self.node, "--generation", str(mine), "--action", action
            )
            self.log(
                "wake_attempt",
                action=action,
                denied=code == EXIT_DENIED,
                by="ledger",
                exit_code=code,
                reason=err.strip()[:500],
            )
            if code != EXIT_DENIED:
                allowed.append(f"guard ({action}, exit {code})")
        if allowed:
            raise AgentError(f"a fenced body was allowed to act: {', '.join(allowed)}")
        self.log("exit", code=EXIT_DENIED, reason="fenced: every attempt denied")
        return EXIT_DENIED


def _is_push(tool_input: dict[str, Any]) -> bool:
    return bool(re.search(r"\bgit\s+push\b", str(tool_input.get("command", ""))))


def _short(value: Any) -> Any:
    """A log-sized copy: long strings cut (file contents, outputs)."""
    if isinstance(value, dict):
        return {k: _short(v) for k, v in value.items()}
    if isinstance(value, str) and len(value) > 300:
        return value[:300] + "…"
    return value


def main(argv: list[str]) -> int:
    """Run the fake agent; returns the exit code."""
    try:
        options = parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or bad input (2)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
        return FakeAgent(options).run()
    except AgentDenied as exc:
        sys.stderr.write(f"{PROG}: denied: {exc}\n")
        return EXIT_DENIED
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        kind = "bad input" if isinstance(exc, BadInput) else "error"
        sys.stderr.write(f"{PROG}: {kind}: {str(message).replace(chr(10), ' ')}\n")
        return EXIT_BAD_INPUT if kind == "bad input" else EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
