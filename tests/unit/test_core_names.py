"""Identifiers that may reach a file path: an allowlist, one-line errors naming the field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onstation.core.errors import BadInput
from onstation.core.names import MAX_NAME_LENGTH, validate_name


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
