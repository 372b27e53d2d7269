"""The hook fast path's statements on a PostgreSQL ledger, in two round trips.

:mod:`onstation.relief.hotpath` decides a common hook call (and
:mod:`onstation.relief.fast_status` a status line) the same way on either backend; this is
the store it asks on PostgreSQL. One round trip begins the write transaction, locks the
session's node's row (``FOR UPDATE``, in a statement of its own, as the ledger's guard locks
it before every write for a body: a fence, which takes the same lock, then waits for this
transaction or this one for the fence), and reads everything the decision needs in one
statement whose snapshot is taken once the lock is held: the session, its node, lease and
stored reading, whether a message waits, whether the generation is under challenge, its
grants, whether a Stop may have to be blocked, whether an effect's result is the full path's
to record, the session's transcript cursor; and the workspace's bindings. A call that reads
telemetry reads the transcript between the two round trips, the node's row locked
(:meth:`PgStore.gather_with_cursor`); a PreToolUse reads the cursor on its own first, as
SQLite does, because its classification may run git and is kept outside any transaction.
The second round trip carries the writes and the COMMIT, with ``synchronous_commit`` off
for the transaction (the full path commits the same journal row so; docs/decisions.md), but
for a durable one.

The connection is a daemon's spare's, made ahead of the call (:mod:`onstation.ledger.pg_ahead`)
when there is one, else the call's own; a call the fast path declines hands it to the full
path (``cli/hooks.py`` ``_open``) instead of the full path making another. A connection made
ahead was warmed (:func:`warm`): its server session holds prepared by name the fast path's
statements, which the call EXECUTEs instead of sending them to be parsed and planned, and
those of a new session's admission, which the full path's writing transactions EXECUTE
(``ledger.pg_backend``).
"""

from __future__ import annotations

import contextlib
import os

from onstation.ledger import fastpath as queries

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    from typing import Any

    from onstation.ledger.pg_backend import PostgresBackend

#: Lock the row of the session's node for the rest of the transaction, before anything is
#: read (the statements after it take their snapshots once it is held).
LOCK_NODE = (
    "SELECT 1 FROM agent_node "
    "WHERE name = (SELECT node FROM body_session WHERE session_id = %s) FOR UPDATE"
)

#: ``SESSION_STATE``'s twelve columns, then (12) whether a message waits for the session's
#: generation, (13) whether that generation is a successor under challenge, (14) the
#: capabilities it holds, (15) whether a Stop may have to be blocked, (16) whether the tool
#: call (the first parameter) was journaled as an effect, (17) whether the generation has a
#: dispatched effect without its result: ``fastpath``'s checks, each by the session. Then
#: (18-21) the cursor's columns ``SESSION_CURSOR`` has and the above do not: the transcript
#: cursor, the context window the host declared, whether a reading is stored, the workspace.
GATHER = (
    "SELECT s.node, s.generation, s.state, s.harness, n.generation, l.state, "
    "l.expires_at, t.tier, l.lease_id, t.generation, t.epoch, s.context_epoch, "
    "EXISTS (SELECT 1 FROM message m WHERE m.recipient = s.node AND m.delivered_at IS NULL "
    "AND (m.generation IS NULL OR m.generation = s.generation)), "
    "EXISTS (SELECT 1 FROM birth b WHERE b.node = s.node AND b.generation = s.generation "
    "AND b.state = 'PROVISIONAL'), "
    "ARRAY(SELECT g.capability FROM capability_grant g WHERE g.node = s.node "
    "AND g.state = 'LIVE' AND g.generation = s.generation), "
    "s.relief_requested_at IS NOT NULL AND s.stop_blocked_at IS NULL, "
    "EXISTS (SELECT 1 FROM tool_call c WHERE c.tool_use_id = %s), "
    "EXISTS (SELECT 1 FROM effect e WHERE e.node = s.node AND e.generation = s.generation "
    "AND e.state = 'DISPATCHED'), "
    "s.telemetry_cursor, s.context_window, t.session_id IS NOT NULL, s.workspace "
    "FROM body_session s "
    "JOIN agent_node n ON n.name = s.node "
    "LEFT JOIN body_lease l ON l.lease_id = s.lease_id "
    "LEFT JOIN telemetry t ON t.session_id = s.session_id "
    "WHERE s.session_id = %s"
)


def _pg(sql: str) -> str:
    """One of ``ledger.fastpath``'s statements with PostgreSQL's placeholders (none of them
    holds a literal question mark)."""
    return sql.replace("?", "%s")


def _bindings(candidates: list[str]) -> str:
    return queries.WORKSPACE_BINDINGS.format(marks=", ".join("%s" for _ in candidates))


def open_pg_store(url: str) -> PgStore | None:
    """The store over the ledger ``url``: on the connection a daemon's spare made ahead for
    it, else on one of its own (a migrated ledger only, nothing created); None when it cannot
    connect or the ledger is not there (the full path then says why)."""
    from onstation.ledger import pg_ahead

    pg_ahead.used(url)
    # Not checked with a round trip of its own: the first statement tells, and a connection
    # that fails it is closed, not handed on (the full path then connects anew).
    backend = pg_ahead.take(url, os.environ, check=False) if pg_ahead.held() else None
    if backend is None:
        from onstation.ledger.pg_backend import PostgresBackend

        try:
            backend = PostgresBackend(url, require_migrated=True, create=False)
        except Exception:
            return None
    return PgStore(backend)


#: What the warm-up asks for: a session id made up to match no session; were one to have
#: it, the warm-up would still only read, and roll back.
_NO_SESSION = "onstation warm-up: no such session"

#: The fast path's reads, prepared by name on a connection made ahead of its call
#: (:func:`warm`): each statement's text -> its name. Every parameter is text (session and
#: tool-call ids, paths). The workspace lookup is prepared for paths up to 15 levels deep
#: (deeper ones, 31 at most, send their statement as it is).
PREPARED_READS: dict[str, str] = {
    LOCK_NODE: "onstation_fast_lock_node",
    GATHER: "onstation_fast_gather",
    _pg(queries.STATUS_SESSION): "onstation_fast_status",
    _pg(queries.SESSION_CURSOR): "onstation_fast_cursor",
    _bindings(["/"] * queries.CANDIDATES_STEP): "onstation_fast_bindings",
}
#: The fast path's writes, prepared beside them; their parameters' types are the server's
#: to infer from the columns they go to, as it does for the statements sent as they are.
PREPARED_WRITES: dict[str, str] = {
    _pg(queries.UPDATE_CURSOR): "onstation_fast_update_cursor",
    _pg(queries.UPDATE_TELEMETRY): "onstation_fast_update_telemetry",
    _pg(queries.RENEW_LEASE): "onstation_fast_renew_lease",
    _pg(queries.INSERT_TOOL_OUTCOME): "onstation_fast_tool_outcome",
    _pg(queries.INSERT_TELEMETRY): "onstation_fast_insert_telemetry",
    _pg(queries.INSERT_TIER_EVENT): "onstation_fast_tier_event",
    _pg(queries.INSERT_TIER_MARK): "onstation_fast_tier_mark",
    _pg(queries.RELEASE_LEASE): "onstation_fast_release_lease",
    _pg(queries.INSERT_EVENT): "onstation_fast_event",
}
PREPARED: dict[str, str] = {**PREPARED_READS, **PREPARED_WRITES}
#: What a new session's admission (``ledger.body_admission``, a SessionStart's full path)
#: sends, prepared beside them, by named query -> prepared name. Its reads, with the
#: arguments the warm-up runs each past its custom plans with (matching nothing)...
ADMISSION_READS: dict[str, tuple[str, tuple[object, ...]]] = {
    "node_lock": ("onstation_admit_node", (_NO_SESSION,)),
    "session_by_id": ("onstation_admit_session", (_NO_SESSION,)),
    "session_live_lease": ("onstation_admit_live_lease", (_NO_SESSION, 0)),
    "session_generation_spent_now": ("onstation_admit_spent", (_NO_SESSION, _NO_SESSION)),
    "message_waiting_for_body": ("onstation_admit_message", (_NO_SESSION, 0)),
}
#: ... and its writes, which the warm-up never runs. Parameter types are the server's to
#: infer, as for the fast path's writes. (Its lookup of the workspace's bindings and its
#: event are the fast path's statements.)
ADMISSION_WRITES: dict[str, str] = {
    "pg_admit": "onstation_admit_judge",
    "session_insert": "onstation_admit_insert_session",
    "body_host_insert": "onstation_admit_host",
    "session_transcript_set": "onstation_admit_transcript",
    "pg_generation_base_offer": "onstation_admit_base",
}
#: Executions of a prepared statement the server plans for their parameters before it
#: considers the plan it keeps (PostgreSQL's plan cache: five): the warm-up runs each read
#: this many times and once more, so that a call finds the kept plan.
CUSTOM_PLANS = 5


def _numbered(sql: str) -> tuple[str, int]:
    """``sql`` with its ``%s`` placeholders numbered (``$1``, ``$2``, ...), as PREPARE takes
    them, and how many there are (none of these statements holds a literal ``%``)."""
    parts = sql.split("%s")
    return parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1)), len(parts) - 1


def _admission() -> dict[str, tuple[str, tuple[object, ...] | None]]:
    """The admission's statements as sent (psycopg's placeholders) -> (prepared name, the
    warm-up's arguments for a read, None for a write)."""
    from onstation.ledger.named_queries import queries

    sql = queries("postgres")
    found: dict[str, tuple[str, tuple[object, ...] | None]] = {}
    for query, (name, asked) in ADMISSION_READS.items():
        found[_pg(sql[query])] = (name, asked)
    for query, name in ADMISSION_WRITES.items():
        found[_pg(sql[query])] = (name, None)
    return found


def warm(backend: PostgresBackend) -> None:
    """Make a connection made ahead of its call ready for it, for a session that does not
    exist. Its server session prepares by name the fast path's statements
    (:data:`PREPARED`) and those of a new session's admission, the full path's
    (:data:`ADMISSION_READS`, :data:`ADMISSION_WRITES`), and runs each read past the plans
    made for their parameters (:data:`CUSTOM_PLANS`), so that a call EXECUTEs them, the
    reads with a kept plan, instead of the server parsing and planning them anew (about
    1 ms of a fast call's two round trips here, most of it the gathering read's plan; 0.4
    of an admission's 2.3 ms of server time). Then the fast path's statements run once as
    a call runs them: the server then has the catalog entries of every table and index they
    touch cached for this connection (a new server process has none), so the call does not
    wait while they load (about 2 ms of a 4 ms fast path here). Reads only, in transactions
    rolled back: nothing is locked (no session, no node row) or written. A server that
    refuses a statement, or will not keep them from one transaction to the next (a proxy
    that pools transactions), leaves the connection with none prepared: its calls send the
    statements as they are."""
    _prepare(backend)
    store = PgStore(backend)
    store.cursor_row(_NO_SESSION)
    store.gather(_NO_SESSION, "/", "PostToolUse", _NO_SESSION)
    store.rollback()
    store.gather_status(_NO_SESSION, "/")
    store.rollback()


def _prepare(backend: PostgresBackend) -> None:
    """PREPARE :data:`PREPARED` and the admission's statements on ``backend``'s session,
    then, in a transaction of its own (rolled back), run each read past its custom plans:
    two round trips in all. Once both have succeeded ``backend.prepared`` names the
    statements, and the connection prepares none of psycopg's own; a statement the server
    refuses to prepare, or prepared statements not found in the next transaction, leave it
    empty (the calls then send their statements as they are). A connection that fails
    otherwise raises (the warm-up fails, and the connection is not used)."""
    import psycopg

    from onstation.ledger.pg_backend import executing

    conn = backend._conn
    admission = _admission()
    statements = {**PREPARED, **{sql: name for sql, (name, _) in admission.items()}}
    reads: list[tuple[str, tuple[object, ...]]] = [
        (name, (_NO_SESSION,) * sql.count("%s")) for sql, name in PREPARED_READS.items()
    ]
    reads += [(name, asked) for name, asked in admission.values() if asked is not None]
    try:
        with conn.pipeline() as pipeline:
            for sql, name in statements.items():
                numbered, count = _numbered(sql)
                types = f" ({', '.join(['text'] * count)})" if sql in PREPARED_READS else ""
                conn.execute(f"PREPARE {name}{types} AS {numbered}".encode(), prepare=False)
            pipeline.sync()
            conn.execute(b"BEGIN")
            for _ in range(CUSTOM_PLANS + 1):
                for name, asked in reads:
                    conn.execute(executing(conn, name, asked), prepare=False)
            conn.execute(b"ROLLBACK")
    except (psycopg.errors.ProgrammingError, psycopg.errors.DataError):
        # Refused, or not kept into the next transaction (a proxy that pools transactions):
        # nothing is prepared for this connection's calls.
        if conn.pgconn.transaction_status in backend._open_states:
            conn.execute(b"ROLLBACK")
        return
    # psycopg answers a ROLLBACK after a statement it prepared itself with DEALLOCATE ALL.
    conn.prepare_threshold = None
    backend.prepared = dict(statements)


class PgStore:
    """The fast path's statements (``hotpath.SqliteStore``'s methods) on a PostgreSQL
    ledger: the transaction's statements pipelined, the node's row locked first."""

    #: The session's cursor read on its own is a round trip: it is read with the locked
    #: reads where nothing but the transcript's read comes between (``hotpath._answer``).
    CURSOR_IS_A_ROUND_TRIP = True

    def __init__(self, backend: PostgresBackend) -> None:
        import psycopg

        self.errors = (psycopg.Error,)
        self.backend = backend
        self.conn = backend._conn
        self._pipeline: Any = None
        self._broken = False
        self._durable = False

    def _ask(self, sql: str, params: tuple[Any, ...] | list[str]) -> Any:
        """Send one of the fast path's statements: EXECUTE its prepared statement where this
        connection's session has it (:func:`warm`), else the statement itself."""
        from onstation.ledger.pg_backend import send_on

        return send_on(self.conn, self.backend.prepared, sql, params)

    def cursor_row(self, session_id: str) -> Any:
        return self._ask(_pg(queries.SESSION_CURSOR), (session_id,)).fetchone()

    def workspace_node(self, cwd: str) -> str | None:
        candidates = queries.workspace_candidates(cwd)
        found = queries.closest_binding(self._ask(_bindings(candidates), candidates).fetchall())
        return None if found is None else found[0]

    def _begin_reading(
        self, session_id: str, cwd: str, sql: str, params: tuple[Any, ...]
    ) -> tuple[Any, str | None]:
        """Begin the write transaction, lock the session's node's row, then read ``sql``'s
        row and the node the workspace ``cwd`` is bound to: one round trip."""
        self._pipeline = self.conn.pipeline()
        self._pipeline.__enter__()
        self.conn.execute(b"BEGIN")
        self._ask(LOCK_NODE, (session_id,))
        candidates = queries.workspace_candidates(cwd)
        state = self._ask(sql, params)
        bindings = self._ask(_bindings(candidates), candidates)
        row = state.fetchone()
        found = queries.closest_binding(bindings.fetchall())
        return row, None if found is None else found[0]

    def _end(self) -> None:
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            pipeline.__exit__(None, None, None)  # syncs: a failed statement raises here

    def gather(
        self, session_id: str, cwd: str, event: str, tool_use_id: str | None,
        durable: bool = False,
    ) -> Any:  # fmt: skip
        """As ``SqliteStore.gather``, in one round trip (``durable``: the commit waits for
        its WAL flush, as every commit but a relaxed one does)."""
        self._durable = durable
        row, bound = self._begin_reading(session_id, cwd, GATHER, (tool_use_id, session_id))
        return None if row is None else self._gathered(row, bound, event, tool_use_id)

    def gather_with_cursor(
        self, session_id: str, cwd: str, event: str, tool_use_id: str | None
    ) -> tuple[Any, Any]:
        """``cursor_row``'s row and ``gather``'s answer, read in the one round trip
        ``gather`` takes (both None for a session the ledger does not know): the transaction
        stays open and the node's row locked while the caller reads the transcript from the
        cursor. The commit is relaxed unless :meth:`make_durable` is called before it."""
        self._durable = False
        row, bound = self._begin_reading(session_id, cwd, GATHER, (tool_use_id, session_id))
        if row is None:
            return None, None
        cursor = (row[18], row[2], row[1], row[4], row[19], row[20], row[21])
        return cursor, self._gathered(row, bound, event, tool_use_id)

    def make_durable(self) -> None:
        """The open transaction's commit waits for its WAL flush (a first reading's tier
        mark), as ``gather(durable=True)`` asks it."""
        self._durable = True

    @staticmethod
    def _gathered(row: Any, bound: str | None, event: str, tool_use_id: str | None) -> Any:
        journaled = event == "PostToolUse" and tool_use_id is not None and row[16]
        return (row[:12], bound, row[12], row[13], set(row[14]), event == "Stop" and row[15],
                journaled or row[17])  # fmt: skip

    def gather_status(self, session_id: str, cwd: str) -> tuple[Any, str | None]:
        """As ``SqliteStore.gather_status``, in one round trip."""
        return self._begin_reading(session_id, cwd, _pg(queries.STATUS_SESSION), (session_id,))

    def commit(self, writes: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Send ``writes`` and the COMMIT together; the commit does not wait for its WAL
        flush (``SET LOCAL``: the setting ends with the transaction), but for a durable one."""
        if not self._durable:
            self.conn.execute(b"SET LOCAL synchronous_commit TO OFF")
        for sql, params in writes:
            self._ask(_pg(sql), params)
        self.conn.execute(b"COMMIT")
        self._end()

    def rollback(self) -> None:
        self.conn.execute(b"ROLLBACK")
        self._end()

    def abort(self) -> None:
        """End what an exception left open: the pipeline, then the transaction. The
        connection is not handed on."""
        self._broken = True
        with contextlib.suppress(Exception):
            self._end()
        with contextlib.suppress(Exception):
            status = self.conn.pgconn.transaction_status
            if status in self.backend._open_states:
                self.conn.execute(b"ROLLBACK")

    def settle(self) -> None:
        return None  # nothing to checkpoint: the server does

    def failed(self) -> None:
        self._broken = True

    def keep(self, keep: list[Any] | None) -> None:
        """Hand the connection on (``keep``), or close it: always when a statement failed
        on it (the full path connects anew)."""
        if keep is not None and not self._broken:
            keep.append(self.backend)
            return
        with contextlib.suppress(Exception):
            self.backend.close()


__all__ = ["GATHER", "LOCK_NODE", "PREPARED", "PgStore", "open_pg_store", "warm"]
