"""The MCP family: MCP tool calls whose name says they create, send, post, delete or merge.

The verbs in force and the tools always (or never) counted come from the
:class:`~onstation.harness.effects.patterns.EffectPatterns`.
"""

from __future__ import annotations

import re
from _collections_abc import Mapping  # as collections.abc, without collections (hot path)
from typing import Any

from onstation.harness.effects.context import EffectCall, _destination, _operation, _wordset
from onstation.harness.effects.patterns import EffectPatterns

_READ_VERBS = _wordset(
    """get list search read fetch find query view describe show count lookup check retrieve
    download export browse inspect"""
)
# Words that are also nouns ("get_post", "list_merge_requests"): a read verb in front wins.
_NOUN_VERBS = frozenset({"post", "merge"})
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _tool_words(name: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(name)]


def _classify_mcp(
    tool_name: str, tool_input: Mapping[str, Any], patterns: EffectPatterns
) -> EffectCall | None:
    from fnmatch import fnmatchcase

    if any(fnmatchcase(tool_name, glob) for glob in patterns.mcp_ignore):
        return None
    server, sep, tool = tool_name[len("mcp__") :].partition("__")
    if not sep or not server or not tool:
        server, tool = server or "?", tool or tool_name
    forced = any(fnmatchcase(tool_name, glob) for glob in patterns.mcp_tools)
    words = _tool_words(tool)
    matched = [w for w in words if w in patterns.mcp_verbs]
    if not forced:
        if not matched:
            return None
        if words[0] in _READ_VERBS and all(w in _NOUN_VERBS for w in matched):
            return None
    return EffectCall(
        operation=_operation(f"mcp.{server}.{tool}"),
        destination=_destination(f"mcp:{server}"),
        arguments=dict(tool_input),
        summary=f"MCP {server}.{tool}"[:300],
        evidence={"tool": tool_name, "matched": matched, "forced_by_config": forced},
    )
