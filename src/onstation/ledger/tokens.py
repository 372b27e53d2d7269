"""Access tokens of the operator's console (``onstation serve``; issue 15).

Every request to the service carries a bearer token. An *operator* token names a person and
may do what the operator's CLI does. An *agent* token is bound to one identity and one
generation: a body on another machine acts through the service without database credentials,
and the service checks its generation on every request, so the moment the generation is
fenced the token's requests get the same durable denial as every other write path.

A token reads ``onst_<token_id>_<secret>``. Only the SHA-256 digest of the secret is kept: the
secret is 256 random bits, so a fast digest is as strong as a password hash would be and costs
nothing per request. Creation and revocation are history events; a revoked token stays on
record and never authenticates again.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from onstation.core.errors import BadInput, Conflict
from onstation.core.names import validate_name
from onstation.ledger.backends import Row, Tx
from onstation.ledger.base import LedgerBase, _at, from_us

TYPE_CHECKING = False  # the records are built only when a method makes one
if TYPE_CHECKING:
    from onstation.ledger.token_records import AccessToken, IssuedToken

#: Every token starts with this, so a leaked one is recognisable (and secret scanners can
#: match it).
TOKEN_PREFIX = "onst_"  # noqa: S105  # a prefix, not a secret
TOKEN_KINDS = ("operator", "agent")
_ID_HEX = 16
_SECRET_BYTES = 32
#: Longest token text accepted before any parsing (a real one is about 70 characters).
MAX_TOKEN_LENGTH = 200


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def parse_token(presented: str) -> tuple[str, str] | None:
    """``(token_id, secret)`` of a well-formed token text, else None (never raises)."""
    if not isinstance(presented, str) or len(presented) > MAX_TOKEN_LENGTH:
        return None
    if not presented.startswith(TOKEN_PREFIX) or not presented.isascii():
        return None
    token_id, sep, secret = presented[len(TOKEN_PREFIX) :].partition("_")
    if not sep or len(token_id) != _ID_HEX or not secret:
        return None
    if any(c not in "0123456789abcdef" for c in token_id):
        return None
    return token_id, secret


def _record(r: Row) -> AccessToken:
    from onstation.ledger.token_records import AccessToken

    return AccessToken(str(r[0]), str(r[1]), str(r[2]), r[3],
                       None if r[4] is None else int(r[4]), _at(r[5]), str(r[6]),
                       from_us(r[7]), r[8])  # fmt: skip


class TokenStore(LedgerBase):
    """Creating, listing, revoking and checking the console's access tokens."""

    def create_operator_token(self, name: str, *, by: str) -> IssuedToken:
        """A token for the operator ``name``; its text is returned once and never kept."""
        validate_name(name, "name")
        validate_name(by, "by")
        return self._issue("operator", name, None, None, by)

    def create_agent_token(self, node: str, *, generation: int, by: str) -> IssuedToken:
        """A token bound to ``generation`` of ``node``, which must be its current generation
        (a token for a fenced generation could never act)."""
        validate_name(node, "node")
        validate_name(by, "by")
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
            raise BadInput("generation: must be a positive integer", field="generation")
        return self._issue("agent", node, node, generation, by)

    def _issue(
        self, kind: str, name: str, node: str | None, generation: int | None, by: str
    ) -> IssuedToken:
        from onstation.ledger.token_records import AccessToken, IssuedToken

        token_id = secrets.token_hex(_ID_HEX // 2)
        secret = secrets.token_urlsafe(_SECRET_BYTES)

        def body(tx: Tx, now: int) -> AccessToken:
            if node is not None:
                current = self._get_node(tx, node).generation
                if generation != current:
                    raise BadInput(
                        f"generation: {node} is at generation {current}, not {generation}",
                        field="generation",
                    )
            tx.run(self._q("token_insert"),
                   (token_id, kind, name, node, generation, _digest(secret), now, by))  # fmt: skip
            self._event(tx, now, node=node, kind="token.created", generation=generation,
                        actor=by, token_id=token_id, token_kind=kind, name=name)  # fmt: skip
            return AccessToken(token_id, kind, name, node, generation, _at(now), by, None, None)

        record = self._write(body)
        return IssuedToken(record, f"{TOKEN_PREFIX}{token_id}_{secret}")

    def tokens(self) -> list[AccessToken]:
        """Every token, revoked ones too, newest first."""
        rows = self._read_single(lambda tx, _now: tx.all(self._q("token_list")))
        return [_record(r) for r in rows]

    def token(self, token_id: str) -> AccessToken:
        """One token by its id."""
        validate_name(token_id, "token_id")
        row = self._read_single(lambda tx, _now: tx.one(self._q("token_by_id"), (token_id,)))
        if row is None:
            raise BadInput(f"no such token {token_id!r}", token_id=token_id)
        return _record(row)

    def revoke_token(self, token_id: str, *, by: str) -> AccessToken:
        """Revoke a token for good; revoking one already revoked is a conflict (exit 5)."""
        validate_name(token_id, "token_id")
        validate_name(by, "by")

        def body(tx: Tx, now: int) -> AccessToken:
            row = tx.one(self._q("token_by_id"), (token_id,))
            if row is None:
                raise BadInput(f"no such token {token_id!r}", token_id=token_id)
            if tx.one(self._q("token_revoke"), (now, by, token_id)) is None:
                raise Conflict(f"token {token_id} is already revoked")
            record = _record(row)
            self._event(tx, now, node=record.node, kind="token.revoked",
                        generation=record.generation, actor=by, token_id=token_id,
                        token_kind=record.kind, name=record.name)  # fmt: skip
            return _record(tx.one(self._q("token_by_id"), (token_id,)) or row)

        return self._write(body)

    def authenticate(self, presented: str) -> AccessToken | None:
        """The live token ``presented`` is, or None: malformed, unknown, tampered with or
        revoked all look the same to the caller (no oracle), and nothing is written."""
        parsed = parse_token(presented)
        if parsed is None:
            return None
        token_id, secret = parsed
        row = self._read_single(lambda tx, _now: tx.one(self._q("token_by_id"), (token_id,)))
        if row is None or not hmac.compare_digest(_digest(secret), str(row[9])):
            return None
        record = _record(row)
        return None if record.revoked else record


__all__ = ["MAX_TOKEN_LENGTH", "TOKEN_KINDS", "TOKEN_PREFIX", "TokenStore", "parse_token"]
