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

This module runs inside a hook on every tool call: it imports only the standard library at
module level, and runs no subprocess unless a command already looks like an effect.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from onstation.core.errors import BadInput

__all__ = [
    "BUILTINS",
    "DEFAULT_MCP_VERBS",
    "DEFAULT_PATTERNS",
    "CommandPattern",
    "EffectCall",
    "EffectPatterns",
    "classify_all",
    "classify_bounded",
    "classify_tool_call",
    "patterns_from_mapping",
]


@dataclass(frozen=True)
class EffectCall:
    """One effect-capable call and its logical identity.

    ``operation``, ``destination`` and ``arguments`` are what the ledger fingerprints;
    ``summary`` is one line for people and ``evidence`` says how the identity was resolved
    (the shell segment, the git commands that answered, what could not be resolved).
    """

    operation: str
    destination: str
    arguments: dict[str, Any]
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CommandPattern:
    """A configured shell command that counts as an effect (``cmd.<name>``)."""

    name: str
    regex: re.Pattern[str]
    destination: str | None = None


#: Built-in recognizers that configuration can switch off.
BUILTINS: tuple[str, ...] = ("git_push", "gh", "npm_publish", "http", "mcp")

#: Words in an MCP tool name that make the call an effect.
DEFAULT_MCP_VERBS: tuple[str, ...] = ("create", "send", "post", "delete", "merge")


@dataclass(frozen=True)
class EffectPatterns:
    """Which calls count as effects: built-ins, extra shell regexes, MCP verbs and globs.

    ``mcp_verbs`` is the full verb list in force (defaults plus configured ones);
    ``mcp_tools`` are ``fnmatch`` globs of full tool names that are always effects and
    ``mcp_ignore`` globs that never are (ignore wins).
    """

    builtins: frozenset[str] = frozenset(BUILTINS)
    commands: tuple[CommandPattern, ...] = ()
    mcp_verbs: tuple[str, ...] = DEFAULT_MCP_VERBS
    mcp_tools: tuple[str, ...] = ()
    mcp_ignore: tuple[str, ...] = ()


DEFAULT_PATTERNS = EffectPatterns()

_CONFIG_KEYS = ("disable", "commands", "mcp_verbs", "mcp_tools", "mcp_ignore")
_COMMAND_KEYS = ("name", "regex", "destination")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_VERB_RE = re.compile(r"^[a-z][a-z0-9]{0,31}$")


def patterns_from_mapping(mapping: Any, *, where: str = "effects") -> EffectPatterns:
    """Build patterns from a config mapping; bad config raises :class:`BadInput`.

    Format (every key optional)::

        {"disable": ["npm_publish"],
         "commands": [{"name": "deploy", "regex": "^make deploy\\b", "destination": "prod"}],
         "mcp_verbs": ["publish"], "mcp_tools": ["mcp__pay__*"], "mcp_ignore": ["mcp__x__post_get"]}
    """

    def bad(path: str, reason: str) -> BadInput:
        return BadInput(f"{path}: {reason}", field=path)

    if not isinstance(mapping, Mapping):
        raise bad(where, "must be a mapping")
    for key in mapping:
        if key not in _CONFIG_KEYS:
            raise bad(f"{where}.{key}", f"unknown key (expected one of {', '.join(_CONFIG_KEYS)})")

    def str_list(key: str) -> list[str]:
        value = mapping.get(key, [])
        if not isinstance(value, list):
            raise bad(f"{where}.{key}", "must be a list of strings")
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise bad(f"{where}.{key}[{index}]", "must be a non-empty string")
        return [item.strip() for item in value]

    disabled = str_list("disable")
    for index, builtin in enumerate(disabled):
        if builtin not in BUILTINS:
            raise bad(
                f"{where}.disable[{index}]", f"{builtin!r} is not one of {', '.join(BUILTINS)}"
            )
    verbs = str_list("mcp_verbs")
    for index, verb in enumerate(verbs):
        if not _VERB_RE.match(verb):
            raise bad(f"{where}.mcp_verbs[{index}]", f"{verb!r} must be one lower-case word")
    mcp_tools = str_list("mcp_tools")
    mcp_ignore = str_list("mcp_ignore")

    raw_commands = mapping.get("commands", [])
    if not isinstance(raw_commands, list):
        raise bad(f"{where}.commands", "must be a list of mappings")
    commands: list[CommandPattern] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw_commands):
        path = f"{where}.commands[{index}]"
        if not isinstance(entry, Mapping):
            raise bad(path, "must be a mapping with name and regex")
        for key in entry:
            if key not in _COMMAND_KEYS:
                raise bad(f"{path}.{key}", f"unknown key (expected {', '.join(_COMMAND_KEYS)})")
        cmd_name = entry.get("name")
        if not isinstance(cmd_name, str) or not _NAME_RE.match(cmd_name):
            raise bad(f"{path}.name", "must match [a-z0-9][a-z0-9_-]{0,63}")
        if cmd_name in seen:
            raise bad(f"{path}.name", f"{cmd_name!r} is used twice")
        seen.add(cmd_name)
        regex = entry.get("regex")
        if not isinstance(regex, str) or not regex or len(regex) > 1000:
            raise bad(f"{path}.regex", "must be a non-empty string of at most 1000 characters")
        try:
            compiled = re.compile(regex)
        except re.error as exc:
            raise bad(f"{path}.regex", f"invalid regular expression ({exc})") from exc
        destination = entry.get("destination")
        if destination is not None and (
            not isinstance(destination, str) or not destination.strip() or len(destination) > 2048
        ):
            raise bad(
                f"{path}.destination", "must be a non-empty string of at most 2048 characters"
            )
        dest = destination.strip() if isinstance(destination, str) else None
        commands.append(CommandPattern(cmd_name, compiled, dest))

    base_verbs = () if "mcp" in disabled else DEFAULT_MCP_VERBS
    return EffectPatterns(
        builtins=frozenset(b for b in BUILTINS if b not in disabled),
        commands=tuple(commands),
        mcp_verbs=tuple(dict.fromkeys([*base_verbs, *verbs])),
        mcp_tools=tuple(mcp_tools),
        mcp_ignore=tuple(mcp_ignore),
    )


# --------------------------------------------------------------------------------------------
# Public entry points


_SHELL_TOOLS = frozenset(
    {"bash", "shell", "exec_command", "local_shell", "container.exec", "shell_command"}
)
_MAX_DEPTH = 3


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


#: Why :func:`classify_bounded` stopped before the end of a call.
TOO_MANY = "too-many"
OVER_TIME = "deadline"


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
            found = _classify_mcp(tool_name, tool_input, patterns)
            return ([found] if found else []), None
        if tool_name.lower() not in _SHELL_TOOLS:
            return [], None
        base = _start_dir(cwd, tool_input)
        command = tool_input.get("command")
        ctx = _Ctx(tool=tool_name, patterns=patterns, limit=max_effects, deadline=deadline)
        effects: list[EffectCall] = []
        if isinstance(command, str):
            if not patterns.commands and not _PREFILTER.search(command):
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
    return replace(first, evidence={**first.evidence, "all": listing})


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


# --------------------------------------------------------------------------------------------
# Shell lexing: words and operators, quoting aware (shlex cannot tell an operator from a
# quoted "&&", so `echo "x; git push"` would be misread as a push).

_PREFILTER = re.compile(r"git|gh|npm|pnpm|yarn|curl|http|xh|wget", re.IGNORECASE)

_OPERATORS = (
    "<<<", "<<-", "&>>", ";;&", "&&", "||", ";;", ";&", "|&", ">>", "<<", ">&", "<&", "&>",
    ">|", "<>", ";", "&", "|", "(", ")", "<", ">", "\n",
)  # fmt: skip
_REDIRECTS = frozenset({"<", ">", ">>", "<<", "<<-", "<<<", ">&", "<&", "&>", "&>>", ">|", "<>"})
_STDIN_REDIRECTS = frozenset({"<", "<<", "<<-", "<<<", "<>"})
_SEQUENCE_OPS = frozenset({"&&", "||", ";", "\n", ";;", ";&", ";;&"})
_PIPE_OPS = frozenset({"|", "|&"})
_OP_START = frozenset(";&|()<>\n")
_ANSI_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "e": "\x1b"}


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


class _LexError(ValueError):
    pass


# The private helper types are plain slotted classes: dataclass creation costs import time
# on the hook's hot path.
class _Word:
    __slots__ = ("expands", "text")

    def __init__(self, text: str, expands: bool = False) -> None:
        self.text = text
        self.expands = expands  # holds a $ or backtick expansion the hook cannot evaluate


class _Op:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_Tok = _Word | _Op


def _matching(src: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index of the bracket closing the one just before ``start`` (quotes skipped)."""
    depth = 1
    i = start
    while i < len(src):
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = src.find("'", i + 1)
            if j < 0:
                raise _LexError("unterminated single quote")
            i = j + 1
            continue
        if c == '"':
            i = _skip_double(src, i + 1)
            continue
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise _LexError(f"unterminated {open_ch}")


def _skip_double(src: str, i: int) -> int:
    while i < len(src):
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        i += 1
    raise _LexError("unterminated double quote")


def _lex(src: str) -> tuple[list[_Tok], list[str]]:
    """Tokens and the command substitutions (``$(...)``, backticks) found on the way."""
    toks: list[_Tok] = []
    subs: list[str] = []
    buf: list[str] = []
    in_word = False
    expands = False
    want_delim: bool | None = None  # next word is a heredoc delimiter (value: strip tabs)
    heredocs: list[tuple[str, bool]] = []
    i = 0
    n = len(src)

    def flush() -> None:
        nonlocal in_word, expands, want_delim
        if in_word:
            word = "".join(buf)
            if want_delim is not None:
                heredocs.append((word, want_delim))
                want_delim = None
            toks.append(_Word(word, expands))
        buf.clear()
        in_word = False
        expands = False

    def dollar(i: int) -> int:
        """Consume an expansion starting at src[i] == '$'; returns the next index."""
        nonlocal expands
        nxt = src[i + 1] if i + 1 < n else ""
        if nxt == "(":
            end = _matching(src, i + 2, "(", ")")
            inner = src[i + 2 : end]
            if not inner.startswith("("):  # $(( )) is arithmetic, not a command
                subs.append(inner)
            buf.append(src[i : end + 1])
            expands = True
            return end + 1
        if nxt == "{":
            end = _matching(src, i + 2, "{", "}")
            buf.append(src[i : end + 1])
            expands = True
            return end + 1
        if nxt and (nxt.isalnum() or nxt in "_?@*#!$-"):
            expands = True
        buf.append("$")
        return i + 1

    def backtick(i: int) -> int:
        nonlocal expands
        j = i + 1
        while j < n and src[j] != "`":
            j += 2 if src[j] == "\\" else 1
        if j >= n:
            raise _LexError("unterminated backtick")
        subs.append(src[i + 1 : j].replace("\\`", "`"))
        buf.append(src[i : j + 1])
        expands = True
        return j + 1

    while i < n:
        c = src[i]
        if c == "\\":
            if i + 1 < n and src[i + 1] == "\n":
                i += 2
                continue
            buf.append(src[i + 1] if i + 1 < n else "\\")
            in_word = True
            i += 2
            continue
        if c == "'":
            j = src.find("'", i + 1)
            if j < 0:
                raise _LexError("unterminated single quote")
            buf.append(src[i + 1 : j])
            in_word = True
            i = j + 1
            continue
        if c == '"' or (c == "$" and src.startswith('$"', i)):
            i += 2 if c == "$" else 1
            in_word = True
            while True:
                if i >= n:
                    raise _LexError("unterminated double quote")
                d = src[i]
                if d == '"':
                    i += 1
                    break
                if d == "\\" and i + 1 < n and src[i + 1] in '$`"\\\n':
                    if src[i + 1] != "\n":
                        buf.append(src[i + 1])
                    i += 2
                elif d == "$":
                    i = dollar(i)
                elif d == "`":
                    i = backtick(i)
                else:
                    buf.append(d)
                    i += 1
            continue
        if c == "$" and src.startswith("$'", i):
            i += 2
            in_word = True
            while True:
                if i >= n:
                    raise _LexError("unterminated $'' quote")
                d = src[i]
                if d == "'":
                    i += 1
                    break
                if d == "\\" and i + 1 < n:
                    buf.append(_ANSI_ESCAPES.get(src[i + 1], "\\" + src[i + 1]))
                    i += 2
                else:
                    buf.append(d)
                    i += 1
            continue
        if c == "$":
            in_word = True
            i = dollar(i)
            continue
        if c == "`":
            in_word = True
            i = backtick(i)
            continue
        if c == "#" and not in_word:
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in " \t\r":
            flush()
            i += 1
            continue
        if c in _OP_START:
            if c in "<>" and in_word and buf and "".join(buf).isdigit():
                buf.clear()  # a file-descriptor number belongs to the redirection
                in_word = False
            flush()
            op = next(o for o in _OPERATORS if src.startswith(o, i))
            i += len(op)
            toks.append(_Op(op))
            if op in ("<<", "<<-"):
                want_delim = op == "<<-"
            elif op == "\n" and heredocs:
                for delim, strip_tabs in heredocs:
                    while i < n:
                        j = src.find("\n", i)
                        line = src[i : n if j < 0 else j]
                        i = n if j < 0 else j + 1
                        if (line.lstrip("\t") if strip_tabs else line) == delim:
                            break
                heredocs.clear()
            continue
        buf.append(c)
        in_word = True
        i += 1
    flush()
    return toks, subs


def _fallback_tokens(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    for part in re.split(r"(&&|\|\||;|\||\n)", src):
        if part in ("&&", "||", ";", "|", "\n"):
            toks.append(_Op(part))
        else:
            toks.extend(_Word(w.strip("'\""), expands="$" in w) for w in part.split())
    return toks


class _Simple:
    __slots__ = ("cwd", "stdin", "words")

    def __init__(self, words: list[_Word], stdin: bool, cwd: str | None) -> None:
        self.words = words
        self.stdin = stdin
        self.cwd = cwd


class _Ctx:
    __slots__ = ("count", "deadline", "limit", "notes", "parse", "patterns", "stopped", "tool")

    def __init__(
        self,
        tool: str,
        patterns: EffectPatterns,
        limit: int | None = None,
        deadline: float | None = None,
    ) -> None:
        self.tool = tool
        self.patterns = patterns
        self.parse = "shell"
        self.notes: list[str] = []
        self.limit = limit
        self.deadline = deadline
        self.count = 0  # effects made so far (each is made once, by _Seg.effect)
        self.stopped: str | None = None


def _spent(ctx: _Ctx) -> bool:
    """Whether classification must stop here (and why, in ``ctx.stopped``)."""
    if ctx.stopped is None:
        if ctx.limit is not None and ctx.count > ctx.limit:
            ctx.stopped = TOO_MANY
        elif ctx.deadline is not None and time.monotonic() > ctx.deadline:
            ctx.stopped = OVER_TIME
    return ctx.stopped is not None


def _segments(toks: list[_Tok], cwd: str | None, deadline: float | None = None) -> list[_Simple]:
    """Simple commands in order, each with the directory it runs in (``cd`` followed)."""
    out: list[_Simple] = []
    stack: list[str | None] = []
    words: list[_Word] = []
    stdin = False
    pending_redirect = False
    start_cwd = cwd

    def emit(next_op: str | None) -> None:
        nonlocal words, stdin, cwd, start_cwd
        if words:
            simple = _Simple(words, stdin, start_cwd)
            out.append(simple)
            if next_op is None or next_op in _SEQUENCE_OPS or next_op == ")":
                cwd = _after_cd(simple, cwd, deadline)
        words = []
        stdin = False
        start_cwd = cwd

    for tok in toks:
        if isinstance(tok, _Word):
            if pending_redirect:
                pending_redirect = False
            else:
                words.append(tok)
            continue
        op = tok.text
        if op in _REDIRECTS:
            pending_redirect = True
            stdin = stdin or op in _STDIN_REDIRECTS
            continue
        if op == "(":
            emit(op)
            stack.append(cwd)
            continue
        if op == ")":
            emit(op)
            cwd = stack.pop() if stack else cwd
            start_cwd = cwd
            continue
        emit(op)
        stdin = op in _PIPE_OPS
    emit(None)
    return out


_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "fi"})


def _after_cd(simple: _Simple, cwd: str | None, deadline: float | None = None) -> str | None:
    words = [w for w in simple.words if w.text not in _KEYWORDS]
    if not words or words[0].text not in ("cd", "pushd", "popd"):
        return cwd
    if words[0].text == "popd":
        return None
    args = [w for w in words[1:] if not (w.text.startswith("-") and w.text != "-")]
    if not args:
        return os.path.expanduser("~")
    target = args[0]
    if target.text == "-":
        return None
    path = _word_path(target, cwd, deadline)
    return path


_TOPLEVEL = re.compile(r"^\$\(\s*git\s+rev-parse\s+--show-toplevel\s*\)$")


def _word_path(word: _Word, base: str | None, deadline: float | None = None) -> str | None:
    """A word used as a directory, resolved against ``base``; None when it cannot be known."""
    text = word.text
    if word.expands:
        if _TOPLEVEL.match(text) and base:
            # `cd "$(git rev-parse --show-toplevel)"` is common enough to answer exactly.
            code, out = _Git(base, deadline=deadline).run(["rev-parse", "--show-toplevel"])
            return out.strip() if code == 0 and out.strip() else None
        if "$(" in text or "`" in text:
            return None
        text = os.path.expandvars(text)
        if "$" in text:
            return None
    text = os.path.expanduser(text)
    if os.path.isabs(text):
        return os.path.normpath(text)
    return os.path.normpath(os.path.join(base, text)) if base else None


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


# --------------------------------------------------------------------------------------------
# One simple command: strip assignments and wrappers, then dispatch on the program.

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})
_WRAPPER_VALUE_OPTS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "exec": frozenset({"-a"}),
    "command": frozenset(),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
}


def _strip_wrappers(
    words: list[_Word], cwd: str | None, deadline: float | None = None
) -> tuple[list[_Word], dict[str, str], str | None]:
    # An index, not repeated slicing: thousands of `nice`/`A=1` words stay linear.
    env: dict[str, str] = {}
    i, n = 0, len(words)
    changed = True
    while i < n and changed:
        changed = False
        while i < n and (m := _ASSIGN.match(words[i].text)):
            env[m.group(1)] = m.group(2)
            i += 1
            changed = True
        if i < n and words[i].text in _KEYWORDS:
            i += 1
            changed = True
            continue
        if i >= n:
            break
        prog = os.path.basename(words[i].text)
        if prog not in _WRAPPER_VALUE_OPTS:
            continue
        value_opts = _WRAPPER_VALUE_OPTS[prog]
        j = i + 1
        while j < n and words[j].text.startswith("-") and words[j].text != "-":
            opt = words[j].text
            if opt == "--":
                j += 1
                break
            if prog == "env" and opt in ("-C", "--chdir") and j + 1 < n:
                cwd = _word_path(words[j + 1], cwd, deadline)
            elif prog == "env" and opt.startswith("--chdir="):
                cwd = _word_path(_Word(opt.split("=", 1)[1]), cwd, deadline)
            j += 2 if opt in value_opts else 1
        if prog == "timeout" and j < n:
            j += 1  # the duration
        i = j
        changed = True
    return words[i:], env, cwd


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
            found.extend(_classify_git(seg, args, depth))
        elif prog == "gh" and "gh" in patterns.builtins:
            found.extend(_classify_gh(seg, args))
        elif prog in ("npm", "pnpm", "yarn") and "npm_publish" in patterns.builtins:
            found.extend(_classify_publish(seg, prog, args))
        elif prog == "curl" and "http" in patterns.builtins:
            found.extend(_classify_curl(seg, args))
        elif prog in ("http", "https", "xh", "xhs") and "http" in patterns.builtins:
            found.extend(_classify_httpie(seg, prog, args))
        elif prog == "wget" and "http" in patterns.builtins:
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


def _shell_c_argument(args: list[_Word]) -> str | None:
    for index, word in enumerate(args):
        text = word.text
        if text.startswith("--"):
            continue
        if text.startswith("-") and len(text) > 1:
            if "c" in text[1:]:
                return args[index + 1].text if index + 1 < len(args) else None
            continue
        return None
    return None


_SECRET_NAME = re.compile(r"token|secret|passw|pass$|key|auth|cookie|otp", re.IGNORECASE)
_SECRET_OPTS = frozenset(
    {
        "-H", "--header", "-u", "--user", "-U", "--proxy-user", "--oauth2-bearer", "-a",
        "--auth", "--password", "--http-password", "--proxy-password", "--otp", "-b",
        "--cookie", "--cert-key-pass", "--pass", "--headers",
    }
)  # fmt: skip


def _redacted_text(words: Sequence[_Word]) -> str:
    """The command for evidence and summaries, without credentials it may carry."""
    out: list[str] = []
    hide_next = False
    for word in words:
        text = word.text
        if hide_next:
            out.append("<redacted>")
            hide_next = False
            continue
        if (m := _ASSIGN.match(text)) and _SECRET_NAME.search(m.group(1)):
            out.append(f"{m.group(1)}=<redacted>")
            continue
        opt = text.split("=", 1)[0]
        if opt in _SECRET_OPTS:
            if "=" in text:
                out.append(f"{opt}=<redacted>")
            else:
                out.append(text)
                hide_next = True
            continue
        if _SECRET_HEADER.match(text):
            out.append(text.split(":", 1)[0] + ":<redacted>")
            continue
        out.append(_strip_userinfo(text))
    return " ".join(out)


_SECRET_HEADER = re.compile(
    r"^(authorization|proxy-authorization|cookie|x-api-key|api-key|x-auth-token):", re.IGNORECASE
)


def _strip_userinfo(text: str) -> str:
    return re.sub(r"(://[^/@:\s]+):[^/@\s]*@", r"\1:<redacted>@", text)


class _Seg:
    """A simple command being classified, with what its effects need to report."""

    __slots__ = ("ctx", "cwd", "env", "stdin", "words")

    def __init__(
        self, words: list[_Word], env: dict[str, str], cwd: str | None, stdin: bool, ctx: _Ctx
    ) -> None:
        self.words = words
        self.env = env
        self.cwd = cwd
        self.stdin = stdin
        self.ctx = ctx

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)

    def effect(
        self,
        operation: str,
        destination: str,
        arguments: dict[str, Any],
        summary: str,
        **evidence: Any,
    ) -> EffectCall:
        ev: dict[str, Any] = {
            "tool": self.ctx.tool,
            "command": _redacted_text(self.words)[:2000],
            "cwd": self.cwd,
            "parse": self.ctx.parse,
        }
        ev.update({k: v for k, v in evidence.items() if v is not None})
        self.ctx.count += 1
        return EffectCall(
            operation=_operation(operation),
            destination=_destination(destination),
            arguments=arguments,
            summary=" ".join(summary.split())[:300],
            evidence=ev,
        )


def _operation(op: str) -> str:
    op = re.sub(r"\s+", "_", op.strip().lower()) or "unknown"
    if len(op) > 256:
        import hashlib

        op = f"{op[:200]}.{hashlib.sha256(op.encode()).hexdigest()[:16]}"
    return op


def _destination(dest: str) -> str:
    dest = dest.strip() or "unknown"
    try:
        from onstation.core.effects import normalize_destination

        return normalize_destination(dest)
    except BadInput:
        if len(dest) > 2048:
            import hashlib

            return f"{dest[:1900]}#sha256={hashlib.sha256(dest.encode()).hexdigest()}"
        return dest


# --------------------------------------------------------------------------------------------
# Option parsing shared by the recognizers


class _Parsed:
    __slots__ = ("opts", "positionals")

    def __init__(self, opts: list[tuple[str, str | None]], positionals: list[_Word]) -> None:
        self.opts = opts  # (canonical name, value) in order
        self.positionals = positionals

    def has(self, *names: str) -> bool:
        return any(n in names for n, _ in self.opts)

    def last(self, *names: str) -> str | None:
        value: str | None = None
        for n, v in self.opts:
            if n in names:
                value = v
        return value

    def values(self, *names: str) -> list[str]:
        return [v for n, v in self.opts if n in names and v is not None]


def _parse_opts(
    args: Sequence[_Word],
    value_opts: frozenset[str],
    aliases: Mapping[str, str] | None = None,
    *,
    optional_value_long: frozenset[str] = frozenset(),
) -> _Parsed:
    """getopt-style parsing: ``--long=v``, ``--long v``, ``-s v``, ``-sv``, bundles ``-abc``."""
    aliases = aliases or {}
    opts: list[tuple[str, str | None]] = []
    pos: list[_Word] = []
    i = 0
    while i < len(args):
        word = args[i]
        text = word.text
        i += 1
        if text == "--":
            pos.extend(args[i:])
            break
        if text.startswith("--") and len(text) > 2:
            name, eq, value = text.partition("=")
            name = aliases.get(name, name)
            if eq:
                opts.append((name, value))
            elif name in value_opts and name not in optional_value_long and i < len(args):
                opts.append((name, args[i].text))
                i += 1
            else:
                opts.append((name, None))
            continue
        if text.startswith("-") and len(text) > 1 and not text[1].isdigit():
            j = 1
            while j < len(text):
                short = "-" + text[j]
                name = aliases.get(short, short)
                if short in value_opts or name in value_opts:
                    if j + 1 < len(text):
                        opts.append((name, text[j + 1 :]))
                    elif i < len(args):
                        opts.append((name, args[i].text))
                        i += 1
                    else:
                        opts.append((name, None))
                    break
                opts.append((name, None))
                j += 1
            continue
        pos.append(word)
    return _Parsed(opts, pos)


# --------------------------------------------------------------------------------------------
# git


class _Git:
    """Read-only git queries in one directory, each recorded for the evidence."""

    def __init__(
        self,
        cwd: str | None,
        global_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        deadline: float | None = None,
    ) -> None:
        self.cwd = cwd
        self.global_args = list(global_args)
        self.extra_env = dict(env or {})
        self.deadline = deadline  # time.monotonic() after which no git command is started
        self.calls: list[dict[str, Any]] = []
        self._cache: dict[tuple[str, ...], tuple[int | None, str]] = {}

    def run(self, args: Sequence[str]) -> tuple[int | None, str]:
        key = tuple(args)
        if key in self._cache:
            return self._cache[key]
        argv = ["git", *self.global_args, *args]
        if self.cwd is None:
            result: tuple[int | None, str] = (None, "")
            self.calls.append({"argv": argv, "cwd": None, "error": "working directory unknown"})
            self._cache[key] = result
            return result
        timeout = 5.0
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
            if timeout <= 0:
                result = (None, "")
                self.calls.append({"argv": argv, "cwd": self.cwd, "error": "out of time"})
                self._cache[key] = result
                return result
        import subprocess

        env = {
            **os.environ,
            **self.extra_env,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "LC_ALL": "C",
        }
        record: dict[str, Any] = {"argv": argv, "cwd": self.cwd}
        try:
            done = subprocess.run(
                argv, cwd=self.cwd, capture_output=True, text=True, timeout=timeout, check=False,
                env=env,
            )  # fmt: skip
            result = (done.returncode, done.stdout)
            record["rc"] = done.returncode
            if done.returncode != 0 and done.stderr.strip():
                record["stderr"] = done.stderr.strip()[:300]
            elif done.stdout:
                record["out"] = done.stdout.strip().replace("\x00", "\n")[:300]
        except subprocess.TimeoutExpired:
            result = (None, "")
            record["error"] = "timed out"
        except OSError as exc:
            result = (None, "")
            record["error"] = f"{type(exc).__name__}: {exc.strerror or exc}"
        self.calls.append(record)
        self._cache[key] = result
        return result


class _Repo:
    """The facts about one repository a push resolution needs."""

    def __init__(self, git: _Git) -> None:
        self.git = git
        self._config: dict[str, list[str]] | None = None
        self._head: tuple[bool, str | None] | None = None

    def head(self) -> tuple[bool, str | None]:
        """(is a repository, current branch ref or None when detached)."""
        if self._head is None:
            code, out = self.git.run(["symbolic-ref", "-q", "HEAD"])
            if code == 0:
                self._head = (True, out.strip() or None)
            elif code == 1:
                self._head = (True, None)
            else:
                self._head = (False, None)
        return self._head

    def config(self, key: str) -> str | None:
        values = self.config_all(key)
        return values[-1] if values else None

    def config_all(self, key: str) -> list[str]:
        return self.config_items().get(_config_key(key), [])

    def config_items(self) -> dict[str, list[str]]:
        if self._config is None:
            self._config = {}
            code, out = self.git.run(["config", "-z", "--list"])
            if code == 0:
                for entry in out.split("\x00"):
                    if not entry:
                        continue
                    name, _, value = entry.partition("\n")
                    self._config.setdefault(_config_key(name), []).append(value)
        return self._config

    def full_name(self, src: str) -> str | None:
        if src.startswith("-"):
            return None
        code, out = self.git.run(["rev-parse", "--symbolic-full-name", src])
        name = out.strip()
        return name if code == 0 and name.startswith("refs/") else None

    def object_id(self, src: str) -> str | None:
        if src.startswith("-"):
            return None
        code, out = self.git.run(["rev-parse", "--verify", "--quiet", src])
        sha = out.strip()
        return sha if code == 0 and sha else None

    def refs(self, prefix: str) -> list[tuple[str, str]]:
        code, out = self.git.run(["for-each-ref", "--format=%(refname) %(objectname)", prefix])
        if code != 0:
            return []
        pairs: list[tuple[str, str]] = []
        for line in out.splitlines():
            name, _, sha = line.partition(" ")
            if name and sha:
                pairs.append((name, sha))
        return pairs

    def remote_url(self, name: str) -> str | None:
        if name.startswith("-"):
            return None
        code, out = self.git.run(["remote", "get-url", "--push", name])
        url = out.strip().splitlines()[0] if out.strip() else ""
        return url if code == 0 and url else None


def _config_key(name: str) -> str:
    # Section and variable names are case-insensitive; a subsection (branch, remote) is not.
    first, _, rest = name.partition(".")
    middle, _, last = rest.rpartition(".")
    if not middle:
        return f"{first.lower()}.{last.lower()}"
    return f"{first.lower()}.{middle}.{last.lower()}"


_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/:]+)@)?(?P<host>[^/:]+):(?P<path>.*)$")


def _url_form(url: str, base_dir: str | None) -> str:
    """A git remote location as a URL: scp-like to ``ssh://``, local paths to ``file://``."""
    if "://" in url:
        if url.startswith("file://"):
            return "file://" + os.path.realpath(url[len("file://") :])
        return url
    m = _SCP_LIKE.match(url)
    if m and not url.startswith(("/", ".", "~")) and len(m.group("host")) > 1:
        user = f"{m.group('user')}@" if m.group("user") else ""
        return f"ssh://{user}{m.group('host')}/{m.group('path').lstrip('/')}"
    path = os.path.expanduser(url)
    if not os.path.isabs(path):
        if base_dir is None:
            return url
        path = os.path.join(base_dir, path)
    return "file://" + os.path.realpath(path)


_GIT_GLOBAL_VALUE = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"}
)
_GIT_PASSTHROUGH = frozenset({"-c", "--git-dir", "--work-tree", "--namespace", "--config-env"})
_GIT_KNOWN = _wordset(
    """add am annotate apply archive bisect blame branch bundle cat-file check-ignore checkout
    cherry cherry-pick clean clone commit config count-objects describe diff diff-files
    diff-index diff-tree difftool fetch for-each-ref format-patch fsck gc grep help init
    log ls-files ls-remote ls-tree merge merge-base mv notes pull range-diff rebase reflog
    remote repack replace reset restore rev-list rev-parse revert rm shortlog show show-ref
    sparse-checkout stash status submodule switch symbolic-ref tag update-index update-ref
    var verify-commit version whatchanged worktree"""
)


def _classify_git(seg: _Seg, args: list[_Word], depth: int) -> list[EffectCall]:
    directory = seg.cwd
    global_args: list[str] = []
    i = 0
    while i < len(args):
        text = args[i].text
        if not text.startswith("-"):
            break
        name, eq, value = text.partition("=")
        if name in _GIT_GLOBAL_VALUE and not (eq and name.startswith("--")):
            if i + 1 >= len(args):
                return []
            value_word = args[i + 1]
            value = value_word.text
            i += 2
        else:
            value_word = _Word(value, expands=args[i].expands)
            i += 1
        if name == "-C":
            directory = _word_path(value_word, directory, seg.ctx.deadline) if value else directory
        elif name in _GIT_PASSTHROUGH:
            global_args.extend([name, value] if not name.startswith("--") else [f"{name}={value}"])
    if i >= len(args):
        return []
    sub = args[i].text
    rest = args[i + 1 :]
    git_env = {k: v for k, v in seg.env.items() if k in ("GIT_DIR", "GIT_WORK_TREE")}
    git = _Git(directory, global_args, git_env, seg.ctx.deadline)
    if sub == "push":
        return _classify_push(seg, git, directory, rest)
    if sub in _GIT_KNOWN or sub.startswith("-") or depth >= _MAX_DEPTH:
        return []
    alias = _Repo(git).config(f"alias.{sub}")
    if not alias:
        return []
    if alias.startswith("!"):
        script = alias[1:] + "".join(f" '{w.text}'" for w in rest if "'" not in w.text)
        return _classify_script(script, directory, seg.ctx, depth + 1)
    try:
        toks, _ = _lex(alias)
    except _LexError:
        return []
    alias_words = [t for t in toks if isinstance(t, _Word)]
    if alias_words and alias_words[0].text == "push":
        seg.ctx.notes.append(f"git alias {sub!r} = {alias!r}")
        return _classify_push(seg, git, directory, [*alias_words[1:], *rest])
    return []


_PUSH_VALUE = frozenset(
    {"--repo", "--push-option", "-o", "--receive-pack", "--exec", "--recurse-submodules"}
)
_PUSH_OPTIONAL = frozenset({"--recurse-submodules"})


def _classify_push(
    seg: _Seg, git: _Git, directory: str | None, args: list[_Word]
) -> list[EffectCall]:
    parsed = _parse_opts(
        args,
        _PUSH_VALUE,
        {
            "-n": "--dry-run",
            "-f": "--force",
            "-d": "--delete",
            "-u": "--set-upstream",
            "-q": "--quiet",
            "-v": "--verbose",
            "--branches": "--all",
        },
        optional_value_long=_PUSH_OPTIONAL,
    )
    if parsed.has("--dry-run"):
        return []
    notes: list[str] = []
    force = parsed.has("--force", "--force-with-lease")
    positionals = [w.text for w in parsed.positionals]
    repo = _Repo(git)
    is_repo, head = repo.head()
    if not is_repo:
        notes.append("not a git repository (or its directory is unknown): nothing resolved")
    head_branch = head[len("refs/heads/") :] if head and head.startswith("refs/heads/") else None

    remote = positionals[0] if positionals else parsed.last("--repo")
    refspecs = positionals[1:]
    if remote is None:
        remote = "origin"
        if is_repo:
            for key in (
                f"branch.{head_branch}.pushremote" if head_branch else "",
                "remote.pushdefault",
                f"branch.{head_branch}.remote" if head_branch else "",
            ):
                value = repo.config(key) if key else None
                if value:
                    remote = value
                    notes.append(f"remote {value!r} from {key}")
                    break
    url = repo.remote_url(remote) if is_repo else None
    if url is not None:
        destination = _url_form(url, directory)
    elif "://" in remote or _SCP_LIKE.match(remote) or "/" in remote or remote.startswith("."):
        destination = _url_form(remote, directory)
        notes.append(f"{remote!r} is not a configured remote; taken as a URL or path")
    else:
        destination = f"git-remote:{directory or '?'}#{remote}"
        notes.append(f"remote {remote!r} URL could not be resolved")

    updates: list[dict[str, Any]] = []
    if parsed.has("--mirror"):
        updates.extend(_ref_update(r, sha, force) for r, sha in repo.refs("refs/"))
    if parsed.has("--all"):
        updates.extend(_ref_update(r, sha, force) for r, sha in repo.refs("refs/heads/"))
    if parsed.has("--tags"):
        updates.extend(_ref_update(r, sha, force) for r, sha in repo.refs("refs/tags/"))
    delete = parsed.has("--delete")
    for spec in refspecs:
        if delete:
            updates.append(_delete_update(repo, spec.lstrip("+"), notes))
        else:
            updates.extend(_resolve_refspec(repo, spec, force, head, notes))
    if not refspecs and not parsed.has("--mirror", "--all", "--tags"):
        updates.extend(_default_push(repo, remote, force, head, notes))
    if not is_repo:
        for update in updates:
            update["commit"] = None

    arguments: dict[str, Any]
    unique = {
        (u["ref"] or "", u["commit"] or "", u["force"], u.get("delete", False)): u for u in updates
    }
    ordered = [unique[k] for k in sorted(unique)]
    arguments = dict(ordered[0]) if len(ordered) == 1 else {"refs": ordered}
    for flag, key in (("--follow-tags", "follow_tags"), ("--prune", "prune")):
        if parsed.has(flag):
            arguments[key] = True
    if parsed.has("--mirror"):
        arguments["mirror"] = True
    refs_text = ", ".join(
        f"{'-' if u.get('delete') else ''}{u['ref'] or '?'}@{(u['commit'] or 'unresolved')[:12]}"
        for u in ordered
    )
    destination = _destination(destination)
    return [
        seg.effect(
            "git.push",
            destination,
            arguments,
            f"git push{' --force' if force else ''} to {_strip_userinfo(destination)}: "
            f"{refs_text or 'no refs'}",
            directory=directory,
            git=git.calls,
            notes=notes + seg.ctx.notes or None,
        )
    ]


def _ref_update(ref: str | None, commit: str | None, force: bool) -> dict[str, Any]:
    return {"ref": ref, "commit": commit, "force": force}


def _delete_update(repo: _Repo, name: str, notes: list[str]) -> dict[str, Any]:
    ref = name if name.startswith("refs/") else None
    if ref is None:
        for prefix in ("refs/heads/", "refs/tags/"):
            if repo.object_id(prefix + name):
                ref = prefix + name
                break
    if ref is None:
        ref = name
        notes.append(f"deleted ref {name!r} not qualified: no local branch or tag of that name")
    update = _ref_update(ref, None, False)
    update["delete"] = True
    return update


def _qualify_dst(dst: str, src_full: str | None, src_is_object: bool) -> str | None:
    if dst.startswith("refs/"):
        return dst
    if src_full and src_full.startswith("refs/tags/"):
        return "refs/tags/" + dst
    if (src_full and src_full.startswith("refs/heads/")) or src_is_object:
        return "refs/heads/" + dst
    return None


def _resolve_refspec(
    repo: _Repo, spec: str, force: bool, head: str | None, notes: list[str]
) -> list[dict[str, Any]]:
    this_force = force or spec.startswith("+")
    spec = spec[1:] if spec.startswith("+") else spec
    src, colon, dst = spec.partition(":")
    if colon and not src:
        update = _ref_update(dst if dst.startswith("refs/") else None, None, this_force)
        if update["ref"] is None:
            return [_delete_update(repo, dst, notes)]
        update["delete"] = True
        return [update]
    if "*" in src:
        return _glob_refspec(repo, src, dst if colon else src, this_force, notes)
    if src in ("HEAD", "@"):
        src_full = head
        if head is None:
            notes.append("HEAD is detached (or the repository is unknown)")
    else:
        src_full = repo.full_name(src)
    commit = repo.object_id(src_full or src)
    if commit is None:
        notes.append(f"source {src!r} does not resolve to an object")
    if colon:
        ref = _qualify_dst(dst, src_full, commit is not None)
        if ref is None:
            ref = dst
            notes.append(f"destination {dst!r} left unqualified: the source kind is unknown")
        elif not dst.startswith("refs/"):
            notes.append(f"destination {dst!r} qualified from the source kind (remote not asked)")
    elif src_full:
        ref = src_full
    else:
        ref = src
        notes.append(f"source {src!r} is not a branch or tag; git needs an explicit destination")
    return [_ref_update(ref, commit, this_force)]


def _glob_refspec(
    repo: _Repo, src: str, dst: str, force: bool, notes: list[str]
) -> list[dict[str, Any]]:
    s_pre, _, s_post = src.partition("*")
    d_pre, star, d_post = dst.partition("*")
    if not star:
        notes.append(f"refspec {src}:{dst} mixes a pattern with a plain ref")
        return [_ref_update(dst, None, force)]
    updates: list[dict[str, Any]] = []
    for name, sha in repo.refs(s_pre.rstrip("/") if s_pre.endswith("/") else s_pre):
        if name.startswith(s_pre) and name.endswith(s_post):
            middle = name[len(s_pre) : len(name) - len(s_post) if s_post else None]
            updates.append(_ref_update(d_pre + middle + d_post, sha, force))
    return updates


def _default_push(
    repo: _Repo, remote: str, force: bool, head: str | None, notes: list[str]
) -> list[dict[str, Any]]:
    configured = repo.config_all(f"remote.{remote}.push")
    if configured:
        notes.append(f"refspecs from remote.{remote}.push")
        out: list[dict[str, Any]] = []
        for spec in configured:
            out.extend(_resolve_refspec(repo, spec, force, head, notes))
        return out
    mode = (repo.config("push.default") or "simple").lower()
    if mode == "matching":
        tracked = {name for name, _ in repo.refs(f"refs/remotes/{remote}/")}
        return [
            _ref_update(name, sha, force)
            for name, sha in repo.refs("refs/heads/")
            if f"refs/remotes/{remote}/{name[len('refs/heads/') :]}" in tracked
        ]
    if head is None:
        notes.append("no refspec and no current branch: git would refuse the push")
        return [_ref_update(None, None, force)]
    if mode == "nothing":
        notes.append("push.default=nothing: git would refuse a push without refspecs")
        return [_ref_update(None, None, force)]
    branch = head[len("refs/heads/") :]
    upstream_remote = repo.config(f"branch.{branch}.remote")
    merge = repo.config(f"branch.{branch}.merge")
    ref = head
    if mode in ("upstream", "tracking", "simple") and upstream_remote == remote and merge:
        ref = merge if merge.startswith("refs/") else f"refs/heads/{merge}"
        if mode == "simple" and ref != head:
            notes.append(f"upstream {ref} differs from {head}: push.default=simple would refuse")
    elif mode in ("upstream", "tracking"):
        notes.append(f"push.default={mode} with no upstream on {remote!r}: git would refuse")
    elif mode == "simple" and upstream_remote is None:
        notes.append("no upstream configured: git may refuse unless push.autoSetupRemote is set")
    notes.append(f"push.default={mode}")
    return [_ref_update(ref, repo.object_id(head), force)]


# --------------------------------------------------------------------------------------------
# gh (GitHub CLI)

_GH_PR_VALUE = frozenset(
    {
        "--repo", "--title", "--body", "--body-file", "--base", "--head", "--reviewer",
        "--assignee", "--label", "--milestone", "--project", "--template", "--subject",
        "--match-head-commit", "--author-email", "--notes", "--notes-file", "--target",
        "--discussion-category", "--notes-start-tag", "--latest", "--notes-from-tag",
    }
)  # fmt: skip
_GH_ALIASES: dict[str, dict[str, str]] = {
    "pr create": {
        "-R": "--repo", "-t": "--title", "-b": "--body", "-F": "--body-file", "-B": "--base",
        "-H": "--head", "-r": "--reviewer", "-a": "--assignee", "-l": "--label",
        "-m": "--milestone", "-p": "--project", "-T": "--template", "-w": "--web",
        "-d": "--draft", "-f": "--fill", "-e": "--editor",
    },
    "pr merge": {
        "-R": "--repo", "-b": "--body", "-F": "--body-file", "-t": "--subject", "-m": "--merge",
        "-s": "--squash", "-r": "--rebase", "-d": "--delete-branch", "-A": "--author-email",
    },
    "pr comment": {
        "-R": "--repo", "-b": "--body", "-F": "--body-file", "-w": "--web", "-e": "--editor",
    },
    "release": {
        "-R": "--repo", "-t": "--title", "-n": "--notes", "-F": "--notes-file", "-d": "--draft",
        "-p": "--prerelease", "-y": "--yes",
    },
}  # fmt: skip
_GH_RELEASE_VERBS = frozenset({"create", "upload", "delete", "edit", "delete-asset"})
_PR_URL = re.compile(r"^https?://([^/]+)/([^/]+)/([^/]+)/pull/(\d+)")


def _gh_repo(seg: _Seg, parsed: _Parsed, notes: list[str]) -> tuple[str, _Git | None]:
    explicit = parsed.last("--repo") or seg.env.get("GH_REPO")
    if explicit:
        explicit_slug = _github_slug(explicit)
        if explicit_slug:
            return explicit_slug, None
        notes.append(f"--repo {explicit!r} is not OWNER/REPO")
        return f"github:{explicit}", None
    git = _Git(seg.cwd, deadline=seg.ctx.deadline)
    repo = _Repo(git)
    remote = "origin"
    # `gh repo set-default` records its choice as remote.<name>.gh-resolved=base.
    for key, values in repo.config_items().items():
        if key.startswith("remote.") and key.endswith(".gh-resolved") and "base" in values:
            remote = key[len("remote.") : -len(".gh-resolved")]
            notes.append(f"repository from remote {remote!r} (gh repo set-default)")
            break
    url = repo.remote_url(remote)
    slug = _github_slug(_url_form(url, seg.cwd)) if url else None
    if slug:
        return slug, git
    notes.append(f"GitHub repository unresolved (remote {remote!r} URL: {url!r})")
    return f"github:unresolved:{seg.cwd or '?'}", git


_SLUG_PART = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9_.-]{1,100}$")


def _github_slug(value: str) -> str | None:
    """``host/owner/repo`` (lower case) from OWNER/REPO, HOST/OWNER/REPO or a remote URL."""
    value = value.strip()
    if "://" in value or (_SCP_LIKE.match(value) and "/" in value.split(":", 1)[-1]):
        url = _url_form(value, None)
        if url.startswith("file://"):
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        path = [p for p in parts.path.split("/") if p]
        if not host or len(path) < 2:
            return None
        owner, name = path[0], path[1]
    else:
        path = [p for p in value.split("/") if p]
        if len(path) == 2:
            host, owner, name = "github.com", path[0], path[1]
        elif len(path) == 3:
            host, owner, name = path[0].lower(), path[1], path[2]
        else:
            return None
    name = name[:-4] if name.endswith(".git") else name
    if not (_SLUG_PART.match(owner) and _SLUG_PART.match(name)):
        return None
    return f"{host}/{owner.lower()}/{name.lower()}"


def _current_branch(git: _Git | None, cwd: str | None, deadline: float | None = None) -> str | None:
    git = git or _Git(cwd, deadline=deadline)
    _, head = _Repo(git).head()
    return head[len("refs/heads/") :] if head and head.startswith("refs/heads/") else None


def _read_text(path: str, cwd: str | None) -> str | None:
    if path == "-":
        return None
    full = path if os.path.isabs(path) or cwd is None else os.path.join(cwd, path)
    try:
        with open(full, "rb") as fh:
            data = fh.read(1 << 20)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


def _classify_gh(seg: _Seg, args: list[_Word]) -> list[EffectCall]:
    texts = [w.text for w in args]
    if len(texts) < 2:
        return []
    noun, verb = texts[0], texts[1]
    rest = args[2:]
    if noun == "pr" and verb in ("create", "new"):
        return _gh_pr_create(seg, rest)
    if noun == "pr" and verb in ("merge", "comment"):
        return _gh_pr_act(seg, verb, rest)
    if noun == "release" and verb in _GH_RELEASE_VERBS:
        return _gh_release(seg, verb, rest)
    return []


def _gh_pr_create(seg: _Seg, rest: list[_Word]) -> list[EffectCall]:
    notes: list[str] = []
    parsed = _parse_opts(rest, _GH_PR_VALUE, _GH_ALIASES["pr create"])
    if parsed.has("--web", "--dry-run"):
        return []  # --web only opens a browser; a person creates the PR there
    dest, git = _gh_repo(seg, parsed, notes)
    head = parsed.last("--head") or _current_branch(git, seg.cwd, seg.ctx.deadline)
    if head is None:
        notes.append("head branch unresolved (detached HEAD or not a repository)")
    base = parsed.last("--base")
    arguments = {"head": head, "base": base, "title": parsed.last("--title")}
    return [
        seg.effect(
            "gh.pr.create",
            dest,
            arguments,
            f"gh pr create in {dest}: {head or '?'} -> {base or 'default branch'}",
            git=git.calls if git else None,
            notes=notes or None,
        )
    ]


def _gh_pr_act(seg: _Seg, verb: str, rest: list[_Word]) -> list[EffectCall]:
    notes: list[str] = []
    parsed = _parse_opts(rest, _GH_PR_VALUE, _GH_ALIASES[f"pr {verb}"])
    if parsed.has("--web"):
        return []
    target = parsed.positionals[0].text if parsed.positionals else None
    dest: str | None = None
    git: _Git | None = None
    pr: int | str | None = None
    if target and (m := _PR_URL.match(target)):
        dest = f"{m.group(1).lower()}/{m.group(2).lower()}/{m.group(3).lower()}"
        pr = int(m.group(4))
    elif target and target.lstrip("#").isdigit():
        pr = int(target.lstrip("#"))
    elif target:
        pr = target  # a branch name: gh finds that branch's pull request
    if dest is None:
        dest, git = _gh_repo(seg, parsed, notes)
    if pr is None:
        # `gh pr merge` with no argument acts on the current branch's PR, exactly as if the
        # branch had been named, so both spellings share one identity.
        pr = _current_branch(git, seg.cwd, seg.ctx.deadline)
        notes.append("no PR given: the pull request of the current branch")
    arguments: dict[str, Any] = {"pr": pr}
    if verb == "merge":
        methods = [m for m in ("merge", "squash", "rebase") if parsed.has(f"--{m}")]
        arguments["method"] = methods[-1] if methods else None
        for flag in ("auto", "disable-auto"):
            if parsed.has(f"--{flag}"):
                arguments[flag.replace("-", "_")] = True
    else:
        body = parsed.last("--body")
        body_file = parsed.last("--body-file")
        if body is None and body_file is not None:
            body = _read_text(body_file, seg.cwd)
            if body is None:
                notes.append(f"body file {body_file!r} unreadable")
        if body is None:
            notes.append("comment body not given on the command line")
        arguments["body"] = body
        for flag in ("edit-last", "delete-last"):
            if parsed.has(f"--{flag}"):
                arguments[flag.replace("-", "_")] = True
    return [
        seg.effect(
            f"gh.pr.{verb}",
            dest,
            arguments,
            f"gh pr {verb} {pr if pr is not None else '?'} in {dest}",
            git=git.calls if git else None,
            notes=notes or None,
        )
    ]


def _gh_release(seg: _Seg, verb: str, rest: list[_Word]) -> list[EffectCall]:
    notes: list[str] = []
    parsed = _parse_opts(rest, _GH_PR_VALUE, _GH_ALIASES["release"])
    dest, git = _gh_repo(seg, parsed, notes)
    pos = [w.text for w in parsed.positionals]
    tag = pos[0] if pos else None
    arguments: dict[str, Any] = {"tag": tag}
    if verb == "upload":
        arguments["assets"] = sorted(os.path.basename(p.split("#", 1)[0]) for p in pos[1:])
    elif verb == "delete-asset":
        arguments["asset"] = pos[1] if len(pos) > 1 else None
    elif verb == "edit":
        arguments["changes"] = {n.lstrip("-"): v for n, v in parsed.opts if n != "--repo"}
    return [
        seg.effect(
            f"gh.release.{verb}",
            dest,
            arguments,
            f"gh release {verb} {tag or '?'} in {dest}",
            git=git.calls if git else None,
            notes=notes or None,
        )
    ]


# --------------------------------------------------------------------------------------------
# npm / pnpm / yarn publish

_NPM_VALUE = frozenset(
    {
        "--registry", "--tag", "--access", "--otp", "--workspace", "--prefix", "--dir",
        "--userconfig", "--provenance-file", "--publish-branch", "--report-summary",
        "--filter",
    }
)  # fmt: skip
DEFAULT_NPM_REGISTRY = "https://registry.npmjs.org"


def _classify_publish(seg: _Seg, prog: str, args: list[_Word]) -> list[EffectCall]:
    parsed = _parse_opts(args, _NPM_VALUE, {"-w": "--workspace", "-C": "--dir"})
    pos = [w.text for w in parsed.positionals]
    # yarn berry spells it `yarn npm publish`; the others `X publish`.
    if prog == "yarn" and pos[:2] == ["npm", "publish"]:
        targets = pos[2:]
    elif pos[:1] == ["publish"]:
        targets = pos[1:]
    else:
        return []
    if parsed.has("--dry-run"):
        return []
    notes: list[str] = []
    base = seg.cwd
    for opt in ("--prefix", "--dir"):
        value = parsed.last(opt)
        if value:
            base = _word_path(_Word(value), base)
    target = targets[0] if targets else None
    workspace = parsed.has("--workspace", "--workspaces", "--recursive", "-r", "--filter")
    manifest: dict[str, Any] | None = None
    pkg_dir: str | None = base
    if target and re.match(r"^[a-z+]+://", target):
        notes.append(f"publishing a remote tarball {target!r}: name and version unresolved")
        pkg_dir = None
    elif target and target.endswith((".tgz", ".tar.gz")):
        path = _word_path(_Word(target), base)
        manifest = _tarball_manifest(path, notes) if path else None
        pkg_dir = os.path.dirname(path) if path else None
    else:
        if target:
            pkg_dir = _word_path(_Word(target), base)
        if workspace:
            notes.append("workspace or recursive publish: packages not enumerated")
        elif pkg_dir is not None:
            manifest = _json_file(os.path.join(pkg_dir, "package.json"), notes)
        else:
            notes.append("package directory unknown")
    name = manifest.get("name") if manifest else None
    version = manifest.get("version") if manifest else None
    registry = parsed.last("--registry") or _npm_registry(manifest, name, pkg_dir, seg.env, notes)
    arguments: dict[str, Any] = {
        "name": name if isinstance(name, str) else None,
        "version": version if isinstance(version, str) else None,
    }
    if workspace:
        arguments["workspace"] = parsed.values("--workspace", "--filter") or True
    return [
        seg.effect(
            "npm.publish",
            registry,
            arguments,
            f"{prog} publish {arguments['name'] or '?'}@{arguments['version'] or '?'} "
            f"to {registry}",
            package_dir=pkg_dir,
            notes=notes or None,
        )
    ]


def _json_file(path: str, notes: list[str]) -> dict[str, Any] | None:
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        notes.append(f"{path}: {type(exc).__name__}")
        return None
    if not isinstance(data, dict):
        notes.append(f"{path}: not a JSON object")
        return None
    return data


def _tarball_manifest(path: str, notes: list[str]) -> dict[str, Any] | None:
    import json
    import tarfile

    try:
        with tarfile.open(path, "r:*") as tar:
            member = tar.extractfile("package/package.json")
            data = json.loads(member.read()) if member else None
    except (OSError, KeyError, ValueError, tarfile.TarError) as exc:
        notes.append(f"{path}: {type(exc).__name__}")
        return None
    return data if isinstance(data, dict) else None


def _npm_registry(
    manifest: dict[str, Any] | None,
    name: Any,
    pkg_dir: str | None,
    env: Mapping[str, str],
    notes: list[str],
) -> str:
    publish_config = manifest.get("publishConfig") if manifest else None
    if isinstance(publish_config, dict) and isinstance(publish_config.get("registry"), str):
        notes.append("registry from package.json publishConfig")
        return str(publish_config["registry"])
    for key in ("npm_config_registry", "NPM_CONFIG_REGISTRY"):
        value = env.get(key) or os.environ.get(key)
        if value:
            notes.append(f"registry from {key}")
            return value
    scope = name.split("/", 1)[0] if isinstance(name, str) and name.startswith("@") else None
    rcs = [os.path.join(pkg_dir, ".npmrc")] if pkg_dir else []
    rcs.append(os.path.expanduser("~/.npmrc"))
    for rc in rcs:
        text = _read_text(rc, None)
        if text is None:
            continue
        found: dict[str, str] = {}
        for line in text.splitlines():
            key, eq, value = line.partition("=")
            if eq:
                found[key.strip()] = value.strip()
        for key in ([f"{scope}:registry"] if scope else []) + ["registry"]:
            if found.get(key):
                notes.append(f"registry from {rc} ({key})")
                return found[key]
    return DEFAULT_NPM_REGISTRY


# --------------------------------------------------------------------------------------------
# HTTP clients: curl, httpie (http/https, xh), wget

_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_CURL_VALUE = _wordset(
    """-A -b -c -C -d -D -e -E -F -H -K -m -o -P -Q -r -T -t -u -U -w -X -x -Y -y -z
    --abstract-unix-socket --alt-svc --aws-sigv4 --cacert --capath --cert --cert-type
    --ciphers --config --connect-timeout --connect-to --continue-at --cookie --cookie-jar
    --create-file-mode --crlfile --curves --data --data-ascii --data-binary --data-raw
    --data-urlencode --delegation --dns-interface --dns-ipv4-addr --dns-ipv6-addr
    --dns-servers --doh-url --dump-header --ech --egd-file --engine --etag-compare
    --etag-save --expect100-timeout --form --form-string --ftp-account
    --ftp-alternative-to-user --ftp-method --ftp-port --happy-eyeballs-timeout-ms --header
    --hostpubmd5 --hostpubsha256 --hsts --interface --ip-tos --ipfs-gateway --json
    --keepalive-cnt --keepalive-time --key --key-type --krb --libcurl --limit-rate
    --local-port --login-options --mail-auth --mail-from --mail-rcpt --max-filesize
    --max-redirs --max-time --netrc-file --noproxy --oauth2-bearer --output --output-dir
    --parallel-max --pass --pinnedpubkey --preproxy --proto --proto-default --proto-redir
    --proxy --proxy-cacert --proxy-capath --proxy-cert --proxy-cert-type --proxy-ciphers
    --proxy-crlfile --proxy-header --proxy-key --proxy-key-type --proxy-pass
    --proxy-pinnedpubkey --proxy-service-name --proxy-tls13-ciphers --proxy-tlsauthtype
    --proxy-tlspassword --proxy-tlsuser --proxy-user --proxy1.0 --pubkey --quote --random-file
    --range --rate --referer --request --request-target --resolve --retry --retry-delay
    --retry-max-time --sasl-authzid --service-name --socks4 --socks4a --socks5
    --socks5-gssapi-service --socks5-hostname --speed-limit --speed-time --stderr
    --telnet-option --tftp-blksize --time-cond --tls-max --tls13-ciphers --tlsauthtype
    --tlspassword --tlsuser --trace --trace-ascii --trace-config --unix-socket --upload-file
    --url --url-query --user --user-agent --variable --write-out"""
)
_CURL_ALIASES = {
    "-X": "--request", "-d": "--data", "-F": "--form", "-T": "--upload-file", "-G": "--get",
    "-I": "--head", "-H": "--header", "-u": "--user",
}  # fmt: skip
_CURL_DATA = ("--data", "--data-ascii", "--data-binary", "--data-raw", "--data-urlencode", "--json")
_BODY_LIMIT = 4096


def _body_value(value: str, cwd: str | None, *, file_prefix: str, notes: list[str]) -> str:
    """A body part, with ``@file`` replaced by the file's digest (its content is the body)."""
    if not value.startswith(file_prefix):
        return value
    path = value[len(file_prefix) :]
    if path == "-":
        notes.append("body read from stdin: its content is not part of the identity")
        return "stdin:"
    return _file_digest(path, cwd, notes)


def _file_digest(path: str, cwd: str | None, notes: list[str]) -> str:
    import hashlib

    full = _word_path(_Word(path), cwd) or path
    digest = hashlib.sha256()
    try:
        with open(full, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 16), b""):
                digest.update(chunk)
    except OSError as exc:
        notes.append(f"body file {full!r} unreadable ({type(exc).__name__})")
        return f"file:{full}"
    return f"file:{full};sha256:{digest.hexdigest()}"


def _body(parts: list[str]) -> Any:
    if not parts:
        return None
    body: Any = parts[0] if len(parts) == 1 else parts
    if len(str(body)) > _BODY_LIMIT:
        import hashlib
        import json

        raw = json.dumps(body, ensure_ascii=False).encode()
        return {"sha256": hashlib.sha256(raw).hexdigest(), "length": len(raw)}
    return body


def _normalize_url(url: str, default_scheme: str = "http") -> tuple[str, str] | None:
    """(origin, normalized URL): lower-case scheme and host, no default port or fragment."""
    from urllib.parse import urlsplit, urlunsplit

    url = url.strip()
    if not url:
        return None
    if "://" not in url:
        url = f"{default_scheme}://{url}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not host:
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and {"http": 80, "https": 443}.get(scheme) != port:
        netloc = f"{netloc}:{port}"
    origin = f"{scheme}://{netloc}"
    path = parts.path.rstrip("/")
    return origin, urlunsplit((scheme, netloc, path, parts.query, ""))


def _http_effects(
    seg: _Seg,
    client: str,
    method: str,
    urls: list[str],
    body: Any,
    notes: list[str],
    default_scheme: str = "http",
) -> list[EffectCall]:
    out: list[EffectCall] = []
    for raw in urls:
        normalized = _normalize_url(raw, default_scheme)
        if normalized is None:
            notes.append(f"URL {_strip_userinfo(raw)!r} unparseable")
            origin, url = f"url:{raw}", raw
        else:
            origin, url = normalized
        out.append(
            seg.effect(
                "http.request",
                origin,
                {"method": method, "url": url, "body": body},
                f"{client} {method} {url}",
                notes=list(notes) or None,
            )
        )
    return out


def _classify_curl(seg: _Seg, args: list[_Word]) -> list[EffectCall]:
    groups: list[list[_Word]] = [[]]
    for word in args:  # --next starts a new set of per-URL options
        if word.text in ("--next", "-:"):
            groups.append([])
        else:
            groups[-1].append(word)
    found: list[EffectCall] = []
    for group in groups:
        parsed = _parse_opts(group, _CURL_VALUE, _CURL_ALIASES)
        notes: list[str] = []
        urls = [w.text for w in parsed.positionals] + parsed.values("--url")
        data = [
            _body_value(v, seg.cwd, file_prefix="@", notes=notes) if n != "--data-raw" else v
            for n, v in parsed.opts
            if n in _CURL_DATA and v is not None
        ]
        form = [
            _form_value(v, seg.cwd, notes) if n == "--form" else v
            for n, v in parsed.opts
            if n in ("--form", "--form-string") and v is not None
        ]
        upload = parsed.last("--upload-file")
        explicit = parsed.last("--request")
        if explicit:
            method = explicit.upper()
        elif parsed.has("--head"):
            method = "HEAD"
        elif upload is not None:
            method = "PUT"
        elif parsed.has("--get"):
            method = "GET"
        elif data or form:
            method = "POST"
        else:
            method = "GET"
        if method not in _MUTATING or not urls:
            continue
        parts = ["&".join(data)] if data else []
        parts += form
        if upload is not None:
            parts.append(_file_digest(upload, seg.cwd, notes) if upload != "-" else "stdin:")
        found.extend(_http_effects(seg, "curl", method, urls, _body(parts), notes))
    return found


def _form_value(value: str, cwd: str | None, notes: list[str]) -> str:
    name, eq, content = value.partition("=")
    if eq and content.startswith(("@", "<")):
        return f"{name}={_file_digest(content[1:].split(';', 1)[0], cwd, notes)}"
    return value


_HTTPIE_VALUE = _wordset(
    """-a -A -o -p -P -s --auth --auth-type --output --session --session-read-only --verify
    --cert --cert-key --cert-key-pass --timeout --proxy --print --history-print --style
    --max-redirects --default-scheme --raw --boundary --format-options --response-charset
    --response-mime --ssl --ciphers --max-headers"""
)
_HTTPIE_SEP = re.compile(r"(:=@|==|:=|=@|@|=|:)")
_HTTP_METHOD = re.compile(r"^[A-Za-z]+$")
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"})


def _classify_httpie(seg: _Seg, prog: str, args: list[_Word]) -> list[EffectCall]:
    parsed = _parse_opts(args, _HTTPIE_VALUE, {"-I": "--ignore-stdin"})
    if parsed.has("--offline"):
        return []
    pos = [w.text for w in parsed.positionals]
    if not pos:
        return []
    method: str | None = None
    if (
        len(pos) >= 2
        and _HTTP_METHOD.match(pos[0])
        and (pos[0].isupper() or pos[0].upper() in _KNOWN_METHODS)
    ):
        method, pos = pos[0].upper(), pos[1:]
    url, items = pos[0], pos[1:]
    notes: list[str] = []
    data: list[str] = []
    query: list[str] = []
    for item in items:
        m = _HTTPIE_SEP.search(item)
        if m is None:
            continue
        sep = m.group(1)
        if sep == "==":
            query.append(item)
        elif sep == ":":
            continue  # a header
        elif sep in ("@", "=@", ":=@"):
            key = item[: m.start()]
            data.append(f"{key}{sep}{_file_digest(item[m.end() :], seg.cwd, notes)}")
        else:
            data.append(item)
    raw = parsed.last("--raw")
    if raw is not None:
        data.append(raw)
    piped = seg.stdin and not parsed.has("--ignore-stdin")
    if piped and not data:
        notes.append("request body from stdin: its content is not part of the identity")
        data.append("stdin:")
    if method is None:
        method = "POST" if data else "GET"
    if method not in _MUTATING:
        return []
    if url.startswith(":"):  # httpie shorthand for localhost
        url = "localhost" + (url if url[1:2] != "/" else url[1:])
    scheme = parsed.last("--default-scheme") or ("https" if prog in ("https", "xhs") else "http")
    if query:
        url += ("&" if "?" in url else "?") + "&".join(q.replace("==", "=", 1) for q in query)
    return _http_effects(seg, prog, method, [url], _body(data), notes, scheme)


_WGET_VALUE = _wordset(
    """-O -o -a -P -e -i -B -t -T -w -U -Q -l -A -R -D -I -X --method --body-data --body-file
    --post-data --post-file --header --user --password --http-user --http-password
    --output-document --output-file --append-output --directory-prefix --execute
    --input-file --base --tries --timeout --wait --user-agent --quota --level --accept
    --reject --domains --include-directories --exclude-directories --referer
    --load-cookies --save-cookies --ca-certificate --certificate --private-key
    --bind-address --limit-rate"""
)


def _classify_wget(seg: _Seg, args: list[_Word]) -> list[EffectCall]:
    parsed = _parse_opts(args, _WGET_VALUE)
    if parsed.has("--spider"):
        return []
    notes: list[str] = []
    method = (parsed.last("--method") or "").upper()
    parts: list[str] = []
    for name, value in parsed.opts:
        if value is None:
            continue
        if name in ("--post-data", "--body-data"):
            parts.append(value)
        elif name in ("--post-file", "--body-file"):
            parts.append(_file_digest(value, seg.cwd, notes))
    if not method:
        method = "POST" if parsed.has("--post-data", "--post-file") else "GET"
    if method not in _MUTATING:
        return []
    urls = [w.text for w in parsed.positionals]
    return _http_effects(seg, "wget", method, urls, _body(parts), notes)


# --------------------------------------------------------------------------------------------
# MCP tools

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
