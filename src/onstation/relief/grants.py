"""Grants that follow the generation: issued from the plan's translation, enforced by hooks.

A relief translates the predecessor's capabilities to the successor's host (never wider) and
issues the new generation fresh grants for what the translation kept: ``tool:<name>`` for
each destination tool, ``mcp:<server>`` for each MCP server. The hooks then refuse a tool call
of that generation outside its grants, naming the reason. A body that was never issued
grants (the user's own first session) is not restricted by them: its host's permission
rules are the only ones. A fence revokes a generation's grants in its own transaction.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # the hook fast path imports this module: typing costs import time
if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any

    from onstation.ledger import Ledger

#: A destination that names a tool or server (not "shell (cat, sed -n)", an emulation note).
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
#: The kinds of capability a hook can enforce by the tool name it is asked about.
_ENFORCED = ("tool", "mcp")


def successor_grants(plan: dict[str, Any]) -> list[str]:
    """The capabilities the plan's translation gives the new generation, sorted."""
    translations = (plan.get("capabilities") or {}).get("translations") or []
    found: set[str] = set()
    for item in translations:
        destination = item.get("destination")
        kind = item.get("kind")
        if kind in _ENFORCED and isinstance(destination, str) and _NAME.match(destination):
            found.add(f"{kind}:{destination}")
    return sorted(found)


def issue_successor_grants(
    ledger: Ledger, node: str, generation: int, plan: dict[str, Any]
) -> list[str]:
    """Issue ``generation`` the grants its plan translated (each once); return them."""
    issued = successor_grants(plan)
    # One write for all of them: one generation guard, the rows and their events (issue 14:
    # it was a guard, a row and an event each). What this generation holds already (a
    # retried launch) is passed over by the grants' own key, not issued again.
    ledger.issue_grants(node, generation=generation, capabilities=issued, skip_granted=True)
    return issued


#: Hook tool names that are another name of a translated tool: Codex's hooks name its shell
#: tool ``Bash`` (docs/hosts.md), which the translation tables call ``shell``.
HOOK_ALIASES: dict[str, tuple[str, ...]] = {"Bash": ("shell", "exec_command", "local_shell")}


def tool_granted(held: Collection[str], tool: str | None) -> bool:
    """Whether a generation holding ``held`` may call ``tool``: it holds no grants at all (it
    is not restricted), or a grant names the tool (or its alias) or its MCP server."""
    if not held:
        return True
    if tool is None:
        return False
    names = (tool, *HOOK_ALIASES.get(tool, ()))
    if any(f"tool:{name}" in held for name in names):
        return True
    server = mcp_server(tool)
    return server is not None and f"mcp:{server}" in held


def grant_refusal(ledger: Ledger, node: str, generation: int, tool: str | None) -> str | None:
    """Why ``tool`` is outside ``generation``'s grants, or None when it may run (granted,
    or the generation holds no grants at all)."""
    held = ledger.live_grants(node, generation)
    if tool is None or tool_granted(held, tool):
        return None
    server = mcp_server(tool)
    what = f"MCP server {server}" if server is not None else f"tool {tool}"
    granted = ", ".join(sorted(held))
    return (
        f"{what} is outside the grants of {node} generation {generation} (what the relief "
        f"translated from its predecessor: {granted[:600]})"
    )


def mcp_server(tool: str) -> str | None:
    """The server of an MCP tool name as Claude Code spells it (``mcp__server__tool``)."""
    if not tool.startswith("mcp__"):
        return None
    server = tool[len("mcp__") :].split("__", 1)[0]
    return server or None


__all__ = [
    "HOOK_ALIASES",
    "grant_refusal",
    "issue_successor_grants",
    "mcp_server",
    "successor_grants",
    "tool_granted",
]
