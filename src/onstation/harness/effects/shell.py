"""Shell lexing and command splitting: from a command string to simple commands.

A quoting-aware lexer (words, operators, heredocs, command substitutions), the split into
simple commands with the directory each runs in (``cd``, ``pushd`` and subshells followed),
and the stripping of assignments and wrappers (``sudo``, ``env``, ``timeout``...) in front
of the program that really runs.
"""

from __future__ import annotations

import os

from onstation.core.lazyre import LazyPattern
from onstation.harness.effects.context import _ASSIGN, _Word

# Shell lexing: words and operators, quoting aware (shlex cannot tell an operator from a
# quoted "&&", so `echo "x; git push"` would be misread as a push).

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


class _LexError(ValueError):
    pass


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


#: Compiled at first use (as every pattern here): most Bash calls are never lexed.
_FALLBACK_SPLIT = LazyPattern(r"(&&|\|\||;|\||\n)")


def _fallback_tokens(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    for part in _FALLBACK_SPLIT.split(src):
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


_TOPLEVEL = LazyPattern(r"^\$\(\s*git\s+rev-parse\s+--show-toplevel\s*\)$")


def _word_path(word: _Word, base: str | None, deadline: float | None = None) -> str | None:
    """A word used as a directory, resolved against ``base``; None when it cannot be known."""
    text = word.text
    if word.expands:
        if _TOPLEVEL.match(text) and base:
            # `cd "$(git rev-parse --show-toplevel)"` is common enough to answer exactly.
            from onstation.harness.effects.git import _Git

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


# --------------------------------------------------------------------------------------------
# One simple command: strip assignments and wrappers in front of the program.

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
