"""The hook fast path: the common call answered with the standard library, the ledger's
driver, the harness adapters and the transcript reader only, in one transaction.

Most hook calls change nothing that matters: an admitted, current body reads a tool's
result, its tier is unchanged, no message waits for it. Those calls are answered here
without importing the ledger, click or the effect journal. The moment anything else is
true (another tier, a pending message, a fenced or unknown session, an effect-capable tool
call) the call is handed to the full path in :mod:`onstation.relief.hooks`, which decides
it. The fast path only ever writes telemetry (the reading and the transcript cursor; an
epoch's first, Green, reading with its tier's mark and event, durably), the session
lease's renewal, the tool call's journal row and, at a clean SessionEnd, the lease's
release with its event (durably), inside one write transaction that
also re-checks that the body is admitted and current, so it never writes for a stale body:
``BEGIN IMMEDIATE`` on SQLite (:class:`SqliteStore`); on PostgreSQL the node's row locked
first, as every guarded write of the ledger locks it, and the statements pipelined into two
round trips (:mod:`onstation.relief.hotpath_pg`). One decision (:func:`_answer`) serves both.

What it imports is chosen for start-up time: JSON through :mod:`onstation.core.fastjson`
(``json`` would import ``re``), SQLite through ``_sqlite3`` (the ``sqlite3`` package's
Python layer imports ``datetime`` for adapters the fast path never uses). Its writes are a
reading, a cursor, a lease renewal and a journal row, committed with ``synchronous=NORMAL``:
durable against a crash of any process, and against power loss up to the last checkpoint
(docs/decisions.md says why that is enough for each); on PostgreSQL with
``synchronous_commit`` off for the transaction, as the full path commits a journal row.
"""

from __future__ import annotations

import os
import time

from onstation.core.fastjson import dumps, loads
from onstation.ledger import fastpath as queries

try:  # the C module alone: no datetime adapters (see above)
    import _sqlite3 as sqlite3
except ImportError:  # pragma: no cover - an interpreter without it: the package
    import sqlite3  # type: ignore[no-redef]

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    from typing import Any

    from onstation.harness.adapters import HookCall

#: Events the fast path may answer; every other event takes the full path.
FAST_EVENTS = frozenset({"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionEnd"})
#: The fast events that read no telemetry (as on the full path).
_NO_TELEMETRY = ("Stop", "SessionEnd")

#: SessionEnd reasons after which the host process goes on with a new session id: not an
#: end (``relief.hooks._CONTINUING_END_REASONS``; checked equal by a test).
_CONTINUING_END_REASONS = ("clear", "resume")

#: Tools that never cause an effect in the world by themselves.
_INERT_TOOLS = frozenset(
    {"Read", "Glob", "Grep", "LS", "Edit", "MultiEdit", "Write", "NotebookEdit", "NotebookRead",
     "TodoWrite", "TodoRead", "WebSearch", "WebFetch", "Task", "ExitPlanMode", "BashOutput",
     "read_file", "list_dir", "apply_patch", "view_image", "update_plan"}
)  # fmt: skip

#: Renew a session lease when less than this is left (microseconds; mirrors the full path).
_RENEW_WHEN_LEFT_US = 6 * 3600 * 1_000_000
#: The lease a session's hooks renew to (``ledger.bodies.SESSION_LEASE_TTL``; checked equal
#: by a test).
_SESSION_LEASE_TTL_US = 12 * 3600 * 1_000_000

NOT_HANDLED = object()

#: The WAL size past which the fast path checkpoints it and truncates it; ``settle_wal``
#: does it (both in :mod:`onstation.ledger.fastpath`, which a ledger left open uses too).
WAL_LIMIT_BYTES = queries.WAL_LIMIT_BYTES
settle_wal = queries.settle_wal

#: The workspace configuration's size limit (``harness.files.MAX_SMALL_JSON_BYTES``; kept
#: here so the fast path does not import that module, and checked equal by a test).
MAX_CONFIG_BYTES = 1 << 20


def _sqlite_path(url: str | None) -> str | None:
    """The SQLite file a ledger URL names, or None for PostgreSQL or a malformed URL (both
    are the full path's to handle): ``ledger.urls.sqlite_file``'s answer.

    A plain file path (what ``ONSTATION_DB`` and ``--db`` hold in the common case) is read
    here; anything else asks ``ledger.urls``, which imports the error classes (and with them
    ``enum``), a cost the common call does without. A property test holds the two equal.
    """
    if (
        url
        and "\x00" not in url
        and "://" not in url
        and url != ":memory:"
        and not url[:7].lower().startswith("sqlite:")
    ):
        return os.path.expanduser(url)
    from onstation.core.errors import BadInput
    from onstation.ledger.urls import sqlite_file

    try:
        return sqlite_file(url)
    except BadInput:
        return None


def _effect_capable(
    call: HookCall, config: dict[str, Any], deadline: float | None = None
) -> bool | None:
    """False when certainly inert, True when effect-capable, None when unsure."""
    tool = call.tool_name
    if tool is None:
        return None
    if tool in _INERT_TOOLS and not config.get("effects"):
        return False
    tool_input = call.tool_input
    if tool_input is None:
        return None
    from onstation.harness.effects import (
        DEFAULT_PATTERNS,
        classify_bounded,
        patterns_from_mapping,
    )

    patterns = (
        patterns_from_mapping(config["effects"]) if config.get("effects") else (DEFAULT_PATTERNS)
    )
    cwd = call.cwd if call.cwd is not None else os.getcwd()
    # The first effect decides; the full path reads the rest (a command of thousands of
    # pushes costs one resolution here, not thousands).
    found, stopped = classify_bounded(
        tool, tool_input, str(cwd), patterns, max_effects=0, deadline=deadline
    )
    return bool(found) or stopped is not None


#: The keys a workspace configuration may hold (``harness.config._KEYS``; checked equal by a
#: test) and the failure modes it may name (``harness.config.HOOK_FAIL_MODES``).
CONFIG_KEYS = frozenset({"node", "db", "tiers", "supervised", "effects", "hook_fail"})
HOOK_FAIL_MODES = ("open", "closed")


def workspace_ledger(cwd: str, db: str | None) -> tuple[dict[str, Any], str, str] | None:
    """The workspace's configuration and its ledger: ``(config, "sqlite", file)`` or
    ``(config, "postgres", url)``; None when a fast path may not answer there (no such
    directory, a configuration the full path refuses, so that it says what is wrong, or a
    ledger that is neither an existing SQLite file nor a PostgreSQL URL)."""
    if not os.path.isdir(cwd):
        return None
    config = raw_config(cwd)
    if config is None or not config_valid(config):
        return None
    url = db or config.get("db") or os.environ.get("ONSTATION_DB")
    if url and url[:13].lower().startswith(("postgresql://", "postgres://")):
        return config, "postgres", url
    path = _sqlite_path(url)
    if path is None or not os.path.isfile(path):
        return None
    return config, "sqlite", path


def open_store(kind: str, where: str) -> Any:
    """The fast path's statements on the ledger ``workspace_ledger`` found: a
    :class:`SqliteStore` or a PostgreSQL one (:mod:`onstation.relief.hotpath_pg`), or None
    when it cannot be opened here (the full path decides, and says why)."""
    if kind == "sqlite":
        conn = open_wal(where)
        return None if conn is None else SqliteStore(conn, where)
    from onstation.relief.hotpath_pg import open_pg_store

    return open_pg_store(where)


def config_valid(config: dict[str, Any]) -> bool:
    """Whether ``harness.config.load_config`` accepts this configuration: when it does not,
    the full path fails open and says why, so the fast path must not answer."""
    if not CONFIG_KEYS.issuperset(config):
        return False
    if not isinstance(config.get("supervised", False), bool):
        return False
    if not isinstance(config.get("effects", {}), dict):
        return False
    if any(key in config and not isinstance(config[key], str) for key in ("node", "db")):
        return False
    mode = config.get("hook_fail")
    return mode is None or mode in HOOK_FAIL_MODES


def raw_config(start: str) -> dict[str, Any] | None:
    """The nearest ``.onstation/config.json`` as a dict ({} when none; None when unreadable)."""
    here = os.path.realpath(start)
    while True:
        candidate = os.path.join(here, ".onstation", "config.json")
        if os.path.isfile(candidate):
            try:
                # Bounded like every input (the full path reports an oversized file).
                with open(candidate, "rb") as fh:
                    raw = fh.read(MAX_CONFIG_BYTES + 1)
                if len(raw) > MAX_CONFIG_BYTES:
                    return None
                data = loads(raw.decode("utf-8"))
            except (OSError, ValueError, RecursionError):
                return None
            return data if isinstance(data, dict) else None
        parent = os.path.dirname(here)
        if parent == here:
            return {}
        here = parent


def try_fast(
    call: HookCall,
    db: str | None,
    deadline: float | None = None,
    *,
    keep: list[Any] | None = None,
) -> object:
    """Answer the call here (returns what to print: None for nothing, or the JSON object a
    host requires even when nothing is decided) or return NOT_HANDLED.

    ``deadline`` (``time.monotonic()``) bounds the effect classification of a PreToolUse.
    ``keep``: the ledger's connection (SQLite) or backend (PostgreSQL), once opened, is
    appended to it, open (whether the call was answered here or not), for the caller to hand
    to the full path, to close, or to leave open at a deliberate exit (closing the last
    SQLite connection checkpoints and deletes the WAL: see ``cli/hooks.py`` ``_exit_now``).
    """
    from onstation.harness.adapters import HOOK_HARNESSES

    if call.event not in FAST_EVENTS or call.harness not in HOOK_HARNESSES:
        return NOT_HANDLED
    session_id = call.session_id
    cwd = call.cwd
    if not session_id or cwd is None:
        return NOT_HANDLED
    found = workspace_ledger(cwd, db)
    if found is None:
        return NOT_HANDLED
    config, kind, where = found
    store = open_store(kind, where)
    if store is None:
        return NOT_HANDLED
    try:
        answered = _answer(store, call, session_id, cwd, config, deadline)
        if answered is not NOT_HANDLED:
            store.settle()
    except store.errors:
        store.failed()
        return NOT_HANDLED  # e.g. a ledger not yet migrated: the full path says why
    finally:
        # Kept open even when the full path is to answer: closing the process's last
        # connection would checkpoint and delete the WAL, which the full path's first commit
        # would then create anew (a directory fsync; about 2 ms a call); a PostgreSQL
        # connection is handed to the full path instead of its making one.
        store.keep(keep)
    return answered


class SqliteStore:
    """The fast path's statements on an SQLite ledger: its reads and its one write
    transaction (``BEGIN IMMEDIATE``: the writer lock is taken before anything is re-checked),
    in the shape the PostgreSQL store has (:mod:`onstation.relief.hotpath_pg`), so that one
    decision serves both."""

    errors = (sqlite3.Error,)
    #: A statement on its own costs no wait for a server (see ``_answer``).
    CURSOR_IS_A_ROUND_TRIP = False

    def __init__(self, conn: Any, path: str) -> None:
        self.conn = conn
        self.path = path
        self._durable = False

    def _relaxed_again(self) -> None:
        if self._durable:
            self._durable = False
            self.conn.execute("PRAGMA synchronous = NORMAL")

    def cursor_row(self, session_id: str) -> Any:
        """``SESSION_CURSOR``'s row, outside any transaction."""
        return self.conn.execute(queries.SESSION_CURSOR, (session_id,)).fetchone()

    def workspace_node(self, cwd: str) -> str | None:
        return queries.workspace_node(self.conn, cwd)

    def gather(
        self, session_id: str, cwd: str, event: str, tool_use_id: str | None,
        durable: bool = False,
    ) -> Any:  # fmt: skip
        """Begin the write transaction and read what the decision needs: ``SESSION_STATE``'s
        row (None: no such session, and nothing else), the node the workspace is bound to,
        whether a message waits, whether the generation is under challenge, its grants (a
        PreToolUse), whether a Stop may have to be blocked, and whether an effect's result
        is the full path's to record (the call's own, or a dispatch still unanswered).
        ``durable``: the transaction commits at ``synchronous=FULL`` (a first reading's tier
        mark), which SQLite takes only outside a transaction."""
        conn = self.conn
        if durable:
            conn.execute("PRAGMA synchronous = FULL")
            self._durable = True
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(queries.SESSION_STATE, (session_id,)).fetchone()
        if row is None:
            return None
        node, generation = row[0], row[1]
        grants: set[str] = set()
        if event == "PreToolUse":
            grants = {r[0] for r in conn.execute(queries.LIVE_GRANTS, (node, generation))}
        journaled = (
            event == "PostToolUse"
            and tool_use_id is not None
            and conn.execute(queries.JOURNALED_CALL, (tool_use_id,)).fetchone() is not None
        )
        return (
            row,
            queries.workspace_node(conn, cwd),
            conn.execute(queries.PENDING_MESSAGE, (node, generation)).fetchone() is not None,
            conn.execute(queries.UNDER_CHALLENGE, (node, generation)).fetchone() is not None,
            grants,
            event == "Stop"
            and conn.execute(queries.STOP_MAY_BLOCK, (session_id,)).fetchone() is not None,
            journaled
            or conn.execute(queries.OPEN_DISPATCH, (node, generation)).fetchone() is not None,
        )

    def gather_status(self, session_id: str, cwd: str) -> tuple[Any, str | None]:
        """Begin the write transaction; ``STATUS_SESSION``'s row and the workspace's node."""
        self.conn.execute("BEGIN IMMEDIATE")
        row = self.conn.execute(queries.STATUS_SESSION, (session_id,)).fetchone()
        return row, queries.workspace_node(self.conn, cwd)

    def commit(self, writes: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Run ``writes`` (statement, parameters) and commit, at ``synchronous=NORMAL``
        (FULL for a durable transaction, NORMAL again after it)."""
        for sql, params in writes:
            self.conn.execute(sql, params)
        self.conn.execute("COMMIT")
        self._relaxed_again()

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")
        self._relaxed_again()

    def abort(self) -> None:
        """End a transaction an exception left open."""
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        self._relaxed_again()

    def settle(self) -> None:
        settle_wal(self.conn, self.path)

    def failed(self) -> None:
        return None  # the connection stays usable: the full path opens its ledger on it

    def keep(self, keep: list[Any] | None) -> None:
        if keep is None:
            self.conn.close()
        else:
            keep.append(self.conn)


def open_wal(path: str) -> Any:
    """A connection to the SQLite ledger at ``path`` for the fast path's one transaction, or
    None when it is not in WAL mode (or cannot be opened): then the full path decides.

    A daemon's spare may have opened it ahead, with the same settings (``ledger.fastpath``
    ``open_ahead``): that connection is taken instead of a new one.

    ``synchronous=NORMAL``: in WAL mode a commit survives any process crash; only a power
    loss can take back the commits since the last checkpoint. Every write taken here is one a
    later call rewrites or can do without (docs/decisions.md); fences and effect transitions
    are the full path's, at FULL.
    """
    conn = queries.take_ahead(path)  # opened by a daemon's spare while it waited
    if conn is not None:
        return conn
    try:
        conn = queries.connect(path, isolation_level=None, timeout=30)
    except sqlite3.Error:
        return None
    try:
        if queries.fast_settings(conn):
            return conn
    except sqlite3.Error:
        pass  # closed below: the full path decides
    conn.close()
    return None


def _answer(
    store: Any,
    call: HookCall,
    session_id: str,
    cwd: str,
    config: dict[str, Any],
    deadline: float | None = None,
) -> object:
    event = call.event
    reading: Any = None
    cursor_json: str | None = None
    # Where the session's cursor costs a round trip of its own (PostgreSQL), it is not read
    # on its own when nothing but the transcript's read would come between it and the
    # locked reads:
    # - a Stop and a SessionEnd read no telemetry: the locked reads tell whether the
    #   session exists, and nothing is read between;
    # - a call that reads telemetry reads the cursor with the locked reads, then the
    #   transcript with the node's row locked: one wait less, at the price of holding that
    #   one row's lock across the read (docs/decisions.md).
    # A PreToolUse reads it first: its classification may run git, outside any transaction.
    # SQLite reads it first: a statement costs no wait there, its write transaction locks
    # every writer out, and an unknown session then never takes the writer lock.
    cursor_first = event not in _NO_TELEMETRY or not store.CURSOR_IS_A_ROUND_TRIP
    together = store.CURSOR_IS_A_ROUND_TRIP and event not in (*_NO_TELEMETRY, "PreToolUse")
    gathered: Any = None
    try:
        if together:
            row, gathered = store.gather_with_cursor(session_id, cwd, event, call.tool_use_id)
            if row is None:
                store.rollback()
                return _unknown_session(store, call, cwd, config)
        else:
            row = store.cursor_row(session_id) if cursor_first else None
            if cursor_first and row is None:
                return _unknown_session(store, call, cwd, config)
        if event == "PreToolUse":
            # A fenced or refused body is the full path's to deny, before any
            # classification: nothing in its call may make that answer slow. A live body's
            # call is classified outside any transaction (it may run git).
            if row[1] != "ADMITTED" or row[2] != row[3]:
                return NOT_HANDLED
            if _effect_capable(call, config, deadline) is not False:
                return NOT_HANDLED
        elif event not in _NO_TELEMETRY:
            reading, cursor_json, settled = _read_transcript(call, row[0], row[4])
            if not settled:
                # A compaction, a new window or a rejected reading: recorded there.
                return _declined(store, together)
        tier: str | None = None
        policy: Any = None
        if reading is not None:
            from onstation.core.hull import tier_value, workspace_policy

            policy = workspace_policy(config.get("tiers"))
            tier = tier_value(reading.percent, policy)
        # No reading stored yet: this one is the epoch's first, and its tier a first tier.
        # A quiet one (Green, with no warning that a tier lies past the host's compaction
        # point) is recorded here as the full path records it, durably; any other is the
        # full path's.
        first = reading is not None and not row[5]
        if first and (tier != "green" or _past_compaction(call.harness, reading, policy, row[6])):
            return _declined(store, together)
        # A clean end releases the body's lease, durably (the next session is admitted at
        # once; a release lost to a power cut would refuse it until the lease ran out).
        releases = event == "SessionEnd" and (call.reason or "other") not in _CONTINUING_END_REASONS
        outcome = None
        if event == "PostToolUse":
            # Every call's outcome is journaled (relief/tool_journal.py); built (and
            # redacted) before SQLite's write lock is taken.
            from onstation.relief.tool_journal import journal_row

            outcome = journal_row(call)
        if not together:
            gathered = store.gather(
                session_id, cwd, event, call.tool_use_id, durable=first or releases
            )
        elif first:
            store.make_durable()
        now = time.time_ns() // 1000
        if gathered is None:
            store.rollback()
            return NOT_HANDLED if cursor_first else _unknown_session(store, call, cwd, config)
        row, bound, pending, challenged, grants, stop_may_block, unsettled = gathered
        if (
            row[2] != "ADMITTED"
            or row[3] != call.harness
            or row[1] != row[4]
            or row[5] != "LIVE"
            or row[6] <= now
            # The node the full path would judge the session for (the workspace's binding,
            # else the configuration's): another one, or none (an unmanaged workspace, no
            # write), is the full path's to answer.
            or (bound or config.get("node")) != row[0]
            # A successor under challenge heartbeats on the full path.
            or challenged
            # Outside the generation's grants: the full path denies it.
            or (event == "PreToolUse" and not _granted(grants, call.tool_name))
            # Relief requested, not yet blocked once: the full path decides.
            or stop_may_block
            # A message to deliver (a SessionEnd delivers none), or an effect's result to
            # record (this call's, or a dispatch the host never answered): the full path's.
            or (pending and event != "SessionEnd")
            or unsettled
        ):
            store.rollback()
            return NOT_HANDLED
        # The session's row before its telemetry row, as the full path records a reading
        # (without the node's lock): on PostgreSQL the other order could deadlock with it.
        writes: list[tuple[str, tuple[Any, ...]]] = []
        if cursor_json is not None:
            writes.append((queries.UPDATE_CURSOR, (cursor_json, session_id)))
        if reading is not None:
            if first and row[7] is None:
                writes += _first_reading(call, session_id, row, reading, tier, config, now)
            elif tier != row[7] or row[9] != row[1] or row[10] != row[11]:
                store.rollback()
                return NOT_HANDLED  # a tier change is recorded (once) by the full path
            else:
                writes.append((
                    queries.UPDATE_TELEMETRY,
                    (reading.percent, reading.used_tokens, reading.window_tokens,
                     reading.source, reading.model, now, session_id),
                ))  # fmt: skip
        if row[6] - now < _RENEW_WHEN_LEFT_US:
            # Renewed here as the full path renews it (admitted, current, live, unexpired:
            # checked above): a body that also heartbeats with a short lease would otherwise
            # send every hook call to the full path just to renew.
            writes.append((queries.RENEW_LEASE, (now, now + _SESSION_LEASE_TTL_US, row[8])))
        if outcome is not None:  # the body is admitted and current: checked above
            writes.append(
                (queries.INSERT_TOOL_OUTCOME, (row[0], row[1], session_id, *outcome, now))
            )
        if releases:  # its lease is live, unexpired and its generation current: checked above
            writes += _release(call, session_id, row, now)
        store.commit(writes)
    except BaseException:
        store.abort()
        raise
    return _quiet(call)


def _declined(store: Any, together: bool) -> object:
    """NOT_HANDLED, the transaction ``gather_with_cursor`` began (``together``) rolled back
    first: the full path is handed a connection with none open."""
    if together:
        store.rollback()
    return NOT_HANDLED


def _unknown_session(store: Any, call: HookCall, cwd: str, config: dict[str, Any]) -> object:
    """The answer for a session the ledger does not know: none in an unmanaged workspace
    (nothing to record, nothing to say), else the full path's (it admits the session)."""
    if not config.get("node") and store.workspace_node(cwd) is None:
        return _quiet(call)
    return NOT_HANDLED


def _past_compaction(harness: str, reading: Any, policy: Any, workspace: str | None) -> bool:
    """Whether a configured tier lies past the host's compaction point: the full path records
    that warning with a first tier (``HookRunner.compaction_notice``)."""
    from onstation.core.compaction import compaction_warning
    from onstation.harness.compaction import host_point

    point = host_point(harness, reading.window_tokens, project=workspace)
    return compaction_warning(policy, point) is not None


def _first_reading(
    call: HookCall, session_id: str, row: Any, reading: Any, tier: Any,
    config: dict[str, Any], now: int,
) -> list[tuple[str, tuple[Any, ...]]]:  # fmt: skip
    """The writes of an epoch's first reading, as ``HarnessLedger.record_fill`` makes them:
    the reading, and (once per session, epoch and tier) the tier's event and mark."""
    node, generation, epoch = row[0], row[1], int(row[11] or 0)
    detail = dumps({"epoch": epoch, "percent": round(reading.percent, 2),
                    "session_id": session_id, "source": reading.source,
                    "supervised": bool(config.get("supervised", False)), "tier": tier},
                   sort_keys=True)  # fmt: skip
    actor = f"{call.harness} session {session_id}"  # ``body_records.holder_for``
    unmarked = (session_id, epoch, tier)
    return [
        (queries.INSERT_TELEMETRY,
         (session_id, node, generation, reading.percent, reading.used_tokens,
          reading.window_tokens, reading.source, reading.model, tier, now, epoch)),
        (queries.INSERT_TIER_EVENT, (node, generation, actor, detail, now, *unmarked)),
        (queries.INSERT_TIER_MARK,
         (session_id, tier, generation, reading.percent, now, epoch, *unmarked)),
    ]  # fmt: skip


def _release(
    call: HookCall, session_id: str, row: Any, now: int
) -> list[tuple[str, tuple[Any, ...]]]:
    """The writes of a clean SessionEnd, as ``Ledger.release_lease`` makes them: the lease
    ended as RELEASED, and its ``lease.released`` event."""
    lease_id = row[8]
    detail = dumps({"lease_id": lease_id, "reason": queries.RELEASE_REASON}, sort_keys=True)
    actor = f"{call.harness} session {session_id}"  # as relief/hooks.py ``on_session_end``
    return [
        (queries.RELEASE_LEASE, (now, queries.RELEASE_REASON, lease_id)),
        (queries.INSERT_EVENT, (row[0], "lease.released", row[1], actor, detail, now)),
    ]


def _quiet(call: HookCall) -> dict[str, Any] | None:
    """What the host must read when nothing is decided: silence, or (Codex, for Stop) the
    JSON it requires, as the full path's ``_no_decision`` gives it."""
    from onstation.harness.adapters import adapter

    return adapter(call.harness).no_decision(call.event)


def _granted(held: set[str], tool: str | None) -> bool:
    """Whether a generation holding the capabilities ``held`` may use ``tool``: it holds
    none (not restricted), or one names the tool or its MCP server (as relief/grants.py
    decides it)."""
    if not held:
        return True  # not restricted (most bodies): relief/grants.py is not even imported
    from onstation.relief.grants import tool_granted

    return tool_granted(held, tool)


def _read_transcript(
    call: HookCall, stored: str | None, window: int | None
) -> tuple[Any, str | None, bool]:
    """(reading, cursor JSON, settled): ``settled`` is False when what was read is the full
    path's to record (a compaction, a window the host declared anew, a rejected reading)."""
    path = call.transcript_path
    if not path:
        return None, None, True
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        return None, None, True
    from onstation.harness.adapters import adapter
    from onstation.harness.transcript import TranscriptCursor, compaction_seen, rejection_seen

    cursor = TranscriptCursor.from_json(loads(stored)) if stored else None
    reading, new_cursor = adapter(call.harness).read_fill(
        path, cursor, model=call.model, declared_window=window
    )
    settled = not (
        (new_cursor.usage_window and new_cursor.usage_window != window)
        or compaction_seen(cursor, new_cursor)
        or rejection_seen(cursor, new_cursor) is not None
    )
    if settled and reading is not None:
        from onstation.core.compaction import reject_reason

        settled = reject_reason(reading) is None
    return reading, dumps(new_cursor.to_json(), sort_keys=True), settled
