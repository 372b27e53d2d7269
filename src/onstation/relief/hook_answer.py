"""The answer a hook call gets, built as data (the CLI prints it), and its common shapes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class HookAnswer:
    """What to print and how to exit: ``output`` becomes the JSON on stdout."""

    output: dict[str, Any] | None = None
    exit_code: int = 0
    notes: list[str] = field(default_factory=list)


def _context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _deny(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


__all__ = ["HookAnswer"]
