"""The literals a prepared statement's EXECUTE carries (``ledger.pg_backend.executing``),
against a real server: every value the ledger sends arrives as sent, quoted as psycopg
quotes it, and what psycopg refuses is refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import _pg_base, _require_pg
from onstation.ledger.pg_backend import executing

#: Text as the ledger sends it: any code point but NUL and the surrogates (which no
#: encoding writes), quotes, backslashes and dollars made likely.
TEXT = st.lists(
    st.one_of(
        st.sampled_from(["'", "\\", "$", '"', "--", "/*", ";", "E'", "\n", "\t", "é", "🛰"]),
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    ),
    max_size=20,
).map("".join)
INTEGER = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.fixture(scope="module")
def conn() -> Iterator[psycopg.Connection[Any]]:
    _require_pg()
    with psycopg.connect(_pg_base(), autocommit=True) as connection:
        connection.execute(
            "PREPARE onstation_test_literals (text, bigint, boolean, text, bigint) AS "
            "SELECT $1, $2, $3, $4, $5"
        )
        yield connection


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=TEXT, number=INTEGER, flag=st.booleans(), other=st.one_of(st.none(), TEXT),
       negative=st.integers(max_value=-1, min_value=-(2**63)))  # fmt: skip
def test_every_value_arrives_as_sent(
    conn: psycopg.Connection[Any], text: str, number: int, flag: bool, other: str | None,
    negative: int,
) -> None:  # fmt: skip
    sent = (text, number, flag, other, negative)
    statement = executing(conn, "onstation_test_literals", sent)
    assert conn.execute(statement, prepare=False).fetchone() == sent


def test_the_literals_are_psycopgs(conn: psycopg.Connection[Any]) -> None:
    """The same bytes psycopg's own ``Literal`` composes, for the values written directly."""
    from psycopg import sql

    sent = ('it\'s \\ $1 "x"', "ünï", 0, -5, 2**62, None, True, False)
    composed = sql.SQL("EXECUTE {}({})").format(
        sql.Identifier("n"), sql.SQL(", ").join(sql.Literal(v) for v in sent)
    )
    assert executing(conn, "n", sent) == composed.as_bytes(conn)


def test_text_holding_a_nul_is_refused_as_psycopg_refuses_it(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.DataError, match="NUL"):
        executing(conn, "onstation_test_literals", ("a\x00b", 1, True, None, -1))


def test_other_values_are_quoted_by_psycopg(conn: psycopg.Connection[Any]) -> None:
    """A float (a reading's percent) goes through psycopg's ``Literal``, and arrives."""
    conn.execute("PREPARE onstation_test_real (real) AS SELECT $1")
    try:
        row = conn.execute(executing(conn, "onstation_test_real", (12.5,)), prepare=False)
        assert row.fetchone() == (12.5,)
    finally:
        conn.execute("DEALLOCATE onstation_test_real")
