"""Fence+admit round trips per second through the ledger, against bare SQL on the same database.

One round trip is what a relief does to the lease table: fence the current generation
(compare-and-swap generation + 1, revoking the live lease and the generation's grants) and
admit a body for the new generation, each in its own transaction, with one history row per
transition.

Baseline (the target's): the same two transactions as hand-written SQL on a raw driver
connection (sqlite3 / psycopg), writing the same rows: the conditional
``UPDATE ... WHERE generation = expected RETURNING``, the lease and grant revocations, the
new lease and the history rows (with the same details, encoded as JSON per row), on a
connection with the ledger's own settings (WAL, synchronous=FULL, foreign keys enforced).
The ratio library/baseline is what the library's Python, validation and records cost, less
what its fewer round trips save; the target is at least 0.90 (issue 14). For information a
second baseline is printed too: the bare CAS and the lease insert alone, without grants or
history; and the CPU time per round trip of both sides (this process's: on PostgreSQL the
client's only), which a loaded machine disturbs far less than the wall-clock rates. On a
local PostgreSQL server this process and both server sessions are held on one CPU while the
samples run (bench/_one_cpu.py): a round trip otherwise costs one of two times by where the
scheduler put each session, and the library's and the baseline's connections would each
carry their own.

Run: ``./dev bench ledger`` (PostgreSQL from ONSTATION_BENCH_PG, default the local test
database; skipped with a note when no server answers). ``ONSTATION_BENCH_ROUNDS`` sets the
round trips per sample.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench._one_cpu import ledger_session, one_cpu, server_session
from onstation.ledger import Ledger, open_backend

ROUNDS = int(os.environ.get("ONSTATION_BENCH_ROUNDS", "50"))
#: Many short samples rather than a few long ones: a neighbour's burst of disk or CPU load
#: then spoils a few samples of every side instead of most of one side's.
REPEATS = 21
TARGET = 0.90


def _library_loop(ledger: Ledger, node: str, rounds: int) -> None:
    generation = ledger.get_node(node).generation
    for _ in range(rounds):
        generation = ledger.fence(node, expect_generation=generation).generation
        ledger.acquire_lease(node, expect_generation=generation)


class _Bare:
    """The baseline: a raw driver connection running the writes as plain SQL, nothing else."""

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
            # The ledger's own connection settings: foreign keys are checked on every write,
            # a statement's scratch tables are kept in memory.
            for pragma in (
                "journal_mode = WAL",
                "synchronous = FULL",
                "busy_timeout = 30000",
                "foreign_keys = ON",
                "temp_store = MEMORY",
            ):
                self.conn.execute(f"PRAGMA {pragma}")

    @contextmanager
    def transaction(self) -> Iterator[Callable[[str, tuple[Any, ...]], Any]]:
        """A writing transaction; yields ``run(sql, params)``, which returns the first row of
        a statement that returns rows (else None)."""

        def run(sql: str, params: tuple[Any, ...]) -> Any:
            if self.postgres:
                cursor = self.conn.execute(sql.replace("?", "%s"), params)
            else:
                cursor = self.conn.execute(sql, params)
            return cursor.fetchone() if sql.startswith("SELECT") or " RETURNING " in sql else None

        if self.postgres:
            with self.conn.transaction():
                yield run
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield run
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")


_EVENT = "INSERT INTO event (node, kind, generation, actor, detail, at) VALUES (?, ?, ?, ?, ?, ?)"


def _bare_loop(bare: _Bare, node: str, rounds: int, *, same_writes: bool) -> None:
    """The fence+admit as hand-written SQL on a raw connection.

    ``same_writes``: the rows the ledger writes for it (CAS, lease fenced, grants revoked,
    the new lease, one history row per transition, with the same details). Otherwise: only
    the CAS and the lease.
    """
    with bare.transaction() as run:
        row = run("SELECT n.generation, l.lease_id FROM agent_node n JOIN body_lease l "
                  "ON l.node = n.name AND l.generation = n.generation WHERE n.name = ?",
                  (node,))  # fmt: skip
    generation, lease_id = int(row[0]), int(row[1])
    now = time.time_ns() // 1000
    for _ in range(rounds):
        with bare.transaction() as run:
            got = run("UPDATE agent_node SET generation = generation + 1 "
                      "WHERE name = ? AND generation = ? RETURNING generation",
                      (node, generation))  # fmt: skip
            assert got is not None
            run("UPDATE body_lease SET state = 'FENCED', ended_at = ?, end_reason = 'fenced' "
                "WHERE node = ? AND state = 'LIVE'", (now, node))  # fmt: skip
            if same_writes:
                run("UPDATE capability_grant SET state = 'REVOKED', revoked_at = ? "
                    "WHERE node = ? AND state = 'LIVE' AND generation <= ?",
                    (now, node, generation))  # fmt: skip
                # Hand-written code knows the lease it ends (its own last admission).
                detail = {"fenced_generations": [generation], "previous_generation": generation,
                          "reason": "fenced", "revoked_grants": [],
                          "revoked_leases": [lease_id]}  # fmt: skip
                run(_EVENT, (node, "node.fenced", int(got[0]), "bench",
                             json.dumps(detail, sort_keys=True), now))  # fmt: skip
        generation = int(got[0])
        with bare.transaction() as run:
            inserted = run("INSERT INTO body_lease (node, generation, state, acquired_at, "
                           "renewed_at, expires_at) VALUES (?, ?, 'LIVE', ?, ?, ?) "
                           "RETURNING lease_id",
                           (node, generation, now, now, now + 3_600_000_000))  # fmt: skip
            lease_id = int(inserted[0])
            if same_writes:
                detail = {"holder": None, "lease_id": lease_id, "ttl_seconds": 3600}
                run(_EVENT, (node, "lease.acquired", generation, "bench",
                             json.dumps(detail, sort_keys=True), now))  # fmt: skip


def _timed(run: Callable[[int], None], rounds: int) -> tuple[float, float]:
    """Round trips per second of wall time, and this process's CPU microseconds per round
    trip (a loaded machine stretches the first far more than the second)."""
    start, cpu = time.perf_counter(), time.process_time()
    run(rounds)
    cpu_us = (time.process_time() - cpu) / rounds * 1e6
    return rounds / (time.perf_counter() - start), cpu_us


def _measure(url: str, label: str) -> None:
    ledger = Ledger.open(url)
    baseline = _Bare(url)
    stack = ExitStack()
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
        if label == "postgres":
            # A session's round trip takes one of two times by the CPU it runs on: the
            # library's connection and the baseline's would each carry their own.
            held = stack.enter_context(
                one_cpu([ledger_session(ledger), server_session(baseline.conn)])
            )
            print(f"{label:<9} {held}")
        # Samples alternate, so a noisy neighbour slows every side of a round alike, and
        # each round starts with another side, so none always runs first (or after a
        # checkpoint of the shared WAL).
        runs = (library_run, bare_run, minimal_run)
        rounds = []
        cpu: list[tuple[float, float]] = []
        for repeat in range(REPEATS):
            order = [(repeat + k) % 3 for k in range(3)]
            timed = {i: _timed(runs[i], ROUNDS) for i in order}
            rounds.append((timed[0][0], timed[1][0], timed[2][0]))
            cpu.append((timed[0][1], timed[1][1]))
    finally:
        stack.close()
        ledger.close()
        baseline.conn.close()
    library, bare, minimal = (statistics.median(r[i] for r in rounds) for i in range(3))
    ratio = statistics.median(r[0] / r[1] for r in rounds)
    minimal_ratio = statistics.median(r[0] / r[2] for r in rounds)
    verdict = "meets" if ratio >= TARGET else "MISSES"
    cpu_library, cpu_bare = (statistics.median(c[i] for c in cpu) for i in range(2))
    where = "this process's" if label == "sqlite" else "client"
    print(
        f"{label:<9} library {library:7.1f}/s | baseline bare SQL, same writes {bare:7.1f}/s "
        f"-> ratio {ratio:5.3f} ({verdict} target {TARGET:.2f}) | bare CAS + lease only "
        f"{minimal:7.1f}/s -> ratio {minimal_ratio:5.3f}\n"
        f"{'':<9} {where} CPU per round trip: library {cpu_library:5.0f} us, baseline "
        f"{cpu_bare:5.0f} us -> ratio {cpu_bare / cpu_library:5.3f}",
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
