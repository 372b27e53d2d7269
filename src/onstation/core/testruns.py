"""Test runs recognised from shell commands, and their status from a tool call's outcome.

A relief's capsule lists the test runs a body made (issue 13): they are read from the hook
journal, where each Bash call is kept with its command and what became of it. Recognition
is by the command word of each simple command (after environment assignments, wrappers such
as ``timeout`` or ``env``, and runners such as ``uv run`` or ``bundle exec``), never by a
word anywhere in the text: ``echo pytest`` or ``git commit -m "fix tests"`` is not a run.

Pure: no I/O. A command is read only up to :data:`MAX_COMMAND_CHARS` characters.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

#: Only this much of a command is parsed (a hook payload may hold a very long one).
MAX_COMMAND_CHARS = 8192
#: A test run's name is at most this long.
MAX_NAME_CHARS = 200
#: ``sh -c '...'`` inside ``sh -c '...'``: nested at most this deep.
_MAX_DEPTH = 3

#: Operators that end a simple command (``shlex`` with punctuation characters yields them).
_SEPARATORS = frozenset({"&&", "||", ";", ";;", "|", "|&", "&", "\n", "(", ")", "{", "}"})
_REDIRECT = re.compile(r"[<>&]*[<>][<>&|]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"(python|pypy)(\d+(\.\d+)?)?|py")
_TEST_WORD = re.compile(r"(test|tests|check|spec|unittest)([-_:.].*)?")
#: A package script that runs tests: ``npm run test:unit`` (not ``check``, often a linter).
_TEST_SCRIPT_NAME = re.compile(r"(test|tests|t|tst|spec|unit|e2e|integration)([-_:.].*)?")
_TEST_SCRIPT = re.compile(r"(run[-_]?tests?|tests?|check)(\.(sh|bash|py))?")
_TEST_FILE = re.compile(r"(test_.*|.*_test|runtests|conftest)\.py")

#: Commands that run tests whatever their arguments (their basename).
_RUNNERS = frozenset({
    "pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "ava", "karma", "ctest",
    "rspec", "phpunit", "pest", "nose2", "nosetests", "trial", "green", "ward", "cucumber",
    "behave", "bats", "busted", "prove", "testem", "jasmine", "codeceptjs", "tap",
})  # fmt: skip
#: Commands that run tests when a sub-command among their arguments says so.
_SUBCOMMANDS = {
    "go": frozenset({"test"}),
    "cargo": frozenset({"test", "t", "nextest"}),
    "dotnet": frozenset({"test"}),
    "deno": frozenset({"test"}),
    "bun": frozenset({"test"}),
    "mix": frozenset({"test"}),
    "dart": frozenset({"test"}),
    "flutter": frozenset({"test"}),
    "swift": frozenset({"test"}),
    "stack": frozenset({"test"}),
    "cabal": frozenset({"test"}),
    "bazel": frozenset({"test"}),
    "bazelisk": frozenset({"test"}),
    "sbt": frozenset({"test", "testOnly", "testQuick"}),
    "rake": frozenset({"test", "spec"}),
    "rails": frozenset({"test"}),
    "playwright": frozenset({"test"}),
    "cypress": frozenset({"run"}),
    "hatch": frozenset({"test"}),
    "zig": frozenset({"test"}),
    "composer": frozenset({"test"}),
}
#: Package managers whose ``test`` script (``npm test``, ``npm run test:unit``) is a run.
_SCRIPT_RUNNERS = frozenset({"npm", "yarn", "pnpm", "bun"})
#: Build tools whose targets or goals name a test run anywhere among their arguments.
_BUILD_TOOLS = frozenset({"make", "gmake", "just", "task", "mvn", "mvnw", "gradle", "gradlew"})
_BUILD_GOALS = frozenset({"verify", "integration-test", "connectedCheck", "surefire:test"})
#: Runners in front of the real command: ``uv run pytest``, ``bundle exec rspec``.
_PREFIX_RUNNERS = {
    "uv": "run", "poetry": "run", "pipenv": "run", "pdm": "run", "rye": "run",
    "hatch": "run", "bundle": "exec", "pnpm": "exec", "yarn": "exec", "direnv": "exec",
    "pipx": "run",
}  # fmt: skip
_LAUNCHERS = frozenset({"npx", "pnpx", "bunx", "uvx"})
#: Options of the wrappers and runners above that take a value (so the value is skipped).
_VALUE_OPTIONS = frozenset({
    "-s", "--signal", "-k", "--kill-after", "-n", "--adjustment", "-u", "--unset", "-C",
    "--chdir", "--with", "--python", "-p", "--extra", "--group", "--package", "--env-file",
    "--directory", "--project", "--with-requirements", "--index", "--only-group", "--from",
    "-o", "-e", "-i", "--spec", "-g", "--gemfile", "-w", "--workspace", "--filter", "-F",
})  # fmt: skip
#: Wrappers that run the command after them (their own options skipped).
_WRAPPERS = frozenset({"env", "nice", "nohup", "time", "command", "exec", "stdbuf", "xvfb-run",
                       "sudo", "doas", "unbuffer", "caffeinate", "ionice", "chronic"})  # fmt: skip
#: Arguments after which a runner only describes itself.
_NOT_A_RUN = frozenset({"--help", "-h", "--version", "-V", "--collect-only", "--co", "--list",
                        "--listTests", "--list-tests"})  # fmt: skip
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})


@dataclass(frozen=True)
class TestRun:
    """A test run found in a command: its short name, and whether the command's exit status
    is the run's (not when a pipe, ``;`` or ``||`` follows it, or it runs in the background)."""

    __test__ = False  # not a pytest test class

    name: str
    exit_is_run: bool


def test_run(command: str) -> TestRun | None:
    """The first test run in a shell command, or None when it runs none."""
    return _find(command[:MAX_COMMAND_CHARS], 0)


def test_run_name(command: str) -> str | None:
    """The short, normalised name of the first test run in ``command`` (the test command and
    its arguments, at most :data:`MAX_NAME_CHARS` characters), or None."""
    found = test_run(command)
    return None if found is None else found.name


def test_status(outcome: str, exit_code: int | None) -> str:
    """A test run's status from its tool call's outcome and exit code: ``passed``,
    ``failed``, ``skipped`` (the call was denied, it never ran) or ``unknown``."""
    if outcome == "denied":
        return "skipped"
    if outcome == "failed":
        return "failed"
    if outcome == "succeeded" and exit_code is not None:
        return "passed" if exit_code == 0 else "failed"
    return "unknown"  # interrupted, or a success whose exit status the host did not give


#: Claude Code's PostToolUseFailure error for a Bash command that exited non-zero.
_FAILURE_CODE = re.compile(r"non-zero (?:exit )?status(?: code)? (-?\d{1,10})\b")
_EXIT_CODE_LINE = re.compile(r"\s*Exit code:? (-?\d{1,10})\b")


def failure_exit_code(error: str) -> int | None:
    """The exit code in a host's tool failure text ("Command exited with non-zero status
    code 1"; or a result starting "Exit code 1"), or None when it names none."""
    head = error[:1000]
    match = _FAILURE_CODE.search(head) or _EXIT_CODE_LINE.match(head)
    if match is None:
        return None
    value = int(match.group(1))
    return value if -(2**31) <= value < 2**31 else None


# -- parsing -----------------------------------------------------------------------------------


def _tokens(command: str) -> list[str] | None:
    lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: nothing is recognised in what cannot be read
        return None


def _segments(tokens: list[str]) -> list[tuple[list[str], str]]:
    """Simple commands, each with the operator that follows it ("" at the end)."""
    out: list[tuple[list[str], str]] = []
    words: list[str] = []
    for token in tokens:
        if token in _SEPARATORS or (token and set(token) <= set(";&|\n()")):
            out.append((words, token))
            words = []
        else:
            words.append(token)
    out.append((words, ""))
    return [(w, op) for w, op in out if w]


def _find(command: str, depth: int) -> TestRun | None:
    tokens = _tokens(command)
    if tokens is None:
        return None
    segments = _segments(tokens)
    for index, (words, _op) in enumerate(segments):
        nested = _nested_shell(words)
        if nested is not None:
            if depth < _MAX_DEPTH:
                inner = _find(nested, depth + 1)
                if inner is not None:
                    return TestRun(inner.name, inner.exit_is_run and _last(segments, index))
            continue
        name = _recognise(words)
        if name is not None:
            return TestRun(name, _last(segments, index))
    return None


def _last(segments: list[tuple[list[str], str]], index: int) -> bool:
    """Whether the exit status of segment ``index`` is the whole command's when it fails:
    only ``&&`` may follow it (a failure stops there)."""
    return all(op.strip("()") in ("", "&&") for _w, op in segments[index:])


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _strip(words: list[str]) -> list[str]:
    """``words`` without leading assignments, redirections and wrappers."""
    i = 0
    while i < len(words):
        word = words[i]
        if _ASSIGNMENT.match(word):
            i += 1
        elif _REDIRECT.fullmatch(word):
            i += 2
        elif _base(word) == "command" and words[i + 1 : i + 2] in (["-v"], ["-V"]):
            return []  # asks where a command is; runs nothing
        elif _base(word) in _WRAPPERS:
            i = _skip_options(words, i + 1)
        elif _base(word) == "timeout":
            i = _skip_options(words, i + 1) + 1  # and its duration
        else:
            break
    return words[i:]


def _skip_options(words: list[str], i: int) -> int:
    while i < len(words) and (words[i].startswith("-") or _ASSIGNMENT.match(words[i])):
        i += 2 if words[i] in _VALUE_OPTIONS else 1
    return i


def _nested_shell(words: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (or ``bash -lc``), or None."""
    rest = _strip(words)
    if len(rest) >= 3 and _base(rest[0]) in _SHELLS and re.fullmatch(r"-[a-z]*c[a-z]*", rest[1]):
        return rest[2]
    return None


def _args(words: list[str]) -> list[str]:
    """Arguments without redirections and their targets."""
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif _REDIRECT.fullmatch(word):
            skip = True
            if out and out[-1].isdigit() and len(out[-1]) == 1:
                out.pop()  # the file descriptor of ``2>&1``
        else:
            out.append(word)
    return out


def _recognise(words: list[str]) -> str | None:
    run = _args(_strip(words))
    if not run or any(a in _NOT_A_RUN for a in run[1:]):
        return None
    if not _is_run(run):
        return None
    name = shlex.join(run)
    name = "".join(ch if ch.isprintable() else " " for ch in name).strip()
    if len(name) > MAX_NAME_CHARS:
        name = name[: MAX_NAME_CHARS - 1].rstrip() + "…"
    return name or None


def _is_run(run: list[str]) -> bool:
    word, args = _base(run[0]), run[1:]
    operands = [a for a in args if not a.startswith("-")]
    if word in _RUNNERS:
        return True
    if word in _PREFIX_RUNNERS and args and args[0] == _PREFIX_RUNNERS[word]:
        rest = args[_skip_options(args, 1) :] if len(args) > 1 else []
        if rest and _is_run(rest):
            return True
    if word in _LAUNCHERS:
        rest = args[_skip_options(args, 0) :]
        return bool(rest) and _is_run(rest)
    if word in _SCRIPT_RUNNERS and operands:
        first = operands[0]
        if first in ("test", "t", "tst"):
            return True
        if first in ("run", "run-script") and len(operands) > 1:
            return bool(_TEST_SCRIPT_NAME.fullmatch(operands[1]))
    subcommands = [a for a in operands if not a.startswith("+")]  # cargo +nightly test
    if word in _SUBCOMMANDS and subcommands and subcommands[0] in _SUBCOMMANDS[word]:
        return True
    if _PYTHON.fullmatch(word) or word == "coverage":
        return _python_run(args if word != "coverage" else args[1:] if args[:1] == ["run"] else [])
    if word in _BUILD_TOOLS:
        return any(
            _TEST_WORD.fullmatch(a) or a in _BUILD_GOALS or a.endswith(":test") for a in operands
        )
    if word in _SHELLS:  # bash run-tests.sh
        return bool(operands) and bool(_TEST_SCRIPT.fullmatch(_base(operands[0])))
    if "/" in run[0]:  # a project's own script: ./dev test, scripts/run-tests.sh
        if _TEST_SCRIPT.fullmatch(word):
            return True
        return bool(operands) and operands[0] in ("test", "tests", "check")
    return False


def _python_run(args: list[str]) -> bool:
    """``python [options] -m pytest``, ``python manage.py test``, ``python test_x.py``."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m":
            return i + 1 < len(args) and args[i + 1] in (
                "pytest", "unittest", "nose2", "nose", "tox", "nox", "green", "ward", "trial",
                "django", "xmlrunner", "hypothesis",
            )  # fmt: skip
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:] in ("pytest", "unittest", "tox", "nox")
        if arg in ("-c",):
            return False
        if arg in ("-W", "-X", "-Q"):
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        script = _base(arg)
        if script in ("manage.py", "setup.py"):
            return i + 1 < len(args) and args[i + 1] == "test"
        return bool(_TEST_FILE.fullmatch(script))
    return False


__all__ = [
    "MAX_COMMAND_CHARS",
    "MAX_NAME_CHARS",
    "TestRun",
    "failure_exit_code",
    "test_run",
    "test_run_name",
    "test_status",
]
