"""Idempotency keys of the operator's console (``onstation serve``; issue 15).

A POST to the service may carry an ``Idempotency-Key``. The first answer to it (status and
body) is kept per (token, key) with a digest of the request; the same request again gets the
same answer without a second write, and the same key with another request is refused by the
service. The service keeps the answer in the same unit of work as the write it answers
(:meth:`LedgerBase.transaction`), so a write and its kept answer commit together or not at
all: of two racing requests with one key, the second's insert fails and its write is rolled
back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from onstation.core.errors import BadInput
from onstation.core.types import Record
from onstation.ledger.backends import Row, Tx
from onstation.ledger.base import LedgerBase, _at

#: Longest idempotency key accepted (Stripe's and the IETF draft's keys fit in far less).
MAX_KEY_LENGTH = 200
_KEY = re.compile(r"[\x21-\x7e]{1,200}")
_DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class StoredAnswer(Record):
    """The first answer the service gave to one (token, idempotency key)."""

    token_id: str
    key: str
    request_digest: str
    status: int
    body: Any
    created_at: datetime


def check_idempotency_key(key: str) -> str:
    """``key`` when it is 1 to 200 visible ASCII characters, else :class:`BadInput`."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise BadInput(
            f"Idempotency-Key: must be 1 to {MAX_KEY_LENGTH} visible ASCII characters",
            field="Idempotency-Key",
        )
    return key


def _answer(row: Row) -> StoredAnswer:
    return StoredAnswer(str(row[0]), str(row[1]), str(row[2]), int(row[3]), json.loads(row[4]),
                        _at(row[5]))  # fmt: skip


class IdempotencyStore(LedgerBase):
    """The answers kept for the service's idempotency keys."""

    def idempotent_answer(self, token_id: str, key: str) -> StoredAnswer | None:
        """The answer kept for ``key`` of ``token_id``, or None."""
        check_idempotency_key(key)
        row = self._read_single(
            lambda tx, _now: tx.one(self._q("idempotency_get"), (token_id, key))
        )
        return None if row is None else _answer(row)

    def keep_idempotent_answer(
        self, token_id: str, key: str, *, request_digest: str, status: int, body: Any,
        first_wins: bool = False,
    ) -> StoredAnswer:  # fmt: skip
        """Keep the answer to a request carrying ``key``.

        Inside a unit of work (the write it answers), a key already kept makes the insert
        fail and the unit roll back (a :class:`~onstation.core.errors.Conflict`).
        ``first_wins`` keeps it only if none is kept yet and returns the one kept (for the
        answer to a refused request, written alone after the refusal)."""
        check_idempotency_key(key)
        if not _DIGEST.fullmatch(request_digest):
            raise BadInput("request digest: must be 64 lower-case hex characters")
        if not 100 <= status <= 599:
            raise BadInput(f"status: must be an HTTP status (got {status})", field="status")
        text = json.dumps(body, sort_keys=True, default=str)

        def write(tx: Tx, now: int) -> StoredAnswer:
            name = "idempotency_insert_if_absent" if first_wins else "idempotency_insert"
            tx.run(self._q(name), (token_id, key, request_digest, status, text, now))
            row = tx.one(self._q("idempotency_get"), (token_id, key))
            assert row is not None
            return _answer(row)

        return self._write(write)


__all__ = ["MAX_KEY_LENGTH", "IdempotencyStore", "StoredAnswer", "check_idempotency_key"]
