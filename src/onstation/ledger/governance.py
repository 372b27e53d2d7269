"""The respawn governor, the crash-loop breaker and the halt gate."""

from __future__ import annotations

import dataclasses

from onstation.core.errors import (
    BadInput,
    BlockedByPolicy,
)
from onstation.core.governor import RespawnPolicy, decide_respawn
from onstation.core.names import validate_free_text, validate_name
from onstation.core.timefmt import human_time
from onstation.core.types import (
    AgentNode,
    Halt,
    RespawnStatus,
)
from onstation.ledger.backends import Tx
from onstation.ledger.base import (
    RESPAWN_KINDS,
    LedgerBase,
    _at,
    _CommitThenRaise,
)


class Governance(LedgerBase):
    """The respawn governor, the crash-loop breaker and the halt gate."""

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
                self._q("respawns_since"),
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
                    f"; reopens at {human_time(status.reopens_at)}" if status.reopens_at else ""
                )
                raise _CommitThenRaise(
                    BlockedByPolicy(
                        f"respawn of {node!r} blocked: {status.reason}{reopens}",
                        **{k: v for k, v in status.to_json().items() if k != "reason"},
                        reason=status.reason,
                    )
                )
            tx.run(self._q("respawn_insert"), (node, now, by, kind))
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
                self._q("breaker_set"),
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
            row = tx.one(self._q("halt_active_in_scope"), (node, node))
            if row is not None:
                return self._halt(row)
            created = tx.one(self._q("halt_insert"), (node, by, why, now))
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
            rows = tx.all(self._q("halt_lift_scope"), (now, by, node, node))
            for r in rows:
                self._event(tx, now, node=node, kind="halt.lifted", generation=None, actor=by,
                            halt_id=int(r[0]))  # fmt: skip
            return [self._halt(r) for r in rows]

        return self._write(body)

    def halts(self, *, active_only: bool = True) -> list[Halt]:
        """Halts on record (by default only those in force)."""
        sql = self._q("halts_in_force" if active_only else "halts_all")
        return self._read_single(lambda tx, _now: [self._halt(r) for r in tx.all(sql)])
