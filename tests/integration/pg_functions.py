"""The statement a PostgreSQL ledger function runs after its locks (schema version 18), as
the server holds it, for tests that ask the planner about it.

``onstation_fence`` and ``onstation_admit`` lock first and then ``RETURN QUERY`` one
statement. A plan is asked of that statement as stored in ``pg_proc`` (not of a copy kept
in a test): each parameter ``p_name`` becomes a ``?`` placeholder cast to its declared type,
and the values are given by name.
"""

from __future__ import annotations

import re
from typing import Any

from onstation.ledger import Ledger


def function_statement(
    ledger: Ledger, function: str, values: dict[str, Any]
) -> tuple[str, tuple[Any, ...]]:
    """(SQL with ``?`` placeholders, its parameters) of the statement ``function`` returns
    the rows of, in the ledger's schema; ``values`` by parameter name (``p_node``...)."""
    row = ledger._read(lambda tx, _now: tx.one(
        "SELECT p.prosrc, p.proargnames, "
        "ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) AS t) "
        "FROM pg_proc p WHERE p.proname = ? "
        "AND p.pronamespace = CAST(current_schema() AS regnamespace)", (function,)))  # fmt: skip
    assert row is not None, f"no function {function} in the ledger's schema"
    source, names, types = row
    declared = dict(zip(names[: len(types)], types, strict=True))
    assert set(values) == set(declared), (sorted(values), sorted(declared))
    found = re.search(r"RETURN QUERY\s+(.*?);\s*END\s*$", source, re.DOTALL)
    assert found is not None, source
    order: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        name = match.group(0)
        order.append(name)
        return f"CAST(? AS {declared[name]})"

    pattern = r"\b(" + "|".join(re.escape(n) for n in declared) + r")\b"
    sql = re.sub(pattern, placeholder, found.group(1))
    return sql, tuple(values[n] for n in order)
