"""Body leases, the fence, denials and capability grants."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import timedelta
from functools import lru_cache
from typing import NoReturn

from onstation.core.errors import (
    BadInput,
    BlockedByPolicy,
    Conflict,
)
from onstation.core.leases import LeaseState
from onstation.core.names import validate_free_text, validate_name
from onstation.core.types import (
    BodyLease,
    Denial,
    FenceResult,
    Grant,
)
from onstation.ledger.backends import Row, Tx
from onstation.ledger.base import (
    BATCH_ROWS,
    DEFAULT_LEASE_TTL,
    LedgerBase,
    _at,
    _check_generation,
    _check_ttl,
    _event_json,
    check_name,
    check_text,
    from_us,
    repeat_rows,
)
from onstation.ledger.fastpath import RELEASE_REASON

# The two events of every relief, encoded by hand: the same text json.dumps(detail,
# sort_keys=True) gives (a test holds them to it), at a fraction of its cost.


def _ints(values: list[int]) -> str:
    if len(values) == 1:  # a fence's usual lists: one lease, one generation
        return f"[{int(values[0])}]"
    return "[" + ", ".join([str(int(v)) for v in values]) + "]"


@lru_cache(maxsize=64)
def _quoted(text: str) -> str:
    """``json.dumps(text)``, remembered: a fence's few reasons come back on every fence."""
    return json.dumps(text)


def _acquired_detail(holder: str | None, lease_id: int, ttl_seconds: int) -> str:
    """The lease.acquired event's detail: holder, lease_id, ttl_seconds."""
    held = "null" if holder is None else json.dumps(holder)
    return f'{{"holder": {held}, "lease_id": {int(lease_id)}, "ttl_seconds": {int(ttl_seconds)}}}'


def _fenced_detail(
    previous: int, reason: str, leases: list[int], grants: list[int], generations: list[int]
) -> str:
    """The node.fenced event's detail: what the fence revoked, and why."""
    return (
        f'{{"fenced_generations": {_ints(generations)}, "previous_generation": {int(previous)}, '
        f'"reason": {_quoted(reason)}, "revoked_grants": {_ints(grants)}, '
        f'"revoked_leases": {_ints(leases)}}}'
    )


def _acquired(
    node: str, holder: str | None, lease_id: int, generation: int, now: int, expires: int
) -> BodyLease:
    """The lease an admission just wrote, as it wrote it (not read back)."""
    acquired = _at(now)
    return BodyLease(
        lease_id=lease_id,
        node=node,
        generation=generation,
        state=LeaseState.LIVE,
        holder=holder,
        acquired_at=acquired,
        renewed_at=acquired,
        expires_at=_at(expires),
        ended_at=None,
        end_reason=None,
        run_id=lease_id,
    )


class LeaseRecords(LedgerBase):
    """Body leases, the fence, denials and capability grants."""

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
        check_name(node, "node")
        if holder is not None:
            check_text(holder, "holder", 1024)
        _check_ttl(ttl)
        if expect_generation is not None:
            _check_generation(expect_generation, "expected generation")

        # PostgreSQL: one statement (the admission function), committing on its own.
        return self._write_statement(
            lambda tx, now: self._acquire_in(tx, now, node, holder, ttl, expect_generation, by)
        )

    def _acquire_in(
        self, tx: Tx, now: int, node: str, holder: str | None, ttl: timedelta,
        expect_generation: int | None, by: str,
    ) -> BodyLease:  # fmt: skip
        """Admit a body inside the caller's transaction (see :meth:`acquire_lease`)."""
        if self.backend.name == "postgres":
            return self._acquire_asked_pg(tx, now, node, holder, ttl, expect_generation, by)()
        seconds = ttl.total_seconds()
        expires = now + int(seconds * 1_000_000)
        # The lease is inserted only where admission is allowed (BEGIN IMMEDIATE holds the
        # writer lock, so nothing changes between this and the read that explains a
        # refusal): one statement on the hot path of every relief.
        inserted = tx.one(
            self._q("lease_admit_if_allowed"),
            (holder, now, now, expires, node, expect_generation, expect_generation),
        )
        if inserted is None:
            read = tx.one(self._q("lease_admission_read"), (node,))
            self._refuse_admission(tx, now, node, read, expect_generation)
        assert inserted is not None
        lease_id, generation = int(inserted[0]), int(inserted[1])
        self._event_encoded(tx, now, node, "lease.acquired", generation, by,
                            _acquired_detail(holder, lease_id, int(seconds)))  # fmt: skip
        return _acquired(node, holder, lease_id, generation, now, expires)

    def _acquire_asked_pg(
        self, tx: Tx, now: int, node: str, holder: str | None, ttl: timedelta,
        expect_generation: int | None, by: str,
    ) -> Callable[[], BodyLease]:  # fmt: skip
        """PostgreSQL's admission, sent now and read by the function returned (which raises
        the refusal): statements asked after it travel in the same round trip."""
        seconds = ttl.total_seconds()
        expires = now + int(seconds * 1_000_000)
        # One statement, the server-side function of schema version 18: it takes the locks
        # first, in a statement of its own, so that the read and the admission see a halt or
        # a lease committed while it waited (a single statement would keep its pre-wait
        # snapshot), then admits only where that read allows it. The row says what it saw, so
        # a refusal is explained from it.
        asked = tx.ask(
            self._q("pg_admit"),
            (node, holder, now, expires, expect_generation, by,
             json.dumps({"holder": holder, "ttl_seconds": int(seconds)})),
        )  # fmt: skip

        def read() -> BodyLease:
            row = asked.one()
            if row is None or row[8] is None:
                self._refuse_admission(tx, now, node, row, expect_generation)
            return _acquired(node, holder, int(row[8]), int(row[0]), now, expires)

        return read

    def _refuse_admission(
        self, tx: Tx, now: int, node: str, row: Row | None, expect_generation: int | None
    ) -> NoReturn:
        """Raise why admission was refused, from the admission read's ``row`` (generation,
        state, current lease id, state, expiry and holder, halt in force, open episode)."""
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
        # The read allows what the write refused: it cannot under the node's lock (or
        # SQLite's writer lock), but if it ever does, the caller runs it again.
        raise Conflict(f"admission of {node!r} raced a change; run it again", node=node)

    def fence(
        self, node: str, *, expect_generation: int, by: str = "operator", reason: str = "fenced"
    ) -> FenceResult:
        """Compare-and-swap the generation from ``expect_generation`` to the next one, revoking
        the predecessor's lease and grants in the same transaction."""
        check_name(node, "node")
        check_text(reason, "reason", 1024)
        _check_generation(expect_generation, "expected generation")

        # PostgreSQL: one statement (the fence function), committing on its own.
        return self._write_statement(
            lambda tx, now: self._fence_in(tx, now, node, expect_generation, by, reason)
        )

    def _fence_in(
        self, tx: Tx, now: int, node: str, expect_generation: int, by: str, reason: str
    ) -> FenceResult:
        """The fence inside the caller's transaction (see :meth:`fence`)."""
        if self.backend.name == "postgres":
            found = self._fence_asked_pg(tx, now, node, expect_generation, by, reason)()
        else:
            found = self._fence_statements(tx, now, node, expect_generation, reason)
        return self._fence_result(tx, node, expect_generation, reason, by, now, found)

    def _fence_result(
        self, tx: Tx, node: str, expect_generation: int, reason: str, by: str, now: int,
        found: tuple[Row | None, list[Row], list[int]],
    ) -> FenceResult:  # fmt: skip
        """What a fence's statements found, as its result (its event on SQLite), or the
        Conflict of a lost compare-and-swap."""
        row, fenced, grants = found
        if row is None:
            current = self._get_node(tx, node)
            raise Conflict(
                f"fence of {node!r} lost: generation is {current.generation}, "
                f"not {expect_generation}",
                node=node, generation=current.generation,
            )  # fmt: skip
        new_generation = int(row[0])
        leases = sorted(int(r[0]) for r in fenced)
        if self.backend.name != "postgres":  # PostgreSQL's statement wrote it already
            # One event records the whole fence: the new generation and every lease and grant
            # it revoked (with the generations those leases held).
            detail = _fenced_detail(expect_generation, reason, leases, grants,
                                    sorted(int(r[1]) for r in fenced))  # fmt: skip
            self._event_encoded(tx, now, node, "node.fenced", new_generation, by, detail)
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

        return self._write(
            lambda tx, now: self._fence_and_acquire_in(
                tx, now, node, expect_generation, by, reason, holder, ttl
            )
        )

    def _fence_and_acquire_in(
        self, tx: Tx, now: int, node: str, expect_generation: int, by: str, reason: str,
        holder: str | None, ttl: timedelta,
    ) -> tuple[FenceResult, BodyLease]:  # fmt: skip
        """Fence ``expect_generation`` and admit ``holder`` for the generation the fence makes,
        inside the caller's transaction.

        On PostgreSQL the admission's statements are sent with the fence's, before the
        fence's answer is read: one round trip instead of two. They ask for the generation
        after ``expect_generation``, the only one a fence that holds can make; a fence that
        lost raises, as before, before the admission's answer is looked at, and whatever
        the admission wrote is rolled back with the transaction. The refusals come in the
        same order as when the two ran one after the other."""
        if self.backend.name != "postgres":
            result = self._fence_in(tx, now, node, expect_generation, by, reason)
            return result, self._acquire_in(tx, now, node, holder, ttl, result.generation, by)
        fenced = self._fence_asked_pg(tx, now, node, expect_generation, by, reason)
        admitted = self._acquire_asked_pg(tx, now, node, holder, ttl, expect_generation + 1,
                                          by)  # fmt: skip
        result = self._fence_result(tx, node, expect_generation, reason, by, now, fenced())
        lease = admitted()
        assert lease.generation == result.generation  # the CAS makes expect + 1, no other
        return result, lease

    def hand_over_lease(self, node: str, *, lease_id: int, holder: str, to: str, by: str) -> None:
        """Give a held lease to the body that takes it (compare-and-swap on the holder)."""
        validate_name(node, "node")
        validate_free_text(to, "holder", 1024)

        def body(tx: Tx, now: int) -> None:
            self._lock_node(tx, node)
            moved = tx.one(
                self._q("lease_hand_over"),
                (to, lease_id, node, holder),
            )
            if moved is None:
                raise Conflict(f"lease {lease_id} of {node!r} is no longer held by {holder!r}")
            self._event(tx, now, node=node, kind="lease.handed_over", generation=int(moved[0]),
                        actor=by,
                        lease_id=lease_id, previous_holder=holder, holder=to)  # fmt: skip

        self._write(body)

    def _fence_statements(
        self, tx: Tx, now: int, node: str, expect: int, reason: str
    ) -> tuple[Row | None, list[Row], list[int]]:
        """The fence as plain statements (SQLite: BEGIN IMMEDIATE already serializes)."""
        # The conditional UPDATE is the compare-and-swap. It also says what the fence has to
        # end (the node's LIVE lease, at most one by the body_lease_one_live index, and
        # whether any grant is LIVE), read under the same writer lock, so no statement runs
        # for what is not there and the lease's UPDATE returns nothing.
        row = tx.one(self._q("fence_bump_generation"), (node, expect))
        if row is None:
            return None, [], []
        fenced: list[Row] = []
        if row[1] is not None:
            ended = tx.run(self._q("fence_revoke_leases"), (now, reason, node))
            # One LIVE lease was read; the index allows no other, so exactly it was ended.
            assert ended == 1, f"fence of {node!r} ended {ended} leases, read one"
            fenced = [(int(row[1]), int(row[2]))]
        grants: list[int] = []
        if row[3]:
            revoked = tx.all(self._q("fence_revoke_grants"), (now, node, expect))
            grants = sorted(int(r[0]) for r in revoked)
        return (row[0],), fenced, grants

    def _fence_asked_pg(
        self, tx: Tx, now: int, node: str, expect: int, by: str, reason: str
    ) -> Callable[[], tuple[Row | None, list[Row], list[int]]]:
        """The same fence, with its history event, as one PostgreSQL statement (a
        server-side function running the node's lock and data-modifying CTEs), read by the
        function returned: one round trip, shared with whatever is asked before it is read.

        The first CTE is the compare-and-swap and takes the node's row lock; the others only
        act when it matched, so a lost CAS changes nothing.
        """
        # One statement, the server-side function of schema version 18: it locks the node
        # first, in a statement of its own (at READ COMMITTED each statement takes a fresh
        # snapshot, so the fence then sees every lease admitted before it; a data-modifying
        # CTE reads one snapshot, taken before any lock wait), then runs the CTEs.
        asked = tx.ask(self._q("pg_fence"), (node, expect, now, reason, by))

        def read() -> tuple[Row | None, list[Row], list[int]]:
            row = asked.one()
            if row is None:
                return None, [], []
            fenced: list[Row] = [(int(a), int(b)) for a, b in zip(row[1], row[2], strict=True)]
            return (row[0],), fenced, [int(g) for g in row[3]]

        return read

    def renew_lease(
        self, node: str, *, generation: int, ttl: timedelta = DEFAULT_LEASE_TTL
    ) -> BodyLease:
        """Extend the live lease of ``generation`` (a heartbeat); stale bodies are denied."""
        validate_name(node, "node")
        _check_ttl(ttl)

        def body(tx: Tx, now: int) -> BodyLease:
            guarded = self._guard(tx, now, node, generation, "lease renew")
            expires = now + int(ttl.total_seconds() * 1_000_000)
            row = tx.one(self._q("lease_renew"), (now, expires, guarded.lease.lease_id))
            assert row is not None
            return self._lease(row)

        return self._write(body)

    def release_lease(self, node: str, *, generation: int, by: str | None = None) -> BodyLease:
        """The body gives up its lease cleanly; the generation admits no other body."""
        validate_name(node, "node")

        def body(tx: Tx, now: int) -> BodyLease:
            guarded = self._guard(tx, now, node, generation, "lease release")
            reason = RELEASE_REASON
            self._end_lease(
                tx, now, guarded.lease, LeaseState.RELEASED, reason,
                actor=by or f"{node}@{generation}",
            )  # fmt: skip
            # The guard read the lease LIVE under the node's lock; ending it changed these.
            return replace(guarded.lease, state=LeaseState.RELEASED, ended_at=_at(now),
                           end_reason=reason)  # fmt: skip

        return self._write(body)

    def leases(self, node: str) -> list[BodyLease]:
        """Every lease the node ever had, oldest generation first."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[BodyLease]:
            rows = tx.all(self._q("leases_of_node"), (node,))
            if not rows:
                self._require_node(tx, node)
            return [self._lease(r) for r in rows]

        return self._read_single(body)

    def lease(self, node: str, generation: int) -> BodyLease | None:
        """The node's lease of one generation (as :meth:`leases` lists it), or None when that
        generation never held one; one row read, for a caller that polls one generation."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> BodyLease | None:
            lease = self._lease_for(tx, node, generation)
            if lease is None:
                self._require_node(tx, node)
            return lease

        return self._read_single(body)

    def multiple_live_leases(self) -> dict[str, int]:
        """Nodes holding more than one LIVE lease, with the count: an invariant check that is
        empty unless the ledger is broken (the simulator asks it after every step)."""
        rows = self._read_single(lambda tx, _now: tx.all(self._q("lease_nodes_with_many_live")))
        return {str(node): int(count) for node, count in rows}

    def live_lease(self, node: str) -> BodyLease | None:
        """The node's lease that may act right now, if any."""
        validate_name(node, "node")

        def body(tx: Tx, now: int) -> BodyLease | None:
            _current, lease = self._node_and_lease(tx, node, lock=False)
            if lease is None or lease.state is not LeaseState.LIVE or _at(now) >= lease.expires_at:
                return None
            return lease

        return self._read_single(body)

    def guard(self, node: str, *, generation: int, action: str = "write") -> BodyLease:
        """Check that ``generation`` may act now; a refusal is recorded as a denial receipt."""
        validate_name(node, "node")
        validate_free_text(action, "action", 1024)
        return self._write(lambda tx, now: self._guard(tx, now, node, generation, action).lease)

    def denials(self, node: str) -> list[Denial]:
        """Every denial receipt of the node, oldest first."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[Denial]:
            rows = tx.all(self._q("denials_of_node"), (node,))
            if not rows:
                self._require_node(tx, node)
            return [
                Denial(int(r[0]), r[1], int(r[2]), int(r[3]), r[4], r[5], _at(r[6])) for r in rows
            ]

        return self._read_single(body)

    def record_denial(
        self, node: str, *, presented_generation: int, action: str, reason: str
    ) -> Denial:
        """Keep the receipt of a refusal decided outside the ledger (a hook's deny)."""
        validate_name(node, "node")
        validate_free_text(action, "action", 1024)
        validate_free_text(reason, "reason", 256)

        def body(tx: Tx, now: int) -> Denial:
            current = self._get_node(tx, node).generation
            denial_id = self._deny(tx, now, node, presented_generation, current, action, reason)
            return Denial(denial_id, node, presented_generation, current, action, reason,
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
            # The (node, generation, capability) key decides: no row back when it was granted.
            row = tx.one(self._q("grant_insert"), (node, generation, capability, now))
            if row is None:
                raise Conflict(f"{capability!r} was already granted to generation {generation}")
            self._event(tx, now, node=node, kind="grant.issued", generation=generation,
                        actor=f"{node}@{generation}", grant_id=int(row[0]),
                        capability=capability)  # fmt: skip
            return Grant(int(row[0]), node, generation, capability, "LIVE", _at(now), None)

        return self._write(body)

    def issue_grants(
        self,
        node: str,
        *,
        generation: int,
        capabilities: Iterable[str],
        skip_granted: bool = False,
    ) -> list[Grant]:
        """Issue several fresh capabilities to the live generation in one write: one guard,
        the grants' rows and their ``grant.issued`` events (a statement each per batch);
        the new grants in the order given.

        What :meth:`issue_grant` once per capability inside one :meth:`transaction` does:
        the same validation, one denial receipt when the generation may not act (naming
        the first capability), the same rows and events. A capability the generation was
        already granted (or named twice) is a :class:`Conflict` and nothing is issued;
        ``skip_granted`` passes over it instead (no row, no event: a retried launch).
        """
        validate_name(node, "node")
        wanted: list[str] = []
        for capability in capabilities:
            validate_free_text(capability, "capability", 256)
            if not capability.strip():
                raise BadInput("capability: must not be empty", field="capability")
            wanted.append(capability)
        if not wanted:
            return []  # as no call of issue_grant: nothing read, nothing written
        unique = list(dict.fromkeys(wanted))
        actor = f"{node}@{generation}"

        def body(tx: Tx, now: int) -> list[Grant]:
            self._guard(tx, now, node, generation, f"grant {wanted[0]}")
            if len(unique) < len(wanted) and not skip_granted:
                twice = next(c for c in unique if wanted.count(c) > 1)
                raise Conflict(f"{twice!r} was already granted to generation {generation}")
            issued: dict[str, int] = {}
            sql = self._q("grant_insert")
            for start in range(0, len(unique), BATCH_ROWS):
                chunk = unique[start : start + BATCH_ROWS]
                params = tuple(v for c in chunk for v in (node, generation, c, now))
                # The (node, generation, capability) key decides: no row back for one
                # granted before. RETURNING's row order is not promised: read by capability.
                for grant_id, capability in tx.all(repeat_rows(sql, len(chunk)), params):
                    issued[str(capability)] = int(grant_id)
            if not skip_granted and len(issued) < len(unique):
                held = next(c for c in unique if c not in issued)
                raise Conflict(f"{held!r} was already granted to generation {generation}")
            granted = [c for c in unique if c in issued]
            self._events_encoded(tx, now, [
                (node, "grant.issued", generation, actor,
                 _event_json({"capability": c, "grant_id": issued[c]}))
                for c in granted
            ])  # fmt: skip
            return [Grant(issued[c], node, generation, c, "LIVE", _at(now), None)
                    for c in granted]  # fmt: skip

        return self._write(body)

    def live_grants(self, node: str, generation: int) -> frozenset[str]:
        """The capabilities ``generation`` of ``node`` holds now (a read of its LIVE grants
        alone, through their own index: the hooks read it on every tool call)."""
        rows = self._read_single(
            lambda tx, _now: tx.all(self._q("live_grants_of_generation"), (node, generation))
        )
        return frozenset(str(r[0]) for r in rows)

    def grants(self, node: str) -> list[Grant]:
        """Every grant the node's generations received."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[Grant]:
            rows = tx.all(self._q("grants_of_node"), (node,))
            if not rows:
                self._require_node(tx, node)
            return [
                Grant(int(r[0]), r[1], int(r[2]), r[3], r[4], _at(r[5]), from_us(r[6]))
                for r in rows
            ]

        return self._read_single(body)
