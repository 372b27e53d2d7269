"""Issue 14: a rule with a literal *and* what must follow it (``_Rule`` ``after``) is skipped
on a text where no literal is followed by it: a brief's "Key Decisions" or "tokens" holds
a literal of the secret assignments but no "=" or ":" after a name, and a remote
``sim://origin`` holds "://" but no "@". Skipping must never change a redaction: each
property redacts with the gates in force and with every rule searched, and compares."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_redact import LOOKALIKES, SECRETS

from onstation.core import redact as r


def _every_rule(text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """``_redact`` with no literal and no gate: every rule searched, in order."""
    counts: Counter[str] = Counter()
    text = r._INVISIBLE.sub("", text)
    if not r._SUSPECT.search(text):
        return text, ()
    for rule in r._RULES:
        text = r._apply(rule, text, counts)
    return text, tuple(sorted(counts.items()))


def _rule(kind: str) -> r._Rule:
    return next(rule for rule in r._RULES if rule.kind == kind)


# Near misses and hits of the two gated rules: names, what may stand between a name and its
# "=" or ":" (quotes, every kind of white space, more name characters), and URLs.
_PIECES = [
    "key", "Key", "KEY", "api_key", "apiKey", "client-secret", "db.password", "PASSWD",
    "passphrase", "credentials", "my_pw", "_pass", "token", "tokens", "MAX_TOKENS", "pwd",
    "secret", "Secret", "x", "9", ".", "-", "_", '"', "'", "`", "=", "=>", ":", " ", "\t", "\n",
    "\r\n", "\u00a0", "\u2028", "\u3000", "\x0b", "value123", "abcdef123456", "$HOME", ",",
    "}", "]", ";", "\u2014", "\u00e9", "\u212a", "\u017f", "\u0130", "\u0131",
    "://", "https://", "http://", "ssh://git", "sim://origin", "@", "user", "TOKEN", ":x@",
    "/", "[", "]", "?", "#", "host.example",
]  # fmt: skip
_TEXTS = st.lists(
    st.sampled_from(_PIECES + LOOKALIKES)
    | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=4),
    max_size=14,
).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_TEXTS)
def test_the_gates_never_change_a_redaction(text: str) -> None:
    assert r._redact(text) == _every_rule(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.sampled_from([t.format(s) for _, t, s in SECRETS]),
                max_size=8))  # fmt: skip
def test_every_planted_secret_is_still_found(parts: list[str]) -> None:
    text = "".join(parts)
    assert r._redact(text) == _every_rule(text)


def test_every_secret_of_a_gated_rule_passes_its_gate() -> None:
    for kind in ("secret-assignment", "url-credentials"):
        rule = _rule(kind)
        for _, template, secret in SECRETS:
            text = template.format(secret)
            if rule.pattern.search(text):
                assert not rule.cannot_match(text, r._lowered(text)), (kind, text)


def test_a_brief_skips_the_assignments_and_the_credentials() -> None:
    text = (
        "## Turnover Brief \u2014 agent-1\n\n### Key Decisions Made\n- none\n"
        "### Effects Done (never repeat them)\n- git.push -> sim://origin (eff-1)\n"
        "context tokens used: 41%\n"
    )
    lowered = r._lowered(text)
    assert lowered is not None
    assert _rule("secret-assignment").cannot_match(text, lowered)
    assert _rule("url-credentials").cannot_match(text, lowered)
    assert r._redact(text) == _every_rule(text) == (text, ())


def test_the_gates_pass_where_the_rules_match() -> None:
    for text, kind in [
        ("API_KEY: abc", "secret-assignment"),
        ('"apiKey"  :\n "v"', "secret-assignment"),
        ("DB_PASSWORD=>x", "secret-assignment"),
        ("git remote https://TOKEN@host/x", "url-credentials"),
        ("ssh://git:pw@host", "url-credentials"),
    ]:
        assert not _rule(kind).cannot_match(text, r._lowered(text)), text
        assert r._redact(text) == _every_rule(text)
        assert r._redact(text)[1], text


class _CountingSuspect:
    def __init__(self, real: object) -> None:
        self.real = real
        self.searches = 0

    def search(self, text: str) -> object:
        self.searches += 1
        return self.real.search(text)  # type: ignore[attr-defined]


def test_a_text_no_rule_can_match_is_not_searched_for_suspects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counting = _CountingSuspect(r._SUSPECT)
    monkeypatch.setattr(r, "_SUSPECT", counting)
    brief = "## Turnover Brief \u2014 agent-1\n### Key Decisions Made\n" + "0123456789abcdef" * 8
    assert r._redact(brief) == (brief, ())
    assert counting.searches == 0
    # A text some rule's literals allow is searched as before.
    assert r._redact("API_KEY=abcdef123456")[1] == (("secret-assignment", 1),)
    assert counting.searches == 1
