"""Fence+admit round trips per second through the ledger, against bare SQL on the same database.

One round trip is what a relief does to the lease table: fence the current generation
(compare-and-swap generation + 1, revoking the live lease and the generation's grants) and
admit a body for the new generation, each in its own transaction, with one history row per
transition.

Baseline (the target's): the same two transactions as hand-written SQL on a raw driver
connection (sqlite3 / psycopg), writing the same rows: the conditional
``UPDATE ... WHERE generation = expected RETURNING``, the lease and grant revocations, the
new lease and the history rows. The ratio library/baseline is what the library's Python,
validation and records cost; the target is at least 0.70. For information a second baseline
is printed too: the bare CAS and the lease insert alone, without grants or history.

Run: ``./dev bench ledger`` (PostgreSQL from ONSTATION_BENCH_PG, default the local test
database; skipped with a note when no server answers). ``ONSTATION_BENCH_ROUNDS`` sets the
round trips per sample.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onstation.ledger import Ledger, open_backend

ROUNDS = int(os.environ.get("ONSTATION_BENCH_ROUNDS", "200"))
REPEATS = 7
TARGET = 0.70


def _library_loop(ledger: Ledger, node: str, rounds: int) -> None:
    generation = ledger.get_node(node).generation
    for _ in range(rounds):
        generation = ledger.fence(node, expect_generation=generation).generation
        ledger.acquire_lease(node, expect_generation=generation)


def _returns(sql: str) -> bool:
    return sql.startswith("SELECT") or " RETURNING " in sql


class _Bare:
    """The baseline: a raw driver connection running the CAS as plain SQL, nothing else."""

    def __init__(self, url: str) -> None:
        self.postgres = url.startswith("postgresql://")
        if self.postgres:
            import psycopg
            from psycopg.conninfo import make_conninfo

            base, _, schema = url.partition("?schema=")
            self.conn: Any = psycopg.connect(make_conninfo(base), autocommit=True)
            self.conn.execute(f'SET search_path TO "{schema}"')
        else:
            self.conn = sqlite3.connect(url, isolation_level=None, timeout=30)
            for pragma in ("journal_mode = WAL", "synchronous = FULL", "busy_timeout = 30000"):
                self.conn.execute(f"PRAGMA {pragma}")

    def sql(self, text: str) -> str:
        return text.replace("?", "%s") if self.postgres else text

    def transaction(self, statements: list[tuple[str, tuple[Any, ...]]]) -> Any:
        first = None
        if self.postgres:
            with self.conn.transaction():
                for sql, params in statements:
                    cursor = self.conn.execute(self.sql(sql), params)
                    first = cursor.fetchone() if first is None and _returns(sql) else first
            return first
        self.conn.execute("BEGIN IMMEDIATE")
        for sql, params in statements:
            cursor = self.conn.execute(sql, params)
            first = cursor.fetchone() if first is None and _returns(sql) else first
        self.conn.execute("COMMIT")
        return first


def _bare_loop(bare: _Bare, node: str, rounds: int, *, same_writes: bool) -> None:
    """The fence+admit as hand-written SQL on a raw connection.

    ``same_writes``: the rows the ledger must write for it (CAS, lease fenced, grants revoked,
    the new lease, one history row per transition). Otherwise: only the CAS and the lease.
    """
    row = bare.transaction([("SELECT generation FROM agent_node WHERE name = ?", (node,))])
    generation = int(row[0])
    now = time.time_ns() // 1000
    event = (
        "INSERT INTO event (node, kind, generation, actor, detail, at) VALUES (?, ?, ?, ?, ?, ?)"
    )
    for _ in range(rounds):
        fence = [
            ("UPDATE agent_node SET generation = generation + 1 "
             "WHERE name = ? AND generation = ? RETURNING generation", (node, generation)),
            ("UPDATE body_lease SET state = 'FENCED', ended_at = ?, end_reason = 'bench' "
             "WHERE node = ? AND state = 'LIVE'", (now, node)),
        ]  # fmt: skip
        if same_writes:
            fence += [
                ("UPDATE capability_grant SET state = 'REVOKED', revoked_at = ? "
                 "WHERE node = ? AND state = 'LIVE' AND generation <= ?", (now, node, generation)),
                (event, (node, "node.fenced", generation + 1, "bench", "{}", now)),
            ]  # fmt: skip
        got = bare.transaction(fence)
        assert got is not None
        generation = int(got[0])
        admit = [
            ("INSERT INTO body_lease (node, generation, state, acquired_at, renewed_at, "
             "expires_at) VALUES (?, ?, 'LIVE', ?, ?, ?)",
             (node, generation, now, now, now + 3_600_000_000)),
        ]  # fmt: skip
        if same_writes:
            admit.append((event, (node, "lease.acquired", generation, "bench", "{}", now)))
        bare.transaction(admit)


def _timed(run: Callable[[int], None], rounds: int) -> float:
    start = time.perf_counter()
    run(rounds)
    return rounds / (time.perf_counter() - start)


def _measure(url: str, label: str) -> None:
    ledger = Ledger.open(url)
    baseline = _Bare(url)
    try:
        for name in ("bench-library", "bench-bare", "bench-minimal"):
            ledger.register_node(name)
            ledger.acquire_lease(name)

        def library_run(n: int) -> None:
            _library_loop(ledger, "bench-library", n)

        def bare_run(n: int) -> None:
            _bare_loop(baseline, "bench-bare", n, same_writes=True)

        def minimal_run(n: int) -> None:
            _bare_loop(baseline, "bench-minimal", n, same_writes=False)

        for warm_up in (library_run, bare_run, minimal_run):
            warm_up(20)  # connections, prepared statements, the WAL
        # Samples alternate, so a noisy neighbour slows every side of a round alike.
        rounds = [
            (_timed(library_run, ROUNDS), _timed(bare_run, ROUNDS), _timed(minimal_run, ROUNDS))
            for _ in range(REPEATS)
        ]
    finally:
        ledger.close()
        baseline.conn.close()
    library, bare, minimal = (statistics.median(r[i] for r in rounds) for i in range(3))
    ratio = statistics.median(r[0] / r[1] for r in rounds)
    minimal_ratio = statistics.median(r[0] / r[2] for r in rounds)
    verdict = "meets" if ratio >= TARGET else "MISSES"
    print(
        f"{label:<9} library {library:7.1f}/s | baseline bare SQL, same writes {bare:7.1f}/s "
        f"-> ratio {ratio:4.2f} ({verdict} target {TARGET:.2f}) | bare CAS + lease only "
        f"{minimal:7.1f}/s -> ratio {minimal_ratio:4.2f}",
        flush=True,
    )


def main() -> None:
    print(
        f"fence+admit round trips per second, {ROUNDS} per sample, median of {REPEATS} "
        "alternating samples; baseline: bare SQL on a raw connection, same database"
    )
    with tempfile.TemporaryDirectory(prefix="onstation-bench-") as scratch:
        _measure(str(Path(scratch) / "ledger.db"), "sqlite")
    base = os.environ.get("ONSTATION_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    try:
        backend = open_backend(url, require_migrated=False)
    except Exception as exc:
        print(f"postgres    skipped: {str(exc).splitlines()[0]}")
        return
    backend.migrate()
    backend.close()
    try:
        _measure(url, "postgres")
    finally:
        import psycopg

        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()
