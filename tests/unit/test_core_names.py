"""Identifiers that may reach a file path: an allowlist, one-line errors naming the field."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onstation.core.errors import BadInput
from onstation.core.names import MAX_NAME_LENGTH, validate_free_text, validate_name


@pytest.mark.parametrize(
    "good", ["a", "exec-1", "coord.auth", "team_lead", "x" * MAX_NAME_LENGTH, "n@host:1"]
)
def test_safe_names_pass(good: str) -> None:
    assert validate_name(good) == good


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("", "empty"),
        ("a/b", "path separator"),
        ("a\\b", "path separator"),
        ("..", "'..'"),
        ("a..b", "'..'"),
        ("-rf", "start with '-'"),
        ("a\x00b", "NUL"),
        ("x" * (MAX_NAME_LENGTH + 1), "longer than"),
        ("café", "ASCII"),
        ("a b", "may hold only"),
        (".hidden", "may hold only"),
    ],
)
def test_unsafe_names_fail_with_the_reason(bad: str, why: str) -> None:
    with pytest.raises(BadInput, match=why) as info:
        validate_name(bad, "node")
    assert info.value.message.startswith("node:")
    assert "\n" not in info.value.message


@given(st.text(max_size=200))
def test_every_accepted_name_is_path_safe(value: str) -> None:
    try:
        validate_name(value)
    except BadInput:
        return
    assert "/" not in value and ".." not in value and "\x00" not in value
    assert not value.startswith(("-", ".")) and 0 < len(value) <= MAX_NAME_LENGTH


@pytest.mark.parametrize("bad", ["abc\n", "abc\r\n", "a\nb", "\n", "abc\t", "abc "])
def test_a_line_break_or_blank_anywhere_is_refused(bad: str) -> None:
    """A ``$``-anchored match let a trailing line break through ("abc\\n" was accepted): a
    name reaches file names, argv and one-line messages, so no line break may be in it."""
    with pytest.raises(BadInput, match="may hold only") as info:
        validate_name(bad, "node")
    assert info.value.message.startswith("node:") and "\n" not in info.value.message


_RULE_CHARS = "abcXYZ019_.:@+=-/\\\x00\n é"


@given(st.text(alphabet=_RULE_CHARS, max_size=MAX_NAME_LENGTH + 3))
def test_accepted_exactly_when_every_rule_holds(value: str) -> None:
    """The one-match fast path accepts exactly the names every stated rule accepts."""
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:@+=-")
    expected = (
        0 < len(value) <= MAX_NAME_LENGTH
        and set(value) <= allowed
        and value[0] not in "-.:@+="
        and ".." not in value
    )
    try:
        validate_name(value)
        accepted = True
    except BadInput:
        accepted = False
    assert accepted == expected, value


@given(st.text(st.characters(codec="utf-8")) | st.text(st.characters(max_codepoint=0x2FF)))
def test_free_text_refuses_exactly_the_control_characters_but_tab_and_line_feed(
    value: str,
) -> None:
    # The rule as Unicode states it, one character at a time (the check searches a class).
    control = any(unicodedata.category(ch) == "Cc" and ch not in "\t\n" for ch in value)
    if control or "\x00" in value:
        with pytest.raises(BadInput):
            validate_free_text(value, "why", max_length=10_000)
    else:
        assert validate_free_text(value, "why", max_length=10_000) == value


def test_free_text_control_class_covers_every_cc_character() -> None:
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        if unicodedata.category(ch) != "Cc" or ch in "\t\n":
            continue
        with pytest.raises(BadInput):
            validate_free_text(f"a{ch}b", "why")
