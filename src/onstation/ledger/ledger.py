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

import json
from collections.abc import Callable
from typing import Generic

from onstation.core.errors import (
    BadInput,
    Conflict,
)
from onstation.core.names import validate_free_text, validate_name
from onstation.core.types import (
    Event,
)
from onstation.ledger.alerts import AlertStore
from onstation.ledger.backends import Row, Tx
from onstation.ledger.base import (
    DEFAULT_LEASE_TTL,
    MAX_GENERATION,
    MAX_LEASE_TTL,
    RESPAWN_KINDS,
    Clock,
    T,
    _at,
    from_us,
    system_clock,
    to_us,
)
from onstation.ledger.effect_journal import EffectJournal
from onstation.ledger.governance import Governance
from onstation.ledger.idempotency import IdempotencyStore
from onstation.ledger.leases import LeaseRecords
from onstation.ledger.nodes import NodeRecords
from onstation.ledger.tokens import TokenStore


class Ledger(
    NodeRecords, LeaseRecords, EffectJournal, Governance, TokenStore, AlertStore, IdempotencyStore
):
    """The durable store behind one interface, over SQLite or PostgreSQL."""

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
            top = tx.one(self._q("capsule_newest_of_node"), (node,))
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
            tx.run(self._q("capsule_insert"), (node, generation, sequence, digest, key_id, now))
            self._event(tx, now, node=node, kind="capsule.accepted", generation=generation,
                        actor="verifier", sequence=sequence, digest=digest,
                        key_id=key_id)  # fmt: skip
            return True

        return self._write(body)

    # ----------------------------------------------------------------------------------------
    # history

    def change_token(self) -> object | None:
        """A value that stays equal while nothing is committed to the ledger (by this
        connection or any other); compare two taken from the same :class:`Ledger` only.
        None when the backend cannot tell (PostgreSQL): then read to know."""
        return self.backend.change_token()

    def own_changes(self) -> int | None:
        """The rows this :class:`Ledger`'s own connection has changed so far (it only grows,
        rolled-back changes included), read without a statement; None on PostgreSQL. For a
        caller that knows every connection that writes (the simulation holds them all): equal
        counts on each mean nothing was committed, at less cost than :meth:`change_token`."""
        return self.backend.own_changes()

    def events_after(self, seq: int, *, limit: int | None = None) -> list[Event]:
        """Events with a sequence number above ``seq``, oldest first (at most ``limit``).

        The way to follow the history as it grows: pass the last ``seq`` seen.
        """
        if seq < 0:
            raise BadInput("--after: must be at least 0", field="after")
        if limit is not None and limit < 1:
            raise BadInput("--limit: must be at least 1", field="limit")
        params: tuple[int, ...]
        if limit is None:
            sql, params = self._q("events_after"), (seq,)
        else:
            sql, params = self._q("events_after_limited"), (seq, limit)
        return self._read_single(lambda tx, _now: [_event_record(r) for r in tx.all(sql, params)])

    def events_of(
        self, node: str, *, after: int = 0, kind: str | None = None, limit: int = 1000
    ) -> list[Event]:
        """One node's events with a sequence number above ``after``, oldest first, at most
        ``limit`` (only those of ``kind`` when given).

        The way to follow one node as its history grows, reading only what is new: pass the
        last ``seq`` seen (a reader that got ``limit`` events asks again from the last one).
        The read is a range of the node's events after ``after``; with ``kind`` it also passes
        over the node's events of other kinds in that range.
        """
        validate_name(node, "node")
        if after < 0:
            raise BadInput("--after: must be at least 0", field="after")
        if limit < 1:
            raise BadInput("--limit: must be at least 1", field="limit")
        if kind is not None:
            validate_free_text(kind, "kind", 256)

        def body(tx: Tx, _now: int) -> list[Event]:
            if kind is None:
                rows = tx.all(self._q("events_of_node_after"), (node, after, node, limit))
            else:
                rows = tx.all(
                    self._q("events_of_node_kind_after"), (node, after, node, kind, limit)
                )
            if not rows:
                self._require_node(tx, node)
            return [_event_record(r) for r in rows]

        return self._read_single(body)

    def history(self, node: str | None = None, *, limit: int | None = None) -> list[Event]:
        """The append-only event history (of one node, or all), oldest first.

        With ``limit``, only the newest ``limit`` events: they alone are read (newest first,
        through the primary key or the node's (node, seq) index) and returned oldest first,
        so a poll of the tail costs the same however long the history has grown.
        """
        if node is not None:
            validate_name(node, "node")
        if limit is not None and limit < 1:
            raise BadInput("--limit: must be at least 1", field="limit")

        def body(tx: Tx, _now: int) -> list[Event]:
            if node is not None:
                if limit is None:
                    rows = tx.all(self._q("events_of_node"), (node,))
                else:
                    rows = tx.all(self._q("events_of_node_newest"), (node, node, limit))
                if not rows:
                    self._require_node(tx, node)
            elif limit is None:
                rows = tx.all(self._q("events_all"))
            else:
                rows = tx.all(self._q("events_newest"), (limit,))
            if limit is not None:
                rows.reverse()  # read newest first; returned oldest first
            return [_event_record(r) for r in rows]

        return self._read_single(body)


class Reread(Generic[T]):
    """``read()``'s answer, read again only once something was committed to ``ledger`` since
    the last read, by any connection (its :meth:`Ledger.change_token` moved); where the
    backend keeps no token (PostgreSQL) every call reads. For a poll that would otherwise
    read the same rows again and again while nothing happens."""

    def __init__(self, ledger: Ledger, read: Callable[[], T]) -> None:
        self._ledger = ledger
        self._read = read
        self._last: tuple[object, T] | None = None  # (the token taken before it, the answer)

    def __call__(self) -> T:
        token = self._ledger.change_token()
        last = self._last
        if last is not None and token is not None and last[0] == token:
            return last[1]
        answer = self._read()
        # Taken before the read: a commit in between only makes the next call read again.
        self._last = None if token is None else (token, answer)
        return answer


def _event_record(r: Row) -> Event:
    return Event(int(r[0]), r[1], r[2], None if r[3] is None else int(r[3]), r[4],
                 json.loads(r[5]), _at(r[6]))  # fmt: skip


__all__ = [
    "DEFAULT_LEASE_TTL",
    "MAX_GENERATION",
    "MAX_LEASE_TTL",
    "RESPAWN_KINDS",
    "Clock",
    "Ledger",
    "Reread",
    "from_us",
    "system_clock",
    "to_us",
]
