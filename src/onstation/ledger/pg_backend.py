"""The PostgreSQL backend: many hosts share one ledger through psycopg 3.

Its own module so that an embedded (SQLite) ledger never loads it: :func:`onstation.ledger.
backends.open_backend` imports it for a ``postgresql://`` URL only. A writing transaction is
a plain ``BEGIN`` at READ COMMITTED, where the named queries' row locks do the serializing.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from onstation.core.errors import BadInput
from onstation.ledger.backends import (
    Asked,
    Fetched,
    LedgerUnavailable,
    NoLedger,
    Params,
    Row,
    Tx,
    _migrations,
    latest_schema_version,
)

if TYPE_CHECKING:
    import psycopg

#: No statement prepared by name.
_NONE: Mapping[str, str] = MappingProxyType({})


def executing(conn: psycopg.Connection[Any], name: str, params: Params) -> bytes:
    """``EXECUTE name(...)`` with ``params`` as literals quoted for ``conn`` as psycopg quotes
    them (a utility statement takes no bound parameters). Text, integers, booleans and None,
    nearly every value the ledger sends, are written here with libpq's own escaping
    (``PQescapeLiteral``, which psycopg's dumpers call for text on a connection) without
    composing a ``psycopg.sql.Literal`` for each: about 2 us a statement instead of 40. Any
    other value, and text holding a NUL (which psycopg refuses), is quoted by its
    ``Literal``."""
    from psycopg import pq

    escaping = pq.Escaping(conn.pgconn)
    encoding = conn.info.encoding
    if encoding == "ascii":  # SQL_ASCII: psycopg writes text as UTF-8
        encoding = "utf-8"
    literals: list[bytes] = []
    for value in params:
        kind = type(value)
        if kind is str and "\x00" not in value:
            literals.append(escaping.escape_literal(value.encode(encoding)))
        elif kind is int:
            digits = str(value).encode()
            literals.append(digits if value >= 0 else b" " + digits)  # never a "--"
        elif value is None:
            literals.append(b"NULL")
        elif kind is bool:
            literals.append(b"true" if value else b"false")
        else:
            from psycopg import sql as pgsql

            literals.append(pgsql.Literal(value).as_bytes(conn))
    return b"EXECUTE %s(%s)" % (escaping.escape_identifier(name.encode()), b", ".join(literals))


def send_on(
    conn: psycopg.Connection[Any], prepared: Mapping[str, str], sql: str, params: Params
) -> Any:
    """Send ``sql`` (psycopg's ``%s`` placeholders) on ``conn``: as an EXECUTE of its
    prepared statement where ``prepared`` (the session's, :attr:`PostgresBackend.prepared`)
    names one, else the statement itself. An EXECUTE is never prepared by psycopg itself: a
    statement it prepared would be deallocated, with every other on the session
    (``DEALLOCATE ALL``), after the next ROLLBACK."""
    name = prepared.get(sql) if prepared else None
    if name is None:
        return conn.execute(sql, params)
    return conn.execute(executing(conn, name, params), prepare=False)


class _PgTx:
    def __init__(self, conn: psycopg.Connection[Any], prepared: Mapping[str, str] = _NONE) -> None:
        self._conn = conn
        #: Statement text -> its name, for those this server session holds prepared
        #: (:attr:`PostgresBackend.prepared`); empty where a statement is sent as it is.
        self._prepared = prepared

    def _execute(self, sql: str, params: Params) -> Any:
        """Send ``sql`` (``?`` placeholders as psycopg's ``%s``) as :func:`send_on` does."""
        return send_on(self._conn, self._prepared, sql.replace("?", "%s"), params)

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self._execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return list(self._execute(sql, params).fetchall())

    def run(self, sql: str, params: Params = ()) -> int:
        return int(self._execute(sql, params).rowcount)

    def send(self, sql: str, params: Params = ()) -> None:
        self._execute(sql, params)

    def ask(self, sql: str, params: Params = ()) -> Asked:
        return Fetched(list(self._execute(sql, params).fetchall()))


class _PgPipelinedTx(_PgTx):
    """A writing transaction in psycopg's pipeline mode: statements are queued and go to the
    server together when a result is first needed.

    ``send`` does not wait at all (its errors surface at the next read, or at COMMIT, and
    fail the whole transaction as before); ``one`` and ``all`` wait for their own rows,
    flushing what was queued before them in the same round trip; ``run`` waits for its row
    count. The server still runs the statements one after another, each with its own
    snapshot at READ COMMITTED, so a lock taken by a sent statement is held before the
    next statement's snapshot is taken.
    """

    def __init__(
        self, conn: psycopg.Connection[Any], pipeline: psycopg.Pipeline,
        prepared: Mapping[str, str] = _NONE,
    ) -> None:  # fmt: skip
        super().__init__(conn, prepared)
        self._pipeline = pipeline

    def run(self, sql: str, params: Params = ()) -> int:
        cur = self._execute(sql, params)
        self._pipeline.sync()  # the row count arrives with the result
        return int(cur.rowcount)

    def ask(self, sql: str, params: Params = ()) -> Asked:
        # Queued: the server runs it in order; its rows are read (with everything queued
        # before it, in one round trip) when first asked for.
        return _PgAsked(self._execute(sql, params))


class _PgAsked:
    """A pipelined statement's cursor, read when its rows are first wanted."""

    __slots__ = ("_cursor", "_rows")

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor
        self._rows: list[Row] | None = None

    def all(self) -> list[Row]:
        if self._rows is None:
            self._rows = list(self._cursor.fetchall())
        return self._rows

    def one(self) -> Row | None:
        rows = self.all()
        return rows[0] if rows else None


class PostgresBackend:
    """Many hosts, one ledger: psycopg 3 at READ COMMITTED with row locks for every CAS.

    A ``schema`` query parameter in the URL selects the PostgreSQL schema (search_path) the
    ledger lives in, so several ledgers can share one database.
    """

    name = "postgres"

    def __init__(
        self, url: str, *, require_migrated: bool = True, create: bool = True,
        connect_timeout: int = 10,
    ) -> None:  # fmt: skip
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise LedgerUnavailable(
                "PostgreSQL support is not installed: pip install 'onstation[postgres]'"
            ) from exc
        self._psycopg = psycopg
        #: A daemon's server session lent to this process for one call (``ledger.pg_lent``):
        #: never closed here.
        self.lent = False
        #: Taken from a daemon without the check that the server still answers on it
        #: (``open_backend(check_ahead=False)``): the caller's first statement tells.
        self.unchecked = False
        #: Whether a COMMIT was ever sent on this connection: until then nothing it did can
        #: have been committed, so a caller may run its work again on another connection.
        self.commit_sent = False
        #: The statements prepared by name on this server session when it was made ahead of
        #: its call (``relief.hotpath_pg.warm``), statement text -> name: the hook fast
        #: path's, and those of a session's admission, which a call EXECUTEs (in a writing
        #: transaction) instead of having the server parse and plan them anew. Empty on a
        #: connection made for its call, and once the session has lost them
        #: (:meth:`is_retryable`). Such a connection never prepares statements of psycopg's
        #: own: psycopg answers a ROLLBACK after one with ``DEALLOCATE ALL``.
        self.prepared: dict[str, str] = {}
        status = psycopg.pq.TransactionStatus
        #: A transaction still open on the server: idle inside it, or failed.
        self._open_states = (status.INTRANS, status.INERROR)
        self.url = url
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.schema = query.pop("schema", None)
        if self.schema is not None and not self.schema.replace("_", "").isalnum():
            raise BadInput(f"--db: schema {self.schema!r} must be letters, digits and _")
        dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))
        try:
            self._conn: psycopg.Connection[Any] = psycopg.connect(
                dsn, autocommit=True, connect_timeout=connect_timeout
            )
        except psycopg.Error as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise LedgerUnavailable(f"cannot connect to PostgreSQL: {message}") from exc
        if self.schema:
            if (
                not create
                and self._conn.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
                ).fetchone()
                is None
            ):
                self._conn.close()
                raise NoLedger(f"--db: no ledger in schema {self.schema!r} of "
                               f"{_redacted(url)}", field="--db")  # fmt: skip
            self._conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            self._conn.execute(f'SET search_path TO "{self.schema}"')
        if require_migrated:
            current, latest = self.schema_version(), latest_schema_version("postgres")
            if current == 0 and not create:
                self._conn.close()
                raise NoLedger(f"--db: no ledger at {_redacted(url)} (never migrated; "
                               "`onstation db migrate` creates it)", field="--db")  # fmt: skip
            if current < latest:
                self._conn.close()
                raise LedgerUnavailable(
                    f"PostgreSQL ledger is at schema {current}, needs {latest}: "
                    "run `onstation db migrate`"
                )

    @contextmanager
    def write(self, *, relaxed: bool = False) -> Iterator[Tx]:
        # BEGIN, the statements and COMMIT are pipelined: BEGIN travels with the first
        # statement and a statement whose outcome is not read now (``send``) with the next
        # one, so a fence or an admission costs two round trips instead of one per statement.
        conn = self._conn
        try:
            with conn.pipeline() as pipeline:
                conn.execute(b"BEGIN")
                if relaxed:
                    # This transaction's COMMIT does not wait for its WAL flush (SET LOCAL:
                    # the setting ends with the transaction, whichever way it ends).
                    conn.execute(b"SET LOCAL synchronous_commit TO OFF")
                yield _PgPipelinedTx(conn, pipeline, self.prepared)
                self.commit_sent = True
                conn.execute(b"COMMIT")
            # Leaving the pipeline syncs it: a failed statement or COMMIT raises here.
        except BaseException:
            # A failed COMMIT has already ended the transaction; anything else left it open.
            if conn.pgconn.transaction_status in self._open_states:
                conn.execute(b"ROLLBACK")
            raise

    @contextmanager
    def read(self) -> Iterator[Tx]:
        with self._conn.transaction():
            yield _PgTx(self._conn)

    def autocommit(self) -> Tx:
        # The connection is in autocommit mode: outside write() and read() each statement is
        # its own transaction, one round trip.
        return _PgTx(self._conn)

    def statement_write(self) -> Tx:
        # In autocommit mode a statement is its own transaction: sent, it may have committed
        # whether or not its answer arrives.
        self.commit_sent = True
        return _PgTx(self._conn)

    def is_retryable(self, exc: BaseException) -> bool:
        """Serialization failures and deadlocks are safe to retry as a whole transaction. So
        is a prepared statement the server session no longer holds (deallocated, or a proxy
        that pools transactions moved the connection to another session): nothing of the
        transaction was done, and the session's statements are forgotten here, so that it
        runs again with them sent as they are."""
        errors = self._psycopg.errors
        if isinstance(exc, errors.InvalidSqlStatementName):
            self.prepared.clear()  # the dict the fast path's store reads too
            return True
        return isinstance(exc, (errors.SerializationFailure, errors.DeadlockDetected))

    def retry_pause(self, attempt: int) -> None:
        """Bounded exponential back-off with jitter between retries."""
        time.sleep(min(0.5, 0.005 * 2**attempt) * random.random())

    def is_integrity_error(self, exc: BaseException) -> bool:
        return isinstance(exc, self._psycopg.errors.IntegrityError)

    def lock_gate(self, tx: Tx, *, exclusive: bool) -> None:
        tx.one("SELECT id FROM gate WHERE id = 1" + (" FOR UPDATE" if exclusive else " FOR SHARE"))

    def schema_version(self) -> int:
        row = self._conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
        if not row or not row[0]:
            return 0
        got = self._conn.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(got[0] or 0) if got else 0

    def migrate(self) -> list[int]:
        applied: list[int] = []
        with self._conn.transaction():
            # One migrator at a time across hosts; released with the transaction.
            self._conn.execute("SELECT pg_advisory_xact_lock(8517320431)")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)"
            )
            current = self.schema_version()
            for version, script in _migrations("postgres"):
                if version <= current:
                    continue
                self._conn.execute(script.encode())
                self._conn.execute(
                    "INSERT INTO schema_version (version, applied_at) VALUES (%s, %s)",
                    (version, int(time.time() * 1_000_000)),
                )
                applied.append(version)
        return applied

    def change_token(self) -> None:
        return None  # no cheap equivalent of SQLite's data_version: a reader reads

    def own_changes(self) -> None:
        return None  # psycopg keeps no running count of a session's changed rows

    def leave_open(self) -> None:
        return None  # the server ends the session when the process ends

    def answers(self) -> bool:
        """Whether the server answers on this connection now, outside any transaction (one
        round trip): a connection made ahead is checked so before it is used."""
        idle = self._psycopg.pq.TransactionStatus.IDLE
        try:
            if self._conn.closed or self._conn.pgconn.transaction_status != idle:
                return False
            return self._conn.execute("SELECT 1").fetchone() == (1,)
        except self._psycopg.Error:
            return False

    def dead_before_commit(self) -> bool:
        """Whether this connection, taken unchecked, turned out dead before anything was
        committed on it: the work done on it may be run again on a new connection."""
        conn = self._conn
        return self.unchecked and not self.commit_sent and (conn.closed or conn.broken)

    def close(self) -> None:
        if self.lent:
            return  # the daemon's server session, lent for this call: the daemon ends it
        self._conn.close()


def _redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


__all__ = ["PostgresBackend", "executing", "send_on"]
