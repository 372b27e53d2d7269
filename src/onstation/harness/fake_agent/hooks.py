"""The hook driver: builds each event's payload, runs the configured hook commands with it on
stdin as Claude Code does, and reads their answers (see :mod:`.answers`).

The commands are those of the workspace's ``.claude/settings.json`` and
``.claude/settings.local.json``, merged (Claude Code's matcher
rules, identical commands run once, a shell string run by a shell); with no hooks configured,
``onstation hook claude-code EVENT`` itself. A string with no shell syntax at all (an absolute
program path and plain words, as ``onstation install`` writes) is run as its words directly:
a shell would run exactly that, and a hook per tool call is then one process, not two.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from onstation.harness.adapters import FAKE
from onstation.harness.fake_agent.answers import HandlerAnswer, HookReply
from onstation.harness.fake_agent.common import AgentError, Log, onstation_argv

#: A command made only of these characters has no shell syntax: no quoting, expansion,
#: redirection, globbing, comment, assignment-before-command or list operator.
_PLAIN_WORDS = re.compile(r"[A-Za-z0-9_/.,:+@%=-]+(?: [A-Za-z0-9_/.,:+@%=-]+)*")


def plain_argv(command: str) -> list[str] | None:
    """The words a shell would run for ``command`` when it has no shell syntax and names an
    executable file by its absolute path (no PATH search, builtin or "not found" to mimic);
    else None."""
    if not _PLAIN_WORDS.fullmatch(command):
        return None
    words = command.split(" ")
    program = words[0]
    if not program.startswith("/") or "=" in program:
        return None
    if not (os.path.isfile(program) and os.access(program, os.X_OK)):
        return None  # the shell's own error (126/127) is what the host would see
    return words


def matches(matcher: Any, value: str | None) -> bool:
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

    def __init__(
        self, workspace: Path, env: dict[str, str], log: Log, session_id: str, transcript: Path
    ) -> None:
        self.workspace = workspace
        self.env = env
        self.log = log
        self.session_id = session_id
        self.transcript = transcript
        self.settings: dict[str, Any] | None = None
        # Claude Code merges the hooks of every settings file (harness-formats.md §1.1): the
        # shared project settings and the local ones `onstation install --project` writes.
        for path in (workspace / ".claude" / "settings.json",
                     workspace / ".claude" / "settings.local.json"):  # fmt: skip
            if not path.is_file():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise AgentError(f"{path}: not readable JSON ({exc})") from exc
            hooks = data.get("hooks") if isinstance(data, dict) else None
            if isinstance(hooks, dict):
                merged: dict[str, Any] = self.settings if self.settings is not None else {}
                for event, groups in hooks.items():
                    if isinstance(groups, list):
                        merged[event] = [*merged.get(event, []), *groups]
                self.settings = merged

    @property
    def source(self) -> str:
        return "settings" if self.settings else "direct"

    def payload(self, event: str, **fields: Any) -> dict[str, Any]:
        """The JSON Claude Code sends a hook for ``event``: the common fields, then the event's."""
        return {
            "session_id": self.session_id,
            "transcript_path": str(self.transcript),
            "cwd": str(self.workspace),
            "permission_mode": "default",
            "hook_event_name": event,
            **fields,
        }

    def commands(self, event: str, tool: str | None) -> list[list[str] | str]:
        """Shell strings from settings.json; without any, the CLI itself as an argv list."""
        if self.settings is None:
            return [[*onstation_argv(), "hook", FAKE.session_harness, event]]
        found: list[list[str] | str] = []
        for group in self.settings.get(event) or []:
            if not isinstance(group, dict) or not matches(group.get("matcher"), tool):
                continue
            for handler in group.get("hooks") or []:
                if isinstance(handler, dict) and handler.get("type") == "command":
                    command = handler.get("command")
                    if isinstance(command, str) and command not in found:
                        found.append(command)  # identical handlers run once
        return found

    def fire(self, event: str, **fields: Any) -> HookReply:
        """Run every handler of ``event`` with its payload; their merged answer."""
        return self.run(self.payload(event, **fields))

    def run(self, payload: dict[str, Any]) -> HookReply:
        """Run every handler configured for ``payload``'s event; their merged answer."""
        event = str(payload["hook_event_name"])
        tool = payload.get("tool_name") if isinstance(payload.get("tool_name"), str) else None
        reply = HookReply(event)
        raw = json.dumps(payload)
        for command in self.commands(event, tool):
            # A configured handler is a shell string, run by a shell as Claude Code does,
            # unless it has no shell syntax: then the shell would only exec its words.
            direct = plain_argv(command) if isinstance(command, str) else command
            try:
                done = subprocess.run(
                    command if direct is None else direct,
                    shell=direct is None,
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
            answer = HandlerAnswer.read(done.returncode, done.stdout, done.stderr)
            reply.answers.append(answer)
            self.log(
                "hook",
                hook=event,
                tool=tool,
                tool_use_id=payload.get("tool_use_id"),
                exit_code=done.returncode,
                answer=answer.output,
                stderr=answer.stderr[:500] or None,
            )
        return reply
