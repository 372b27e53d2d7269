"""The patterns the hook path answers without ``re`` (issue 14), held to the ``re`` forms
they stand for: :mod:`onstation.core.lazyre`, :mod:`onstation.core.secret_shapes`, the
effect classifier's prefilter and the error classes' exit codes."""

from __future__ import annotations

import re
import subprocess
import sys

from hypothesis import example, given
from hypothesis import strategies as st

from onstation.core import lazyre, secret_shapes
from onstation.harness.effects import classify

#: Texts near the patterns: their words in any case, the characters Unicode case folding
#: maps onto ASCII letters (dotless i, long s, the Kelvin sign...), invisible characters,
#: separators, white space and runs of token characters.
_PIECES = st.sampled_from([
    "git", "GIT", "gIt", "g\u0131t", "G\u0130T", "gh", "npm", "pnpm", "yarn", "curl", "http",
    "xh", "wget", "HTTP", "w\u0261et", "-----BEGIN", "-----begin", "eyJ", "EYJ", "glpat-",
    "xox", "hooks.slack", "hooks_slack", "sk-", "SK-", "AIza", "@", "bearer", "BEARER",
    "authoriz", "pass", "PA\u017fS", "pa\u017f\u017f", "pwd", "secret", "token", "TOKEN",
    "key", "KEY", "\u212aey", "credential", "_pw", "_PW", "?", "&", ";", "=", " ", "\t", "\n",
    "\x1c", "\x1f", "\x85", "\u00a0", "\u2028", "a", "Z", "0", "9", "_", "-", "/", ".",
    "abcdefgh", "ABCDEFGH", "01234567", "\u00ad", "\u200b", "\u200f", "\u202a", "\u2060",
    "\u206f", "\ufeff", "\u00e9", "\u00c5", "\u0660", "\u00b2", "\u2126", "\u00df",
])  # fmt: skip
_TEXTS = st.lists(_PIECES | st.text(max_size=4), max_size=30).map("".join)


def test_the_flag_values_are_res() -> None:
    assert (lazyre.IGNORECASE, lazyre.MULTILINE, lazyre.DOTALL) == (
        re.IGNORECASE, re.MULTILINE, re.DOTALL,
    )  # fmt: skip


@given(_TEXTS)
def test_a_lazy_pattern_answers_as_the_compiled_one(text: str) -> None:
    lazy = lazyre.LazyPattern(r"(\w+)=(\S*)|(?:git|gh)\b", lazyre.IGNORECASE | lazyre.DOTALL)
    real = re.compile(lazy.pattern, re.IGNORECASE | re.DOTALL)
    assert lazy.compiled() == real
    assert repr(lazy.search(text)) == repr(real.search(text))
    assert repr(lazy.match(text)) == repr(real.match(text))
    assert repr(lazy.fullmatch(text)) == repr(real.fullmatch(text))
    assert lazy.findall(text) == real.findall(text)
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in real.finditer(text)]
    assert lazy.split(text) == real.split(text)
    assert lazy.sub(r"<\1>", text) == real.sub(r"<\1>", text)
    assert lazy.sub("x", text, 1) == real.sub("x", text, 1)


@given(_TEXTS)
@example("a?b=c")
@example("?\x1c=")
@example("x; y=1")
@example("0123456789abcdeF")
@example("0123456789abcde_F")
@example("g\u0131t")
def test_the_secret_shapes_answer_as_their_patterns(text: str) -> None:
    stripped = secret_shapes.INVISIBLE.sub("", text)
    assert secret_shapes.without_invisible(text) == stripped
    assert secret_shapes.suspect(stripped) is (secret_shapes.SUSPECT.search(stripped) is not None)
    assert secret_shapes.suspect(text) is (secret_shapes.SUSPECT.search(text) is not None)
    assert secret_shapes.may_hold_secret(text) is (
        secret_shapes.SUSPECT.search(stripped) is not None
    )


def test_the_secret_shapes_are_the_patterns_they_were() -> None:
    assert secret_shapes.SUSPECT.flags & re.IGNORECASE
    invisible = "[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]"
    assert secret_shapes.INVISIBLE.pattern == invisible
    assert secret_shapes.SUSPECT is secret_shapes.SUSPECT  # compiled once


@given(_TEXTS)
@example("G\u0130T push")
@example("wGET x")
def test_the_effect_prefilter_answers_as_its_pattern(text: str) -> None:
    pattern = re.compile(r"git|gh|npm|pnpm|yarn|curl|http|xh|wget", re.IGNORECASE)
    assert classify._may_name_builtin(text) is (pattern.search(text) is not None)


def test_the_error_classes_keep_their_exit_codes_without_importing_enum() -> None:
    probe = (
        "import sys\n"
        "from onstation.core.errors import BadInput, BlockedByPolicy, Conflict, "
        "OnstationError, StaleGeneration\n"
        "assert 'enum' not in sys.modules\n"
        "from onstation.core.errors import ExitCode\n"
        "from onstation.core.exit_codes import ExitCode as Real\n"
        "assert ExitCode is Real\n"
        "pairs = [(OnstationError, Real.ERROR), (BadInput, Real.BAD_INPUT),\n"
        "         (StaleGeneration, Real.DENIED), (BlockedByPolicy, Real.BLOCKED),\n"
        "         (Conflict, Real.CONFLICT)]\n"
        "for cls, code in pairs:\n"
        "    assert cls.exit_code is code and cls('x').exit_code is code, cls\n"
        "    assert type(cls('x').exit_code) is Real\n"
        "error = BadInput('x')\n"
        "error.exit_code = type(error.exit_code)(4)\n"
        "assert error.exit_code is Real.BLOCKED and BadInput('y').exit_code is Real.BAD_INPUT\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.stdout == "ok\n", done.stderr
