"""The two storage backends behind the ledger: SQLite (embedded default) and PostgreSQL.

A backend owns one connection and knows its dialect's plumbing: its placeholder style and
how a writing transaction begins (``BEGIN IMMEDIATE`` on SQLite so a read-then-write can
never fail to upgrade; a plain ``BEGIN`` at READ COMMITTED on PostgreSQL, where row locks do
the serializing). The statements themselves, row locks included, are the ledger's named
queries (:mod:`onstation.ledger.named_queries`), chosen by the backend's ``name``.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from onstation.core.errors import BadInput, OnstationError
from onstation.ledger import fastpath
from onstation.ledger.fastpath import WAL_LIMIT_BYTES as WAL_LIMIT_BYTES  # noqa: PLC0414 - re-exported
from onstation.ledger.fastpath import settle_wal
from onstation.ledger.urls import default_sqlite_file, parse_url

if TYPE_CHECKING:
    import psycopg

Params = Sequence[Any]
Row = tuple[Any, ...]

MIN_SQLITE = (3, 35, 0)  # RETURNING
SQLITE_BUSY_TIMEOUT_MS = 30_000
PG_RETRY_LIMIT = 10


class Tx(Protocol):
    """One open transaction: run statements written with ``?`` placeholders."""

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row of ``sql``, or None."""

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        """Every row of ``sql``."""

    def run(self, sql: str, params: Params = ()) -> int:
        """Execute ``sql`` and return the number of rows it changed."""

    def send(self, sql: str, params: Params = ()) -> None:
        """Execute ``sql`` whose outcome nobody reads now (it may be pipelined)."""

    def ask(self, sql: str, params: Params = ()) -> Asked:
        """Execute ``sql`` and read its rows later, from what this returns. Statements asked
        one after another run in that order, each seeing what the ones before it did, and
        where the backend pipelines (PostgreSQL's write transaction) they travel to the
        server together: one round trip for all of them, paid by the first read."""


class Asked(Protocol):
    """The rows of a statement :meth:`Tx.ask` sent."""

    def one(self) -> Row | None:
        """The first row, or None."""

    def all(self) -> list[Row]:
        """Every row."""


class Fetched:
    """Rows read already (a backend that does not pipeline reads them as it is asked)."""

    __slots__ = ("_rows",)

    def __init__(self, rows: list[Row]) -> None:
        self._rows = rows

    def one(self) -> Row | None:
        return self._rows[0] if self._rows else None

    def all(self) -> list[Row]:
        return self._rows


class Backend(Protocol):
    """A connection to one ledger database and its dialect."""

    url: str
    name: str

    def write(self, *, relaxed: bool = False) -> Any:
        """Context manager: a transaction that may write, committed on success.

        ``relaxed``: its commit need not wait for the disk (SQLite ``synchronous=NORMAL``,
        PostgreSQL ``synchronous_commit = off``): it survives any process's crash, and a
        power loss takes back at most the relaxed commits since the last synchronous one.
        Only for rows that are evidence, never authority (docs/decisions.md)."""

    def read(self) -> Any:
        """Context manager: a read-only view."""

    def autocommit(self) -> Tx:
        """Statements outside any transaction, each one atomic on its own (no BEGIN before,
        no COMMIT or ROLLBACK after): for reads that need no common snapshot."""

    def statement_write(self) -> Tx | None:
        """A statement runner for a write that is one statement committing on its own (no
        BEGIN before, no COMMIT after); None where a write needs its transaction around it.
        The connection then counts as having sent a commit (see ``dead_before_commit``)."""

    def migrate(self) -> list[int]:
        """Apply pending migrations; return the versions applied."""

    def schema_version(self) -> int:
        """The applied schema version (0 when none)."""

    def close(self) -> None:
        """Release the connection."""

    def is_retryable(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the whole transaction may safely run again."""

    def retry_pause(self, attempt: int) -> None:
        """Wait a little before retry number ``attempt``."""

    def is_integrity_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a constraint violation (a lost race on a unique key)."""

    def lock_gate(self, tx: Tx, *, exclusive: bool) -> None:
        """Serialize admissions and effects against halts (a no-op where writes are serial)."""

    def change_token(self) -> object | None:
        """A value that stays equal while nothing is committed to the database, by this
        connection or any other; None where the backend cannot tell."""

    def own_changes(self) -> int | None:
        """How many rows this connection has inserted, updated or deleted since it opened
        (rolled-back ones included: it only grows), read without a statement; None where the
        backend does not count them. Equal twice: this connection committed nothing between
        (another connection may have)."""

    def leave_open(self) -> None:
        """Get ready to be left open at the end of a whole process (never closed: a hook
        call's deliberate exit); nothing committed depends on it."""

    def dead_before_commit(self) -> bool:
        """Whether the connection, taken from a daemon unchecked, turned out dead before
        anything was committed on it: the work done on it may be run again on another."""


def _migrations(dialect: str) -> list[tuple[int, str]]:
    # A plain directory listing: importlib.resources costs ~10 ms of imports on every
    # hook call, and the ledger package is always installed as files.
    folder = Path(__file__).parent / "migrations" / dialect
    found: list[tuple[int, str]] = []
    for name in os.listdir(folder):
        if name.endswith(".sql"):
            found.append((int(name.split("_", 1)[0]), (folder / name).read_text(encoding="utf-8")))
    return sorted(found)


def _latest_version(dialect: str) -> int:
    folder = Path(__file__).parent / "migrations" / dialect
    return max(int(name.split("_", 1)[0]) for name in os.listdir(folder) if name.endswith(".sql"))


def latest_schema_version(dialect: str) -> int:
    """The highest numbered migration shipped for ``dialect``."""
    return _latest_version(dialect)


class LedgerUnavailable(OnstationError):
    """The ledger database cannot be opened or used safely."""


class UnsafeLedger(BadInput, LedgerUnavailable):
    """The ledger's place in the file system is unsafe (a symlink, writable by others, in a
    directory others may write to); refused before anything is read or created (exit 2)."""


class NoLedger(BadInput, LedgerUnavailable):
    """A read-only command named a ledger that does not exist (nothing is created)."""


# --------------------------------------------------------------------------------------------
# SQLite


class _SqliteTx:
    # sqlite3 binds any sequence as it is; the ledger passes tuples, so no copy is made.
    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self._conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        rows: list[Row] = self._conn.execute(sql, params).fetchall()
        return rows

    def run(self, sql: str, params: Params = ()) -> int:
        return self._conn.execute(sql, params).rowcount

    def send(self, sql: str, params: Params = ()) -> None:
        self._conn.execute(sql, params)

    def ask(self, sql: str, params: Params = ()) -> Asked:
        # Read now: a later read of this very statement would see what ran between.
        return Fetched(self._conn.execute(sql, params).fetchall())


class _SqliteWrite:
    """A writing transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any error),
    as a plain context manager: it is entered on every ledger write.

    A relaxed one commits at ``synchronous=NORMAL`` and puts the connection back to FULL
    after: SQLite refuses to change the setting inside a transaction, so it brackets it."""

    __slots__ = ("_conn", "_path", "_relaxed", "_tx")

    def __init__(
        self, conn: sqlite3.Connection, path: Path, tx: _SqliteTx, relaxed: bool = False
    ) -> None:
        self._conn = conn
        self._path = path
        self._tx = tx
        self._relaxed = relaxed

    def __enter__(self) -> Tx:
        if self._relaxed:
            self._conn.execute("PRAGMA synchronous = NORMAL")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            self._back_to_full()
            raise LedgerUnavailable(f"ledger {self._path} is busy: {exc}") from exc
        return self._tx

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            self._conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
        finally:
            self._back_to_full()

    def _back_to_full(self) -> None:
        """After a relaxed transaction, however it ended: the connection at FULL again."""
        if not self._relaxed:
            return
        # A COMMIT that failed may leave the transaction open (a deferred constraint), where
        # SQLite refuses the setting: roll it back first, so that the next write never
        # commits relaxed.
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
        self._conn.execute("PRAGMA synchronous = FULL")


class SqliteBackend:
    """The embedded default: one file, WAL, synchronous=FULL, BEGIN IMMEDIATE for every write."""

    name = "sqlite"

    def __init__(
        self,
        path: Path,
        url: str,
        *,
        create: bool = True,
        connection: sqlite3.Connection | None = None,
    ) -> None:
        """Open the ledger at ``path``; given ``connection`` (one already open to that very
        file, as a hook's fast path hands over), set that one up instead of connecting."""
        if sqlite3.sqlite_version_info < MIN_SQLITE:
            raise LedgerUnavailable(
                f"SQLite {sqlite3.sqlite_version} is too old; onstation needs 3.35 or newer"
            )
        self.url = url
        self.path = path
        if not create and not path.exists() and not path.is_symlink():
            raise NoLedger(
                f"--db: no ledger at {path}; a read-only command does not create one (check "
                "--db or ONSTATION_DB; `onstation db migrate` creates it)",
                field="--db",
            )
        self._prepare_directory(path)
        created = not path.exists()
        try:
            self._conn = connection or fastpath.connect(
                str(path), isolation_level=None, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000
            )
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"cannot open ledger {path}: {exc}") from exc
        if created:
            os.chmod(path, 0o600)
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise LedgerUnavailable(
                    f"ledger {path}: the filesystem does not support WAL mode (got {mode!r})"
                )
            self._conn.execute("PRAGMA synchronous = FULL")
            # Set only when off: setting it expires every statement compiled on the
            # connection, and one handed over by the fast path has it on already, with the
            # statements a daemon's spare compiled ahead for this call (ledger.fastpath).
            if not self._conn.execute("PRAGMA foreign_keys").fetchone()[0]:
                self._conn.execute("PRAGMA foreign_keys = ON")
            # A statement's scratch tables (an INSERT ... SELECT ... RETURNING buffers its
            # rows in one) in memory, not in a temporary file created and deleted each time:
            # that file cost an admission about 100 us of system calls. Nothing durable is
            # kept there; the ledger's own writes go to the database and its WAL as before.
            self._conn.execute("PRAGMA temp_store = MEMORY")
            self.migrate()
        except sqlite3.Error as exc:
            self._conn.close()
            raise LedgerUnavailable(f"ledger {path} is not usable: {exc}") from exc
        #: One statement runner for the connection: it holds no state of its own.
        self._tx = _SqliteTx(self._conn)
        # Nor do the two kinds of writing transaction: made once, entered on every write
        # (one transaction at a time on a connection: BEGIN IMMEDIATE refuses a second).
        self._writes = (_SqliteWrite(self._conn, path, self._tx, False),
                        _SqliteWrite(self._conn, path, self._tx, True))  # fmt: skip

    @staticmethod
    def _prepare_directory(path: Path) -> None:
        parent = path.parent
        if not parent.exists():
            _refuse_shared_ancestors(parent)
            try:
                parent.mkdir(parents=True, mode=0o700)
            except OSError as exc:
                raise LedgerUnavailable(f"cannot create ledger directory {parent}: {exc}") from exc
        _refuse_shared_directory(parent, path)
        if path.is_symlink():
            raise UnsafeLedger(f"ledger {path} is a symlink; refusing to open it")
        if path.exists():
            mode = path.stat().st_mode
            if mode & stat.S_IWOTH:
                raise UnsafeLedger(f"ledger {path} is writable by others; refusing to open it")

    def write(self, *, relaxed: bool = False) -> _SqliteWrite:
        return self._writes[relaxed]

    @contextmanager
    def read(self) -> Iterator[Tx]:
        self._conn.execute("BEGIN")
        try:
            yield self._tx
        finally:
            self._conn.execute("ROLLBACK")

    def autocommit(self) -> Tx:
        # isolation_level=None: outside BEGIN ... COMMIT each statement is its own
        # transaction, a read seeing one snapshot.
        return self._tx

    def statement_write(self) -> None:
        # A write's reads rely on the writer lock BEGIN IMMEDIATE takes before them, and a
        # statement costs no round trip here: every write keeps its transaction.
        return None

    def schema_version(self) -> int:
        row = self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone()
        if row is None:
            return 0
        version = self._conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        return int(version or 0)

    def migrate(self) -> list[int]:
        if self.schema_version() >= _latest_version("sqlite"):
            return []  # the common case, on every open: no write lock, no file reads
        applied: list[int] = []
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"
            )
            current = self.schema_version()
            for version, script in _migrations("sqlite"):
                if version <= current:
                    continue
                # executescript would COMMIT first; run statement by statement inside our BEGIN.
                for statement in _split_sql(script):
                    self._conn.execute(statement)
                self._conn.execute(
                    "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                    (version, int(time.time() * 1_000_000)),
                )
                applied.append(version)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        return applied

    def is_retryable(self, exc: BaseException) -> bool:
        return False

    def retry_pause(self, attempt: int) -> None:
        return None

    def is_integrity_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError)

    def lock_gate(self, tx: Tx, *, exclusive: bool) -> None:
        return None  # BEGIN IMMEDIATE already holds the database's single writer lock

    def integrity_check(self) -> str:
        """SQLite's own consistency check of the ledger file ("ok" when sound)."""
        return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])

    def change_token(self) -> tuple[int, int]:
        # SQLite's own counters: data_version changes when any other connection (any
        # process) commits; total_changes counts the rows this connection changed.
        version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        return version, self._conn.total_changes

    def own_changes(self) -> int:
        return self._conn.total_changes

    def leave_open(self) -> None:
        # Without the close's checkpoint the WAL would only grow: bounded as the fast path's
        # connection bounds it (the same function).
        settle_wal(self._conn, str(self.path))

    def dead_before_commit(self) -> bool:
        return False  # a file: never taken from a daemon unchecked

    def close(self) -> None:
        self._conn.close()


def _refuse_shared_directory(directory: Path, path: Path) -> None:
    """Refuse a ledger in a directory others may write to, sticky or not.

    SQLite keeps companion files beside the ledger (``-wal``, ``-shm``, ``-journal``) and
    opens them by name; in a world-writable directory anyone can create those names first.
    The sticky bit (as on /tmp) only stops others deleting or renaming existing files, so
    it does not help: the rule is "not world-writable". Directories above it may be
    world-writable only with the sticky bit, else the ledger's directory itself could be
    renamed away and replaced.
    """
    try:
        mode = directory.stat().st_mode
    except OSError as exc:
        raise LedgerUnavailable(f"ledger directory {directory}: {exc.strerror}") from exc
    if mode & stat.S_IWOTH:
        raise UnsafeLedger(
            f"ledger {path}: its directory {directory} is writable by every user; refusing to "
            "open it (keep the ledger in a directory only you can write to)"
        )
    _refuse_shared_ancestors(directory.parent)


def _refuse_shared_ancestors(directory: Path) -> None:
    """Refuse when an existing directory on the way is world-writable without the sticky bit."""
    real = directory.resolve()  # the directories actually traversed, whatever the spelling
    for ancestor in (real, *real.parents):
        try:
            mode = ancestor.stat().st_mode
        except OSError:
            continue  # not there yet: it is created 0700 by us
        if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
            raise UnsafeLedger(
                f"ledger directory {ancestor} is writable by every user without the sticky "
                "bit; refusing to keep a ledger below it"
            )


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements; sqlite3 itself says when one is complete."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        if not buffer and (not line.strip() or line.strip().startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete statement at the end of a migration: {buffer[:60]!r}")
    return statements


# --------------------------------------------------------------------------------------------
# PostgreSQL


class _PgTx:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    @staticmethod
    def _sql(sql: str) -> Any:
        return sql.replace("?", "%s")

    def one(self, sql: str, params: Params = ()) -> Row | None:
        cur = self._conn.execute(self._sql(sql), params)
        row: Row | None = cur.fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return list(self._conn.execute(self._sql(sql), params).fetchall())

    def run(self, sql: str, params: Params = ()) -> int:
        return self._conn.execute(self._sql(sql), params).rowcount

    def send(self, sql: str, params: Params = ()) -> None:
        self._conn.execute(self._sql(sql), params)

    def ask(self, sql: str, params: Params = ()) -> Asked:
        return Fetched(list(self._conn.execute(self._sql(sql), params).fetchall()))


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

    def __init__(self, conn: psycopg.Connection[Any], pipeline: psycopg.Pipeline) -> None:
        super().__init__(conn)
        self._pipeline = pipeline

    def run(self, sql: str, params: Params = ()) -> int:
        cur = self._conn.execute(self._sql(sql), params)
        self._pipeline.sync()  # the row count arrives with the result
        return cur.rowcount

    def ask(self, sql: str, params: Params = ()) -> Asked:
        # Queued: the server runs it in order; its rows are read (with everything queued
        # before it, in one round trip) when first asked for.
        return _PgAsked(self._conn.execute(self._sql(sql), params))


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
                yield _PgPipelinedTx(conn, pipeline)
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
        """Serialization failures and deadlocks are safe to retry as a whole transaction."""
        errors = self._psycopg.errors
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


# --------------------------------------------------------------------------------------------


def _redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def default_sqlite_path() -> Path:
    """``$XDG_STATE_HOME/onstation/ledger.db`` (``~/.local/state/onstation/ledger.db``)."""
    return Path(default_sqlite_file())


def open_backend(
    url: str | None,
    *,
    require_migrated: bool = True,
    create: bool = True,
    sqlite_connection: sqlite3.Connection | None = None,
    check_ahead: bool = True,
) -> Backend:
    """Open the backend a ledger URL names (``None``: the default SQLite file).

    With ``create=False`` (read-only commands) a ledger that does not exist yet is refused
    (:class:`NoLedger`) and nothing is created: no file, no directory, no schema.
    ``sqlite_connection`` is a connection already open to the SQLite file the URL names
    (the caller has checked it is that file); the backend sets it up as its own.
    ``check_ahead=False`` takes a PostgreSQL connection a daemon made ahead without asking
    the server whether it still answers (a round trip): the caller runs its work again on a
    new connection when that one turns out dead (``PostgresBackend.dead_before_commit``).
    """
    if url is None:
        path = default_sqlite_path()
        return SqliteBackend(path, f"sqlite://{path}", create=create,
                             connection=sqlite_connection)  # fmt: skip
    dialect, target = parse_url(url)
    if dialect == "postgres":
        if sqlite_connection is not None:
            raise ValueError("a SQLite connection cannot open a PostgreSQL ledger")
        from onstation.ledger import pg_ahead

        pg_ahead.used(target)
        # A daemon's spare may have connected to this very ledger ahead (a migrated one, so
        # whatever this call asks of its opening holds for it).
        ahead = pg_ahead.take(target, os.environ, check=check_ahead) if pg_ahead.held() else None
        if ahead is not None:
            ahead.unchecked = not check_ahead
            return ahead
        return PostgresBackend(target, require_migrated=require_migrated, create=create)
    path = Path(target).expanduser()
    if path.is_dir():
        raise BadInput(f"--db: {path} is a directory")
    return SqliteBackend(path, url, create=create, connection=sqlite_connection)
