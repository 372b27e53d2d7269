"""Named queries: every dialect answers to the same names, and to every name the code asks for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onstation.ledger.named_queries import DIALECTS, QUERIES_DIR, parse, queries

LEDGER = Path(__file__).parents[2] / "src" / "onstation" / "ledger"


def test_every_dialect_defines_the_same_names() -> None:
    names = {dialect: set(queries(dialect)) for dialect in DIALECTS}
    assert names["sqlite"] == names["postgres"]
    assert names["sqlite"]  # not vacuous


def test_every_name_the_ledger_asks_for_exists() -> None:
    asked = {
        name
        for path in LEDGER.glob("*.py")
        for name in re.findall(r'_q\(\s*"([a-z_]+)"', path.read_text(encoding="utf-8"))
    }
    asked |= {"halts_in_force", "halts_all"}  # chosen by a conditional expression
    assert asked, "no module asks for a named query"
    for dialect in DIALECTS:
        assert asked <= set(queries(dialect)), (dialect, asked - set(queries(dialect)))


def test_the_query_files_are_where_the_package_data_says() -> None:
    names = sorted(p.name for p in QUERIES_DIR.glob("*.sql"))
    assert names == sorted(["common.sql", *(f"{d}.sql" for d in DIALECTS)])


def test_a_dialect_overrides_only_names_the_common_file_has() -> None:
    common = parse((QUERIES_DIR / "common.sql").read_text(encoding="utf-8"))
    for dialect in DIALECTS:
        own = parse((QUERIES_DIR / f"{dialect}.sql").read_text(encoding="utf-8"))
        assert set(own) <= set(common), (dialect, set(own) - set(common))


def test_parse_reads_blocks_and_refuses_duplicates_and_empty_ones() -> None:
    text = "-- header\n-- name: a\n-- what a does\nSELECT 1;\n\n-- name: b\nSELECT\n  2;\n"
    assert parse(text) == {"a": "SELECT 1", "b": "SELECT\n  2"}
    with pytest.raises(ValueError, match="defined twice"):
        parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")
    with pytest.raises(ValueError, match="empty"):
        parse("-- name: a\n-- only a comment\n")
    with pytest.raises(ValueError, match="no named queries"):
        queries("mysql")
