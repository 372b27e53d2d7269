"""The lifecycle ledger: the one authority on which body holds which identity, and which
side effects happened.

Every method is one transaction. Every write on behalf of a body carries the body's
generation and is checked in the same transaction as the write, under a lock on the node's
row (SQLite: the database writer lock taken by ``BEGIN IMMEDIATE``; PostgreSQL: ``SELECT ...
FOR UPDATE`` on the node). A refused write is not silent: its denial receipt is committed,
then :class:`~onstation.core.errors.StaleGeneration` is raised.

Decisions (may this write happen, which state comes next, may this respawn pass) are made
by the pure functions in :mod:`onstation.core`; this module moves rows.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from onstation.core.canonical import JsonValue, canonical_bytes, loads_strict
from onstation.core.effects import (
    REINTENDABLE,
    EffectAction,
    EffectState,
    effect_id_for,
    effect_payload,
    fingerprint,
    identity_slot,
    next_state,
)
from onstation.core.errors import (
    BadInput,
    BlockedByPolicy,
    Conflict,
    OnstationError,
    StaleGeneration,
)
from onstation.core.governor import RespawnPolicy, decide_respawn
from onstation.core.leases import GuardOutcome, LeaseState, judge_write
from onstation.core.names import validate_free_text, validate_name
from onstation.core.types import (
    Actor,
    AgentNode,
    AgentRun,
    BodyLease,
    Denial,
    Effect,
    Event,
    FenceResult,
    Grant,
    Halt,
    ReconcileReport,
    RespawnStatus,
    WorkEpisode,
)
from onstation.ledger.backends import Backend, Row, Tx, open_backend

T = TypeVar("T")
Clock = Callable[[], datetime]

DEFAULT_LEASE_TTL = timedelta(hours=1)
MAX_LEASE_TTL = timedelta(days=30)

_NODE_COLUMNS = "name, role, spawner, generation, state, created_at, breaker_open, breaker_reason"
_LEASE_COLUMNS = (
    "l.lease_id, l.node, l.generation, l.state, l.holder, l.acquired_at, l.renewed_at, "
    "l.expires_at, l.ended_at, l.end_reason, l.lease_id"
)
_LEASE_FROM = "body_lease l"
_EFFECT_COLUMNS = (
    "effect_id, node, generation, fingerprint, operation, destination, arguments, "
    "approval_slot, caller_ref, state, result, created_at, updated_at, resolved_by, resolution, "
    "repeat_of, repeat_reason"
)


#: What a counted respawn is: a coordinator's self-respawn, or a relief of a body.
RESPAWN_KINDS = ("coordinator", "relief")


def system_clock() -> datetime:
    """The ledger's default clock: timezone-aware UTC wall time."""
    return datetime.now(UTC)


def to_us(moment: datetime) -> int:
    """A timezone-aware instant as integer microseconds since the epoch."""
    if moment.tzinfo is None:
        raise BadInput("time must be timezone-aware")
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int | None) -> datetime | None:
    """Integer microseconds since the epoch as an aware UTC datetime (None stays None)."""
    if value is None:
        return None
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(value))


def _at(value: int) -> datetime:
    moment = from_us(value)
    assert moment is not None
    return moment


class _CommitThenRaise(Exception):
    """Raised inside a transaction body: commit what was written (a denial), then raise."""

    def __init__(self, error: OnstationError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True)
class _Guarded:
    node: AgentNode
    lease: BodyLease


class Ledger:
    """The durable store behind one interface, over SQLite or PostgreSQL."""

    def __init__(
        self,
        backend: Backend,
        *,
        clock: Clock = system_clock,
        respawn_policy: RespawnPolicy | None = None,
        relief_policy: RespawnPolicy | None = None,
    ) -> None:
        self.backend = backend
        self._clock = clock
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
    ) -> Ledger:
        """Open the ledger a URL names: a SQLite path (default) or a ``postgresql://`` URL.

        ``create=False`` refuses a ledger that does not exist instead of creating it."""
        return cls(open_backend(url, create=create), clock=clock, respawn_policy=respawn_policy,
                   relief_policy=relief_policy)  # fmt: skip

    def close(self) -> None:
        """Release the connection."""
        self.backend.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------------------
    # transaction plumbing

    def now(self) -> datetime:
        """The ledger's clock (wall time, UTC): the time its records are stamped with."""
        return self._clock()

    def _now(self) -> int:
        return to_us(self._clock())

    def _write(self, body: Callable[[Tx, int], T]) -> T:
        attempt = 0
        while True:
            pending: OnstationError | None = None
            try:
                with self.backend.write() as tx:
                    now = self._now()
                    try:
                        result = body(tx, now)
                    except _CommitThenRaise as deferred:
                        pending = deferred.error
            except OnstationError:
                raise
            except Exception as exc:
                if self.backend.is_retryable(exc) and attempt < 10:
                    attempt += 1
                    self.backend.retry_pause(attempt)
                    continue
                if self.backend.is_integrity_error(exc):
                    raise Conflict(f"lost a race with a concurrent writer: {exc}") from exc
                raise
            if pending is not None:
                raise pending
            return result

    def _read(self, body: Callable[[Tx, int], T]) -> T:
        with self.backend.read() as tx:
            return body(tx, self._now())

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
            "INSERT INTO event (node, kind, generation, actor, detail, at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (node, kind, generation, actor, json.dumps(detail, sort_keys=True), now),
        )

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
        row = tx.one(
            f"SELECT {_NODE_COLUMNS} FROM agent_node WHERE name = ?{self.backend.lock_rows}",
            (name,),
        )
        if row is None:
            raise BadInput(f"no such node {name!r}", node=name)
        return self._node(row)

    def _get_node(self, tx: Tx, name: str) -> AgentNode:
        row = tx.one(f"SELECT {_NODE_COLUMNS} FROM agent_node WHERE name = ?", (name,))
        if row is None:
            raise BadInput(f"no such node {name!r}", node=name)
        return self._node(row)

    def _lease_for(self, tx: Tx, name: str, generation: int) -> BodyLease | None:
        row = tx.one(
            f"SELECT {_LEASE_COLUMNS} FROM {_LEASE_FROM} WHERE l.node = ? AND l.generation = ?",
            (name, generation),
        )
        return None if row is None else self._lease(row)

    def _active_halt(self, tx: Tx, name: str | None) -> Halt | None:
        row = tx.one(
            "SELECT halt_id, node, by, why, at, lifted_at, lifted_by FROM halt "
            "WHERE lifted_at IS NULL AND (node IS NULL OR node = ?) ORDER BY halt_id LIMIT 1",
            (name,),
        )
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

    def _guard(self, tx: Tx, now: int, name: str, generation: int, action: str) -> _Guarded:
        """Check a body's generation inside the writing transaction; record a denial if stale."""
        _check_generation(generation, "generation")
        node = self._lock_node(tx, name)
        lease = self._lease_for(tx, name, node.generation)
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
        row = tx.one(
            "INSERT INTO denial (node, presented_generation, current_generation, action, reason,"
            " at) VALUES (?, ?, ?, ?, ?, ?) RETURNING denial_id",
            (name, generation, node.generation, action, outcome.value, now),
        )
        assert row is not None
        self._event(
            tx,
            now,
            node=name,
            kind="write.denied",
            generation=generation,
            actor=f"{name}@{generation}",
            action=action,
            reason=outcome.value,
            current_generation=node.generation,
            denial_id=int(row[0]),
        )
        raise _CommitThenRaise(
            StaleGeneration(
                f"{name} generation {generation} may not act ({outcome.value}; "
                f"current generation {node.generation})",
                node=name,
                presented_generation=generation,
                current_generation=node.generation,
                reason=outcome.value,
                denial_id=int(row[0]),
            )
        )

    def _require_effect_rights(
        self, tx: Tx, now: int, node: str, generation: int, action: str
    ) -> None:
        """A successor launched by a relief acts only once its birth is RUNNING."""
        row = tx.one(
            "SELECT state FROM birth WHERE node = ? AND generation = ?", (node, generation)
        )
        if row is None or row[0] == "RUNNING":
            return
        reason = "successor not yet challenged" if row[0] == "PROVISIONAL" else "birth failed"
        denial = tx.one(
            "INSERT INTO denial (node, presented_generation, current_generation, action, reason,"
            " at) VALUES (?, ?, ?, ?, ?, ?) RETURNING denial_id",
            (node, generation, generation, action, reason, now),
        )
        assert denial is not None
        self._event(tx, now, node=node, kind="write.denied", generation=generation,
                    actor=f"{node}@{generation}", action=action, reason=reason,
                    current_generation=generation, denial_id=int(denial[0]))  # fmt: skip
        raise _CommitThenRaise(
            StaleGeneration(
                f"{node} generation {generation} has no effect rights yet ({reason})",
                node=node, presented_generation=generation, current_generation=generation,
                reason=reason, denial_id=int(denial[0]),
            )
        )  # fmt: skip

    def _end_lease(
        self, tx: Tx, now: int, lease: BodyLease, state: LeaseState, reason: str, *, actor: str
    ) -> None:
        tx.run(
            "UPDATE body_lease SET state = ?, ended_at = ?, end_reason = ? "
            "WHERE lease_id = ? AND state = 'LIVE'",
            (state.value, now, reason, lease.lease_id),
        )
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

    # ----------------------------------------------------------------------------------------
    # identities

    def register_node(
        self,
        name: str,
        *,
        role: str | None = None,
        spawner: str | None = None,
        by: str = "operator",
    ) -> AgentNode:
        """Create a durable identity at generation 1 (no body yet)."""
        validate_name(name, "node")
        if role is not None:
            validate_name(role, "role")
        if spawner is not None:
            validate_name(spawner, "spawner")
            if spawner == name:
                raise BadInput("spawner: a node cannot be its own spawner", field="spawner")
        validate_free_text(by, "by", 256)

        def body(tx: Tx, now: int) -> AgentNode:
            if tx.one("SELECT 1 FROM agent_node WHERE name = ?", (name,)) is not None:
                raise Conflict(f"node {name!r} is already registered", node=name)
            tx.run(
                "INSERT INTO agent_node (name, role, spawner, generation, state, created_at) "
                "VALUES (?, ?, ?, 1, 'ACTIVE', ?)",
                (name, role, spawner, now),
            )
            self._event(
                tx, now, node=name, kind="node.registered", generation=1, actor=by,
                role=role, spawner=spawner,
            )  # fmt: skip
            return self._get_node(tx, name)

        return self._write(body)

    def get_node(self, name: str) -> AgentNode:
        """One identity as it stands now."""
        validate_name(name, "node")
        return self._read(lambda tx, _now: self._get_node(tx, name))

    def list_nodes(self) -> list[AgentNode]:
        """Every identity, by name."""
        return self._read(
            lambda tx, _now: [
                self._node(r)
                for r in tx.all(f"SELECT {_NODE_COLUMNS} FROM agent_node ORDER BY name")
            ]
        )

    def add_actor(self, actor: str, *, node: str | None = None, by: str = "operator") -> Actor:
        """Record an office or mailbox, optionally held by a node."""
        validate_name(actor, "actor")
        if node is not None:
            validate_name(node, "node")

        def body(tx: Tx, now: int) -> Actor:
            if node is not None:
                self._get_node(tx, node)
            if tx.one("SELECT 1 FROM actor WHERE name = ?", (actor,)) is not None:
                raise Conflict(f"actor {actor!r} already exists", actor=actor)
            tx.run(
                "INSERT INTO actor (name, node, created_at) VALUES (?, ?, ?)", (actor, node, now)
            )
            self._event(tx, now, node=node, kind="actor.added", generation=None, actor=by,
                        name=actor)  # fmt: skip
            return Actor(actor=actor, node=node, created_at=_at(now))

        return self._write(body)

    def list_actors(self) -> list[Actor]:
        """Every actor."""
        return self._read(
            lambda tx, _now: [
                Actor(actor=r[0], node=r[1], created_at=_at(r[2]))
                for r in tx.all("SELECT name, node, created_at FROM actor ORDER BY name")
            ]
        )

    def open_episode(
        self, node: str, objective: str, *, by: str = "operator", generation: int | None = None
    ) -> WorkEpisode:
        """Open the node's bounded assignment; a node has at most one open episode.

        ``generation`` is given when a body opens it: a stale one is denied with a receipt.
        """
        validate_name(node, "node")
        validate_free_text(objective, "objective")
        if not objective.strip():
            raise BadInput("objective: must not be empty", field="objective")

        def body(tx: Tx, now: int) -> WorkEpisode:
            if generation is not None:
                self._guard(tx, now, node, generation, "episode open")
            self._lock_node(tx, node)
            if (
                tx.one("SELECT 1 FROM work_episode WHERE node = ? AND state = 'OPEN'", (node,))
                is not None
            ):
                raise Conflict(f"node {node!r} already has an open episode", node=node)
            row = tx.one(
                "INSERT INTO work_episode (node, objective, state, opened_at) "
                "VALUES (?, ?, 'OPEN', ?) RETURNING episode_id",
                (node, objective, now),
            )
            assert row is not None
            self._event(tx, now, node=node, kind="episode.opened", generation=None, actor=by,
                        episode_id=int(row[0]), objective=objective)  # fmt: skip
            return WorkEpisode(int(row[0]), node, objective, "OPEN", _at(now), None)

        return self._write(body)

    def settle_episode(
        self, node: str, *, by: str = "operator", generation: int | None = None
    ) -> WorkEpisode:
        """Close the node's open episode (a body's ``generation`` is checked like any write)."""
        validate_name(node, "node")

        def body(tx: Tx, now: int) -> WorkEpisode:
            if generation is not None:
                self._guard(tx, now, node, generation, "episode settle")
            self._lock_node(tx, node)
            row = tx.one(
                "SELECT episode_id, objective, opened_at FROM work_episode "
                "WHERE node = ? AND state = 'OPEN'",
                (node,),
            )
            if row is None:
                raise Conflict(f"node {node!r} has no open episode", node=node)
            tx.run(
                "UPDATE work_episode SET state = 'SETTLED', closed_at = ? WHERE episode_id = ?",
                (now, row[0]),
            )
            self._event(tx, now, node=node, kind="episode.settled", generation=None, actor=by,
                        episode_id=int(row[0]))  # fmt: skip
            return WorkEpisode(int(row[0]), node, row[1], "SETTLED", _at(row[2]), _at(now))

        return self._write(body)

    def episodes(self, node: str) -> list[WorkEpisode]:
        """The node's episodes, oldest first."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[WorkEpisode]:
            self._get_node(tx, node)
            return [
                WorkEpisode(int(r[0]), r[1], r[2], r[3], _at(r[4]), from_us(r[5]))
                for r in tx.all(
                    "SELECT episode_id, node, objective, state, opened_at, closed_at "
                    "FROM work_episode WHERE node = ? ORDER BY episode_id",
                    (node,),
                )
            ]

        return self._read(body)

    def runs(self, node: str) -> list[AgentRun]:
        """The node's execution attempts, oldest first."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[AgentRun]:
            self._get_node(tx, node)
            return [
                AgentRun(int(r[0]), r[1], int(r[2]), int(r[3]),
                         None if r[4] is None else int(r[4]), _at(r[5]), from_us(r[6]), r[7])
                for r in tx.all(
                    "SELECT run_id, node, generation, lease_id, episode_id, started_at, ended_at, "
                    "outcome FROM agent_run WHERE node = ? ORDER BY run_id",
                    (node,),
                )
            ]  # fmt: skip

        return self._read(body)

    # ----------------------------------------------------------------------------------------
    # body leases and fencing

    def acquire_lease(
        self,
        node: str,
        *,
        holder: str | None = None,
        ttl: timedelta = DEFAULT_LEASE_TTL,
        expect_generation: int | None = None,
        by: str = "operator",
    ) -> BodyLease:
        """Admit a body for the node's current generation (one lease per generation, ever)."""
        validate_name(node, "node")
        if holder is not None:
            validate_free_text(holder, "holder", 1024)
        _check_ttl(ttl)
        if expect_generation is not None:
            _check_generation(expect_generation, "expected generation")

        return self._write(
            lambda tx, now: self._acquire_in(tx, now, node, holder, ttl, expect_generation, by)
        )

    def _acquire_in(
        self, tx: Tx, now: int, node: str, holder: str | None, ttl: timedelta,
        expect_generation: int | None, by: str,
    ) -> BodyLease:  # fmt: skip
        """Admit a body inside the caller's transaction (see :meth:`acquire_lease`)."""
        pg = self.backend.name == "postgres"
        if pg:
            # Take the locks first, in their own statement, so that the read below gets a
            # snapshot taken after them: it then sees a halt or a lease committed while we
            # waited (a single statement would keep its pre-wait snapshot for the joins).
            tx.one(
                "SELECT n.generation FROM agent_node n CROSS JOIN gate g WHERE n.name = ? "
                "FOR UPDATE OF n FOR SHARE OF g",
                (node,),
            )
        # One round trip reads the node (locked), its current lease, any halt in force and
        # the open episode (and, on PostgreSQL, takes the halt gate in share mode):
        # admission is on the hot path of every relief.
        row = tx.one(
            "SELECT n.generation, n.state, l.lease_id, l.state, l.expires_at, l.holder, "
            "(SELECT h.halt_id FROM halt h WHERE h.lifted_at IS NULL "
            " AND (h.node IS NULL OR h.node = n.name) ORDER BY h.halt_id LIMIT 1), "
            "(SELECT e.episode_id FROM work_episode e WHERE e.node = n.name "
            " AND e.state = 'OPEN') "
            "FROM agent_node n LEFT JOIN body_lease l "
            "ON l.node = n.name AND l.generation = n.generation WHERE n.name = ?",
            (node,),
        )
        if row is None:
            raise BadInput(f"no such node {node!r}", node=node)
        generation, state = int(row[0]), row[1]
        if state != "ACTIVE":
            raise BlockedByPolicy(f"node {node!r} is retired; admission refused", node=node)
        if row[6] is not None:
            self._refuse_if_halted(tx, node, "admission")
        if expect_generation is not None and expect_generation != generation:
            raise Conflict(
                f"generation of {node!r} is {generation}, not {expect_generation}",
                node=node, generation=generation,
            )  # fmt: skip
        if row[2] is not None:
            if row[3] == LeaseState.LIVE.value and now < int(row[4]):
                raise Conflict(
                    f"{node!r} generation {generation} already has a live body "
                    f"({row[5] or 'unnamed'})",
                    node=node, generation=generation, lease_id=int(row[2]),
                )  # fmt: skip
            raise Conflict(
                f"{node!r} generation {generation} already admitted a body "
                f"(lease {str(row[3]).lower()}); fence it with "
                f"--expect-generation {generation} to admit a new one",
                node=node, generation=generation, lease_id=int(row[2]),
            )  # fmt: skip
        expires = now + int(ttl.total_seconds() * 1_000_000)
        detail = {"holder": holder, "ttl_seconds": int(ttl.total_seconds())}
        if pg:
            # Lease, run and history in one statement: one round trip.
            got = tx.one(
                "WITH lease AS ("
                " INSERT INTO body_lease (node, generation, state, holder, acquired_at,"
                " renewed_at, expires_at, episode_id) VALUES (?, ?, 'LIVE', ?, ?, ?, ?, ?)"
                " RETURNING lease_id),"
                " history AS ("
                " INSERT INTO event (node, kind, generation, actor, detail, at)"
                " SELECT ?, 'lease.acquired', ?, ?,"
                " (CAST(? AS jsonb) || jsonb_build_object('lease_id', lease_id))::text, ?"
                " FROM lease)"
                " SELECT lease_id FROM lease",
                (node, generation, holder, now, now, expires, row[7],
                 node, generation, by, json.dumps(detail), now),
            )  # fmt: skip
            assert got is not None
            lease_id = int(got[0])
        else:
            inserted = tx.one(
                "INSERT INTO body_lease (node, generation, state, holder, acquired_at,"
                " renewed_at, expires_at, episode_id) VALUES (?, ?, 'LIVE', ?, ?, ?, ?, ?)"
                " RETURNING lease_id",
                (node, generation, holder, now, now, expires, row[7]),
            )
            assert inserted is not None
            lease_id = int(inserted[0])
            self._event(tx, now, node=node, kind="lease.acquired", generation=generation,
                        actor=by, lease_id=lease_id, **detail)  # fmt: skip
        return BodyLease(
            lease_id=lease_id,
            node=node,
            generation=generation,
            state=LeaseState.LIVE,
            holder=holder,
            acquired_at=_at(now),
            renewed_at=_at(now),
            expires_at=_at(expires),
            ended_at=None,
            end_reason=None,
            run_id=lease_id,
        )

    def fence(
        self, node: str, *, expect_generation: int, by: str = "operator", reason: str = "fenced"
    ) -> FenceResult:
        """Compare-and-swap the generation from ``expect_generation`` to the next one, revoking
        the predecessor's lease and grants in the same transaction."""
        validate_name(node, "node")
        validate_free_text(reason, "reason", 1024)
        _check_generation(expect_generation, "expected generation")

        return self._write(
            lambda tx, now: self._fence_in(tx, now, node, expect_generation, by, reason)
        )

    def _fence_in(
        self, tx: Tx, now: int, node: str, expect_generation: int, by: str, reason: str
    ) -> FenceResult:
        """The fence inside the caller's transaction (see :meth:`fence`)."""
        if self.backend.name == "postgres":
            row, fenced, grants = self._fence_statement_pg(tx, now, node, expect_generation,
                                                           reason)  # fmt: skip
        else:
            row, fenced, grants = self._fence_statements(tx, now, node, expect_generation,
                                                         reason)  # fmt: skip
        if row is None:
            current = self._get_node(tx, node)
            raise Conflict(
                f"fence of {node!r} lost: generation is {current.generation}, "
                f"not {expect_generation}",
                node=node, generation=current.generation,
            )  # fmt: skip
        new_generation = int(row[0])
        leases = sorted(int(r[0]) for r in fenced)
        # One event records the whole fence: the new generation and every lease and grant
        # it revoked (with the generations those leases held).
        self._event(tx, now, node=node, kind="node.fenced", generation=new_generation,
                    actor=by, previous_generation=expect_generation, reason=reason,
                    revoked_leases=leases, revoked_grants=grants,
                    fenced_generations=sorted(int(r[1]) for r in fenced))  # fmt: skip
        return FenceResult(
            node=node,
            previous_generation=expect_generation,
            generation=new_generation,
            revoked_leases=leases,
            revoked_grants=grants,
        )

    def fence_and_hold(
        self, node: str, *, expect_generation: int, holder: str, ttl: timedelta,
        by: str = "operator", reason: str = "fenced",
    ) -> tuple[FenceResult, BodyLease]:  # fmt: skip
        """Fence ``expect_generation`` and, in the same transaction, take the new generation's
        lease for ``holder``.

        A relief holds the generation its fence made until its successor takes it over
        (:meth:`hand_over_lease`): no session that starts between the fence and the launch
        can be admitted for that generation, because there is no moment without a live lease.
        """
        validate_free_text(holder, "holder", 1024)
        _check_ttl(ttl)
        validate_name(node, "node")
        validate_free_text(reason, "reason", 1024)
        _check_generation(expect_generation, "expected generation")

        def body(tx: Tx, now: int) -> tuple[FenceResult, BodyLease]:
            result = self._fence_in(tx, now, node, expect_generation, by, reason)
            lease = self._acquire_in(tx, now, node, holder, ttl, result.generation, by)
            return result, lease

        return self._write(body)

    def hand_over_lease(self, node: str, *, lease_id: int, holder: str, to: str, by: str) -> None:
        """Give a held lease to the body that takes it (compare-and-swap on the holder)."""
        validate_name(node, "node")
        validate_free_text(to, "holder", 1024)

        def body(tx: Tx, now: int) -> None:
            self._lock_node(tx, node)
            moved = tx.one(
                "UPDATE body_lease SET holder = ? WHERE lease_id = ? AND node = ? AND holder = ? "
                "AND state = 'LIVE' RETURNING generation",
                (to, lease_id, node, holder),
            )
            if moved is None:
                raise Conflict(f"lease {lease_id} of {node!r} is no longer held by {holder!r}")
            self._event(tx, now, node=node, kind="lease.handed_over", generation=int(moved[0]),
                        actor=by,
                        lease_id=lease_id, previous_holder=holder, holder=to)  # fmt: skip

        self._write(body)

    @staticmethod
    def _fence_statements(
        tx: Tx, now: int, node: str, expect: int, reason: str
    ) -> tuple[Row | None, list[Row], list[int]]:
        """The fence as plain statements (SQLite: BEGIN IMMEDIATE already serializes)."""
        # The conditional UPDATE is the compare-and-swap.
        row = tx.one(
            "UPDATE agent_node SET generation = generation + 1 "
            "WHERE name = ? AND generation = ? RETURNING generation",
            (node, expect),
        )
        if row is None:
            return None, [], []
        fenced = tx.all(
            "UPDATE body_lease SET state = 'FENCED', ended_at = ?, end_reason = ? "
            "WHERE node = ? AND state = 'LIVE' RETURNING lease_id, generation",
            (now, reason, node),
        )
        grants = tx.all(
            "UPDATE capability_grant SET state = 'REVOKED', revoked_at = ? "
            "WHERE node = ? AND state = 'LIVE' AND generation <= ? RETURNING grant_id",
            (now, node, expect),
        )
        return row, fenced, sorted(int(r[0]) for r in grants)

    @staticmethod
    def _fence_statement_pg(
        tx: Tx, now: int, node: str, expect: int, reason: str
    ) -> tuple[Row | None, list[Row], list[int]]:
        """The same fence as one PostgreSQL statement (data-modifying CTEs): one round trip.

        The first CTE is the compare-and-swap and takes the node's row lock; the others only
        act when it matched, so a lost CAS changes nothing.
        """
        # Lock the node first, in its own statement: at READ COMMITTED each statement takes a
        # fresh snapshot, so the statement below then sees every lease admitted before us
        # (a data-modifying CTE reads one snapshot, taken before any lock wait).
        tx.one("SELECT generation FROM agent_node WHERE name = ? FOR UPDATE", (node,))
        row = tx.one(
            "WITH bumped AS ("
            " UPDATE agent_node SET generation = generation + 1"
            " WHERE name = ? AND generation = ? RETURNING name, generation),"
            " fenced AS ("
            " UPDATE body_lease SET state = 'FENCED', ended_at = ?, end_reason = ?"
            " WHERE node IN (SELECT name FROM bumped) AND state = 'LIVE'"
            " RETURNING lease_id, generation),"
            " grants AS ("
            " UPDATE capability_grant SET state = 'REVOKED', revoked_at = ?"
            " WHERE node IN (SELECT name FROM bumped) AND state = 'LIVE' AND generation <= ?"
            " RETURNING grant_id)"
            " SELECT b.generation,"
            " (SELECT coalesce(array_agg(lease_id ORDER BY lease_id), '{}') FROM fenced),"
            " (SELECT coalesce(array_agg(generation ORDER BY lease_id), '{}') FROM fenced),"
            " (SELECT coalesce(array_agg(grant_id ORDER BY grant_id), '{}') FROM grants)"
            " FROM bumped b",
            (node, expect, now, reason, now, expect),
        )
        if row is None:
            return None, [], []
        fenced: list[Row] = [(int(a), int(b)) for a, b in zip(row[1], row[2], strict=True)]
        return (row[0],), fenced, [int(g) for g in row[3]]

    def renew_lease(
        self, node: str, *, generation: int, ttl: timedelta = DEFAULT_LEASE_TTL
    ) -> BodyLease:
        """Extend the live lease of ``generation`` (a heartbeat); stale bodies are denied."""
        validate_name(node, "node")
        _check_ttl(ttl)

        def body(tx: Tx, now: int) -> BodyLease:
            guarded = self._guard(tx, now, node, generation, "lease renew")
            expires = now + int(ttl.total_seconds() * 1_000_000)
            tx.run(
                "UPDATE body_lease SET renewed_at = ?, expires_at = ? WHERE lease_id = ?",
                (now, expires, guarded.lease.lease_id),
            )
            lease = self._lease_for(tx, node, generation)
            assert lease is not None
            return lease

        return self._write(body)

    def release_lease(self, node: str, *, generation: int, by: str | None = None) -> BodyLease:
        """The body gives up its lease cleanly; the generation admits no other body."""
        validate_name(node, "node")

        def body(tx: Tx, now: int) -> BodyLease:
            guarded = self._guard(tx, now, node, generation, "lease release")
            self._end_lease(
                tx, now, guarded.lease, LeaseState.RELEASED, "released by body",
                actor=by or f"{node}@{generation}",
            )  # fmt: skip
            lease = self._lease_for(tx, node, generation)
            assert lease is not None
            return lease

        return self._write(body)

    def leases(self, node: str) -> list[BodyLease]:
        """Every lease the node ever had, oldest generation first."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[BodyLease]:
            self._get_node(tx, node)
            return [
                self._lease(r)
                for r in tx.all(
                    f"SELECT {_LEASE_COLUMNS} FROM {_LEASE_FROM} WHERE l.node = ? "
                    "ORDER BY l.generation",
                    (node,),
                )
            ]

        return self._read(body)

    def live_lease(self, node: str) -> BodyLease | None:
        """The node's lease that may act right now, if any."""
        validate_name(node, "node")

        def body(tx: Tx, now: int) -> BodyLease | None:
            current = self._get_node(tx, node)
            lease = self._lease_for(tx, node, current.generation)
            if lease is None or lease.state is not LeaseState.LIVE or _at(now) >= lease.expires_at:
                return None
            return lease

        return self._read(body)

    def guard(self, node: str, *, generation: int, action: str = "write") -> BodyLease:
        """Check that ``generation`` may act now; a refusal is recorded as a denial receipt."""
        validate_name(node, "node")
        validate_free_text(action, "action", 1024)
        return self._write(lambda tx, now: self._guard(tx, now, node, generation, action).lease)

    def denials(self, node: str) -> list[Denial]:
        """Every denial receipt of the node, oldest first."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[Denial]:
            self._get_node(tx, node)
            return [
                Denial(int(r[0]), r[1], int(r[2]), int(r[3]), r[4], r[5], _at(r[6]))
                for r in tx.all(
                    "SELECT denial_id, node, presented_generation, current_generation, action, "
                    "reason, at FROM denial WHERE node = ? ORDER BY denial_id",
                    (node,),
                )
            ]

        return self._read(body)

    def record_denial(
        self, node: str, *, presented_generation: int, action: str, reason: str
    ) -> Denial:
        """Keep the receipt of a refusal decided outside the ledger (a hook's deny)."""
        validate_name(node, "node")
        validate_free_text(action, "action", 1024)
        validate_free_text(reason, "reason", 256)

        def body(tx: Tx, now: int) -> Denial:
            current = self._get_node(tx, node).generation
            row = tx.one(
                "INSERT INTO denial (node, presented_generation, current_generation, action,"
                " reason, at) VALUES (?, ?, ?, ?, ?, ?) RETURNING denial_id",
                (node, presented_generation, current, action, reason, now),
            )
            assert row is not None
            self._event(tx, now, node=node, kind="write.denied", generation=presented_generation,
                        actor=f"{node}@{presented_generation}", action=action, reason=reason,
                        current_generation=current, denial_id=int(row[0]))  # fmt: skip
            return Denial(int(row[0]), node, presented_generation, current, action, reason,
                          _at(now))  # fmt: skip

        return self._write(body)

    # ----------------------------------------------------------------------------------------
    # capability grants

    def issue_grant(self, node: str, *, generation: int, capability: str) -> Grant:
        """Issue a fresh capability to the live generation; fencing revokes it."""
        validate_name(node, "node")
        validate_free_text(capability, "capability", 256)
        if not capability.strip():
            raise BadInput("capability: must not be empty", field="capability")

        def body(tx: Tx, now: int) -> Grant:
            self._guard(tx, now, node, generation, f"grant {capability}")
            if (
                tx.one(
                    "SELECT 1 FROM capability_grant WHERE node = ? AND generation = ? "
                    "AND capability = ?",
                    (node, generation, capability),
                )
                is not None
            ):
                raise Conflict(f"{capability!r} was already granted to generation {generation}")
            row = tx.one(
                "INSERT INTO capability_grant (node, generation, capability, state, issued_at) "
                "VALUES (?, ?, ?, 'LIVE', ?) RETURNING grant_id",
                (node, generation, capability, now),
            )
            assert row is not None
            self._event(tx, now, node=node, kind="grant.issued", generation=generation,
                        actor=f"{node}@{generation}", grant_id=int(row[0]),
                        capability=capability)  # fmt: skip
            return Grant(int(row[0]), node, generation, capability, "LIVE", _at(now), None)

        return self._write(body)

    def grants(self, node: str) -> list[Grant]:
        """Every grant the node's generations received."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[Grant]:
            self._get_node(tx, node)
            return [
                Grant(int(r[0]), r[1], int(r[2]), r[3], r[4], _at(r[5]), from_us(r[6]))
                for r in tx.all(
                    "SELECT grant_id, node, generation, capability, state, issued_at, revoked_at "
                    "FROM capability_grant WHERE node = ? ORDER BY grant_id",
                    (node,),
                )
            ]

        return self._read(body)

    # ----------------------------------------------------------------------------------------
    # effects

    def intend_effect(
        self,
        node: str,
        *,
        generation: int,
        operation: str,
        destination: str,
        arguments: JsonValue,
        approval_slot: str | None = None,
        caller_ref: str | None = None,
        repeat_reason: str | None = None,
    ) -> tuple[Effect, bool]:
        """Record the intent to perform one logical effect; returns (effect, created).

        The fingerprint is recomputed here over the effect's identity: node, operation,
        destination and arguments. The same logical effect presented again, under any slot or
        none, returns the existing record while it has not been dispatched, and is a
        :class:`Conflict` once it has. Only a declared repeat (``approval_slot`` and
        ``repeat_reason``) is recorded as a new effect naming the one it repeats, once per
        slot: presenting that slot again finds that repeat.
        """
        validate_name(node, "node")
        if approval_slot is not None:
            validate_free_text(approval_slot, "slot", 256)
        if repeat_reason is not None:
            validate_free_text(repeat_reason, "--repeat-reason")
        if caller_ref is not None:
            validate_free_text(caller_ref, "caller reference", 256)
        if isinstance(arguments, str):
            arguments = loads_strict(arguments, "args")
        repeat_slot = identity_slot(approval_slot, repeat_reason)
        payload = effect_payload(
            node=node, operation=operation, destination=destination, arguments=arguments,
            approval_slot=None,
        )  # fmt: skip
        logical_print = fingerprint(
            node=node, operation=operation, destination=destination, arguments=arguments,
            approval_slot=None,
        )  # fmt: skip
        repeat_print = None
        if repeat_slot is not None:
            repeat_print = fingerprint(
                node=node, operation=operation, destination=destination, arguments=arguments,
                approval_slot=repeat_slot,
            )  # fmt: skip
        args_text = canonical_bytes(payload["arguments"]).decode("utf-8")
        description = f"effect intend {payload['operation']} {payload['destination']}"

        def logical_effect(tx: Tx) -> Effect | None:
            row = tx.one(
                f"SELECT {_EFFECT_COLUMNS} FROM effect WHERE fingerprint = ?", (logical_print,)
            )
            if row is None:
                # An effect recorded before schema 5 under a slot has the slot in its
                # fingerprint; its identity columns still find it.
                row = tx.one(
                    f"SELECT {_EFFECT_COLUMNS} FROM effect WHERE node = ? AND operation = ? "
                    "AND destination = ? AND arguments = ? AND repeat_of IS NULL "
                    "ORDER BY created_at, effect_id LIMIT 1",
                    (node, payload["operation"], payload["destination"], args_text),
                )
            return None if row is None else self._effect(row)

        def present_again(tx: Tx, now: int, existing: Effect) -> tuple[Effect, bool]:
            if existing.state not in REINTENDABLE:
                hint = ""
                if approval_slot is not None and repeat_reason is None:
                    hint = (
                        f"; slot {approval_slot!r} alone does not make it a new effect "
                        "(a deliberate repeat also needs --repeat-reason)"
                    )
                raise Conflict(
                    f"effect {existing.effect_id} is this same logical effect and was already "
                    f"dispatched (state {existing.state.value}); it is not recorded again{hint}",
                    effect_id=existing.effect_id, state=existing.state.value,
                    fingerprint=existing.fingerprint,
                )  # fmt: skip
            if existing.state is EffectState.INTENDED and existing.generation == generation:
                return existing, False
            tx.run(
                "UPDATE effect SET state = 'INTENDED', generation = ?, updated_at = ?, "
                "resolved_by = NULL, resolution = NULL WHERE effect_id = ?",
                (generation, now, existing.effect_id),
            )
            self._event(tx, now, node=node, kind="effect.reintended", generation=generation,
                        actor=f"{node}@{generation}", effect_id=existing.effect_id,
                        previous_state=existing.state.value,
                        previous_generation=existing.generation)  # fmt: skip
            return self._load_effect(tx, existing.effect_id), False

        def record(tx: Tx, now: int, print_: str, repeat_of: str | None) -> tuple[Effect, bool]:
            effect_id = effect_id_for(print_)
            tx.run(
                f"INSERT INTO effect ({_EFFECT_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, 'INTENDED', NULL, ?, ?, NULL, NULL, ?, ?)",
                (effect_id, node, generation, print_, payload["operation"],
                 payload["destination"], args_text, repeat_slot, caller_ref, now, now,
                 repeat_of, repeat_reason),
            )  # fmt: skip
            detail: dict[str, Any] = {}
            if repeat_of is not None:
                detail = {"approval_slot": repeat_slot, "repeat_of": repeat_of,
                          "repeat_reason": repeat_reason}  # fmt: skip
            elif approval_slot is not None:
                # Kept in the history only: an undeclared slot is not part of the effect.
                detail = {"undeclared_slot": approval_slot}
            self._event(tx, now, node=node, kind="effect.intended", generation=generation,
                        actor=f"{node}@{generation}", effect_id=effect_id,
                        fingerprint=print_, operation=payload["operation"],
                        destination=payload["destination"], **detail)  # fmt: skip
            return self._load_effect(tx, effect_id), True

        def body(tx: Tx, now: int) -> tuple[Effect, bool]:
            self._guard(tx, now, node, generation, description)
            self._require_effect_rights(tx, now, node, generation, description)
            self._refuse_if_halted(tx, node, "new effect")
            original = logical_effect(tx)
            if repeat_print is None:
                if original is None:
                    return record(tx, now, logical_print, None)
                return present_again(tx, now, original)
            if original is None:
                raise BadInput(
                    f"--repeat-reason: there is no earlier {payload['operation']} to "
                    f"{payload['destination']} with these arguments to repeat; intend it "
                    "without --slot and --repeat-reason",
                    field="repeat_reason",
                )
            if original.approval_slot == repeat_slot:
                return present_again(tx, now, original)
            row = tx.one(
                f"SELECT {_EFFECT_COLUMNS} FROM effect WHERE fingerprint = ?", (repeat_print,)
            )
            if row is not None:
                return present_again(tx, now, self._effect(row))
            # Repeating what may or may not have happened could make it happen twice: an
            # AMBIGUOUS effect is settled by an operator first, whatever the caller declares.
            unsettled = tx.one(
                "SELECT effect_id FROM effect WHERE (effect_id = ? OR repeat_of = ?) "
                "AND state = 'AMBIGUOUS' ORDER BY effect_id LIMIT 1",
                (original.effect_id, original.effect_id),
            )
            if unsettled is not None:
                raise Conflict(
                    f"effect {unsettled[0]} of this same logical effect is AMBIGUOUS; it is not "
                    "repeated until an operator resolves it with `onstation effect resolve "
                    f"{unsettled[0]} --as observed|compensated --by NAME --why TEXT`",
                    effect_id=unsettled[0], state=EffectState.AMBIGUOUS.value,
                )  # fmt: skip
            return record(tx, now, repeat_print, original.effect_id)

        return self._write(body)

    def _load_effect(self, tx: Tx, effect_id: str) -> Effect:
        row = tx.one(f"SELECT {_EFFECT_COLUMNS} FROM effect WHERE effect_id = ?", (effect_id,))
        if row is None:
            raise BadInput(f"no such effect {effect_id!r}", effect_id=effect_id)
        return self._effect(row)

    def get_effect(self, effect_id: str) -> Effect:
        """One effect by id."""
        validate_name(effect_id, "effect id")
        return self._read(lambda tx, _now: self._load_effect(tx, effect_id))

    def _advance(
        self,
        effect_id: str,
        action: EffectAction,
        generation: int,
        result: JsonValue = None,
    ) -> Effect:
        validate_name(effect_id, "effect id")
        result_text = None if result is None else canonical_bytes(result).decode("utf-8")

        def body(tx: Tx, now: int) -> Effect:
            effect = self._load_effect(tx, effect_id)
            self._guard(tx, now, effect.node, generation, f"effect {action.value} {effect_id}")
            if action is EffectAction.DISPATCH:
                self._require_effect_rights(
                    tx, now, effect.node, generation, f"effect dispatch {effect_id}"
                )
                self._refuse_if_halted(tx, effect.node, "effect dispatch")
            resolve = (
                f"an operator resolves it with `onstation effect resolve {effect_id} "
                "--as observed|compensated --by NAME --why TEXT`"
            )
            if effect.generation != generation:
                # The advice depends on the state: each one names a command that succeeds.
                if effect.state is EffectState.AMBIGUOUS:
                    advice = f"it is AMBIGUOUS and never retried automatically: {resolve}"
                elif effect.state is EffectState.COMMITTED:
                    advice = "it is already COMMITTED; nothing is left to do"
                elif effect.state in {EffectState.INTENDED, EffectState.DISPATCHED,
                                      EffectState.OBSERVED}:  # fmt: skip
                    advice = (
                        f"it is {effect.state.value} under a fenced generation: settle it with "
                        f"`onstation effect reconcile {effect.node}`"
                    )
                else:
                    advice = (  # FAILED_BEFORE_DISPATCH or COMPENSATED: never done now
                        f"it is {effect.state.value}: intend it again under generation "
                        f"{generation} (`onstation effect intend {effect.node} --generation "
                        f"{generation}` with the same --op, --dest and --args)"
                    )
                raise Conflict(
                    f"effect {effect_id} belongs to generation {effect.generation}, not "
                    f"{generation}; {advice}",
                    effect_id=effect_id, state=effect.state.value,
                )  # fmt: skip
            target = next_state(action, effect.state)
            if target is None:
                hint = ""
                if effect.state is EffectState.AMBIGUOUS:
                    hint = f"; AMBIGUOUS is never retried automatically: {resolve}"
                raise Conflict(
                    f"cannot {action.value} effect {effect_id} in state {effect.state.value}{hint}",
                    effect_id=effect_id, state=effect.state.value,
                )  # fmt: skip
            changed = tx.run(
                "UPDATE effect SET state = ?, updated_at = ?, result = COALESCE(?, result) "
                "WHERE effect_id = ? AND state = ?",
                (target.value, now, result_text, effect_id, effect.state.value),
            )
            if changed != 1:  # pragma: no cover - the node lock makes this unreachable
                raise Conflict(f"effect {effect_id} changed concurrently")
            self._event(tx, now, node=effect.node, kind=f"effect.{target.value.lower()}",
                        generation=generation, actor=f"{effect.node}@{generation}",
                        effect_id=effect_id, previous_state=effect.state.value)  # fmt: skip
            return self._load_effect(tx, effect_id)

        return self._write(body)

    def dispatch_effect(self, effect_id: str, *, generation: int) -> Effect:
        """INTENDED -> DISPATCHED: the body is about to act in the world."""
        return self._advance(effect_id, EffectAction.DISPATCH, generation)

    def observe_effect(
        self, effect_id: str, *, generation: int, result: JsonValue = None
    ) -> Effect:
        """DISPATCHED -> OBSERVED: the body saw the authoritative result."""
        if isinstance(result, str):
            result = loads_strict(result, "result")
        return self._advance(effect_id, EffectAction.OBSERVE, generation, result)

    def commit_effect(self, effect_id: str, *, generation: int) -> Effect:
        """OBSERVED -> COMMITTED: the result is settled."""
        return self._advance(effect_id, EffectAction.COMMIT, generation)

    def fail_effect(self, effect_id: str, *, generation: int, reason: str | None = None) -> Effect:
        """INTENDED -> FAILED_BEFORE_DISPATCH: the body gave up before acting."""
        result = None if reason is None else {"failure": validate_free_text(reason, "reason")}
        return self._advance(effect_id, EffectAction.FAIL, generation, result)

    def reconcile(self, node: str, *, by: str = "operator") -> ReconcileReport:
        """Settle every effect of the node's fenced generations.

        DISPATCHED without a result becomes AMBIGUOUS; OBSERVED (result on record) becomes
        COMMITTED. INTENDED becomes AMBIGUOUS too (a hook killed after recording the intent
        gave its host no decision, and the host ran the tool) unless the ledger refused its
        dispatch to that generation for good (a denial receipt ``effect dispatch ID`` of that
        generation whose reason ends it): then it is FAILED_BEFORE_DISPATCH.
        """
        validate_name(node, "node")

        def body(tx: Tx, now: int) -> ReconcileReport:
            current = self._lock_node(tx, node)
            rows = tx.all(
                f"SELECT {_EFFECT_COLUMNS} FROM effect WHERE node = ? AND generation < ? "
                "AND state IN ('INTENDED', 'DISPATCHED', 'OBSERVED') ORDER BY created_at, "
                "effect_id",
                (node, current.generation),
            )
            moved: dict[EffectState, list[str]] = {
                EffectState.AMBIGUOUS: [],
                EffectState.FAILED_BEFORE_DISPATCH: [],
                EffectState.COMMITTED: [],
            }
            # A generation refused for one of these reasons never acts again: after such a
            # refusal of its dispatch, the intent cannot have reached the world through it.
            ended = tuple(
                o.value
                for o in (GuardOutcome.STALE_GENERATION, GuardOutcome.LEASE_FENCED,
                          GuardOutcome.LEASE_EXPIRED, GuardOutcome.LEASE_RELEASED)
            )  # fmt: skip
            for row in rows:
                effect = self._effect(row)
                action = EffectAction.RECONCILE
                if effect.state is EffectState.INTENDED and tx.one(
                    "SELECT 1 FROM denial WHERE node = ? AND presented_generation = ? "
                    "AND action = ? AND reason IN (?, ?, ?, ?) LIMIT 1",
                    (node, effect.generation, f"effect dispatch {effect.effect_id}", *ended),
                ):
                    action = EffectAction.RECONCILE_REFUSED
                target = next_state(action, effect.state)
                assert target is not None
                tx.run(
                    "UPDATE effect SET state = ?, updated_at = ? WHERE effect_id = ?",
                    (target.value, now, effect.effect_id),
                )
                self._event(tx, now, node=node, kind=f"effect.{target.value.lower()}",
                            generation=effect.generation, actor=by, effect_id=effect.effect_id,
                            previous_state=effect.state.value, via="reconcile")  # fmt: skip
                moved[target].append(effect.effect_id)
            unresolved = [
                r[0]
                for r in tx.all(
                    "SELECT effect_id FROM effect WHERE node = ? AND state = 'AMBIGUOUS' "
                    "ORDER BY effect_id",
                    (node,),
                )
            ]
            self._event(tx, now, node=node, kind="node.reconciled", generation=current.generation,
                        actor=by, ambiguous=moved[EffectState.AMBIGUOUS],
                        failed_before_dispatch=moved[EffectState.FAILED_BEFORE_DISPATCH],
                        committed=moved[EffectState.COMMITTED],
                        unresolved_ambiguous=unresolved)  # fmt: skip
            return ReconcileReport(
                node=node,
                generation=current.generation,
                ambiguous=moved[EffectState.AMBIGUOUS],
                failed_before_dispatch=moved[EffectState.FAILED_BEFORE_DISPATCH],
                committed=moved[EffectState.COMMITTED],
                unresolved_ambiguous=unresolved,
            )

        return self._write(body)

    def resolve_effect(self, effect_id: str, *, outcome: str, by: str, why: str) -> Effect:
        """An operator settles an AMBIGUOUS effect: ``observed`` (it happened) -> COMMITTED,
        ``compensated`` (a compensating action undid it) -> COMPENSATED."""
        validate_name(effect_id, "effect id")
        validate_free_text(by, "by", 256)
        validate_free_text(why, "why")
        if not by.strip() or not why.strip():
            raise BadInput("resolve: --by and --why must both be given", field="by")
        actions = {
            "observed": EffectAction.RESOLVE_OBSERVED,
            "compensated": EffectAction.RESOLVE_COMPENSATED,
        }
        if outcome not in actions:
            raise BadInput(f"--as: must be observed or compensated, not {outcome!r}", field="as")
        action = actions[outcome]

        def body(tx: Tx, now: int) -> Effect:
            effect = self._load_effect(tx, effect_id)
            self._lock_node(tx, effect.node)
            target = next_state(action, effect.state)
            if target is None:
                raise Conflict(
                    f"effect {effect_id} is {effect.state.value}; only an AMBIGUOUS effect "
                    "is resolved by an operator",
                    effect_id=effect_id, state=effect.state.value,
                )  # fmt: skip
            tx.run(
                "UPDATE effect SET state = ?, updated_at = ?, resolved_by = ?, resolution = ? "
                "WHERE effect_id = ?",
                (target.value, now, by, f"{outcome}: {why}", effect_id),
            )
            self._event(tx, now, node=effect.node, kind=f"effect.{target.value.lower()}",
                        generation=effect.generation, actor=by, effect_id=effect_id,
                        previous_state=effect.state.value, resolution=outcome,
                        why=why)  # fmt: skip
            return self._load_effect(tx, effect_id)

        return self._write(body)

    def effects(self, node: str, *, state: EffectState | None = None) -> list[Effect]:
        """The node's effects, oldest first, optionally only those in one state."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[Effect]:
            self._get_node(tx, node)
            sql = f"SELECT {_EFFECT_COLUMNS} FROM effect WHERE node = ?"
            params: list[Any] = [node]
            if state is not None:
                sql += " AND state = ?"
                params.append(state.value)
            return [
                self._effect(r) for r in tx.all(sql + " ORDER BY created_at, effect_id", params)
            ]

        return self._read(body)

    # ----------------------------------------------------------------------------------------
    # respawn governor and breaker

    def policy_for(self, kind: str) -> RespawnPolicy:
        """The cap a respawn of ``kind`` counts against (see :data:`RESPAWN_KINDS`)."""
        if kind not in RESPAWN_KINDS:
            raise BadInput(f"respawn kind must be one of {', '.join(RESPAWN_KINDS)}, not {kind!r}")
        return self.respawn_policy if kind == "coordinator" else self.relief_policy

    def _respawn_status(
        self, tx: Tx, now: int, node: AgentNode, kind: str = "relief"
    ) -> RespawnStatus:
        policy = self.policy_for(kind)
        counted = [
            _at(r[0])
            for r in tx.all(
                "SELECT at FROM respawn WHERE node = ? AND kind = ? AND at > ?",
                (node.node, kind, now - int(policy.window.total_seconds() * 1_000_000)),
            )
        ]
        decision = decide_respawn(policy, counted, _at(now), breaker_open=node.breaker_open)
        return RespawnStatus(
            node=node.node,
            allowed=decision.allowed,
            count_in_window=decision.count_in_window,
            limit=decision.limit,
            window_seconds=int(policy.window.total_seconds()),
            window_started_at=decision.window_started_at,
            reopens_at=decision.reopens_at,
            breaker_open=node.breaker_open,
            reason=decision.reason
            if not node.breaker_open
            else f"breaker open: {node.breaker_reason}",
        )

    def request_respawn(
        self, node: str, *, by: str = "operator", kind: str = "relief"
    ) -> RespawnStatus:
        """Count one respawn if the governor allows it; the check and the count are atomic.

        ``kind`` is ``coordinator`` for a coordinator's self-respawn (the coordinator
        procedure's cap, :attr:`respawn_policy`) or ``relief`` for a body relieved by its lead
        or an operator (births per window, :attr:`relief_policy`); each is counted on its own.
        """
        validate_name(node, "node")
        validate_free_text(by, "by", 256)
        self.policy_for(kind)

        def body(tx: Tx, now: int) -> RespawnStatus:
            current = self._lock_node(tx, node)
            status = self._respawn_status(tx, now, current, kind)
            if not status.allowed:
                self._event(tx, now, node=node, kind="respawn.blocked",
                            generation=current.generation, actor=by, reason=status.reason,
                            reopens_at=None if status.reopens_at is None
                            else status.reopens_at.isoformat())  # fmt: skip
                reopens = (
                    f"; reopens at {status.reopens_at.isoformat()}" if status.reopens_at else ""
                )
                raise _CommitThenRaise(
                    BlockedByPolicy(
                        f"respawn of {node!r} blocked: {status.reason}{reopens}",
                        **{k: v for k, v in status.to_json().items() if k != "reason"},
                        reason=status.reason,
                    )
                )
            tx.run(
                "INSERT INTO respawn (node, at, by, kind) VALUES (?, ?, ?, ?)",
                (node, now, by, kind),
            )
            self._event(tx, now, node=node, kind="respawn.counted", generation=current.generation,
                        actor=by, count=status.count_in_window, limit=status.limit,
                        respawn_kind=kind)  # fmt: skip
            return status

        return self._write(body)

    def respawn_status(self, node: str, *, kind: str = "relief") -> RespawnStatus:
        """What a respawn request of ``kind`` would get now (nothing is counted)."""
        validate_name(node, "node")
        self.policy_for(kind)

        def body(tx: Tx, now: int) -> RespawnStatus:
            current = self._get_node(tx, node)
            status = self._respawn_status(tx, now, current, kind)
            # A status query reports the count so far, not the count after a new request.
            count = status.count_in_window - 1 if status.allowed else status.count_in_window
            return dataclasses.replace(status, count_in_window=count)

        return self._read(body)

    def open_breaker(self, node: str, *, by: str, why: str) -> AgentNode:
        """Open the persistent breaker: every respawn of the node is blocked until closed."""
        return self._set_breaker(node, True, by, why)

    def close_breaker(self, node: str, *, by: str, why: str = "closed by operator") -> AgentNode:
        """Close the breaker; the respawn governor's count applies again."""
        return self._set_breaker(node, False, by, why)

    def _set_breaker(self, node: str, is_open: bool, by: str, why: str) -> AgentNode:
        validate_name(node, "node")
        validate_free_text(by, "by", 256)
        validate_free_text(why, "why")

        def body(tx: Tx, now: int) -> AgentNode:
            current = self._lock_node(tx, node)
            if current.breaker_open == is_open:
                return current
            tx.run(
                "UPDATE agent_node SET breaker_open = ?, breaker_reason = ? WHERE name = ?",
                (1 if is_open else 0, f"{why} (by {by})" if is_open else None, node),
            )
            kind = "breaker.opened" if is_open else "breaker.closed"
            self._event(tx, now, node=node, kind=kind, generation=current.generation, actor=by,
                        why=why)  # fmt: skip
            return self._get_node(tx, node)

        return self._write(body)

    # ----------------------------------------------------------------------------------------
    # the halt gate

    def halt(self, *, node: str | None = None, by: str, why: str) -> Halt:
        """Block admission of new bodies and new effects (globally or for one node)."""
        if node is not None:
            validate_name(node, "node")
        validate_free_text(by, "by", 256)
        validate_free_text(why, "why")
        if not why.strip():
            raise BadInput("--why: a halt must say why", field="why")

        def body(tx: Tx, now: int) -> Halt:
            self.backend.lock_gate(tx, exclusive=True)
            if node is not None:
                self._lock_node(tx, node)
            row = tx.one(
                "SELECT halt_id, node, by, why, at, lifted_at, lifted_by FROM halt "
                "WHERE lifted_at IS NULL "
                "AND (node = ? OR (node IS NULL AND CAST(? AS TEXT) IS NULL))",
                (node, node),
            )
            if row is not None:
                return self._halt(row)
            created = tx.one(
                "INSERT INTO halt (node, by, why, at) VALUES (?, ?, ?, ?) "
                "RETURNING halt_id, node, by, why, at, lifted_at, lifted_by",
                (node, by, why, now),
            )
            assert created is not None
            self._event(tx, now, node=node, kind="halt.raised", generation=None, actor=by,
                        why=why, halt_id=int(created[0]))  # fmt: skip
            return self._halt(created)

        return self._write(body)

    def unhalt(self, *, node: str | None = None, by: str) -> list[Halt]:
        """Lift the active halt of one scope (global when ``node`` is None)."""
        if node is not None:
            validate_name(node, "node")
        validate_free_text(by, "by", 256)

        def body(tx: Tx, now: int) -> list[Halt]:
            self.backend.lock_gate(tx, exclusive=True)
            rows = tx.all(
                "UPDATE halt SET lifted_at = ?, lifted_by = ? "
                "WHERE lifted_at IS NULL "
                "AND (node = ? OR (node IS NULL AND CAST(? AS TEXT) IS NULL)) "
                "RETURNING halt_id, node, by, why, at, lifted_at, lifted_by",
                (now, by, node, node),
            )
            for r in rows:
                self._event(tx, now, node=node, kind="halt.lifted", generation=None, actor=by,
                            halt_id=int(r[0]))  # fmt: skip
            return [self._halt(r) for r in rows]

        return self._write(body)

    def halts(self, *, active_only: bool = True) -> list[Halt]:
        """Halts on record (by default only those in force)."""
        where = " WHERE lifted_at IS NULL" if active_only else ""
        return self._read(
            lambda tx, _now: [
                self._halt(r)
                for r in tx.all(
                    "SELECT halt_id, node, by, why, at, lifted_at, lifted_by FROM halt"
                    + where
                    + " ORDER BY halt_id"
                )
            ]
        )

    # ----------------------------------------------------------------------------------------
    # capsule acceptance (signature-receipt replay protection)

    def accept_capsule(
        self, node: str, *, generation: int, sequence: int, digest: str, key_id: str
    ) -> bool:
        """Record that a verified capsule of ``node`` was accepted; refuse a replay.

        Capsules are ordered by (generation, sequence). Accepting one older than the newest
        already accepted for the node is a :class:`Conflict`; accepting the very same digest
        again is idempotent (returns False); a newer one raises the high-water mark (True).
        Call it only after every other check has passed.
        """
        validate_name(node, "node")
        validate_free_text(key_id, "key id", 256)
        if generation < 1 or sequence < 0:
            raise BadInput("capsule: generation must be >= 1 and sequence >= 0")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise BadInput("capsule: digest must be 64 lower-case hex characters", field="digest")

        def body(tx: Tx, now: int) -> bool:
            self._lock_node(tx, node)
            top = tx.one(
                "SELECT generation, sequence, digest FROM accepted_capsule WHERE node = ? "
                "ORDER BY generation DESC, sequence DESC LIMIT 1",
                (node,),
            )
            if top is not None:
                mark = (int(top[0]), int(top[1]))
                if (generation, sequence) == mark and top[2] == digest:
                    return False
                if (generation, sequence) <= mark:
                    raise Conflict(
                        f"capsule replay refused: {node} already accepted generation {mark[0]} "
                        f"sequence {mark[1]}; this one is generation {generation} sequence "
                        f"{sequence}",
                        node=node, accepted_generation=mark[0], accepted_sequence=mark[1],
                    )  # fmt: skip
            tx.run(
                "INSERT INTO accepted_capsule (node, generation, sequence, digest, key_id, "
                "accepted_at) VALUES (?, ?, ?, ?, ?, ?)",
                (node, generation, sequence, digest, key_id, now),
            )
            self._event(tx, now, node=node, kind="capsule.accepted", generation=generation,
                        actor="verifier", sequence=sequence, digest=digest,
                        key_id=key_id)  # fmt: skip
            return True

        return self._write(body)

    # ----------------------------------------------------------------------------------------
    # history

    def history(self, node: str | None = None, *, limit: int | None = None) -> list[Event]:
        """The append-only event history (of one node, or all), oldest first."""
        if node is not None:
            validate_name(node, "node")
        if limit is not None and limit < 1:
            raise BadInput("--limit: must be at least 1", field="limit")

        def body(tx: Tx, _now: int) -> list[Event]:
            if node is not None:
                self._get_node(tx, node)
                rows = tx.all(
                    "SELECT seq, node, kind, generation, actor, detail, at FROM event "
                    "WHERE node = ? ORDER BY seq",
                    (node,),
                )
            else:
                rows = tx.all(
                    "SELECT seq, node, kind, generation, actor, detail, at FROM event ORDER BY seq"
                )
            events = [
                Event(int(r[0]), r[1], r[2], None if r[3] is None else int(r[3]), r[4],
                      json.loads(r[5]), _at(r[6]))
                for r in rows
            ]  # fmt: skip
            return events[-limit:] if limit else events

        return self._read(body)


#: Generations are signed 64-bit integers in both backends' columns.
MAX_GENERATION = 2**63 - 1


def _check_generation(value: int, field: str) -> None:
    # Out of range would fail inside the database as an overflow; it is bad input, said so.
    if not 1 <= value <= MAX_GENERATION:
        raise BadInput(
            f"{field}: must be between 1 and {MAX_GENERATION} (got {value})", field="generation"
        )


def _check_ttl(ttl: timedelta) -> None:
    if ttl <= timedelta(0):
        raise BadInput("--ttl: must be positive", field="ttl")
    if ttl > MAX_LEASE_TTL:
        raise BadInput(f"--ttl: at most {int(MAX_LEASE_TTL.total_seconds())} seconds", field="ttl")
