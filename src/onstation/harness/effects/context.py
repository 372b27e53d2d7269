"""The shared context of effect classification: the result type and what every family uses.

:class:`EffectCall` is what classification returns. The private helpers here are shared by
the shell lexer, the dispatcher and every recognizer family: the word type, the per-call
context (``_Ctx``: limits, deadline, notes), the simple command being classified (``_Seg``,
which makes each effect with its evidence), option parsing, credential redaction and the
normalization of operations and destinations.

Deadlines are read from one clock, ``time.monotonic`` as bound in the package namespace
(:func:`_monotonic`), so moving that one clock moves every deadline check.
"""

from __future__ import annotations

import os

from onstation.core.errors import BadInput
from onstation.core.frozen import FrozenRecord
from onstation.core.lazyre import DOTALL, IGNORECASE, LazyPattern
from onstation.harness import effects as _package
from onstation.harness.effects.patterns import EffectPatterns

TYPE_CHECKING = False  # typing and dataclasses cost a Bash PreToolUse hook their import time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any


class EffectCall(FrozenRecord):
    """One effect-capable call and its logical identity.

    ``operation``, ``destination`` and ``arguments`` are what the ledger fingerprints;
    ``summary`` is one line for people and ``evidence`` says how the identity was resolved
    (the shell segment, the git commands that answered, what could not be resolved).
    """

    __slots__ = ("operation", "destination", "arguments", "summary", "evidence")  # noqa: RUF023 - field order
    operation: str
    destination: str
    arguments: dict[str, Any]
    summary: str
    evidence: dict[str, Any]

    def __init__(
        self,
        operation: str,
        destination: str,
        arguments: dict[str, Any],
        summary: str,
        evidence: dict[str, Any] | None = None,
    ) -> None:
        self._set(operation=operation, destination=destination, arguments=arguments,
                  summary=summary, evidence={} if evidence is None else evidence)  # fmt: skip


#: Why :func:`classify_bounded` stopped before the end of a call.
TOO_MANY = "too-many"
OVER_TIME = "deadline"

#: How deep classification follows nested scripts (``bash -c``, ``eval``, ``$(...)``, aliases).
_MAX_DEPTH = 3


def _monotonic() -> float:
    """``time.monotonic()`` through the package namespace: the one clock deadlines are read on."""
    return _package.time.monotonic()


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The private helper types are plain slotted classes: dataclass creation costs import time
# on the hook's hot path.
class _Word:
    __slots__ = ("expands", "text")

    def __init__(self, text: str, expands: bool = False) -> None:
        self.text = text
        self.expands = expands  # holds a $ or backtick expansion the hook cannot evaluate


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
        elif ctx.deadline is not None and _monotonic() > ctx.deadline:
            ctx.stopped = OVER_TIME
    return ctx.stopped is not None


#: A shell variable assignment (``NAME=value``): stripped in front of a program, and
#: redacted in evidence when its name looks like a credential. Compiled at first use: a
#: command without any effect word (most Bash calls) never needs them, nor ``re``.
_ASSIGN = LazyPattern(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", DOTALL)

_SECRET_NAME = LazyPattern(r"token|secret|passw|pass$|key|auth|cookie|otp", IGNORECASE)
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


_SECRET_HEADER = LazyPattern(
    r"^(authorization|proxy-authorization|cookie|x-api-key|api-key|x-auth-token):", IGNORECASE
)
_USERINFO = LazyPattern(r"(://[^/@:\s]+):[^/@\s]*@")
_SPACES = LazyPattern(r"\s+")


def _strip_userinfo(text: str) -> str:
    return _USERINFO.sub(r"\1:<redacted>@", text)


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
    op = _SPACES.sub("_", op.strip().lower()) or "unknown"
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
