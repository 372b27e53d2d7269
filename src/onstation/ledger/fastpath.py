"""The ledger's queries for the hook fast path: plain ``sqlite3``, nothing else imported.

Most hook calls change nothing that matters (an admitted, current body reads a tool's
result at an unchanged tier), and :mod:`onstation.relief.hotpath` answers them without
loading the full ledger. The statements it runs are these, named here beside the rest of
the ledger's SQL; :class:`~onstation.ledger.bodies.HarnessLedger` uses the same
workspace lookup, and a differential test (``tests/integration/test_fast_path_differential``)
runs payload sequences through both paths and compares the ledgers they leave.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable
    from typing import Any

#: The WAL size past which a connection left open checkpoints it and truncates it.
WAL_LIMIT_BYTES = 256 * 1024


#: Checkpoints left for after the caller has its answer (a daemon's child, whose client is
#: told its outcome before the child ends: :func:`defer_settling`), and whether to leave them.
_DEFERRED: list[tuple[Any, str]] = []
_DEFERRING: list[bool] = [False]


def defer_settling() -> None:
    """From now on :func:`settle_wal` only notes what to checkpoint; :func:`settle_deferred`
    does it. A daemon's child calls this before its call runs, and settles once its client
    has the outcome: the checkpoint (a few milliseconds when it is due: pages written into
    the database, two syncs) then costs the caller nothing. Nothing durable waits for it (a
    commit is durable in the WAL); a child that ends first leaves it to a later call."""
    _DEFERRING[0] = True


#: How long (seconds) a deferred checkpoint, off the caller's clock, tries again while a
#: reader is in the WAL (the daemon's next spare opening the same ledger ahead reads its
#: schema at about the moment the child settles).
DEFERRED_PATIENCE = 0.05


def settle_deferred() -> None:
    """Run the checkpoints :func:`settle_wal` noted since :func:`defer_settling`, each given
    :data:`DEFERRED_PATIENCE` to find the WAL free of readers."""
    _DEFERRING[0] = False
    pending = list(_DEFERRED)
    _DEFERRED.clear()
    for conn, path in pending:
        settle_wal(conn, path, patience=DEFERRED_PATIENCE)


def settle_wal(conn: Any, path: str, *, patience: float = 0.0) -> None:
    """Checkpoint the WAL into the database and truncate it once it is past
    :data:`WAL_LIMIT_BYTES`; call after the call's commit (in a daemon's child: noted, and
    done once the client has its answer, :func:`defer_settling`).

    The fast path (and a whole hook call's ledger: ``Ledger.leave_open``) leaves its
    connection open at exit, so SQLite's close never checkpoints;
    the next process to open the ledger then rebuilds the WAL index by reading the whole WAL,
    and (the index rebuilt knows nothing of earlier checkpoints) never restarts the WAL from
    its start: left alone it would grow for ever, and every call would read it all. A
    ``TRUNCATE`` checkpoint empties it. It never waits: with a reader in the WAL it gives up
    (``busy_timeout`` 0) and a later call tries again; ``wal_autocheckpoint`` (SQLite's
    default, 1000 pages) still bounds the WAL as ever. ``patience`` (seconds; a deferred
    checkpoint's, off the caller's clock): while a reader keeps it from truncating, try again
    every 2 ms for that long, each try as short as the first (writers are held up only
    while a try runs, never while this waits between tries).
    """
    if _DEFERRING[0]:
        _DEFERRED.append((conn, path))
        return
    try:
        if os.stat(path + "-wal").st_size <= WAL_LIMIT_BYTES:
            return
    except OSError:
        return
    import _sqlite3  # loaded already: ``conn`` is one of its connections

    give_up = time.monotonic() + patience
    try:
        conn.execute("PRAGMA busy_timeout = 0")
        # (busy, WAL frames, frames checkpointed): busy 1 when a reader kept it from truncating.
        while conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
            if time.monotonic() >= give_up:
                return  # nothing is lost: a later call checkpoints
            time.sleep(0.002)
    except _sqlite3.Error:
        pass  # anything else: nothing is lost, a later call checkpoints


def fast_settings(conn: Any) -> bool:
    """Give ``conn`` the fast path's settings (a 30 s busy wait, ``synchronous=NORMAL``:
    docs/decisions.md says why; foreign keys enforced, as the full path enforces them) and
    say whether its ledger is in WAL mode; a connection of a ledger that is not is the
    caller's to close. One place for both the fast path's own connection and one a
    daemon's spare opens ahead, so the two cannot differ.

    Foreign keys are set here, before any statement is compiled, because setting them
    expires every statement compiled on the connection: the full path, handed this
    connection, finds them on and leaves them be (``SqliteBackend``), so what was compiled
    ahead (:func:`compile_ahead`) stays compiled."""
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return bool(conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal")


def connect(database: str, **options: Any) -> Any:
    """``sqlite3.connect``: the one way the ledger's SQLite connections are made (the fast
    path's, the full path's, a spare's ahead), so that the daemon's warm-up can note what
    they run (:func:`noting`)."""
    import _sqlite3

    if _NOTING[0]:
        options["factory"] = _noting_connection()
    return _sqlite3.connect(database, **options)


#: The statements a session's hook calls ran, noted once by the daemon's warm-up
#: (:func:`noting`): SQL text -> the number of parameters it was given. Inherited by each
#: spare the daemon forks, which compiles them ahead on the ledger it opened ahead
#: (:func:`compile_ahead`); empty in every other process.
_NOTED: dict[str, int] = {}
_NOTING: list[bool] = [False]
#: At most this many are noted: the sqlite3 module keeps 128 compiled statements a
#: connection (least recently used first out), and the call's own must fit beside them.
MAX_NOTED = 64
#: What is compiled ahead: statements that do nothing until they run. Never a PRAGMA (a
#: setting takes effect when it is compiled) nor a transaction's control.
_COMPILABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH")


class noting:
    """While entered, the connections :func:`connect` makes note each statement they run
    (for :func:`compile_ahead`); the daemon's warm-up enters it around its made-up session."""

    def __enter__(self) -> None:
        _NOTING[0] = True

    def __exit__(self, *_: object) -> None:
        _NOTING[0] = False


def noted() -> list[str]:
    """The statements noted (in the order first run)."""
    return list(_NOTED)


def _noting_connection() -> type:
    import _sqlite3

    class NotingConnection(_sqlite3.Connection):
        """A connection that notes each statement it runs, with its number of parameters."""

        def execute(self, sql: str, parameters: Any = (), /) -> Any:
            if (
                isinstance(parameters, tuple | list)
                and len(_NOTED) < MAX_NOTED
                and sql.lstrip().upper().startswith(_COMPILABLE)
            ):
                _NOTED.setdefault(sql, len(parameters))
            return super().execute(sql, parameters)

    return NotingConnection


def compile_ahead(path: str, stop: Callable[[], bool]) -> int:
    """Compile the noted statements on the ledger opened ahead for ``path``, one at a time
    until ``stop()`` says a call has come; how many were compiled.

    The sqlite3 module compiles a statement and keeps it in the connection's cache before
    it binds the parameters; given one parameter too many, it refuses to bind, so the
    statement is compiled and kept without running. The call's own ``execute`` of the same
    text then finds it compiled (about 30 us a statement saved, some 35 in a session's
    start). All of it inside a transaction rolled back, so that nothing could be written
    even if a statement ever ran. A test holds the sqlite3 module to this
    (tests/integration/test_compile_ahead.py)."""
    import _sqlite3
    import contextlib

    held = _AHEAD.get(path)
    if held is None or not _NOTED:
        return 0
    conn = held[0]
    compiled = 0
    try:
        conn.execute("BEGIN")
        for sql, count in list(_NOTED.items()):
            if stop():
                break
            try:
                conn.execute(sql, (None,) * (count + 1))
            except _sqlite3.ProgrammingError:
                compiled += 1  # the expected refusal to bind: compiled, kept, not run
            except _sqlite3.Error:
                pass  # a statement this ledger's schema cannot compile: left to the call
    except _sqlite3.Error:
        pass
    finally:
        if conn.in_transaction:
            with contextlib.suppress(_sqlite3.Error):
                conn.execute("ROLLBACK")
    return compiled


#: The connection a daemon's spare opened ahead of its call (cli/daemon.py): ledger path ->
#: (connection, the file's (device, inode) when it was opened). A process-wide resource,
#: like the sqlite module's own state: empty in every process but a daemon's spare (and
#: the call the spare becomes), and never carried across a fork (the spare opens it after
#: its own fork).
_AHEAD: dict[str, tuple[Any, tuple[int, int]]] = {}


def _identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def open_ahead(path: str) -> bool:
    """Open the ledger at ``path`` for the call to come (a daemon's spare, while it waits):
    connected, in WAL mode, its schema read, as :func:`onstation.relief.hotpath.open_wal`
    opens it. Never creates a file; whether it was opened (a connection is then held, to be
    taken or, when :func:`ahead_stale`, let go of by ending the process)."""
    import _sqlite3

    identity = _identity(path)
    if identity is None or path in _AHEAD:
        return False
    quoted = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    try:
        conn = connect(f"file:{quoted}?mode=rw", uri=True, isolation_level=None, timeout=30)
    except _sqlite3.Error:
        return False
    try:
        wal = fast_settings(conn)
    except _sqlite3.Error:
        wal = False
    if not wal:
        conn.close()  # not in WAL mode: no WAL its close could delete, nothing to hold
        return False
    # Kept even when the file was deleted or replaced while it was opened: never closed (a
    # close may checkpoint, and delete the WAL by its name, which may now be another
    # file's), but held under the identity it was opened with, so that it is never taken
    # and :func:`ahead_stale` says so at once (the spare ends instead of holding it).
    _AHEAD[path] = (conn, identity)
    return True


def take_ahead(path: str) -> Any:
    """The connection opened ahead for the ledger file at ``path`` (once), or None: none
    was, or the file there is no longer the one it opened (deleted, replaced). A connection not
    taken stays open until the process ends: closing the last connection to a file that
    was replaced would delete the new file's WAL, which has the same name."""
    wanted = _identity(path) if _AHEAD else None  # one stat, and only in a spare's call
    for opened, (conn, identity) in list(_AHEAD.items()):
        # The same file by identity (the path named may differ: relative, a symlinked
        # directory), still the file at the path it was opened by.
        if wanted == identity and _identity(opened) == identity:
            del _AHEAD[opened]
            _TAKEN.append(opened)
            return conn
    return None


#: The ledgers this process took opened ahead (what a daemon's child reports).
_TAKEN: list[str] = []


def took_ahead() -> bool:
    """Whether this process took a ledger a daemon's spare opened ahead."""
    return bool(_TAKEN)


def ahead_stale() -> bool:
    """Whether a ledger opened ahead is no longer the file at its path (deleted, replaced):
    the spare holding it then ends, so that it keeps no deleted ledger alive."""
    return any(_identity(path) != identity for path, (_conn, identity) in _AHEAD.items())


def open_ledger_of(pid_fds: str = "/proc/self/fd") -> str | None:
    """The SQLite ledger this process has open in WAL mode (the file beside its ``-wal``)
    and used (not one opened ahead and left untaken), or None: what a daemon's child
    reports, for the next spare to open ahead."""
    try:
        names = os.listdir(pid_fds)
    except OSError:
        return None
    untaken = {identity for _conn, identity in _AHEAD.values()}
    for name in names:
        try:
            target = os.readlink(os.path.join(pid_fds, name))
        except OSError:
            continue
        if target.endswith("-wal") and target.startswith("/"):
            ledger = target[:-4]
            identity = _identity(ledger)
            if identity is not None and identity not in untaken and os.path.isfile(ledger):
                return ledger
    return None


def handed_ledger(conn: Any, url: str | None) -> Any:
    """The ledger ``url`` names, opened on ``conn``, the fast path's open connection, when
    that is a connection to the same file; None otherwise (the caller opens its own).

    A call the fast path declines goes to the full path, which opened a second connection
    to the same file: SQLite's set-up again and the whole schema parsed again (about a
    millisecond, on the call's clock). Handed over, the connection gets every setting and
    check the backend gives its own (``SqliteBackend`` sets it up instead of connecting):
    ``synchronous=FULL`` among them, so the full path's writes are as durable as ever.
    """
    import sqlite3  # its errors: the connection is one of the C module's

    from onstation.core.errors import BadInput
    from onstation.ledger.ledger import Ledger
    from onstation.ledger.urls import sqlite_file

    try:
        target = sqlite_file(url)
        opened = conn.execute("PRAGMA database_list").fetchone()
        if target is None or opened is None or not opened[2]:
            return None
        wanted = os.stat(os.path.expanduser(target))
        had = os.stat(opened[2])
    except (BadInput, OSError, sqlite3.Error):
        return None
    if (wanted.st_dev, wanted.st_ino) != (had.st_dev, had.st_ino):
        return None
    return Ledger.open(url, sqlite_connection=conn)


#: The workspace bindings among a list of candidate paths (``{marks}``: one ``?`` each).
WORKSPACE_BINDINGS = "SELECT path, node FROM workspace_binding WHERE path IN ({marks})"

#: A session's transcript cursor, its state and generation, its node's generation, the
#: context window the host declared for it, whether a reading is stored, and its workspace.
SESSION_CURSOR = (
    "SELECT s.telemetry_cursor, s.state, s.generation, n.generation, s.context_window, "
    "t.session_id IS NOT NULL, s.workspace "
    "FROM body_session s "
    "JOIN agent_node n ON n.name = s.node "
    "LEFT JOIN telemetry t ON t.session_id = s.session_id "
    "WHERE s.session_id = ?"
)

#: Everything the fast path re-checks inside its write transaction (the stored reading's
#: generation and epoch: the fast path only updates a reading of this very body and epoch).
SESSION_STATE = (
    "SELECT s.node, s.generation, s.state, s.harness, n.generation, l.state, "
    "l.expires_at, t.tier, l.lease_id, t.generation, t.epoch, s.context_epoch "
    "FROM body_session s "
    "JOIN agent_node n ON n.name = s.node "
    "LEFT JOIN body_lease l ON l.lease_id = s.lease_id "
    "LEFT JOIN telemetry t ON t.session_id = s.session_id "
    "WHERE s.session_id = ?"
)

#: What the status line's fast path re-checks inside its write transaction
#: (relief/fast_status.py): the session's node, generation and state, its node's generation,
#: its lease's state and expiry, the window the host declared, the stored reading's tier and
#: epoch, the session's epoch, its workspace and the stored reading's generation.
STATUS_SESSION = (
    "SELECT s.node, s.generation, s.state, n.generation, l.state, l.expires_at, "
    "s.context_window, t.tier, t.epoch, s.context_epoch, s.workspace, t.generation "
    "FROM body_session s "
    "JOIN agent_node n ON n.name = s.node "
    "LEFT JOIN body_lease l ON l.lease_id = s.lease_id "
    "LEFT JOIN telemetry t ON t.session_id = s.session_id "
    "WHERE s.session_id = ?"
)

#: Whether a message waits for the node's current generation.
PENDING_MESSAGE = (
    "SELECT 1 FROM message WHERE recipient = ? AND delivered_at IS NULL "
    "AND (generation IS NULL OR generation = ?) LIMIT 1"
)

#: Whether the generation is a successor still under challenge.
UNDER_CHALLENGE = "SELECT 1 FROM birth WHERE node = ? AND generation = ? AND state = 'PROVISIONAL'"

#: Whether a tool call was journaled as an effect (its result is the full path's).
JOURNALED_CALL = "SELECT 1 FROM tool_call WHERE tool_use_id = ?"

#: Whether a body (node, generation) has a DISPATCHED effect without its result: the full path
#: then looks for what became of its call (relief/hooks.py ``_settle_unanswered``).
OPEN_DISPATCH = (
    "SELECT 1 FROM effect WHERE node = ? AND generation = ? AND state = 'DISPATCHED' LIMIT 1"
)

UPDATE_TELEMETRY = (
    "UPDATE telemetry SET percent = ?, used_tokens = ?, window_tokens = ?, "
    "source = ?, model = ?, reported_at = ? WHERE session_id = ?"
)

UPDATE_CURSOR = "UPDATE body_session SET telemetry_cursor = ? WHERE session_id = ?"

#: A context epoch's first reading (as ``telemetry_insert`` in queries/bodies.sql).
INSERT_TELEMETRY = (
    "INSERT INTO telemetry (session_id, node, generation, percent, used_tokens, window_tokens, "
    "source, model, tier, reported_at, epoch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

#: The tier's ``hull.tier`` event (node, generation, actor, detail, at), only while the
#: session has no mark of that tier in that epoch (session, epoch, tier): sent before
#: :data:`INSERT_TIER_MARK`, it is written exactly when the mark is (``record_fill``).
INSERT_TIER_EVENT = (
    "INSERT INTO event (node, kind, generation, actor, detail, at) "
    "SELECT ?, 'hull.tier', ?, ?, ?, ? WHERE NOT EXISTS "
    "(SELECT 1 FROM tier_mark WHERE session_id = ? AND epoch = ? AND tier = ?)"
)

#: The first report of a tier by a session in an epoch (as ``tier_mark_insert``), only while
#: there is none (session, epoch, tier).
INSERT_TIER_MARK = (
    "INSERT INTO tier_mark (session_id, tier, generation, percent, at, epoch) "
    "SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS "
    "(SELECT 1 FROM tier_mark WHERE session_id = ? AND epoch = ? AND tier = ?)"
)

#: A row when a Stop may have to be blocked: relief was requested of the session and its Stop
#: has not been blocked yet (relief/hooks.py ``on_stop`` decides it, on the full path).
STOP_MAY_BLOCK = (
    "SELECT 1 FROM body_session WHERE session_id = ? AND relief_requested_at IS NOT NULL "
    "AND stop_blocked_at IS NULL"
)

#: Extend the session's lease (as ``lease_renew`` in queries/leases.sql).
RENEW_LEASE = "UPDATE body_lease SET renewed_at = ?, expires_at = ? WHERE lease_id = ?"

#: Why a lease a body gave up cleanly ended (``release_lease``'s ``end_reason``).
RELEASE_REASON = "released by body"

#: End a body's lease it gave up cleanly (as ``lease_end_if_live`` in queries/base.sql, with
#: the state ``release_lease`` gives it): ended time and reason, the lease id.
RELEASE_LEASE = (
    "UPDATE body_lease SET state = 'RELEASED', ended_at = ?, end_reason = ? "
    "WHERE lease_id = ? AND state = 'LIVE'"
)

#: One history event (as ``event_insert`` in queries/base.sql): node, kind, generation, actor,
#: detail (JSON, as ``ledger.base._event_json`` encodes it), at.
INSERT_EVENT = (
    "INSERT INTO event (node, kind, generation, actor, detail, at) VALUES (?, ?, ?, ?, ?, ?)"
)

#: The capabilities a generation holds now (relief/grants.py); none: it is not restricted.
LIVE_GRANTS = (
    "SELECT capability FROM capability_grant WHERE node = ? AND state = 'LIVE' AND generation = ?"
)

#: Journal one tool call's outcome (as ``tool_outcome_insert`` in queries/tool_outcomes.sql).
INSERT_TOOL_OUTCOME = (
    "INSERT INTO tool_call_outcome (node, generation, session_id, tool_use_id, tool, "
    "call_summary, outcome, exit_code, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


#: The workspace lookup's candidates come in multiples of this many (see below).
CANDIDATES_STEP = 16


def workspace_candidates(path: str) -> list[str]:
    """``path`` (resolved) and each of its ancestors, closest first, the last (the root)
    repeated up to a multiple of :data:`CANDIDATES_STEP`: ``WORKSPACE_BINDINGS`` then has
    one text for every directory up to 15 levels deep (another for up to 31), so that a
    statement compiled once, or ahead (:func:`compile_ahead`), serves calls from any of
    them. A path named twice in ``IN`` matches as once."""
    real = os.path.realpath(path)
    candidates = [real]
    parent = os.path.dirname(real)
    while parent and parent != candidates[-1]:
        candidates.append(parent)
        parent = os.path.dirname(parent)
    candidates += candidates[-1:] * (-len(candidates) % CANDIDATES_STEP)
    return candidates


def closest_binding(rows: list[Any]) -> tuple[str, str] | None:
    """(node, bound path) of the deepest binding among ``WORKSPACE_BINDINGS`` rows."""
    if not rows:
        return None
    path, node = max(rows, key=lambda r: len(r[0]))
    return str(node), str(path)


def workspace_node(conn: sqlite3.Connection, cwd: str) -> str | None:
    """The node the closest bound ancestor of ``cwd`` belongs to, if any."""
    candidates = workspace_candidates(cwd)
    marks = ", ".join("?" for _ in candidates)
    rows = conn.execute(WORKSPACE_BINDINGS.format(marks=marks), candidates).fetchall()
    found = closest_binding(rows)
    return None if found is None else found[0]
