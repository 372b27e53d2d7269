"""The ledger's records, as plain immutable values shared by every layer.

Names follow the vocabulary of DESIGN.md. ``to_json`` gives the snake_case form the CLI
prints with ``--json`` and the API returns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from onstation.core.effects import EffectState
from onstation.core.leases import LeaseState


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


class Record:
    """Mixin: a dataclass record that renders itself as JSON-ready data."""

    def to_json(self) -> dict[str, Any]:
        """Snake-case keys, ISO-8601 UTC times, enum values as strings."""
        assert dataclasses.is_dataclass(self)
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class AgentNode(Record):
    """The durable worker identity: it outlives every body that carries it."""

    node: str
    role: str | None
    spawner: str | None
    generation: int
    state: str
    created_at: datetime
    breaker_open: bool = False
    breaker_reason: str | None = None


@dataclass(frozen=True)
class Actor(Record):
    """An office, role or mailbox (e.g. ``coord-auth``), held by one AgentNode."""

    actor: str
    node: str | None
    created_at: datetime


@dataclass(frozen=True)
class WorkEpisode(Record):
    """One bounded assignment of a node: the contamination boundary."""

    episode_id: int
    node: str
    objective: str
    state: str
    opened_at: datetime
    closed_at: datetime | None


@dataclass(frozen=True)
class AgentRun(Record):
    """One execution attempt: the run of one body under one lease."""

    run_id: int
    node: str
    generation: int
    lease_id: int
    episode_id: int | None
    started_at: datetime
    ended_at: datetime | None
    outcome: str | None


@dataclass(frozen=True)
class BodyLease(Record):
    """One admitted embodiment, numbered by its generation; at most one per generation."""

    lease_id: int
    node: str
    generation: int
    state: LeaseState
    holder: str | None
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    ended_at: datetime | None
    end_reason: str | None
    run_id: int | None = None


@dataclass(frozen=True)
class Grant(Record):
    """A capability issued to one generation; revoked when that generation is fenced."""

    grant_id: int
    node: str
    generation: int
    capability: str
    state: str
    issued_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True)
class Denial(Record):
    """The durable receipt of a refused write from a stale, fenced or lease-less body."""

    denial_id: int
    node: str
    presented_generation: int
    current_generation: int
    action: str
    reason: str
    at: datetime


@dataclass(frozen=True)
class Effect(Record):
    """One logical non-idempotent effect and where it stands.

    ``approval_slot`` is set only on a declared repeat (and on effects recorded before
    schema 5); ``repeat_of`` then names the effect it deliberately repeats, and
    ``repeat_reason`` says why.
    """

    effect_id: str
    node: str
    generation: int
    fingerprint: str
    operation: str
    destination: str
    arguments: Any
    approval_slot: str | None
    caller_ref: str | None
    state: EffectState
    result: Any
    created_at: datetime
    updated_at: datetime
    resolved_by: str | None = None
    resolution: str | None = None
    repeat_of: str | None = None
    repeat_reason: str | None = None


@dataclass(frozen=True)
class Event(Record):
    """One entry of the append-only history: who did what, when, under which generation."""

    seq: int
    node: str | None
    kind: str
    generation: int | None
    actor: str
    detail: dict[str, Any]
    at: datetime


@dataclass(frozen=True)
class FenceResult(Record):
    """What one fence did: the new generation and what it revoked."""

    node: str
    previous_generation: int
    generation: int
    revoked_leases: list[int] = field(default_factory=list)
    revoked_grants: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class ReconcileReport(Record):
    """What reconciling a node's fenced generations changed, effect by effect."""

    node: str
    generation: int
    ambiguous: list[str] = field(default_factory=list)
    failed_before_dispatch: list[str] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)
    unresolved_ambiguous: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RespawnStatus(Record):
    """The governor's view of one identity (a request's answer or a status query)."""

    node: str
    allowed: bool
    count_in_window: int
    limit: int
    window_seconds: int
    window_started_at: datetime | None
    reopens_at: datetime | None
    breaker_open: bool
    reason: str


@dataclass(frozen=True)
class Halt(Record):
    """An operator halt, global (node None) or for one identity."""

    halt_id: int
    node: str | None
    by: str
    why: str
    at: datetime
    lifted_at: datetime | None
    lifted_by: str | None
