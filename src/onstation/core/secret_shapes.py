"""What a secret needs to look like before the redaction rules can find it.

:mod:`onstation.core.redact` runs its rules only on a text these shapes flag; the hook fast
path checks them before it imports the rules at all, so a tool call whose summary cannot
hold a secret (most of them) costs no redaction. Kept apart from the rules so that checking
costs two small patterns, not the whole ruleset.

The hook fast path checks an ASCII text (most summaries: a command, a path) without ``re``,
whose import costs a hook process milliseconds: :func:`without_invisible` and
:func:`suspect` answer exactly as the two patterns do (property tests hold them equal:
tests/unit/test_lazy_patterns.py), and compile them only for a text that is not ASCII.

Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

from onstation.core.lazyre import IGNORECASE, LazyPattern

#: Zero-width characters, bidirectional controls, the soft hyphen and other invisible format
#: characters: a reader does not see them, so a secret split by one still reads whole (they
#: are removed before any rule runs). Compiled at first use, as SUSPECT (re costs a hook
#: process its import).
INVISIBLE = LazyPattern("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]")

#: What every redaction rule needs somewhere in a text before it can match (case-insensitive):
#: a long run of token characters, a PEM armour line, a token prefix, a URL's userinfo or
#: query, an authorization header, or a word that names a secret. A text without any of them
#: holds no secret the rules know (a property test holds this against the rules:
#: tests/unit/test_redact.py).
SUSPECT = LazyPattern(
    r"[A-Za-z0-9]{16}|-----BEGIN|eyJ|glpat-|xox|hooks\.slack|sk-|AIza|@|bearer|authoriz"
    r"|pass|pwd|secret|token|key|credential|_pw|[?&;][^=\s]*=",
    IGNORECASE,
)


#: SUSPECT's literal alternatives, lower-cased: between ASCII characters its case folding
#: is ASCII's (the Unicode foldings it adds, a dotless i or a long s, are not ASCII).
_SUSPECT_WORDS = ("-----begin", "eyj", "glpat-", "xox", "hooks.slack", "sk-", "aiza", "@",
                  "bearer", "authoriz", "pass", "pwd", "secret", "token", "key", "credential",
                  "_pw")  # fmt: skip
#: Every ASCII character that is not [A-Za-z0-9] to a space: the token runs are then words.
_NOT_ALNUM = {c: " " for c in range(128) if not chr(c).isalnum()}


def without_invisible(text: str) -> str:
    """``INVISIBLE.sub("", text)``: every invisible character is outside ASCII, so an ASCII
    text is returned as it is."""
    if text.isascii():
        return text
    return INVISIBLE.sub("", text)


def suspect(text: str) -> bool:
    """``SUSPECT.search(text) is not None``, for an ASCII text without ``re``."""
    if not text.isascii():
        return SUSPECT.search(text) is not None
    lowered = text.lower()
    if any(word in lowered for word in _SUSPECT_WORDS):
        return True
    # [A-Za-z0-9]{16}: an ASCII character is alphanumeric exactly when it is one of those.
    if any(len(run) >= 16 for run in text.translate(_NOT_ALNUM).split()):
        return True
    # [?&;][^=\s]*= : a separator, then no "=" and no white space up to an "=".
    if "=" not in text or not ("?" in text or "&" in text or ";" in text):
        return False
    armed = False
    for ch in text:
        if ch == "=":
            if armed:
                return True
        elif ch.isspace():
            armed = False
        elif ch in "?&;":
            armed = True
    return False


def may_hold_secret(text: str) -> bool:
    """Whether ``text`` (invisible characters removed) has a shape a secret needs."""
    return suspect(without_invisible(text))


__all__ = ["INVISIBLE", "SUSPECT", "may_hold_secret", "suspect", "without_invisible"]
