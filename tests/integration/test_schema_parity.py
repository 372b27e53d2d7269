"""The SQLite and PostgreSQL migrations build the same schema.

Both dialects are written by hand, migration by migration; this test catches the one that
was forgotten: every table, every column (with its nullability and whether it is part of
the primary key), every named index and the unique constraints, the same on both.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from onstation.ledger import open_backend

Schema = dict[str, Any]

#: Tables only one dialect needs, each with its reason. PostgreSQL serializes halts against
#: admissions through a lock on the one row of ``gate``; SQLite's writer lock already does.
DIALECT_ONLY = {"gate": "postgres"}


def _sqlite_schema(path: Path) -> Schema:
    backend = open_backend(str(path), require_migrated=False)
    backend.migrate()
    backend.close()
    conn = sqlite3.connect(path)
    try:
        tables = sorted(r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ))  # fmt: skip
        columns = {
            table: sorted(
                (name, bool(notnull) or pk > 0, pk > 0)
                for _cid, name, _type, notnull, _default, pk in conn.execute(
                    f'PRAGMA table_info("{table}")'
                )
            )
            for table in tables
        }
        indexes = sorted(
            r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
            )
        )  # fmt: skip
        unique = sorted(
            (table, tuple(c[2] for c in conn.execute(f'PRAGMA index_info("{idx[1]}")')))
            for table in tables
            for idx in conn.execute(f'PRAGMA index_list("{table}")')
            if idx[2] and idx[3] != "pk"
        )
    finally:
        conn.close()
    return {"tables": tables, "columns": columns, "indexes": indexes, "unique": unique}


def _pg_schema(url: str) -> Schema:
    import psycopg

    schema = url.rsplit("schema=", 1)[1]
    base = url.split("?", 1)[0]
    with psycopg.connect(base) as conn:
        tables = sorted(r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_type = 'BASE TABLE'", (schema,)
        ))  # fmt: skip
        keys = {
            (r[0], r[1])
            for r in conn.execute(
                "SELECT k.table_name, k.column_name FROM information_schema.key_column_usage k "
                "JOIN information_schema.table_constraints c ON c.constraint_name = "
                "k.constraint_name AND c.table_schema = k.table_schema "
                "WHERE c.constraint_type = 'PRIMARY KEY' AND k.table_schema = %s", (schema,)
            )
        }  # fmt: skip
        columns = {
            table: sorted(
                (name, nullable == "NO", (table, name) in keys)
                for name, nullable in conn.execute(
                    "SELECT column_name, is_nullable FROM information_schema.columns "
                    "WHERE table_schema = %s AND table_name = %s", (schema, table)
                )
            )
            for table in tables
        }  # fmt: skip
        indexes = sorted(
            r[0] for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s "
                "AND indexname NOT LIKE '%%_pkey' AND indexdef NOT LIKE '%%_key ON %%'",
                (schema,),
            )
        )  # fmt: skip
        unique = sorted(
            (r[0], tuple(r[1]))
            for r in conn.execute(
                "SELECT t.relname, array_agg(a.attname ORDER BY k.ord) FROM pg_index i "
                "JOIN pg_class t ON t.oid = i.indrelid "
                "JOIN pg_namespace n ON n.oid = t.relnamespace "
                "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
                "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum "
                "WHERE n.nspname = %s AND i.indisunique AND NOT i.indisprimary "
                "GROUP BY i.indexrelid, t.relname", (schema,)
            )
        )  # fmt: skip
    return {"tables": tables, "columns": columns, "indexes": indexes, "unique": unique}


def test_sqlite_and_postgres_migrations_build_the_same_schema(tmp_path: Path, pg_url: str) -> None:
    lite = _sqlite_schema(tmp_path / "ledger.db")
    pg = _pg_schema(pg_url)
    pg["tables"] = [t for t in pg["tables"] if DIALECT_ONLY.get(t) != "postgres"]
    assert lite["tables"] == pg["tables"]
    for table in lite["tables"]:
        assert lite["columns"][table] == pg["columns"][table], table
    assert lite["indexes"] == pg["indexes"]
    assert lite["unique"] == pg["unique"]
