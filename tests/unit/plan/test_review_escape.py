"""The review's Markdown escaping (one str.translate pass, issue 14) escapes exactly as the
replace-per-character form it replaced: every metacharacter, the backslash first."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from onstation.plan.review import _clean


def _reference(text: str, limit: int = 300) -> str:
    value = " ".join(text.split())
    if len(value) > limit:
        value = value[: limit - 3] + "..."
    for ch in ("\\", "|", "`", "*", "_", "#", "<", ">", "[", "]"):
        value = value.replace(ch, "\\" + ch)
    return value


@given(st.text(alphabet=st.sampled_from(list("\\|`*_#<>[]ab \n\t")) | st.characters()))
def test_escaping_matches_the_reference(text: str) -> None:
    assert _clean(text) == _reference(text)
    assert _clean(text, 20) == _reference(text, 20)


def test_every_metacharacter_is_escaped_once() -> None:
    assert _clean("a\\b|c`d*e_f#g<h>i[j]k") == "a\\\\b\\|c\\`d\\*e\\_f\\#g\\<h\\>i\\[j\\]k"
