"""The entry points of effect classification and the dispatch to each effect family.

A tool call is classified as an MCP call (:mod:`.mcp`) or as a shell command: the command is
lexed and split (:mod:`.shell`), and each simple command goes to the family of its program
(:mod:`.git`, :mod:`.github`, :mod:`.publish`, :mod:`.http`) and to the configured command
patterns. A family module is imported the first time a call needs it.
"""

from __future__ import annotations

import os
from _collections_abc import Mapping  # as collections.abc, without collections (hot path)

from onstation.core.lazyre import IGNORECASE, LazyPattern
from onstation.harness.effects.context import (
    _MAX_DEPTH,
    EffectCall,
    _Ctx,
    _Seg,
    _spent,
    _Word,
)
from onstation.harness.effects.patterns import DEFAULT_PATTERNS, EffectPatterns
from onstation.harness.effects.shell import (
    _SHELLS,
    _fallback_tokens,
    _lex,
    _LexError,
    _segments,
    _shell_c_argument,
    _Simple,
    _strip_wrappers,
)

TYPE_CHECKING = False  # typing costs a Bash PreToolUse hook its import time
if TYPE_CHECKING:
    from typing import Any

_SHELL_TOOLS = frozenset(
    {"bash", "shell", "exec_command", "local_shell", "container.exec", "shell_command"}
)

#: Words one of the built-in families needs; a command with none of them is not lexed.
_PREFILTER_WORDS = ("git", "gh", "npm", "pnpm", "yarn", "curl", "http", "xh", "wget")
_PREFILTER = LazyPattern("|".join(_PREFILTER_WORDS), IGNORECASE)


def _may_name_builtin(command: str) -> bool:
    """Whether ``command`` holds one of :data:`_PREFILTER_WORDS`, case-insensitively: what
    ``_PREFILTER.search`` answers. An ASCII command is checked without ``re`` (most hook
    calls: ``re`` costs the process milliseconds to import): between ASCII characters the
    pattern's case folding is ASCII's. Any other command goes to the pattern, whose Unicode
    folding matches more (a dotless i for an i, say); a property test holds the two equal."""
    if command.isascii():
        lowered = command.lower()
        return any(word in lowered for word in _PREFILTER_WORDS)
    return _PREFILTER.search(command) is not None


def classify_all(
    tool_name: str,
    tool_input: Mapping[str, Any],
    cwd: str,
    patterns: EffectPatterns = DEFAULT_PATTERNS,
) -> list[EffectCall]:
    """Every effect a tool call holds, in command order (empty when it holds none).

    Never raises: input of any shape yields a (possibly empty) list.
    """
    return classify_bounded(tool_name, tool_input, cwd, patterns)[0]


def classify_bounded(
    tool_name: str,
    tool_input: Mapping[str, Any],
    cwd: str,
    patterns: EffectPatterns = DEFAULT_PATTERNS,
    *,
    max_effects: int | None = None,
    deadline: float | None = None,
) -> tuple[list[EffectCall], str | None]:
    """:func:`classify_all` within bounds: ``(effects, stopped)``.

    ``stopped`` is None when the whole call was read; :data:`TOO_MANY` once more than
    ``max_effects`` effects were found (reading stops there, so a command of thousands of
    pushes costs the resolution of a few); :data:`OVER_TIME` once ``time.monotonic()``
    passed ``deadline`` (no git command is started after it). The effects found before the
    stop are returned. Never raises.
    """
    ctx: _Ctx | None = None
    try:
        if not isinstance(tool_name, str) or not isinstance(tool_input, Mapping):
            return [], None
        if tool_name.startswith("mcp__"):
            from onstation.harness.effects.mcp import _classify_mcp

            found = _classify_mcp(tool_name, tool_input, patterns)
            return ([found] if found else []), None
        if tool_name.lower() not in _SHELL_TOOLS:
            return [], None
        base = _start_dir(cwd, tool_input)
        command = tool_input.get("command")
        ctx = _Ctx(tool=tool_name, patterns=patterns, limit=max_effects, deadline=deadline)
        effects: list[EffectCall] = []
        if isinstance(command, str):
            if not patterns.commands and not _may_name_builtin(command):
                return [], None
            effects = _classify_script(command, base, ctx, depth=0)
        elif isinstance(command, list) and command and all(isinstance(w, str) for w in command):
            # Codex passes argv directly (often ["bash", "-lc", "..."]): no shell parsing.
            words = [_Word(w, expands=False) for w in command]
            ctx.parse = "argv"
            effects = _classify_simple(_Simple(words, stdin=False, cwd=base), ctx, depth=0)
        _spent(ctx)
        return effects, ctx.stopped
    except Exception as exc:  # a hook must never break the agent; classification fails open
        return _internal_error(tool_name, exc), None if ctx is None else ctx.stopped


def classify_tool_call(
    tool_name: str,
    tool_input: Mapping[str, Any],
    cwd: str,
    patterns: EffectPatterns = DEFAULT_PATTERNS,
) -> EffectCall | None:
    """The first effect of a tool call, or None; with several, ``evidence["all"]`` lists all."""
    found = classify_all(tool_name, tool_input, cwd, patterns)
    if not found:
        return None
    first = found[0]
    if len(found) == 1:
        return first
    listing = [
        {
            "operation": e.operation,
            "destination": e.destination,
            "arguments": e.arguments,
            "summary": e.summary,
        }
        for e in found
    ]
    return first.replace(evidence={**first.evidence, "all": listing})


def _internal_error(tool_name: Any, exc: Exception) -> list[EffectCall]:
    # A crash inside the classifier must not let a real effect slip through unjournaled
    # when the call plainly could be one; a shell call that crashed us is reported as an
    # unresolved effect rather than dropped.
    name = tool_name if isinstance(tool_name, str) else repr(tool_name)
    return [
        EffectCall(
            operation="unclassified",
            destination=f"tool:{name[:200] or '?'}",
            arguments={"tool": name[:200]},
            summary=f"unclassified {name[:80]} call (classifier error)",
            evidence={"error": f"{type(exc).__name__}: {exc}"[:500]},
        )
    ]


def _start_dir(cwd: Any, tool_input: Mapping[str, Any]) -> str | None:
    base = cwd if isinstance(cwd, str) and cwd else None
    for key in ("workdir", "cwd"):  # Codex shell tools name the directory in the input
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            base = value if os.path.isabs(value) or base is None else os.path.join(base, value)
            break
    if base is None:
        return None
    return os.path.normpath(base) if os.path.isabs(base) else None


def _classify_script(src: str, cwd: str | None, ctx: _Ctx, depth: int) -> list[EffectCall]:
    try:
        toks, subs = _lex(src)
    except _LexError as exc:
        toks, subs = _fallback_tokens(src), []
        ctx.parse = f"fallback-whitespace ({exc})"
    found: list[EffectCall] = []
    for simple in _segments(toks, cwd, ctx.deadline):
        if _spent(ctx):
            return found
        found.extend(_classify_simple(simple, ctx, depth))
    if depth < _MAX_DEPTH:
        for sub in subs:
            if _spent(ctx):
                return found
            found.extend(_classify_script(sub, cwd, ctx, depth + 1))
    return found


def _classify_simple(simple: _Simple, ctx: _Ctx, depth: int) -> list[EffectCall]:
    words, env, cwd = _strip_wrappers(simple.words, simple.cwd, ctx.deadline)
    if not words:
        return []
    prog = os.path.basename(words[0].text)
    args = words[1:]
    patterns = ctx.patterns
    seg = _Seg(words=words, env=env, cwd=cwd, stdin=simple.stdin, ctx=ctx)
    found: list[EffectCall] = []
    try:
        if prog in _SHELLS and depth < _MAX_DEPTH:
            script = _shell_c_argument(args)
            if script is not None:
                return _classify_script(script, cwd, ctx, depth + 1)
        elif prog == "eval" and depth < _MAX_DEPTH:
            return _classify_script(" ".join(w.text for w in args), cwd, ctx, depth + 1)
        elif prog == "git" and "git_push" in patterns.builtins:
            from onstation.harness.effects.git import _classify_git

            found.extend(_classify_git(seg, args, depth))
        elif prog == "gh" and "gh" in patterns.builtins:
            from onstation.harness.effects.github import _classify_gh

            found.extend(_classify_gh(seg, args))
        elif prog in ("npm", "pnpm", "yarn") and "npm_publish" in patterns.builtins:
            from onstation.harness.effects.publish import _classify_publish

            found.extend(_classify_publish(seg, prog, args))
        elif prog == "curl" and "http" in patterns.builtins:
            from onstation.harness.effects.http import _classify_curl

            found.extend(_classify_curl(seg, args))
        elif prog in ("http", "https", "xh", "xhs") and "http" in patterns.builtins:
            from onstation.harness.effects.http import _classify_httpie

            found.extend(_classify_httpie(seg, prog, args))
        elif prog == "wget" and "http" in patterns.builtins:
            from onstation.harness.effects.http import _classify_wget

            found.extend(_classify_wget(seg, args))
    except Exception as exc:  # an unresolvable effect is still an effect; say why
        found.append(
            seg.effect(
                f"{prog}.unclassified",
                f"shell:{cwd or '?'}",
                {"command": seg.text},
                f"{prog} call the classifier could not resolve",
                error=f"{type(exc).__name__}: {exc}"[:500],
            )
        )
    if patterns.commands:
        text = seg.text
        for pattern in patterns.commands:
            match = pattern.regex.search(text)
            if match is None:
                continue
            groups = dict(match.groupdict())
            arguments: dict[str, Any] = groups if groups else {"command": text}
            found.append(
                seg.effect(
                    f"cmd.{pattern.name}",
                    pattern.destination or f"shell:{cwd or '?'}",
                    arguments,
                    f"{pattern.name}: {text[:120]}",
                    pattern=pattern.regex.pattern,
                )
            )
    return found
