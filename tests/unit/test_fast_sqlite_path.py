"""The hook fast path's reading of a ledger URL against ``ledger.urls.sqlite_file``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from onstation.core.errors import BadInput
from onstation.ledger.urls import sqlite_file
from onstation.relief.hotpath import _sqlite_path

_PIECES = st.sampled_from(
    ["", "/", "~", "~/x", "sqlite:", "SQLite:", "sqlite://", "postgresql://", "postgres://h/db",
     "http://", ":memory:", "\x00", "a", "ledger.db", "::", "//", "%", " ", "é"]
)  # fmt: skip


def _reference(url: str | None) -> str | None:
    try:
        return sqlite_file(url)
    except BadInput:
        return None


@settings(max_examples=500)
@given(st.lists(_PIECES, max_size=4).map("".join) | st.text(max_size=20) | st.none())
def test_the_fast_reading_is_the_ledgers(url: str | None) -> None:
    assert _sqlite_path(url) == _reference(url)
