"""The ledger's shared base: connection, clock, transactions, row readers and the generation
guard that every write on behalf of a body passes through.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Self, TypeVar

from onstation.core.effects import (
    EffectState,
)
from onstation.core.errors import (
    BadInput,
    BlockedByPolicy,
    Conflict,
    OnstationError,
    StaleGeneration,
)
from onstation.core.governor import RespawnPolicy
from onstation.core.leases import GuardOutcome, LeaseState, judge_write
from onstation.core.names import validate_free_text, validate_name
from onstation.core.types import (
    AgentNode,
    BodyLease,
    Effect,
    Halt,
)
from onstation.ledger.backends import Backend, Params, Row, Tx, open_backend
from onstation.ledger.named_queries import queries

T = TypeVar("T")
Clock = Callable[[], datetime]

DEFAULT_LEASE_TTL = timedelta(hours=1)
MAX_LEASE_TTL = timedelta(days=30)


#: What a counted respawn is: a coordinator's self-respawn, or a relief of a body.
RESPAWN_KINDS = ("coordinator", "relief")


def system_clock() -> datetime:
    """The ledger's default clock: timezone-aware UTC wall time."""
    return datetime.now(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: Event details as JSON with sorted keys; one encoder, not one per event (json.dumps
#: builds a new encoder on every call that passes options).
_event_json = json.JSONEncoder(sort_keys=True).encode


def to_us(moment: datetime) -> int:
    """A timezone-aware instant as integer microseconds since the epoch."""
    if moment.tzinfo is None:
        raise BadInput("time must be timezone-aware")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int | None) -> datetime | None:
    """Integer microseconds since the epoch as an aware UTC datetime (None stays None)."""
    if value is None:
        return None
    return _EPOCH + timedelta(microseconds=int(value))


@lru_cache(maxsize=1024)
def _known_name(value: str, field: str) -> str:
    return validate_name(value, field)


@lru_cache(maxsize=1024)
def _known_text(value: str, field: str, max_length: int) -> str:
    return validate_free_text(value, field, max_length)


def check_name(value: str, field: str) -> None:
    """:func:`~onstation.core.names.validate_name`, remembering the names it passed: the
    same few names come back on every call of the hot paths (a refusal is never kept)."""
    if type(value) is str:
        _known_name(value, field)
    else:
        validate_name(value, field)


def check_text(value: str, field: str, max_length: int) -> None:
    """:func:`~onstation.core.names.validate_free_text`, remembering the texts it passed."""
    if type(value) is str:
        _known_text(value, field, max_length)
    else:
        validate_free_text(value, field, max_length)


@lru_cache(maxsize=256)
def repeat_rows(sql: str, count: int) -> str:
    """``sql``, an ``INSERT ... VALUES (...)`` of one row, with that row written ``count``
    times: a batch of rows in one statement, in the same SQL on every backend (no JSON
    table function, no array parameter). The rows are inserted in the order written."""
    start = sql.index("VALUES (") + len("VALUES ")
    depth, end = 0, start
    for end in range(start, len(sql)):  # the row's closing parenthesis
        depth += {"(": 1, ")": -1}.get(sql[end], 0)
        if depth == 0:
            break
    row = sql[start : end + 1]
    return sql[:start] + ", ".join([row] * count) + sql[end + 1 :]


#: Rows written per batched statement at most: far below either backend's limit on bound
#: parameters (SQLite 32,766, PostgreSQL 65,535) for any row the ledger batches.
BATCH_ROWS = 200


@lru_cache(maxsize=8192)
def _at(value: int) -> datetime:
    # Remembered: the same rows (a node, its leases) are read again and again, and an
    # instant (an immutable datetime) is a pure function of its microseconds.
    return _EPOCH + timedelta(microseconds=int(value))


class _CommitThenRaise(Exception):
    """Raised inside a transaction body: commit what was written (a denial), then raise."""

    def __init__(self, error: OnstationError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True)
class _Guarded:
    node: AgentNode
    lease: BodyLease


class _NeedsFullSync(Exception):
    """A relaxed write's body refused with a receipt: roll it back and run it again with a
    synchronous commit (a denial is durable at FULL, whatever the write was)."""


class _UnitReplayChanged(Exception):
    """A refused write, replayed after its unit was rolled back, was no longer refused."""


def unit_refusal(error: OnstationError) -> Callable[[Tx, int], Any] | None:
    """The write whose refusal ended a unit of work, to replay for its receipt (or None)."""
    body = error.__dict__.get("_unit_refusal")
    return body if callable(body) else None


class UnitOfWork:
    """One open ledger transaction, as :meth:`LedgerBase.transaction` yields it."""

    def __init__(self, ledger: LedgerBase, tx: Tx, stamp: int, *, read_only: bool = False) -> None:
        self._ledger = ledger
        self.tx = tx
        self.stamp = stamp
        #: A unit of :meth:`LedgerBase.reading`: reads only; a write in it is refused.
        self.read_only = read_only

    @property
    def now(self) -> datetime:
        """The one time every write of this unit is stamped with."""
        return _at(self.stamp)

    def event(
        self, *, node: str | None, kind: str, generation: int | None, actor: str, **detail: Any
    ) -> None:
        """Append one event to the history, committed with the rest of the unit."""
        self._ledger._event(self.tx, self.stamp, node=node, kind=kind, generation=generation,
                            actor=actor, **detail)  # fmt: skip


class LedgerBase:
    """The ledger's connection, clock and transaction plumbing, shared by every aggregate.

    Each aggregate (nodes, leases, effects, governance) is a subclass adding its operations;
    :class:`onstation.ledger.Ledger` combines them. Private helpers here (``_write``,
    ``_read``, ``_event``, the row readers and the generation guard) are for the ledger
    package only; outside it, :meth:`transaction` is the unit of work.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        clock: Clock = system_clock,
        respawn_policy: RespawnPolicy | None = None,
        relief_policy: RespawnPolicy | None = None,
    ) -> None:
        self.backend = backend
        #: This backend's named queries, looked up once (they are asked for per statement).
        self._queries = queries(backend.name)
        self._clock = clock
        #: The default clock is read as an integer straight away: the same microseconds
        #: since the epoch without building a datetime on every write.
        self._system_time = clock is system_clock
        #: Branches for PostgreSQL's lock-first statements, decided once.
        self._pg = backend.name == "postgres"
        self._unit: UnitOfWork | None = None
        #: The coordinator procedure's cap on self-respawns (3 per 24 h by default).
        self.respawn_policy = respawn_policy or RespawnPolicy()
        #: Births per window for bodies relieved by their lead or an operator; the same numbers
        #: as the coordinator cap unless configured, but counted apart from it.
        self.relief_policy = relief_policy or self.respawn_policy

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        clock: Clock = system_clock,
        respawn_policy: RespawnPolicy | None = None,
        relief_policy: RespawnPolicy | None = None,
        create: bool = True,
        sqlite_connection: sqlite3.Connection | None = None,
        check_ahead: bool = True,
    ) -> Self:
        """Open the ledger a URL names: a SQLite path (default) or a ``postgresql://`` URL.

        ``create=False`` refuses a ledger that does not exist instead of creating it;
        ``sqlite_connection`` is one already open to that SQLite file, set up as the
        backend's own; ``check_ahead=False`` takes a connection a daemon made ahead
        unchecked (:func:`onstation.ledger.backends.open_backend`)."""
        backend = open_backend(
            url, create=create, sqlite_connection=sqlite_connection, check_ahead=check_ahead
        )
        return cls(backend, clock=clock, respawn_policy=respawn_policy,
                   relief_policy=relief_policy)  # fmt: skip

    def close(self) -> None:
        """Release the connection."""
        self.backend.close()

    def leave_open(self) -> None:
        """Get ready to be left open by a process that ends without closing it (a whole hook
        call: closing a SQLite ledger checkpoints and deletes its WAL, which costs the call
        more than its answer). Everything committed stays committed either way."""
        self.backend.leave_open()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------------------
    # transaction plumbing

    def _q(self, name: str) -> str:
        """The named query ``name`` in this backend's dialect (see :mod:`.named_queries`)."""
        return self._queries[name]

    def now(self) -> datetime:
        """The ledger's clock (wall time, UTC): the time its records are stamped with."""
        return self._clock()

    def _now(self) -> int:
        if self._system_time:
            return time.time_ns() // 1000
        return to_us(self._clock())

    @contextmanager
    def transaction(self) -> Iterator[UnitOfWork]:
        """A unit of work: every ledger write made inside the block commits together or not
        at all, stamped with one time.

        Use it for what must never be seen half done (a tier event and the message it
        causes). Ledger methods called inside the block join it, on this ledger object.
        A write refused inside the block (a stale generation, a blocked respawn) ends it:
        what the block wrote is rolled back, the refusal's receipt is committed on its own,
        and the refusal is raised. A concurrent-writer conflict is raised as
        :class:`~onstation.core.errors.Conflict` for the caller to run the block again.
        """
        if self._unit is not None:
            yield self._unit  # already inside one: the outer block decides
            return
        try:
            with self.backend.write() as tx:
                unit = UnitOfWork(self, tx, self._now())
                self._unit = unit
                try:
                    yield unit
                finally:
                    self._unit = None
        except OnstationError as error:
            if unit_refusal(error) is not None:
                self._replay_refusal(error)
            raise
        except Exception as exc:
            if self.backend.is_retryable(exc) or self.backend.is_integrity_error(exc):
                raise Conflict(f"lost a race with a concurrent writer: {exc}") from exc
            raise

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Reads made inside the block share one read transaction, stamped with one time.

        A view made of many reads (the team view: a handful per identity) then costs one
        BEGIN and one ROLLBACK instead of one pair per read (three round trips each on
        PostgreSQL). On SQLite the block sees one snapshot; on PostgreSQL (READ COMMITTED)
        each statement sees what was committed when it ran. A write inside the block is a
        programming error (RuntimeError); inside a :meth:`transaction` this joins it.
        """
        if self._unit is not None:
            yield
            return
        with self.backend.read() as tx:
            self._unit = UnitOfWork(self, tx, self._now(), read_only=True)
            try:
                yield
            finally:
                self._unit = None

    def _replay_refusal(self, error: OnstationError) -> None:
        """Commit, on its own, the receipt of a write refused inside a rolled-back unit."""
        body = unit_refusal(error)
        assert body is not None

        def replay(tx: Tx, now: int) -> None:
            body(tx, now)
            # The refusal did not happen again (the state moved on): write nothing alone.
            raise _UnitReplayChanged

        try:
            self._write(replay)
        except _UnitReplayChanged:
            raise Conflict(
                "the ledger changed under a refused unit of work; run it again"
            ) from None

    def _write(self, body: Callable[[Tx, int], T], *, relaxed: bool = False) -> T:
        """Run ``body`` in a writing transaction (or in the open unit of work, which then
        decides its commit), run again on a retryable conflict.

        ``relaxed``: the commit need not wait for the disk (the backend's ``write``), for a
        row that is evidence and never authority. A body that refuses with a receipt (a
        stale generation's denial) is rolled back and run again with a synchronous commit,
        so that every denial is as durable as ever."""
        unit = self._unit
        if unit is not None:
            if unit.read_only:
                raise RuntimeError("a ledger write inside Ledger.reading(), which only reads")
            try:
                return body(unit.tx, unit.stamp)
            except _CommitThenRaise as deferred:
                # Kept in this transaction when the block handles the refusal and goes on;
                # replayed alone when the refusal ends the block (see :meth:`transaction`).
                deferred.error.__dict__["_unit_refusal"] = body
                raise deferred.error from None
        attempt = 0
        while True:
            pending: OnstationError | None = None
            try:
                with self.backend.write(relaxed=relaxed) as tx:
                    now = self._now()
                    try:
                        result = body(tx, now)
                    except _CommitThenRaise as deferred:
                        if relaxed:
                            raise _NeedsFullSync from None  # rolled back by the with block
                        pending = deferred.error
            except _NeedsFullSync:
                relaxed = False
                continue
            except OnstationError:
                raise
            except Exception as exc:
                attempt = self._retry_or_raise(exc, attempt)
                continue
            if pending is not None:
                raise pending
            return result

    def _write_statement(self, body: Callable[[Tx, int], T]) -> T:
        """:meth:`_write` for a body whose only write is its first statement, one that takes
        its own locks before it reads (PostgreSQL's fence and admission functions); what it
        runs after that statement only reads, to explain a refusal. Where the backend lets a
        statement commit on its own (PostgreSQL, outside a unit of work) it runs with no
        BEGIN and no COMMIT around it: one round trip. Else, and inside a unit of work, as
        :meth:`_write`."""
        tx = None if self._unit is not None else self.backend.statement_write()
        if tx is None:
            return self._write(body)
        attempt = 0
        while True:
            try:
                return body(tx, self._now())
            except _CommitThenRaise as deferred:  # its one statement has committed already
                raise deferred.error from None
            except OnstationError:
                raise
            except Exception as exc:
                attempt = self._retry_or_raise(exc, attempt)

    def _retry_or_raise(self, exc: Exception, attempt: int) -> int:
        """After a write failed with ``exc`` on try number ``attempt`` (0 first): the next
        try's number, having paused, when the backend says it may run again (a deadlock, a
        serialization failure; ten times at most); else a lost race on a key as a Conflict,
        or ``exc`` itself."""
        if self.backend.is_retryable(exc) and attempt < 10:
            self.backend.retry_pause(attempt + 1)
            return attempt + 1
        if self.backend.is_integrity_error(exc):
            raise Conflict(f"lost a race with a concurrent writer: {exc}") from exc
        raise exc

    def _read(self, body: Callable[[Tx, int], T]) -> T:
        unit = self._unit
        if unit is not None:
            return body(unit.tx, unit.stamp)  # a unit of work reads what it has written
        with self.backend.read() as tx:
            return body(tx, self._now())

    def _read_single(self, body: Callable[[Tx, int], T]) -> T:
        """:meth:`_read` for a body whose statements need no common snapshot (one statement,
        or a second that only tells a missing node from an empty answer: nodes are never
        deleted). Outside a unit each statement runs on its own, without the BEGIN and
        ROLLBACK around it (two more statements on SQLite, two more round trips on
        PostgreSQL)."""
        unit = self._unit
        if unit is not None:
            return body(unit.tx, unit.stamp)
        return body(self.backend.autocommit(), self._now())

    def _event(
        self,
        tx: Tx,
        now: int,
        *,
        node: str | None,
        kind: str,
        generation: int | None,
        actor: str,
        **detail: Any,
    ) -> None:
        tx.send(
            self._q("event_insert"),
            (node, kind, generation, actor, _event_json(detail), now),
        )

    def _event_encoded(
        self, tx: Tx, now: int, node: str, kind: str, generation: int, actor: str, detail: str
    ) -> None:
        """:meth:`_event` with its detail already encoded (as ``_event_json`` would)."""
        tx.send(self._q("event_insert"), (node, kind, generation, actor, detail, now))

    def _events_encoded(
        self, tx: Tx, now: int, events: list[tuple[str | None, str, int | None, str, str]]
    ) -> None:
        """Append several events, each ``(node, kind, generation, actor, encoded detail)``,
        in the order given: one statement per :data:`BATCH_ROWS` of them."""
        sql = self._q("event_insert")
        for start in range(0, len(events), BATCH_ROWS):
            chunk = events[start : start + BATCH_ROWS]
            params = tuple(v for event in chunk for v in (*event, now))
            tx.send(repeat_rows(sql, len(chunk)), params)

    # ----------------------------------------------------------------------------------------
    # rows -> records

    @staticmethod
    def _node(row: Row) -> AgentNode:
        return AgentNode(
            node=row[0],
            role=row[1],
            spawner=row[2],
            generation=int(row[3]),
            state=row[4],
            created_at=_at(row[5]),
            breaker_open=bool(row[6]),
            breaker_reason=row[7],
        )

    @staticmethod
    def _lease(row: Row) -> BodyLease:
        return BodyLease(
            lease_id=int(row[0]),
            node=row[1],
            generation=int(row[2]),
            state=LeaseState(row[3]),
            holder=row[4],
            acquired_at=_at(row[5]),
            renewed_at=_at(row[6]),
            expires_at=_at(row[7]),
            ended_at=from_us(row[8]),
            end_reason=row[9],
            run_id=None if row[10] is None else int(row[10]),
        )

    @staticmethod
    def _effect(row: Row) -> Effect:
        return Effect(
            effect_id=row[0],
            node=row[1],
            generation=int(row[2]),
            fingerprint=row[3],
            operation=row[4],
            destination=row[5],
            arguments=json.loads(row[6]),
            approval_slot=row[7],
            caller_ref=row[8],
            state=EffectState(row[9]),
            result=None if row[10] is None else json.loads(row[10]),
            created_at=_at(row[11]),
            updated_at=_at(row[12]),
            resolved_by=row[13],
            resolution=row[14],
            repeat_of=row[15],
            repeat_reason=row[16],
        )

    def _lock_node(self, tx: Tx, name: str) -> AgentNode:
        return self._locked_node(tx.one(self._q("node_lock"), (name,)), name)

    def _locked_node(self, row: Row | None, name: str) -> AgentNode:
        """The node of a ``node_lock`` row; BadInput when there was none."""
        if row is None:
            raise BadInput(f"no such node {name!r}", node=name)
        return self._node(row)

    def _get_node(self, tx: Tx, name: str) -> AgentNode:
        row = tx.one(self._q("node_get"), (name,))
        if row is None:
            raise BadInput(f"no such node {name!r}", node=name)
        return self._node(row)

    def _node_and_lease(
        self, tx: Tx, name: str, *, lock: bool
    ) -> tuple[AgentNode, BodyLease | None]:
        """The node and its current generation's lease, in one statement; ``lock``: the
        node's row is locked for the rest of the transaction first.

        SQLite's writer lock (BEGIN IMMEDIATE) already covers a write. PostgreSQL locks the
        row in a statement of its own, sent in the same round trip: at READ COMMITTED the read
        after it then takes its snapshot once the lock is held, and so sees a fence or an
        admission committed while it waited (one statement locking through a join would
        re-check the node's new row against the lease row of its old snapshot).
        """
        return self._node_lease_of(self._node_row(tx, name, "node_and_lease", (name,), lock=lock))

    def _node_row(self, tx: Tx, name: str, query: str, params: Params, *, lock: bool) -> Row:
        """The row ``query`` reads for node ``name`` (its node's columns first), the node's row
        locked first when ``lock`` (see :meth:`_node_and_lease`); BadInput when there is none."""
        if lock and self._pg:
            tx.send(self._q("node_row_lock"), (name,))
        row = tx.one(self._q(query), params)
        if row is None:
            raise BadInput(f"no such node {name!r}", node=name)
        return row

    def _node_lease_of(self, row: Row) -> tuple[AgentNode, BodyLease | None]:
        """The node (the columns of node_get) and its current lease (the 11 columns of
        lease_of_generation after them, NULL when it has none) at the start of ``row``."""
        return self._node(row), None if row[8] is None else self._lease(row[8:19])

    def _guard_and_rights(
        self, tx: Tx, now: int, name: str, generation: int, action: str
    ) -> _Guarded:
        """:meth:`_guard`, then :meth:`_require_effect_rights`, from one read of the node, its
        lease and the acting generation's birth (issue 14: two statements before, each a
        round trip on PostgreSQL), taken after the node's row lock as the guard's own is."""
        _check_generation(generation, "generation")
        row = self._node_row(tx, name, "node_lease_and_birth", (generation, name), lock=True)
        read = self._node_lease_of(row)
        guarded = self._guard(tx, now, name, generation, action, read=read)
        self._require_effect_rights(tx, now, name, generation, action, birth=(row[19],))
        return guarded

    def _require_node(self, tx: Tx, name: str) -> None:
        """Refuse a node that does not exist: asked by a read only when its answer is empty
        (rows naming a node prove it exists: their foreign key, and no node is ever deleted)."""
        if tx.one(self._q("node_exists"), (name,)) is None:
            raise BadInput(f"no such node {name!r}", node=name)

    def _lease_for(self, tx: Tx, name: str, generation: int) -> BodyLease | None:
        row = tx.one(self._q("lease_of_generation"), (name, generation))
        return None if row is None else self._lease(row)

    def _active_halt(self, tx: Tx, name: str | None) -> Halt | None:
        row = tx.one(self._q("halt_blocking_node"), (name,))
        return None if row is None else self._halt(row)

    @staticmethod
    def _halt(row: Row) -> Halt:
        return Halt(
            halt_id=int(row[0]),
            node=row[1],
            by=row[2],
            why=row[3],
            at=_at(row[4]),
            lifted_at=from_us(row[5]),
            lifted_by=row[6],
        )

    def _refuse_if_halted(self, tx: Tx, name: str, what: str) -> None:
        self.backend.lock_gate(tx, exclusive=False)
        halt = self._active_halt(tx, name)
        if halt is not None:
            scope = "global halt" if halt.node is None else f"halt on {halt.node}"
            raise BlockedByPolicy(
                f"{what} refused: {scope} by {halt.by} ({halt.why})",
                node=name,
                halt_id=halt.halt_id,
                reason="halted",
            )

    # ----------------------------------------------------------------------------------------
    # the generation guard

    def _guard(
        self, tx: Tx, now: int, name: str, generation: int, action: str, *,
        read: tuple[AgentNode, BodyLease | None] | None = None,
    ) -> _Guarded:  # fmt: skip
        """Check a body's generation inside the writing transaction; record a denial if stale.

        ``read``: the node and its current generation's lease as the caller read them in this
        transaction, after locking the node's row as :meth:`_node_and_lease` does (an effect's
        step reads them with the effect: ``effect_and_guard``); else they are read here."""
        _check_generation(generation, "generation")
        node, lease = read if read is not None else self._node_and_lease(tx, name, lock=True)
        outcome = judge_write(
            presented=generation,
            current=node.generation,
            lease_state=None if lease is None else lease.state,
            lease_expires_at=None if lease is None else lease.expires_at,
            now=_at(now),
        )
        if outcome is GuardOutcome.ALLOWED:
            assert lease is not None
            return _Guarded(node, lease)
        if (
            outcome is GuardOutcome.LEASE_EXPIRED
            and lease is not None
            and lease.state is LeaseState.LIVE
        ):
            self._end_lease(tx, now, lease, LeaseState.EXPIRED, "ttl passed", actor="ledger")
        denial_id = self._deny(tx, now, name, generation, node.generation, action, outcome.value)
        raise _CommitThenRaise(
            StaleGeneration(
                f"{name} generation {generation} may not act ({outcome.value}; "
                f"current generation {node.generation})",
                node=name,
                presented_generation=generation,
                current_generation=node.generation,
                reason=outcome.value,
                denial_id=denial_id,
            )
        )

    def _deny(
        self, tx: Tx, now: int, node: str, presented: int, current: int, action: str, reason: str
    ) -> int:
        """Write a denial receipt and its history event; returns the denial's id."""
        row = tx.one(self._q("denial_insert"), (node, presented, current, action, reason, now))
        assert row is not None
        self._event(tx, now, node=node, kind="write.denied", generation=presented,
                    actor=f"{node}@{presented}", action=action, reason=reason,
                    current_generation=current, denial_id=int(row[0]))  # fmt: skip
        return int(row[0])

    def _require_effect_rights(
        self, tx: Tx, now: int, node: str, generation: int, action: str, *,
        birth: tuple[str | None] | None = None,
    ) -> None:  # fmt: skip
        """A successor launched by a relief acts only once its birth is RUNNING.

        ``birth``: the generation's birth state as the caller read it in this transaction
        (``(None,)`` when it has no birth); else it is read here."""
        if birth is None:
            row = tx.one(self._q("birth_state_of_generation"), (node, generation))
            state = None if row is None else row[0]
        else:
            state = birth[0]
        if state is None or state == "RUNNING":
            return
        reason = "successor not yet challenged" if state == "PROVISIONAL" else "birth failed"
        denial_id = self._deny(tx, now, node, generation, generation, action, reason)
        raise _CommitThenRaise(
            StaleGeneration(
                f"{node} generation {generation} has no effect rights yet ({reason})",
                node=node, presented_generation=generation, current_generation=generation,
                reason=reason, denial_id=denial_id,
            )
        )  # fmt: skip

    def _end_lease(
        self, tx: Tx, now: int, lease: BodyLease, state: LeaseState, reason: str, *, actor: str
    ) -> None:
        tx.run(self._q("lease_end_if_live"), (state.value, now, reason, lease.lease_id))
        self._event(
            tx,
            now,
            node=lease.node,
            kind=f"lease.{state.value.lower()}",
            generation=lease.generation,
            actor=actor,
            lease_id=lease.lease_id,
            reason=reason,
        )


#: Generations are signed 64-bit integers in both backends' columns.
MAX_GENERATION = 2**63 - 1


def _check_generation(value: int, field: str) -> None:
    # Out of range would fail inside the database as an overflow; it is bad input, said so.
    if not 1 <= value <= MAX_GENERATION:
        raise BadInput(
            f"{field}: must be between 1 and {MAX_GENERATION} (got {value})", field="generation"
        )


_NO_TIME = timedelta(0)


def _check_ttl(ttl: timedelta) -> None:
    if ttl <= _NO_TIME:
        raise BadInput("--ttl: must be positive", field="ttl")
    if ttl > MAX_LEASE_TTL:
        raise BadInput(f"--ttl: at most {int(MAX_LEASE_TTL.total_seconds())} seconds", field="ttl")
