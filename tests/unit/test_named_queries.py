"""Named queries: every dialect answers to the same names, and to every name the code asks for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onstation.ledger.named_queries import (
    DIALECTS,
    OWN_PREFIX,
    QUERIES_DIR,
    _read_all,
    overrides,
    parse,
    portable,
    queries,
)

LEDGER = Path(__file__).parents[2] / "src" / "onstation" / "ledger"


def test_every_dialect_defines_the_same_portable_names() -> None:
    names = {
        dialect: {n for n in queries(dialect) if not n.startswith(OWN_PREFIX[dialect])}
        for dialect in DIALECTS
    }
    assert names["sqlite"] == names["postgres"] == set(portable())
    assert names["sqlite"]  # not vacuous


def test_a_dialect_only_statement_is_named_as_such() -> None:
    own = {n for n in queries("postgres") if n.startswith("pg_")}
    assert own  # PostgreSQL's data-modifying WITH statements
    assert not own & set(queries("sqlite"))


def test_every_name_the_ledger_asks_for_exists() -> None:
    asked = {
        name
        for path in LEDGER.glob("*.py")
        for name in re.findall(r'_q\(\s*"([a-z_]+)"', path.read_text(encoding="utf-8"))
    }
    asked |= {"halts_in_force", "halts_all"}  # chosen by a conditional expression
    assert asked, "no module asks for a named query"
    for dialect in DIALECTS:
        # A dialect's own statement is asked for only on that dialect's branch.
        wanted = {
            n
            for n in asked
            if not any(n.startswith(p) for d, p in OWN_PREFIX.items() if d != dialect)
        }
        assert wanted <= set(queries(dialect)), (dialect, wanted - set(queries(dialect)))


def test_each_query_file_belongs_to_a_ledger_module() -> None:
    files = [
        *QUERIES_DIR.glob("*.sql"),
        *(p for d in DIALECTS for p in (QUERIES_DIR / d).glob("*.sql")),
    ]
    assert files
    for path in files:
        assert (LEDGER / f"{path.stem}.py").is_file(), path
    assert {p.name for p in QUERIES_DIR.iterdir() if p.is_dir()} <= set(DIALECTS)


def test_a_dialect_overrides_only_names_the_portable_files_have() -> None:
    for dialect in DIALECTS:
        foreign = {n for n in overrides(dialect) if not n.startswith(OWN_PREFIX[dialect])}
        assert foreign <= set(portable()), dialect


def test_an_unprefixed_dialect_only_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onstation.ledger.named_queries as nq

    (tmp_path / "postgres").mkdir()
    (tmp_path / "a.sql").write_text("-- name: a\nSELECT 1;\n")
    (tmp_path / "postgres" / "a.sql").write_text("-- name: b\nSELECT 2;\n")
    monkeypatch.setattr(nq, "QUERIES_DIR", tmp_path)
    nq.portable.cache_clear()
    nq.overrides.cache_clear()
    try:
        with pytest.raises(ValueError, match="name no portable query"):
            nq.overrides("postgres")
    finally:
        nq.portable.cache_clear()
        nq.overrides.cache_clear()


def test_a_name_defined_in_two_files_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.sql").write_text("-- name: same\nSELECT 1;\n")
    (tmp_path / "b.sql").write_text("-- name: same\nSELECT 2;\n")
    with pytest.raises(ValueError, match="also defined in another file"):
        _read_all([tmp_path / "a.sql", tmp_path / "b.sql"])


def test_parse_reads_blocks_and_refuses_duplicates_and_empty_ones() -> None:
    text = "-- header\n-- name: a\n-- what a does\nSELECT 1;\n\n-- name: b\nSELECT\n  2;\n"
    assert parse(text) == {"a": "SELECT 1", "b": "SELECT\n  2"}
    with pytest.raises(ValueError, match="defined twice"):
        parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")
    with pytest.raises(ValueError, match="empty"):
        parse("-- name: a\n-- only a comment\n")
    with pytest.raises(ValueError, match="no named queries"):
        queries("mysql")
