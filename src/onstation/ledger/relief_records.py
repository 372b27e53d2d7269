"""Relief records in the ledger: tasks, successor births and challenges, reservations, reliefs.

A successor's body is born PROVISIONAL: it holds the new generation's lease but no effect
rights (the ledger denies its effects) until it has echoed its challenge exactly and the
relief has seen its process and heartbeat witnesses agree; then it is RUNNING. A birth that
does not get there is BIRTH_FAILED and its generation is fenced. At most one relief per
identity is in progress at a time (a unique index), so two racing supervisors cannot both
relieve one identity.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from onstation.core.canonical import canonical_bytes, digest
from onstation.core.errors import BadInput, BlockedByPolicy, Conflict, StaleGeneration
from onstation.core.names import validate_free_text, validate_name
from onstation.core.types import Record
from onstation.ledger.backends import Row, Tx
from onstation.ledger.base import _at, from_us
from onstation.ledger.ledger import Ledger

CHALLENGE_SCOPE = "onstation-challenge-v1"
TASK_STATUSES = ("pending", "in_progress", "blocked", "completed")
CHALLENGE_FIELDS = (
    "node", "episode", "generation", "capsule_digest", "worktree_head", "plan_revision",
    "capability_set", "reservation", "transcript_sink", "nonce",
)  # fmt: skip


@dataclass(frozen=True)
class Task(Record):
    """A unit of work with an owner, a status and hand-off notes."""

    task_id: int
    title: str
    owner: str | None
    status: str
    notes: list[str]
    brief_path: str | None
    parent_id: int | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Birth(Record):
    """One successor body's birth: its challenge, witnesses and outcome."""

    node: str
    generation: int
    lease_id: int | None
    state: str
    challenge: dict[str, Any]
    challenge_digest: str
    launch_witness: dict[str, Any] | None
    answer_witness: dict[str, Any] | None
    launched_at: datetime
    answered_at: datetime | None
    decided_at: datetime | None
    reason: str | None


@dataclass(frozen=True)
class Relief(Record):
    """One relief of an identity, from request to settlement."""

    relief_id: int
    node: str
    from_generation: int
    to_generation: int | None
    state: str
    verdict: str | None
    cause: str
    started_at: datetime
    finished_at: datetime | None
    report_path: str | None
    detail: dict[str, Any]


def _task(r: Row) -> Task:
    return Task(int(r[0]), r[1], r[2], r[3], json.loads(r[4]), r[5],
                None if r[6] is None else int(r[6]), _at(r[7]), _at(r[8]))  # fmt: skip


def _birth(r: Row) -> Birth:
    return Birth(
        node=r[0], generation=int(r[1]), lease_id=None if r[2] is None else int(r[2]),
        state=r[3], challenge=json.loads(r[4]), challenge_digest=r[5],
        launch_witness=None if r[6] is None else json.loads(r[6]),
        answer_witness=None if r[7] is None else json.loads(r[7]),
        launched_at=_at(r[8]), answered_at=from_us(r[9]), decided_at=from_us(r[10]),
        reason=r[11],
    )  # fmt: skip


def _relief(r: Row) -> Relief:
    return Relief(int(r[0]), r[1], int(r[2]), None if r[3] is None else int(r[3]), r[4], r[5],
                  r[6], _at(r[7]), from_us(r[8]), r[9], json.loads(r[10]))  # fmt: skip


def challenge_digest(challenge: dict[str, Any]) -> str:
    """The digest an echo must reproduce (scope ``onstation-challenge-v1``)."""
    return digest(CHALLENGE_SCOPE, challenge)


def new_nonce() -> str:
    """A fresh random nonce binding one launch, its challenge and its witnesses."""
    return secrets.token_hex(16)


class ReliefLedger:
    """Tasks, births, reservations and reliefs over one :class:`Ledger`."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    # -- tasks ------------------------------------------------------------------------------

    def create_task(
        self,
        title: str,
        *,
        owner: str | None = None,
        status: str = "pending",
        parent_id: int | None = None,
        brief_path: str | None = None,
        note: str | None = None,
        by: str,
    ) -> Task:
        """Create a task (e.g. the successor's, carrying the brief's path)."""
        validate_free_text(title, "title", 512)
        if not title.strip():
            raise BadInput("title: must not be empty", field="title")
        if owner is not None:
            validate_name(owner, "owner")
        if status not in TASK_STATUSES:
            raise BadInput(f"status: one of {', '.join(TASK_STATUSES)}", field="status")
        notes = [validate_free_text(note, "note")] if note else []

        def body(tx: Tx, now: int) -> Task:
            if (
                parent_id is not None
                and tx.one(self.ledger._q("task_exists"), (parent_id,)) is None
            ):
                raise BadInput(f"--parent: no such task {parent_id}")
            row = tx.one(
                self.ledger._q("task_insert"),
                (title, owner, status, json.dumps(notes), brief_path, parent_id, now, now),
            )
            assert row is not None
            self.ledger._event(tx, now, node=self._node_or_none(tx, owner), kind="task.created",
                               generation=None, actor=by, task_id=int(row[0]), title=title,
                               status=status, brief_path=brief_path)  # fmt: skip
            return _task(row)

        return self.ledger._write(body)

    def _node_or_none(self, tx: Tx, name: str | None) -> str | None:
        if name is None:
            return None
        return name if tx.one(self.ledger._q("task_owner_node_exists"), (name,)) else None

    def update_task(
        self,
        task_id: int,
        *,
        status: str | None = None,
        owner: str | None = None,
        note: str | None = None,
        brief_path: str | None = None,
        by: str,
        as_node: str | None = None,
        generation: int | None = None,
    ) -> Task:
        """The source's TaskUpdate: change status or owner, append a hand-off note.

        A body updating a task writes as ``as_node`` at ``generation``: a stale generation is
        denied with a receipt, and nothing of the update is kept.
        """
        if status is not None and status not in TASK_STATUSES:
            raise BadInput(f"status: one of {', '.join(TASK_STATUSES)}", field="status")
        if owner is not None:
            validate_name(owner, "owner")
        if note is not None:
            validate_free_text(note, "note")

        def body(tx: Tx, now: int) -> Task:
            if as_node is not None and generation is not None:
                self.ledger._guard(tx, now, as_node, generation, f"task update {task_id}")
            row = tx.one(self.ledger._q("task_by_id"), (task_id,))
            if row is None:
                raise BadInput(f"no such task {task_id}")
            task = _task(row)
            notes = task.notes + ([note] if note else [])
            got = tx.one(
                self.ledger._q("task_update"),
                (status or task.status, owner or task.owner, json.dumps(notes),
                 brief_path or task.brief_path, now, task_id),
            )  # fmt: skip
            assert got is not None
            self.ledger._event(tx, now, node=self._node_or_none(tx, owner or task.owner),
                               kind="task.updated", generation=generation,
                               actor=by if as_node is None else f"{as_node}@{generation}",
                               task_id=task_id,
                               status=status or task.status, note=note)  # fmt: skip
            return _task(got)

        return self.ledger._write(body)

    def tasks(self, owner: str | None = None) -> list[Task]:
        """Tasks (of one owner), oldest first."""
        sql = self.ledger._q("task_list_all")
        params: tuple[Any, ...] = ()
        if owner is not None:
            validate_name(owner, "owner")
            sql = self.ledger._q("task_list_of_owner")
            params = (owner,)
        return self.ledger._read_single(lambda tx, _now: [_task(r) for r in tx.all(sql, params)])

    # -- births and challenges --------------------------------------------------------------

    def start_birth(
        self,
        node: str,
        *,
        generation: int,
        lease_id: int,
        challenge: dict[str, Any],
        by: str,
    ) -> Birth:
        """Record a provisional successor birth and the challenge it must echo."""
        missing = [f for f in CHALLENGE_FIELDS if f not in challenge]
        if missing:
            raise BadInput(f"challenge: missing {', '.join(missing)}")
        text = canonical_bytes(challenge).decode("utf-8")
        expected = challenge_digest(challenge)

        def body(tx: Tx, now: int) -> Birth:
            self.ledger._lock_node(tx, node)
            row = tx.one(
                self.ledger._q("birth_insert_provisional"),
                (node, generation, lease_id, text, expected, now),
            )
            assert row is not None
            self.ledger._event(tx, now, node=node, kind="birth.provisional",
                               generation=generation, actor=by, lease_id=lease_id,
                               challenge_digest=expected)  # fmt: skip
            return _birth(row)

        return self.ledger._write(body)

    def set_launch_witness(self, node: str, generation: int, witness: dict[str, Any]) -> None:
        """Record the process witness observed when the successor was launched."""
        text = json.dumps(witness, sort_keys=True)
        self.ledger._write(
            lambda tx, _now: tx.run(
                self.ledger._q("birth_set_launch_witness"), (text, node, generation)
            )
        )

    def birth(self, node: str, generation: int) -> Birth | None:
        """The birth record of one generation, if it was launched by a relief."""
        row = self.ledger._read_single(
            lambda tx, _now: tx.one(self.ledger._q("birth_by_generation"), (node, generation))
        )
        return None if row is None else _birth(row)

    def answer_challenge(
        self,
        node: str,
        *,
        generation: int,
        echo: dict[str, Any],
        witness: dict[str, Any] | None,
    ) -> Birth:
        """The successor echoes its challenge; a stale body is denied, a wrong echo refused."""
        validate_name(node, "node")
        echoed = challenge_digest(echo)

        def body(tx: Tx, now: int) -> Birth:
            self.ledger._guard(tx, now, node, generation, "challenge answer")
            row = tx.one(self.ledger._q("birth_by_generation"), (node, generation))
            if row is None:
                raise BadInput(f"{node} generation {generation} has no challenge to answer")
            birth = _birth(row)
            if birth.state != "PROVISIONAL":
                raise Conflict(f"the challenge of generation {generation} is already {birth.state}")
            if echoed != birth.challenge_digest:
                differing = sorted(
                    k for k in set(echo) | set(birth.challenge)
                    if echo.get(k) != birth.challenge.get(k)
                )  # fmt: skip
                self.ledger._event(tx, now, node=node, kind="birth.echo_mismatch",
                                   generation=generation, actor=f"{node}@{generation}",
                                   fields=differing)  # fmt: skip
                raise _commit_then(
                    Conflict(
                        f"challenge echo does not match (fields: {', '.join(differing)})",
                        node=node, generation=generation, fields=differing,
                    )
                )  # fmt: skip
            got = tx.one(
                self.ledger._q("birth_answer"),
                (now, None if witness is None else json.dumps(witness, sort_keys=True), node,
                 generation),
            )  # fmt: skip
            assert got is not None
            self.ledger._event(tx, now, node=node, kind="birth.answered", generation=generation,
                               actor=f"{node}@{generation}",
                               witness_pid=(witness or {}).get("pid"))  # fmt: skip
            return _birth(got)

        return self.ledger._write(body)

    def decide_birth(
        self, node: str, *, generation: int, running: bool, reason: str, by: str
    ) -> Birth:
        """RUNNING (effect rights granted) or BIRTH_FAILED (its generation is fenced)."""

        def body(tx: Tx, now: int) -> Birth:
            self.ledger._lock_node(tx, node)
            state = "RUNNING" if running else "BIRTH_FAILED"
            got = tx.one(self.ledger._q("birth_decide"), (state, now, reason, node, generation))
            if got is None:
                raise Conflict(f"birth of {node} generation {generation} is not provisional")
            self.ledger._event(tx, now, node=node, kind=f"birth.{state.lower()}",
                               generation=generation, actor=by, reason=reason)  # fmt: skip
            return _birth(got)

        decided = self.ledger._write(body)
        if not running:
            # Already fenced further by someone else: the failed body can never act anyway.
            with contextlib.suppress(Conflict):
                self.ledger.fence(node, expect_generation=generation, by=by,
                                  reason=f"birth failed: {reason}")  # fmt: skip
        return decided

    # -- reservations -----------------------------------------------------------------------

    def reserve(
        self, node: str, *, generation: int, execution_class: str, evidence_digest: str | None,
        reservation_id: str | None = None,
    ) -> str:  # fmt: skip
        """Reserve capacity for one attempt under ``reservation_id`` (the id its capacity
        evidence holds; a fresh one when it holds none); returns the id."""
        if reservation_id is None:
            reservation_id = f"res-{secrets.token_hex(8)}"
        validate_name(reservation_id, "reservation")

        def body(tx: Tx, now: int) -> str:
            if tx.one(self.ledger._q("reservation_exists"), (reservation_id,)) is not None:
                raise BlockedByPolicy(
                    f"CAPACITY_REUSED: reservation {reservation_id} was made by an earlier "
                    "attempt; capacity evidence holds for one attempt only"
                )
            tx.run(
                self.ledger._q("reservation_insert"),
                (reservation_id, node, generation, execution_class, evidence_digest, now),
            )
            self.ledger._event(tx, now, node=node, kind="reservation.made",
                               generation=generation, actor="relief",
                               reservation_id=reservation_id,
                               execution_class=execution_class)  # fmt: skip
            return reservation_id

        return self.ledger._write(body)

    def settle_reservation(self, reservation_id: str, *, used: bool) -> None:
        """SETTLED when the attempt used it, RELEASED when it did not."""
        state = "SETTLED" if used else "RELEASED"

        def body(tx: Tx, now: int) -> None:
            row = tx.one(self.ledger._q("reservation_settle"), (state, now, reservation_id))
            if row is not None:
                self.ledger._event(tx, now, node=row[0], kind=f"reservation.{state.lower()}",
                                   generation=int(row[1]), actor="relief",
                                   reservation_id=reservation_id)  # fmt: skip

        self.ledger._write(body)

    # -- reliefs ----------------------------------------------------------------------------

    def open_relief(
        self, node: str, *, cause: str, by: str, stale_after: timedelta | None = None
    ) -> Relief:
        """Start a relief; a Conflict when one is already in progress for the identity.

        A relief still open after ``stale_after`` was abandoned (its controller died mid-way):
        it is closed as ABANDONED, on record, and the new one proceeds. Nothing it did is
        undone; every step it took was its own committed transaction.
        """
        validate_name(node, "node")

        def body(tx: Tx, now: int) -> Relief:
            current = self.ledger._lock_node(tx, node)
            open_row = tx.one(self.ledger._q("relief_open_of_node"), (node,))
            if open_row is not None:
                age = now - int(open_row[1])
                if stale_after is None or age < stale_after.total_seconds() * 1_000_000:
                    raise Conflict(f"a relief of {node} is already in progress", node=node)
                tx.run(self.ledger._q("relief_abandon"), (now, open_row[0]))
                self.ledger._event(tx, now, node=node, kind="relief.abandoned",
                                   generation=current.generation, actor=by,
                                   relief_id=int(open_row[0]))  # fmt: skip
            row = tx.one(self.ledger._q("relief_insert"), (node, current.generation, cause, now))
            assert row is not None
            self.ledger._event(tx, now, node=node, kind="relief.started",
                               generation=current.generation, actor=by, relief_id=int(row[0]),
                               cause=cause)  # fmt: skip
            return _relief(row)

        return self.ledger._write(body)

    def update_relief(
        self,
        relief_id: int,
        *,
        state: str,
        verdict: str | None = None,
        to_generation: int | None = None,
        detail: dict[str, Any] | None = None,
        finished: bool = False,
        report_path: str | None = None,
        by: str = "relief",
    ) -> Relief:
        """Move a relief to its next step (and finish it)."""

        def body(tx: Tx, now: int) -> Relief:
            if not detail:
                # Nothing to merge: one UPDATE, the detail left as it is stored.
                got = tx.one(self.ledger._q("relief_update_keeping_detail"),
                             (state, verdict, to_generation, 1 if finished else 0, now,
                              report_path, relief_id))  # fmt: skip
                if got is None:
                    raise BadInput(f"no such relief {relief_id}")
                updated = _relief(got)
                self.ledger._event(tx, now, node=updated.node, kind=f"relief.{state.lower()}",
                                   generation=to_generation or updated.from_generation,
                                   actor=by, relief_id=relief_id, verdict=verdict)  # fmt: skip
                return updated
            row = tx.one(self.ledger._q("relief_by_id"), (relief_id,))
            if row is None:
                raise BadInput(f"no such relief {relief_id}")
            current = _relief(row)
            merged = {**current.detail, **(detail or {})}
            got = tx.one(
                self.ledger._q("relief_update"),
                (state, verdict, to_generation, json.dumps(merged, sort_keys=True, default=str),
                 1 if finished else 0, now, report_path, relief_id),
            )  # fmt: skip
            assert got is not None
            self.ledger._event(tx, now, node=current.node, kind=f"relief.{state.lower()}",
                               generation=to_generation or current.from_generation, actor=by,
                               relief_id=relief_id, verdict=verdict)  # fmt: skip
            return _relief(got)

        return self.ledger._write(body)

    def reliefs(self, node: str | None = None) -> list[Relief]:
        """Reliefs (of one identity), oldest first."""
        sql = self.ledger._q("relief_list_all")
        params: tuple[Any, ...] = ()
        if node is not None:
            validate_name(node, "node")
            sql = self.ledger._q("relief_list_of_node")
            params = (node,)
        return self.ledger._read_single(lambda tx, _now: [_relief(r) for r in tx.all(sql, params)])


def _commit_then(error: Conflict | StaleGeneration) -> Exception:
    from onstation.ledger.base import _CommitThenRaise

    return _CommitThenRaise(error)
