"""The records of the console's access tokens (:mod:`onstation.ledger.tokens`).

Kept apart from the store so that a command which opens the ledger does not build these
classes (a frozen dataclass costs about an eighth of the interpreter's start-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from onstation.core.types import Record


@dataclass(frozen=True)
class AccessToken(Record):
    """A token as the ledger keeps it: who it speaks for, never its secret."""

    token_id: str
    kind: str
    name: str
    node: str | None
    generation: int | None
    created_at: datetime
    created_by: str
    revoked_at: datetime | None
    revoked_by: str | None

    @property
    def revoked(self) -> bool:
        """Whether the token was revoked (it never authenticates again)."""
        return self.revoked_at is not None


@dataclass(frozen=True)
class IssuedToken:
    """A token just created: its record and the one and only copy of its text."""

    record: AccessToken
    token: str


__all__ = ["AccessToken", "IssuedToken"]
