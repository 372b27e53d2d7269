"""The Claude Code version parser of core/hull.py reads a version's leading digits without
``re`` (the hook path imports the module; issue 14): the same answers as the regex it
replaced, for any text."""

from __future__ import annotations

import re
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from onstation.core.hull import _parse_version


def _by_regex(value: object) -> tuple[int, ...] | None:
    if not isinstance(value, str):
        return None
    parts: list[int] = []
    for piece in value.strip().split(".")[:3]:
        digits = re.match(r"\d+", piece)
        if digits is None:
            return None
        parts.append(int(digits.group(0)))
    return tuple(parts) if len(parts) == 3 else None


_pieces = st.text(alphabet=st.sampled_from("0123456789٣۷.-abx \u0660\uff11"), max_size=20)


@given(st.one_of(_pieces, st.text(max_size=30), st.none(), st.integers()))
def test_the_parser_answers_as_the_regex_did(value: object) -> None:
    assert _parse_version(value) == _by_regex(value)


def test_examples() -> None:
    assert _parse_version("2.1.197") == (2, 1, 197)
    assert _parse_version(" 1.0.3-beta ") == (1, 0, 3)
    assert _parse_version("1.x.3") is None and _parse_version("1.2") is None


def test_importing_the_hull_module_does_not_import_re() -> None:
    code = "import sys; import onstation.core.hull; print('re' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "False"


_FAMILY_VERSION = r"(opus|sonnet|fable|haiku)-(\d{1,2})(?:[-.](\d{1,2}))?(?!\d)"


def _families_by_regex(name: str) -> list[tuple[str, int, int]]:
    return [(m.group(1), int(m.group(2)), int(m.group(3) or 0))
            for m in re.finditer(_FAMILY_VERSION, name)]  # fmt: skip


_model_ids = st.lists(
    st.sampled_from(["opus", "sonnet", "fable", "haiku", "claude", "-", ".", "0", "1", "4",
                     "5", "7", "12", "123", "٣", "x", "[1m]", "-2025"]),
    max_size=12,
).map("".join)  # fmt: skip


@given(st.one_of(_model_ids, st.text(max_size=40).map(str.lower)))
def test_family_versions_are_what_the_pattern_found(name: str) -> None:
    from onstation.core.hull import family_versions

    assert family_versions(name) == _families_by_regex(name)


def test_model_windows_by_name() -> None:
    from onstation.core.hull import DEFAULT_WINDOW, ONE_MILLION, model_window

    assert model_window("claude-opus-4-7") == ONE_MILLION
    assert model_window("claude-opus-4-6") == DEFAULT_WINDOW
    assert model_window("claude-sonnet-5-20260101") == ONE_MILLION
    assert model_window("claude-sonnet-4-5") == DEFAULT_WINDOW
    assert model_window("claude-opus-4.10") == ONE_MILLION
    assert model_window("claude-haiku-9") == DEFAULT_WINDOW
    assert model_window("claude-opus-4-6[1m]") == ONE_MILLION
