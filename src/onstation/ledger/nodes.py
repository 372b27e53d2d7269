"""Identities, actors, work episodes and runs."""

from __future__ import annotations

from onstation.core.errors import (
    BadInput,
    Conflict,
)
from onstation.core.names import validate_free_text, validate_name
from onstation.core.types import (
    Actor,
    AgentNode,
    AgentRun,
    WorkEpisode,
)
from onstation.ledger.backends import Tx
from onstation.ledger.base import (
    LedgerBase,
    _at,
    from_us,
)


class NodeRecords(LedgerBase):
    """Identities, actors, work episodes and runs."""

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
            if tx.one(self._q("node_exists"), (name,)) is not None:
                raise Conflict(f"node {name!r} is already registered", node=name)
            tx.run(self._q("node_insert"), (name, role, spawner, now))
            self._event(
                tx, now, node=name, kind="node.registered", generation=1, actor=by,
                role=role, spawner=spawner,
            )  # fmt: skip
            return self._get_node(tx, name)

        return self._write(body)

    def get_node(self, name: str) -> AgentNode:
        """One identity as it stands now."""
        validate_name(name, "node")
        return self._read_single(lambda tx, _now: self._get_node(tx, name))

    def generation_of(self, name: str) -> int:
        """The identity's current generation: :meth:`get_node`'s ``generation`` alone, for a
        caller that asks it before each act of a body (the simulator's bodies do)."""
        validate_name(name, "node")

        def body(tx: Tx, _now: int) -> int:
            row = tx.one(self._q("node_generation"), (name,))
            if row is None:
                raise BadInput(f"no such node {name!r}", node=name)
            return int(row[0])

        return self._read_single(body)

    def list_nodes(self) -> list[AgentNode]:
        """Every identity, by name."""
        return self._read_single(
            lambda tx, _now: [self._node(r) for r in tx.all(self._q("nodes_all"))]
        )

    def add_actor(self, actor: str, *, node: str | None = None, by: str = "operator") -> Actor:
        """Record an office or mailbox, optionally held by a node."""
        validate_name(actor, "actor")
        if node is not None:
            validate_name(node, "node")

        def body(tx: Tx, now: int) -> Actor:
            if node is not None:
                self._get_node(tx, node)
            if tx.one(self._q("actor_exists"), (actor,)) is not None:
                raise Conflict(f"actor {actor!r} already exists", actor=actor)
            tx.run(self._q("actor_insert"), (actor, node, now))
            self._event(tx, now, node=node, kind="actor.added", generation=None, actor=by,
                        name=actor)  # fmt: skip
            return Actor(actor=actor, node=node, created_at=_at(now))

        return self._write(body)

    def list_actors(self) -> list[Actor]:
        """Every actor."""
        return self._read_single(
            lambda tx, _now: [
                Actor(actor=r[0], node=r[1], created_at=_at(r[2]))
                for r in tx.all(self._q("actors_all"))
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
            if tx.one(self._q("episode_open_exists"), (node,)) is not None:
                raise Conflict(f"node {node!r} already has an open episode", node=node)
            row = tx.one(self._q("episode_insert"), (node, objective, now))
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
            row = tx.one(self._q("episode_open_of_node"), (node,))
            if row is None:
                raise Conflict(f"node {node!r} has no open episode", node=node)
            tx.run(self._q("episode_settle"), (now, row[0]))
            self._event(tx, now, node=node, kind="episode.settled", generation=None, actor=by,
                        episode_id=int(row[0]))  # fmt: skip
            return WorkEpisode(int(row[0]), node, row[1], "SETTLED", _at(row[2]), _at(now))

        return self._write(body)

    def episodes(self, node: str, *, open_only: bool = False) -> list[WorkEpisode]:
        """The node's episodes, oldest first; ``open_only``: only the open one (at most one),
        read without the settled ones, however many there are."""
        validate_name(node, "node")
        sql = self._q("episodes_open_of_node" if open_only else "episodes_of_node")

        def body(tx: Tx, _now: int) -> list[WorkEpisode]:
            rows = tx.all(sql, (node,))
            if not rows:
                self._require_node(tx, node)
            return [
                WorkEpisode(int(r[0]), r[1], r[2], r[3], _at(r[4]), from_us(r[5])) for r in rows
            ]

        return self._read_single(body)

    def runs(self, node: str) -> list[AgentRun]:
        """The node's execution attempts, oldest first."""
        validate_name(node, "node")

        def body(tx: Tx, _now: int) -> list[AgentRun]:
            rows = tx.all(self._q("runs_of_node"), (node,))
            if not rows:
                self._require_node(tx, node)
            return [
                AgentRun(int(r[0]), r[1], int(r[2]), int(r[3]),
                         None if r[4] is None else int(r[4]), _at(r[5]), from_us(r[6]), r[7])
                for r in rows
            ]  # fmt: skip

        return self._read_single(body)
