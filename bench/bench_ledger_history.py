"""Ledger operations against the size of the history: each must stay flat from 1k to 1M rows.

A ledger lives for months: every hook call, fence and effect adds history rows, and the team
lead polls the history on every loop. What must not happen is an operation whose cost grows
with that past. For each history size (1k, 10k, 100k, 1M event rows) a freshly migrated
ledger is filled in bulk with plain SQL in one transaction: the events spread over 100 nodes
(one event in ten on a busy node, whose tail is read; one in ten of the first half on a node
quiet since), and per 1,000 events one past
generation of every node, with its fenced lease and five revoked grants (so at 1M rows each
node has 1,000 past generations and 5,000 revoked grants), a committed effect per 10 events,
and each node's current generation with a live lease and three live grants, and a halt
raised and lifted per 100 events (global and per node alike; none in force); per 10 events
a session's last fill reading and a note, per 100 a settled episode, per 20 an APPROACH
message and its reply, spread over the nodes as the events are. Then, through
the library, the time per call of:

- ``history(node, limit=50)`` of the busy node and of the quiet one, and
  ``history(limit=50)`` (what a poll of the tail reads);
- fence (compare-and-swap, revoking the live lease and the generation's live grant) + admit
  (``acquire_lease``) of the new generation: one round trip;
- ``live_grants(node, generation)`` (every PreToolUse of a body holding grants);
- ``issue_grant`` and ``intend_effect`` (a new effect each time);
- ``halts()``, the halts in force (the team lead's every poll; an admission and a new effect
  ask the same of one node);
- ``latest_fill(node)`` (the team view, of every identity on every poll), the node's open
  episode (a relief's brief, capsule and launch) and its open exchanges (a relief, before
  its fence), read through the partial index of unanswered exchanges: a reply marks the
  message it answers (the fill marks its replies' messages so too).

Baseline: the same operation on the smallest history (1k rows), in the same run. The ratio
largest/smallest is printed; "flat" when it is at most 1.5x, else "GROWS". All sizes are
filled first; then each round makes one call of every operation on every size in turn, so a
noisy neighbour slows every size alike. Each figure is the median over the rounds (after 3
warm-up rounds; at least 5, at most 200, while 30 s per backend last). On a local PostgreSQL
server this process and the four ledgers' server sessions are held on one CPU while the
rounds run (bench/_one_cpu.py): a round trip otherwise costs one of two times by where the
scheduler put each session (27 or 62 us here), and each size's connection carried its own:
one run printed a read at 0.09 ms on two sizes and 0.16 ms on the two others, "GROWS" for
what was the scheduler's doing.

Run: ``./dev bench ledger_history`` (PostgreSQL from ONSTATION_BENCH_PG, default the local
test database, in a scratch schema; skipped with a note when no server answers).
``ONSTATION_BENCH_HISTORY_SIZES`` (comma-separated row counts) replaces the sizes,
``ONSTATION_BENCH_HISTORY_ROUNDS`` the most rounds. The 1M fill takes about 4 s on SQLite and
10 s on PostgreSQL; the whole benchmark about a minute.
"""

from __future__ import annotations

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

from bench._one_cpu import ledger_session, one_cpu
from onstation.ledger import Ledger, open_backend
from onstation.ledger.bodies import HarnessLedger

SIZES = tuple(
    int(s) for s in os.environ.get("ONSTATION_BENCH_HISTORY_SIZES", "1000,10000,100000,1000000")
    .split(",") if s.strip()
)  # fmt: skip
NODES = 100
PAST_GRANTS_PER_GENERATION = 5
LIVE_GRANTS = 3
LIMIT = 50
ROUNDS = int(os.environ.get("ONSTATION_BENCH_HISTORY_ROUNDS", "200"))
MIN_ROUNDS = 5
BUDGET = 30.0  # seconds of rounds per backend, once MIN_ROUNDS are done
FLAT = 1.5
WARM_UP = 3  # rounds before the timed ones: caches filled, statements prepared

# The measured nodes: one is fenced, granted and given effects; one is busy and read; one
# was as busy in the first half of the history and has been quiet since (its tail is the
# case a planner misjudges when it picks a scan by sequence number for a frequent node).
WORKED, READ, QUIET = "n0", "n7", "n9"

OPERATIONS = (
    f"history(node, limit={LIMIT})",
    f"history(quiet, limit={LIMIT})",
    f"history(limit={LIMIT})",
    "fence + admit",
    "live_grants(node, gen)",
    "issue_grant",
    "intend_effect",
    "halts in force",
    "latest_fill(node)",
    "episodes(node, open_only)",
    "open_exchanges(node)",
)


def _over_series(postgres: bool, head: str, count: int, select: str) -> tuple[str, tuple[int]]:
    """``head`` (an INSERT) of ``select`` (a SELECT list over an integer ``i``) for
    i = 0 .. count - 1, in the dialect's way of counting."""
    if postgres:
        # psycopg reads % as a placeholder's start: the modulo is written %%.
        select = select.replace("%", "%%")
        return f"{head} {select} FROM generate_series(0, %s - 1) AS s(i)", (count,)
    return (
        "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?) "
        f"{head} {select} FROM s",
        (count,),
    )


def _fill_statements(size: int, now: int, postgres: bool) -> list[tuple[str, tuple[Any, ...]]]:
    """Plain SQL filling a migrated, empty ledger with a history of ``size`` event rows."""
    past = max(1, size // 1000)  # past generations of every node
    current = past + 1
    kinds = "CASE i % 5 " + " ".join(f"WHEN {k} THEN '{kind}'" for k, kind in enumerate(
        ("hull.tier", "lease.acquired", "effect.intended", "grant.issued", "node.fenced"))
    ) + " END"  # fmt: skip
    node = f"'n' || (i % {NODES})"
    # One node in ten events is the read node's (a busy one): it has at least LIMIT events at
    # every size, so its tail is the same amount of work at 1k rows as at 1M.
    event_node = (
        f"CASE WHEN i % 10 = 0 THEN '{READ}' WHEN i % 10 = 5 AND i < {size // 2} THEN "
        f"'{QUIET}' ELSE {node} END"
    )
    statements: list[tuple[str, tuple[Any, ...]]] = []

    def add(head: str, count: int, select: str) -> None:
        statements.append(_over_series(postgres, head, count, select))

    add(
        "INSERT INTO agent_node (name, role, generation, state, created_at)",
        NODES,
        f"SELECT {node}, 'executor', {current}, 'ACTIVE', {now}",
    )
    add(
        "INSERT INTO body_lease (node, generation, state, holder, acquired_at, renewed_at, "
        "expires_at, ended_at, end_reason)",
        NODES * past,
        f"SELECT {node}, i / {NODES} + 1, 'FENCED', 'body ' || i, {now}, {now}, {now}, {now}, "
        "'fenced'",
    )
    add(
        "INSERT INTO body_lease (node, generation, state, holder, acquired_at, renewed_at, "
        "expires_at)",
        NODES,
        f"SELECT {node}, {current}, 'LIVE', 'body ' || i, {now}, {now}, {now + 86_400_000_000}",
    )
    per_node = PAST_GRANTS_PER_GENERATION
    add(
        "INSERT INTO capability_grant (node, generation, capability, state, issued_at, revoked_at)",
        NODES * past * per_node,
        f"SELECT {node}, i / {NODES} / {per_node} + 1, 'cap-' || ((i / {NODES}) % {per_node}), "
        f"'REVOKED', {now}, {now}",
    )
    add(
        "INSERT INTO capability_grant (node, generation, capability, state, issued_at)",
        NODES * LIVE_GRANTS,
        f"SELECT {node}, {current}, 'live-' || (i / {NODES}), 'LIVE', {now}",
    )
    add(
        "INSERT INTO effect (effect_id, node, generation, fingerprint, operation, destination, "
        "arguments, state, created_at, updated_at)",
        max(1, size // 10),
        f"SELECT 'fx-' || i, {node}, (i / {NODES}) % {past} + 1, 'fp-' || i, 'git.push', "
        f"'origin/branch-' || i, '{{}}', 'COMMITTED', {now}, {now}",
    )
    # Halts raised and lifted since (one per 100 events; none in force, or nothing could be
    # admitted): every admission, new effect and lead poll asks whether one covers a node.
    add(
        "INSERT INTO halt (node, by, why, at, lifted_at, lifted_by)",
        max(1, size // 100),
        f"SELECT CASE WHEN i % 2 = 0 THEN NULL ELSE {node} END, 'bench', 'filled', {now}, "
        f"{now}, 'bench'",
    )
    # What else accumulates per node, spread over the nodes as the events are: a session's
    # last fill reading and a note per 10 events, a settled episode per 100, and per 20 an
    # APPROACH message with its reply.
    add(
        "INSERT INTO telemetry (session_id, node, generation, percent, used_tokens, "
        "window_tokens, source, model, tier, reported_at)",
        max(1, size // 10),
        f"SELECT 'session-' || i, {node}, 1, 27.5, 55000, 200000, 'statusline', 'bench', "
        f"'amber', {now} - i",
    )
    add(
        "INSERT INTO note (node, generation, kind, text, rationale, at)",
        max(1, size // 10),
        f"SELECT {node}, 1, 'decision', 'decided ' || i, 'filled', {now}",
    )
    add(
        "INSERT INTO work_episode (node, objective, state, opened_at, closed_at)",
        max(1, size // 100),
        f"SELECT {node}, 'episode ' || i, 'SETTLED', {now}, {now}",
    )
    add(
        "INSERT INTO message (sender, recipient, kind, body, created_at)",
        max(1, size // 20),
        f"SELECT 'coord', {node}, 'APPROACH', 'approaching ' || i, {now}",
    )
    statements.append((
        "INSERT INTO message (sender, recipient, kind, body, reply_to, created_at) "
        "SELECT recipient, sender, 'REPLY', 'ready', message_id, created_at FROM message "
        "WHERE kind = 'APPROACH'", (),
    ))  # fmt: skip
    # As the ledger's own reply does in the same transaction: each answered message is so.
    statements.append(("UPDATE message SET answered_at = created_at WHERE kind = 'APPROACH'", ()))
    add(
        "INSERT INTO event (node, kind, generation, actor, detail, at)",
        size,
        f"SELECT {event_node}, {kinds}, (i / {NODES}) * {past} / ({size} / {NODES} + 1) + 1, "
        '\'bench\', \'{"holder": "body \' || i || \'", "ttl_seconds": 3600, "tier": '
        f'"amber", "percent": 27.5, "reason": "filled by the benchmark"}}\', {now}',
    )
    return statements


def _fill_sqlite(path: str, size: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for sql, params in _fill_statements(size, time.time_ns() // 1000, postgres=False):
            conn.execute(sql, params)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _fill_postgres(base: str, schema: str, size: int) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        with conn.transaction():
            for sql, params in _fill_statements(size, time.time_ns() // 1000, postgres=True):
                conn.execute(sql, params)
        # What autovacuum and the checkpointer do after a bulk load, done before the clock
        # runs: the planner knows the tables' sizes, and no background pass over the new rows
        # competes with the measured calls (a long-lived ledger is in that steady state).
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


class _Subject:
    """One filled ledger and the calls measured on it, one of each per round."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.records = HarnessLedger(ledger)
        self.generation = ledger.get_node(WORKED).generation
        self.round = 0
        self.times: dict[str, list[float]] = {name: [] for name in OPERATIONS}

    def _timed(self, name: str, call: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        got = call()
        self.times[name].append(time.perf_counter() - start)
        return got

    def _fence_admit(self) -> int:
        fenced = self.ledger.fence(WORKED, expect_generation=self.generation, by="bench")
        self.ledger.acquire_lease(WORKED, expect_generation=fenced.generation, by="bench")
        return fenced.generation

    def sample(self) -> None:
        """One call of each operation. The writes are a relief's cycle on one node: fence +
        admit, then a grant for the new generation (which the next fence revokes), a read of
        the live grants and a new effect."""
        ledger, n = self.ledger, self.round
        self.round += 1
        self._timed(OPERATIONS[0], lambda: ledger.history(READ, limit=LIMIT))
        self._timed(OPERATIONS[1], lambda: ledger.history(QUIET, limit=LIMIT))
        self._timed(OPERATIONS[2], lambda: ledger.history(limit=LIMIT))
        self.generation = gen = self._timed(OPERATIONS[3], self._fence_admit)
        self._timed(OPERATIONS[5], lambda: ledger.issue_grant(
            WORKED, generation=gen, capability=f"tool.bash.{n}"))  # fmt: skip
        self._timed(OPERATIONS[4], lambda: ledger.live_grants(WORKED, gen))
        self._timed(OPERATIONS[6], lambda: ledger.intend_effect(
            WORKED, generation=gen, operation="git.push", destination=f"origin/bench-{n}",
            arguments={"round": n}))  # fmt: skip
        self._timed(OPERATIONS[7], ledger.halts)
        self._timed(OPERATIONS[8], lambda: self.records.latest_fill(WORKED))
        self._timed(OPERATIONS[9], lambda: ledger.episodes(WORKED, open_only=True))
        self._timed(OPERATIONS[10], lambda: self.records.open_exchanges(WORKED))

    def median_ms(self, name: str) -> float:
        return statistics.median(self.times[name][WARM_UP:]) * 1000


@contextmanager
def _sqlite_ledger(size: int) -> Iterator[Ledger]:
    with tempfile.TemporaryDirectory(prefix="onstation-bench-") as scratch:
        path = str(Path(scratch) / "ledger.db")
        Ledger.open(path).close()  # created and migrated
        _fill_sqlite(path, size)
        with Ledger.open(path, create=False) as ledger:
            yield ledger


@contextmanager
def _postgres_ledger(base: str, size: int) -> Iterator[Ledger]:
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    backend = open_backend(url, require_migrated=False)
    try:
        backend.migrate()
    finally:
        backend.close()
    try:
        _fill_postgres(base, schema, size)
        with Ledger.open(url, create=False) as ledger:
            yield ledger
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _size_label(size: int) -> str:
    if size >= 1_000_000 and size % 1_000_000 == 0:
        return f"{size // 1_000_000}M"
    return f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else str(size)


def _run(label: str, open_filled: Callable[[int], Any]) -> None:
    subjects: dict[int, _Subject] = {}
    with ExitStack() as stack:
        for size in SIZES:
            start = time.perf_counter()
            subjects[size] = _Subject(stack.enter_context(open_filled(size)))
            print(f"{label}: {_size_label(size)} history rows filled in "
                  f"{time.perf_counter() - start:.1f} s", flush=True)  # fmt: skip
        if label == "postgres":
            # A session's round trip takes one of two times by the CPU it runs on, whatever
            # the history: each size's connection would carry its own (bench/_one_cpu.py).
            held = stack.enter_context(one_cpu(ledger_session(s.ledger) for s in subjects.values()))
            print(f"{label}: {held}")
        # Rounds visit every size in turn (starting one further each round), so that a noisy
        # neighbour or a CPU frequency change slows every size alike.
        start = time.perf_counter()
        rounds = 0
        while rounds < WARM_UP + MIN_ROUNDS or (
            rounds < WARM_UP + ROUNDS and time.perf_counter() - start < BUDGET
        ):
            for i in range(len(SIZES)):
                subjects[SIZES[(rounds + i) % len(SIZES)]].sample()
            rounds += 1
    print(f"{label}: {rounds - WARM_UP} rounds measured in {time.perf_counter() - start:.1f} s")
    head = "".join(f"{_size_label(s):>10}" for s in SIZES)
    print(f"{label:<8} {'operation (ms per call)':<26}{head}   largest/smallest")
    for name in OPERATIONS:
        figures = [subjects[s].median_ms(name) for s in SIZES]
        cells = "".join(f"{f:10.3f}" for f in figures)
        ratio = figures[-1] / figures[0]
        verdict = "flat" if ratio <= FLAT else "GROWS"
        print(f"{label:<8} {name:<26}{cells}   {ratio:5.2f}x {verdict}", flush=True)


def main() -> None:
    print(
        f"ledger operations per history size ({', '.join(_size_label(s) for s in SIZES)} event "
        f"rows over {NODES} nodes, with past generations, revoked grants, effects, lifted "
        "halts, fill readings, notes, settled episodes and answered exchanges); "
        f"baseline: the same operation at {_size_label(SIZES[0])} rows; flat when "
        f"largest/smallest <= {FLAT}x"
    )
    _run("sqlite", _sqlite_ledger)
    base = os.environ.get("ONSTATION_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        import psycopg

        with psycopg.connect(base, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        print(f"postgres skipped: {str(exc).splitlines()[0] if str(exc) else exc!r}")
        return
    _run("postgres", lambda size: _postgres_ledger(base, size))


if __name__ == "__main__":
    main()
