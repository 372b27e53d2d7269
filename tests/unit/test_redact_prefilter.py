"""Issue 14: a redaction rule is skipped on an ASCII text that lacks every literal its matches
hold (``_Rule.needs``). Skipping must never change a redaction: each property here redacts
the same text with the literals in force and with every rule searched, and compares."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_redact import LOOKALIKES, SECRETS

from onstation.core import redact as r


def _every_rule(text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    """``_redact`` as it was before the literals: every rule searched, in order."""
    counts: Counter[str] = Counter()
    text = r._INVISIBLE.sub("", text)
    if not r._SUSPECT.search(text):
        return text, ()
    for rule in r._RULES:
        text = r._apply(rule, text, counts)
    return text, tuple(sorted(counts.items()))


# Pieces of every rule's shapes, so that random joins come near (and into) each rule.
_PIECES = [
    "-----BEGIN ", "PRIVATE KEY-----", "-----END ", "eyJ", "eyJhbGciOiJIUzI1NiJ9.", "ghp_",
    "gho_", "github_pat_", "glpat-", "xoxb-", "https://hooks.slack.com/services/", "sk-ant-",
    "sk-", "sk_live_", "rk_test_", "AKIA", "A3TX", "AIza", "https://", "ssh://git:", "@",
    "?token=", "&sig=", ";key=", "Authorization: Bearer ", "bearer ", "BEARER ", "PASSWORD=",
    "api_key: ", '"client_secret": "', "db.Password = ", "MAX_TOKENS=", "_pw=", "Token: ",
    "Abc123" * 6, "0123456789abcdef" * 2, "=", ":", "\n", " ", '"', "'", "[redacted: jwt]",
    # Outside ASCII: a brief's dash, and the letters re's case folding reads as ASCII ones.
    " \u2014 ", "\u00e9", "\u0130", "\u0131", "\u017f", "\u212a", "PA\u017fSWORD=",
    "API_\u212aEY: ", "AUTHOR\u0130ZATION: Bearer ", "to\u212aen=",
]  # fmt: skip
_TEXTS = st.lists(
    st.sampled_from(_PIECES + LOOKALIKES)
    | st.text(alphabet=st.characters(codec="ascii"), max_size=12)
    | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6),
    max_size=12,
).map("".join)


@settings(max_examples=600, deadline=None)
@given(_TEXTS)
def test_the_literals_never_change_a_redaction(text: str) -> None:
    assert r._redact(text) == _every_rule(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.sampled_from([t.format(s) for _, t, s in SECRETS]),
                max_size=8))  # fmt: skip
def test_every_planted_secret_is_found_with_the_literals(parts: list[str]) -> None:
    text = " ".join(parts)
    assert r._redact(text) == _every_rule(text)


@pytest.mark.parametrize(("kind", "template", "secret"), SECRETS)
def test_each_rule_still_finds_its_secret(kind: str, template: str, secret: str) -> None:
    text = template.format(secret)
    assert r._redact(text) == _every_rule(text)
    assert secret not in r._redact(text)[0]


@pytest.mark.parametrize("name", ["API_\u212aEY", "MY_PA\u017fS", "PRIVATE_\u212aEY"])
def test_a_letter_folded_from_outside_ascii_is_still_found(name: str) -> None:
    # re's case folding outside ASCII is wider than str.lower(): the Kelvin sign reads as a
    # "k", the long s as an "s". A text holding one searches every case-insensitive rule.
    text = f"{name}=abcdef123456"
    assert r._redact(text) == _every_rule(text)
    assert r._redact(text)[1] == (("secret-assignment", 1),)


def test_the_literals_skip_rules_on_a_plain_text() -> None:
    # A brief-like ASCII text that passes the first sieve but holds no rule's literal.
    text = "files: " + "0123456789abcdef" * 3 + " agent-1/.bridge/reports/agent-1-relief-3.md"
    lowered = text.lower()
    skipped = [rule.kind for rule in r._RULES if rule.cannot_match(text, lowered)]
    assert "secret-assignment" in skipped and "jwt" in skipped
    assert r._redact(text) == (text, ())


def _tree_reference(value: object, skip: frozenset[str]) -> tuple[object, dict[str, int]]:
    """``redact_tree`` as it was: every text through :func:`redact`, subclasses alike."""
    counts: Counter[str] = Counter()

    def walk(node: object) -> object:
        if isinstance(node, str):
            done = r.redact(node)
            counts.update(done.kinds)
            return done.text
        if isinstance(node, dict):
            return {k: v if k in skip else walk(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [walk(v) for v in node]
        return node

    return walk(value), dict(sorted(counts.items()))


class _Text(str):
    """A str subclass: redacted, never remembered by its text."""


_LEAVES = _TEXTS | _TEXTS.map(_Text) | st.integers() | st.none() | st.booleans()
_TREES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.sampled_from(["a", "effects", "text", "k"]), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_TREES, st.sampled_from([frozenset(), frozenset({"effects"})]))
def test_redact_tree_redacts_as_every_text_through_redact(
    tree: object, skip: frozenset[str]
) -> None:
    assert r.redact_tree(tree, skip=skip) == _tree_reference(tree, skip)


def test_the_odd_folds_are_every_character_folded_to_an_ascii_letter() -> None:
    import re
    import sys

    letter = re.compile("(?i)[a-z]")
    folded = [chr(c) for c in range(0x80, sys.maxunicode + 1)
              if not 0xD800 <= c <= 0xDFFF and letter.fullmatch(chr(c))]  # fmt: skip
    assert sorted(folded) == sorted(r._ODD_FOLDS)
    for odd, ascii_letter in zip(r._ODD_FOLDS, "iisk", strict=True):
        assert re.fullmatch(f"(?i){ascii_letter}", odd)


def test_a_brief_with_a_dash_skips_the_rules_it_cannot_match() -> None:
    text = "Remaining work \u2014 none; files: " + "0123456789abcdef" * 3
    assert r._lowered(text) == text.lower()
    skipped = [rule.kind for rule in r._RULES if rule.cannot_match(text, r._lowered(text))]
    assert "secret-assignment" in skipped and "jwt" in skipped
    assert r._lowered("\u212aEY") is None  # the Kelvin sign: every folded rule searches
    assert r._redact(text) == _every_rule(text) == (text, ())
