"""Effect-capable tool calls: which harness tool calls change the world, and as what.

A Claude Code (or Codex CLI) tool call is an *effect* when running it changes something
outside the workspace that cannot simply be done again: a push, a pull request, a release, a
published package, a mutating HTTP request, an MCP call that creates, sends, posts, deletes
or merges. :func:`classify_tool_call` recognizes such calls and returns their **logical
identity** (operation, destination, arguments), which the ledger fingerprints: the same
logical effect must always give the same triple and a different one never.

The identity is what the call changes, not the command's text. A push is (remote URL,
destination ref, object pushed), resolved with local, read-only git commands (``rev-parse``,
``symbolic-ref``, ``config``, ``remote get-url``, ``for-each-ref``) in the directory the
command would run in, so ``git push`` and ``git push origin main`` of the same commit are
one effect and a push of a later commit is another. What cannot be resolved is recorded as
``None`` with the reason in ``evidence``; it is never guessed.

This package runs inside a hook on every tool call: it imports only the standard library at
module level, and runs no subprocess unless a command already looks like an effect. Its
modules, by concern:

- :mod:`.patterns` which calls count as effects (built-ins, configured commands, MCP verbs);
- :mod:`.context` the result type and the context every family shares;
- :mod:`.shell` shell lexing and the split into simple commands;
- :mod:`.classify` the entry points, and the dispatch of each command to its family;
- the families, each imported the first time a call needs it: :mod:`.git` (push),
  :mod:`.github` (``gh``), :mod:`.publish` (``npm publish``), :mod:`.http` (curl, httpie,
  wget) and :mod:`.mcp` (MCP tool calls).
"""

from __future__ import annotations

# The one clock every deadline is read on (``context._monotonic`` reads it here, so
# replacing ``onstation.harness.effects.time`` moves every deadline check at once).
import time as time

from onstation.harness.effects.classify import classify_all, classify_bounded, classify_tool_call
from onstation.harness.effects.context import OVER_TIME, TOO_MANY, EffectCall
from onstation.harness.effects.patterns import (
    BUILTINS,
    DEFAULT_MCP_VERBS,
    DEFAULT_NPM_REGISTRY,
    DEFAULT_PATTERNS,
    CommandPattern,
    EffectPatterns,
    patterns_from_mapping,
)

__all__ = [
    "BUILTINS",
    "DEFAULT_MCP_VERBS",
    "DEFAULT_NPM_REGISTRY",
    "DEFAULT_PATTERNS",
    "OVER_TIME",
    "TOO_MANY",
    "CommandPattern",
    "EffectCall",
    "EffectPatterns",
    "classify_all",
    "classify_bounded",
    "classify_tool_call",
    "patterns_from_mapping",
]
