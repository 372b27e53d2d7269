"""Hypothesis stateful test: the real ledger against a small pure model of leases and effects.

Every rule performs one operation on the ledger (on SQLite, and on PostgreSQL with fewer
examples) and on the model, and the two must agree on the outcome (which error, if any) and
on the resulting state. Invariants: at most one live lease; the generation only grows; no
write with a generation other than the live one is accepted; AMBIGUOUS is left only by an
operator.
"""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conftest import pg_available
from onstation.core.effects import EffectState
from onstation.core.errors import BadInput, BlockedByPolicy, Conflict, StaleGeneration
from onstation.core.leases import LeaseState
from onstation.ledger import Ledger

NODE = "subject"
TTL = timedelta(seconds=60)
KEYS = ["a", "b", "c"]


@dataclass
class Model:
    """What the ledger should hold, computed the simple way."""

    now: datetime
    generation: int = 1
    leases: dict[int, tuple[LeaseState, datetime]] = field(default_factory=dict)
    effects: dict[str, tuple[EffectState, int]] = field(default_factory=dict)
    #: (key, generation) whose dispatch the ledger refused to that generation for good.
    refused: set[tuple[str, int]] = field(default_factory=set)
    respawns: list[datetime] = field(default_factory=list)
    writes_accepted: list[int] = field(default_factory=list)

    def live(self, generation: int) -> bool:
        lease = self.leases.get(generation)
        return (
            generation == self.generation
            and lease is not None
            and lease[0] is LeaseState.LIVE
            and self.now < lease[1]
        )

    def expire_if_due(self, generation: int) -> None:
        lease = self.leases.get(self.generation)
        if (
            generation == self.generation
            and lease is not None
            and lease[0] is LeaseState.LIVE
            and self.now >= lease[1]
        ):
            self.leases[self.generation] = (LeaseState.EXPIRED, lease[1])


class LedgerMachine(RuleBasedStateMachine):
    """Drives one ledger and one model in lockstep."""

    url: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.clock_now = datetime(2026, 3, 1, tzinfo=UTC)
        self.ledger = Ledger.open(self.fresh_url(), clock=lambda: self.clock_now)
        self.ledger.register_node(NODE)
        self.model = Model(now=self.clock_now)

    def fresh_url(self) -> str:
        raise NotImplementedError

    def teardown(self) -> None:
        self.ledger.close()

    # -- helpers ------------------------------------------------------------------------------

    def outcome(self, action, expected: type[Exception] | None):  # type: ignore[no-untyped-def]
        if expected is None:
            return action()
        with pytest.raises(expected):
            action()
        return None

    def guarded(self, generation: int) -> type[Exception] | None:
        """The model's verdict for a guarded write, with the expiry side effect applied."""
        if self.model.live(generation):
            return None
        self.model.expire_if_due(generation)
        return StaleGeneration

    # -- rules --------------------------------------------------------------------------------

    @rule()
    def acquire(self) -> None:
        gen = self.model.generation
        expected = None if gen not in self.model.leases else Conflict
        self.outcome(lambda: self.ledger.acquire_lease(NODE, ttl=TTL), expected)
        if expected is None:
            self.model.leases[gen] = (LeaseState.LIVE, self.model.now + TTL)

    @rule(stale=st.booleans())
    def fence(self, stale: bool) -> None:
        expect = self.model.generation - 1 if stale else self.model.generation
        if expect < 1:
            return
        expected = Conflict if stale else None
        self.outcome(lambda: self.ledger.fence(NODE, expect_generation=expect), expected)
        if expected is None:
            for gen, (state, expires) in list(self.model.leases.items()):
                if state is LeaseState.LIVE:
                    self.model.leases[gen] = (LeaseState.FENCED, expires)
            self.model.generation += 1

    @rule(offset=st.integers(-2, 1))
    def renew(self, offset: int) -> None:
        gen = self.model.generation + offset
        if gen < 1:
            return
        expected = self.guarded(gen)
        self.outcome(lambda: self.ledger.renew_lease(NODE, generation=gen, ttl=TTL), expected)
        if expected is None:
            self.model.leases[gen] = (LeaseState.LIVE, self.model.now + TTL)

    @rule(offset=st.integers(-1, 0))
    def release(self, offset: int) -> None:
        gen = self.model.generation + offset
        if gen < 1:
            return
        expected = self.guarded(gen)
        self.outcome(lambda: self.ledger.release_lease(NODE, generation=gen), expected)
        if expected is None:
            self.model.leases[gen] = (LeaseState.RELEASED, self.model.leases[gen][1])

    @rule(offset=st.integers(-2, 0))
    def stale_write(self, offset: int) -> None:
        gen = self.model.generation + offset
        if gen < 1:
            return
        expected = self.guarded(gen)
        self.outcome(lambda: self.ledger.guard(NODE, generation=gen), expected)
        if expected is None:
            # An accepted write always carried the live generation.
            assert gen == self.ledger.get_node(NODE).generation
            self.model.writes_accepted.append(gen)

    @rule(key=st.sampled_from(KEYS), offset=st.integers(-1, 0))
    def intend(self, key: str, offset: int) -> None:
        gen = self.model.generation + offset
        if gen < 1:
            return
        expected = self.guarded(gen)
        current = self.model.effects.get(key)
        reintendable = {
            EffectState.INTENDED, EffectState.FAILED_BEFORE_DISPATCH, EffectState.COMPENSATED
        }  # fmt: skip
        if expected is None and current is not None and current[0] not in reintendable:
            expected = Conflict
        self.outcome(
            lambda: self.ledger.intend_effect(
                NODE, generation=gen, operation="send", destination=f"chan-{key}", arguments={}
            ),
            expected,
        )
        if expected is None:
            self.model.effects[key] = (EffectState.INTENDED, gen)

    def _advance(self, key: str, verb: str, src: EffectState, dst: EffectState) -> None:
        if key not in self.model.effects:
            return
        gen = self.model.generation
        state, owner = self.model.effects[key]
        ended = gen in self.model.leases  # one lease per generation: once gone, gone for good
        expected = self.guarded(gen)
        if expected is not None and verb == "dispatch" and state is src and owner == gen and ended:
            self.model.refused.add((key, gen))
        if expected is None and (state is not src or owner != gen):
            expected = Conflict
        effect_id = self._effect_id(key)
        method = getattr(self.ledger, f"{verb}_effect")
        self.outcome(lambda: method(effect_id, generation=gen), expected)
        if expected is None:
            self.model.effects[key] = (dst, gen)

    def _effect_id(self, key: str) -> str:
        for effect in self.ledger.effects(NODE):
            if effect.destination == f"chan-{key}":
                return effect.effect_id
        raise AssertionError(key)

    @rule(key=st.sampled_from(KEYS))
    def dispatch(self, key: str) -> None:
        self._advance(key, "dispatch", EffectState.INTENDED, EffectState.DISPATCHED)

    @rule(key=st.sampled_from(KEYS))
    def observe(self, key: str) -> None:
        self._advance(key, "observe", EffectState.DISPATCHED, EffectState.OBSERVED)

    @rule(key=st.sampled_from(KEYS))
    def commit(self, key: str) -> None:
        self._advance(key, "commit", EffectState.OBSERVED, EffectState.COMMITTED)

    @rule(key=st.sampled_from(KEYS))
    def fail(self, key: str) -> None:
        self._advance(key, "fail", EffectState.INTENDED, EffectState.FAILED_BEFORE_DISPATCH)

    @rule()
    def reconcile(self) -> None:
        self.ledger.reconcile(NODE)
        moves = {
            EffectState.INTENDED: EffectState.AMBIGUOUS,  # it may have run: no decision seen
            EffectState.DISPATCHED: EffectState.AMBIGUOUS,
            EffectState.OBSERVED: EffectState.COMMITTED,
        }
        for key, (state, gen) in list(self.model.effects.items()):
            if gen < self.model.generation and state in moves:
                refused = state is EffectState.INTENDED and (key, gen) in self.model.refused
                moved = EffectState.FAILED_BEFORE_DISPATCH if refused else moves[state]
                self.model.effects[key] = (moved, gen)

    @precondition(
        lambda self: any(s is EffectState.AMBIGUOUS for s, _ in self.model.effects.values())
    )
    @rule(observed=st.booleans())
    def operator_resolves(self, observed: bool) -> None:
        key = next(k for k, (s, _) in self.model.effects.items() if s is EffectState.AMBIGUOUS)
        outcome = "observed" if observed else "compensated"
        self.ledger.resolve_effect(self._effect_id(key), outcome=outcome, by="op", why="checked")
        gen = self.model.effects[key][1]
        dst = EffectState.COMMITTED if observed else EffectState.COMPENSATED
        self.model.effects[key] = (dst, gen)

    @rule(seconds=st.integers(-120, 120))
    def clock_jump(self, seconds: int) -> None:
        self.clock_now += timedelta(seconds=seconds)
        self.model.now = self.clock_now

    @rule()
    def respawn(self) -> None:
        window = [t for t in self.model.respawns if t > self.model.now - timedelta(hours=24)]
        expected = BlockedByPolicy if len(window) >= 3 else None
        self.outcome(lambda: self.ledger.request_respawn(NODE), expected)
        if expected is None:
            self.model.respawns.append(self.model.now)

    @rule()
    def bad_input_changes_nothing(self) -> None:
        before = len(self.ledger.history(NODE))
        with pytest.raises(BadInput):
            self.ledger.fence("../" + NODE, expect_generation=1)
        assert len(self.ledger.history(NODE)) == before

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        node = self.ledger.get_node(NODE)
        assert node.generation == self.model.generation
        leases = {ls.generation: ls.state for ls in self.ledger.leases(NODE)}
        assert leases == {g: s for g, (s, _) in self.model.leases.items()}
        assert sum(s is LeaseState.LIVE for s in leases.values()) <= 1
        effects = {
            e.destination[len("chan-") :]: (e.state, e.generation)
            for e in self.ledger.effects(NODE)
        }
        assert effects == self.model.effects


class SqliteLedgerMachine(LedgerMachine):
    def fresh_url(self) -> str:
        return str(Path(tempfile.mkdtemp(prefix="onstation-model-")) / "ledger.db")


class PostgresLedgerMachine(LedgerMachine):
    def fresh_url(self) -> str:
        from conftest import _pg_base, _with_schema
        from onstation.ledger import open_backend

        url = _with_schema(_pg_base(), f"m_{uuid.uuid4().hex[:16]}")
        backend = open_backend(url, require_migrated=False)
        backend.migrate()
        backend.close()
        self._schema_url = url
        return url

    def teardown(self) -> None:
        super().teardown()
        import psycopg

        from conftest import _pg_base

        schema = self._schema_url.rsplit("schema=", 1)[1]
        with psycopg.connect(_pg_base(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


_common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

TestSqliteLedgerModel = SqliteLedgerMachine.TestCase
TestSqliteLedgerModel.settings = settings(max_examples=60, stateful_step_count=40, **_common)

TestPostgresLedgerModel = PostgresLedgerMachine.TestCase
TestPostgresLedgerModel.settings = settings(max_examples=25, stateful_step_count=30, **_common)


@pytest.fixture(autouse=True)
def _need_pg_for_postgres_model(request: pytest.FixtureRequest) -> None:
    if "Postgres" in request.node.nodeid:
        reason = pg_available()
        if reason is not None:
            from conftest import _pg_required

            if _pg_required():
                pytest.fail(reason)
            pytest.skip(reason)
