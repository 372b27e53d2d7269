"""The storage backends behind the ledger: their interface, SQLite (the embedded default)
and the opening of either; PostgreSQL's own is :mod:`onstation.ledger.pg_backend`, loaded for
a ``postgresql://`` URL only.

A backend owns one connection and knows its dialect's plumbing: its placeholder style and
how a writing transaction begins (``BEGIN IMMEDIATE`` on SQLite so a read-then-write can
never fail to upgrade; a plain ``BEGIN`` at READ COMMITTED on PostgreSQL, where row locks do
the serializing). The statements themselves, row locks included, are the ledger's named
queries (:mod:`onstation.ledger.named_queries`), chosen by the backend's ``name``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from onstation.core.errors import BadInput, OnstationError
from onstation.ledger import fastpath
from onstation.ledger.fastpath import WAL_LIMIT_BYTES as WAL_LIMIT_BYTES  # noqa: PLC0414 - re-exported
from onstation.ledger.fastpath import settle_wal
from onstation.ledger.urls import default_sqlite_file, parse_url

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
        from onstation.ledger.pg_backend import PostgresBackend

        return PostgresBackend(target, require_migrated=require_migrated, create=create)
    path = Path(target).expanduser()
    if path.is_dir():
        raise BadInput(f"--db: {path} is a directory")
    return SqliteBackend(path, url, create=create, connection=sqlite_connection)
