"""What a secret needs to look like before the redaction rules can find it.

:mod:`onstation.core.redact` runs its rules only on a text these shapes flag; the hook fast
path checks them before it imports the rules at all, so a tool call whose summary cannot
hold a secret (most of them) costs no redaction. Kept apart from the rules so that checking
costs two small patterns, not the whole ruleset.

Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import re

#: Zero-width characters, bidirectional controls, the soft hyphen and other invisible format
#: characters: a reader does not see them, so a secret split by one still reads whole (they
#: are removed before any rule runs).
INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]")

#: What every redaction rule needs somewhere in a text before it can match (case-insensitive):
#: a long run of token characters, a PEM armour line, a token prefix, a URL's userinfo or
#: query, an authorization header, or a word that names a secret. A text without any of them
#: holds no secret the rules know (a property test holds this against the rules:
#: tests/unit/test_redact.py).
SUSPECT = re.compile(
    r"[A-Za-z0-9]{16}|-----BEGIN|eyJ|glpat-|xox|hooks\.slack|sk-|AIza|@|bearer|authoriz"
    r"|pass|pwd|secret|token|key|credential|_pw|[?&;][^=\s]*=",
    re.IGNORECASE,
)


def may_hold_secret(text: str) -> bool:
    """Whether ``text`` (invisible characters removed) has a shape a secret needs."""
    return SUSPECT.search(INVISIBLE.sub("", text)) is not None


__all__ = ["INVISIBLE", "SUSPECT", "may_hold_secret"]
