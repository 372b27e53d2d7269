"""The commit each generation started from: the base of a body's work.

A relief's capsule carries the diff of the body's work since its generation began, so the
base is recorded once per generation, the first time it is known (a successor's launch, or
the generation's first session start in a git workspace).
"""

from __future__ import annotations

import re

from onstation.core.errors import BadInput, Conflict
from onstation.core.names import validate_name
from onstation.ledger.backends import Tx
from onstation.ledger.base import _event_json
from onstation.ledger.correspondence import Correspondence

#: A full commit id (SHA-1 or SHA-256 object format).
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _check_base(node: str, commit: str, source: str) -> None:
    """Refuse a base named badly: the node, the commit (a full id) or its source."""
    validate_name(node, "node")
    if not _COMMIT.fullmatch(commit):
        raise BadInput(f"base commit: {commit!r} is not a full commit id", field="commit")
    validate_name(source, "source")


class GenerationBases(Correspondence):
    """Generation bases over one ledger; part of :class:`~onstation.ledger.bodies.HarnessLedger`."""

    def record_base(self, node: str, generation: int, commit: str, *, source: str) -> str:
        """Record the commit ``generation`` started from, unless one is recorded; return the
        recorded one. The first record wins: a later session of the same generation (a /clear)
        started where the body already was, not where its work began."""
        _check_base(node, commit, source)

        def body(tx: Tx, now: int) -> str:
            # One statement where it records (a session start's common case: issue 14, a
            # round trip on PostgreSQL instead of four); a concurrent record of the same
            # generation is waited for and kept, not an error.
            if tx.one(self._q("generation_base_record"),
                      (generation, commit, source, now, node)) is not None:  # fmt: skip
                self.ledger._event(tx, now, node=node, kind="generation.base",
                                   generation=generation, actor=source, commit=commit)  # fmt: skip
                return commit
            known = tx.one(self._q("generation_base_of"), (node, generation))
            if known is None:
                # Nothing recorded and nothing there: only a node that does not exist.
                self.ledger._get_node(tx, node)
                raise Conflict(
                    f"the base of {node} generation {generation} was neither "
                    "recorded nor found; try again"
                )
            return str(known[0])

        return self.ledger._write(body)

    def offer_base(self, node: str, generation: int, commit: str, *, source: str) -> None:
        """Record the commit ``generation`` started from unless one is recorded, as
        :meth:`record_base` does, without saying which is recorded: a session start offers
        the head it found and needs no answer. So on PostgreSQL the record and its event are
        one statement sent without waiting for it (a round trip less in a session start's
        transaction: issue 14); on SQLite, which has no round trips, it is
        :meth:`record_base`'s statement. A node that does not exist gets no base, on both
        (the caller admitted a session of it in the same transaction)."""
        _check_base(node, commit, source)
        ledger = self.ledger

        def body(tx: Tx, now: int) -> None:
            if ledger.backend.name == "postgres":
                tx.send(self._q("pg_generation_base_offer"),
                        (generation, commit, source, now, node, source,
                         _event_json({"commit": commit})))  # fmt: skip
            elif tx.one(self._q("generation_base_record"),
                        (generation, commit, source, now, node)) is not None:  # fmt: skip
                ledger._event(tx, now, node=node, kind="generation.base",
                              generation=generation, actor=source, commit=commit)  # fmt: skip

        ledger._write(body)

    def base_of(self, node: str, generation: int) -> str | None:
        """The commit ``generation`` started from, or None when it was never learnt."""
        validate_name(node, "node")
        row = self.ledger._read_single(
            lambda tx, _now: tx.one(self._q("generation_base_of"), (node, generation))
        )
        return None if row is None else str(row[0])


__all__ = ["GenerationBases"]
