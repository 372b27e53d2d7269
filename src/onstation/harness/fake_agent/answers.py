"""What a hook said, read the way Claude Code reads it: from exit codes and JSON fields.

The rules, from Claude Code's hooks reference ("What a hook may return", v2.1.240):

- exit 2 is a blocking error whose reason is stderr: PreToolUse does not run the tool, Stop
  keeps working; its stdout is not read;
- exit 0 with stdout starting with ``{`` is the JSON answer; any other exit code decides
  nothing (the hook fails open), and neither does stdout that is not a JSON object;
- ``continue: false`` stops the session after the hook, with ``stopReason``; it takes
  precedence over every decision (onstation sends it on every answer to a fenced body; the
  fake agent stops on it, see ``FakeAgent.answered``). Codex differs on PreToolUse only: it
  rejects ``continue``/``stopReason`` there (docs/hosts.md), so onstation never sends them
  to a Codex PreToolUse;
- PreToolUse: ``hookSpecificOutput.permissionDecision`` (``allow``, ``deny``, ``ask``,
  ``defer``) with ``permissionDecisionReason``; the deprecated top-level ``decision: "block"``
  still denies;
- ``decision: "block"`` with ``reason`` blocks (for Stop: the session must go on working);
- ``hookSpecificOutput.additionalContext`` is text for the model (SessionStart,
  UserPromptSubmit, PostToolUse).

Every decision here follows those fields. The texts (reasons, context) are carried along to
be shown to the model and logged; no decision depends on their wording.
Nothing here does I/O, so the rules can be tested on their own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: ``permissionDecision`` values, strongest first: the host applies deny > defer > ask > allow.
PERMISSION_DECISIONS = ("deny", "defer", "ask", "allow")


@dataclass(frozen=True)
class HandlerAnswer:
    """One handler's answer: its exit code, its JSON object (exit 0 only) and its stderr."""

    exit_code: int
    output: dict[str, Any] | None = None
    stderr: str = ""

    @classmethod
    def read(cls, exit_code: int, stdout: str, stderr: str) -> HandlerAnswer:
        """Read a finished handler as the host does: JSON on stdout only with exit 0."""
        output: dict[str, Any] | None = None
        text = stdout.strip()
        if exit_code == 0 and text.startswith("{"):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            output = parsed if isinstance(parsed, dict) else None
        return cls(exit_code, output, stderr.strip())

    @property
    def blocking(self) -> bool:
        """Exit 2: a blocking error, whose reason is stderr."""
        return self.exit_code == 2

    @property
    def specific(self) -> dict[str, Any]:
        """``hookSpecificOutput``, or an empty mapping."""
        value = (self.output or {}).get("hookSpecificOutput")
        return value if isinstance(value, dict) else {}

    @property
    def permission_decision(self) -> str | None:
        """``hookSpecificOutput.permissionDecision`` when it is one the host knows."""
        value = self.specific.get("permissionDecision")
        return value if value in PERMISSION_DECISIONS else None


@dataclass
class HookReply:
    """The merged answer of every handler configured for one event."""

    event: str
    answers: list[HandlerAnswer] = field(default_factory=list)

    @property
    def outputs(self) -> list[dict[str, Any]]:
        """The JSON answers, in handler order."""
        return [a.output for a in self.answers if a.output is not None]

    @property
    def blocking_errors(self) -> list[str]:
        """The reasons of the handlers that exited 2, in handler order."""
        return [a.stderr or "blocked by hook" for a in self.answers if a.blocking]

    @property
    def deny_reason(self) -> str | None:
        """Why a PreToolUse call is not run (``permissionDecision: "deny"``, the deprecated
        ``decision: "block"``, or exit 2); None when it may run."""
        for answer in self.answers:
            out = answer.output
            if out is None:
                continue
            if answer.permission_decision == "deny":
                return str(answer.specific.get("permissionDecisionReason") or "denied")
            if out.get("decision") == "block" and self.event == "PreToolUse":
                return str(out.get("reason") or "blocked")
        if self.blocking_errors and self.event == "PreToolUse":
            return self.blocking_errors[0]
        return None

    @property
    def permission(self) -> str | None:
        """The strongest permission decision of the answers (deny > defer > ask > allow);
        None when no handler decided. Only a deny keeps the call from running here."""
        if self.deny_reason is not None:
            return "deny"
        given = {a.permission_decision for a in self.answers}
        return next((d for d in PERMISSION_DECISIONS if d in given), None)

    @property
    def block_reason(self) -> str | None:
        """Why the event is blocked (``decision: "block"`` or exit 2); None when it is not."""
        for out in self.outputs:
            if out.get("decision") == "block":
                return str(out.get("reason") or "blocked")
        return self.blocking_errors[0] if self.blocking_errors else None

    @property
    def stop_reason(self) -> str | None:
        """Why the host stops the session after this hook (``continue: false``); else None."""
        for out in self.outputs:
            if out.get("continue") is False:
                return str(out.get("stopReason") or "stopped by hook")
        return None

    @property
    def context(self) -> str:
        """The ``additionalContext`` texts for the model, joined."""
        parts = []
        for answer in self.answers:
            text = answer.specific.get("additionalContext")
            if text:
                parts.append(str(text))
        return "\n\n".join(parts)
