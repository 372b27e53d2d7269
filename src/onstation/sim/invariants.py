"""The invariants of a crash-loop simulation, checked after every step by reading the ledger.

The checker keeps its own model built from the append-only event history (never from the
ledger's counters): it reads the events committed since its last look, replays them into the
model and names every broken rule. A few rules are about what the simulation itself saw (a
write that should have been denied and was not, a denial raised but not on record); the run
reports those through :meth:`Invariants.fail`.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from onstation.core.governor import RespawnPolicy
from onstation.core.types import Event
from onstation.ledger import Ledger, to_us

#: Every invariant, by the name a failure prints.
NAMES = (
    "one-live-lease",  # at most one LIVE lease (one effect-capable generation) per identity
    "generations-increase",  # node.fenced generations strictly increase
    "no-stale-write",  # no write accepted from a generation below the current one
    "births-bounded",  # respawn.counted per identity per sliding window <= the policy's limit
    "breaker-persists",  # an opened breaker stays open (across restarts) until closed
    "no-double-commit",  # no logical effect COMMITTED twice
    "ambiguous-not-retried",  # AMBIGUOUS never followed by an automatic intend or dispatch
    "dispatched-becomes-ambiguous",  # reconcile never settles a DISPATCHED effect otherwise
    "effect-not-repeated",  # the outside world saw each logical effect at most once
    "denials-recorded",  # every denial raised is on record
    "halt-honoured",  # no admission and no new effect while a halt is in force
    "supervisors-exclusive",  # a second supervisor of the same relief gets Conflict
    "relief-completes",  # a relief ends in an outcome, never aborted by the ledger
)

#: Session ids are uuid4s made inside onstation: the one part of a run a seed does not fix.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

_REENTRY = ("effect.intended", "effect.reintended", "effect.dispatched")
_HALTED = ("lease.acquired", "effect.intended", "effect.reintended", "effect.dispatched")


@dataclass
class Invariants:
    """The model of the run, fed by the event history; ``violations`` lists what broke."""

    policy: RespawnPolicy
    cursor: int = 0
    generation: dict[str, int] = field(default_factory=dict)
    effect_state: dict[str, str] = field(default_factory=dict)
    commits: dict[str, int] = field(default_factory=dict)
    respawns: dict[str, list[int]] = field(default_factory=dict)
    breaker: dict[str, bool] = field(default_factory=dict)
    halts: dict[int, str | None] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    leases_checked: bool = False  # the LIVE-lease count was read at least once
    #: The ledger (held, so its identity cannot be reused) and its change token at the last
    #: look that read everything up to then.
    seen: tuple[Ledger, object] | None = None
    #: The replay digest of every event read so far (see :meth:`history_digest`), fed as the
    #: checks read them, so the history is not read a second time at the end.
    hashed: Any = field(default_factory=hashlib.sha256)
    hashed_events: int = 0
    hashed_through: int = 0

    def fail(self, name: str, detail: str) -> None:
        """Record one broken invariant (named as in :data:`NAMES`)."""
        assert name in NAMES, name
        self.violations.append(f"{name}: {detail}")

    # -- the event history ------------------------------------------------------------------

    def check(self, ledger: Ledger, token: object | None = None) -> None:
        """Read what was committed since the last check and test every rule against it.

        Nothing committed since the last look (the ledger's change token, SQLite's own
        counters, is unchanged): no new event and no new LIVE lease, so nothing to read.
        ``token``: the caller's own in place of the ledger's, from a caller that holds every
        connection that writes and writes nothing while the check runs (the simulation, one
        thread: :meth:`Ledger.own_changes` of each, which costs no statement); it must change
        whenever any of them committed. The two reads then see one moment without a read
        transaction around them (a BEGIN and a ROLLBACK fewer on each look)."""
        own = token is not None
        if token is None:
            token = ledger.change_token()
        seen = self.seen
        if (token is not None and seen is not None and seen[0] is ledger and seen[1] == token
                and self.leases_checked):  # fmt: skip
            return
        with contextlib.nullcontext() if own else ledger.reading():  # one moment's state
            events = ledger.events_after(self.cursor)
            # A lease becomes LIVE only by its acquisition's insert, which records
            # lease.acquired in the same transaction (ledger/queries/leases.sql, and
            # PostgreSQL's admission function): with no lease.acquired since the last look,
            # no node can hold one more LIVE lease than it did.
            acquired = not self.leases_checked or any(e.kind == "lease.acquired" for e in events)
            many = ledger.multiple_live_leases() if acquired else None
        for event in events:
            self.cursor = event.seq
            at = to_us(event.at)
            self._hash(event, at)
            self._apply(event.node, event.kind, event.generation, event.actor, event.detail,
                        at)  # fmt: skip
        if many is not None:
            self.leases_checked = True
            for node, count in many.items():
                self.fail("one-live-lease", f"{node} has {count} LIVE leases")
        # Taken before the reads: a commit between the two only makes the next look read.
        self.seen = None if token is None else (ledger, token)

    def _hash(self, event: Event, at: int) -> None:
        row = (event.seq, event.node, event.kind, event.generation, event.actor, at)
        line = _UUID.sub("<uuid>", "|".join(str(v) for v in row))
        self.hashed.update((f"\n{line}" if self.hashed_events else line).encode())
        self.hashed_events += 1
        self.hashed_through = event.seq

    def history_digest(self, ledger: Ledger) -> tuple[str, int]:
        """(SHA-256 of the whole event history, the number of events): each event's sequence
        number, node, kind, generation, actor and time in microseconds, joined by ``|``, one
        line each, with uuids masked. The events the checks have not read yet (a run that
        stopped early) are read here, for the digest only."""
        for event in ledger.events_after(self.hashed_through):
            self._hash(event, to_us(event.at))
        return self.hashed.hexdigest(), self.hashed_events

    def _apply(self, node: str | None, kind: str, generation: int | None, actor: str,
               detail: dict[str, Any], at: int) -> None:  # fmt: skip
        if kind == "node.registered" and node is not None:
            self.generation[node] = int(generation or 1)
            return
        if kind == "node.fenced" and node is not None and generation is not None:
            previous = self.generation.get(node, 0)
            if generation <= previous:
                self.fail("generations-increase",
                          f"{node} fenced to {generation} after {previous}")  # fmt: skip
            self.generation[node] = generation
            return
        if node is not None and actor.startswith(f"{node}@") and kind not in (
            "write.denied", "birth.echo_mismatch"
        ):  # fmt: skip
            acting = int(actor.rsplit("@", 1)[1])
            current = self.generation.get(node, 0)
            if acting < current:
                self.fail("no-stale-write",
                          f"{kind} accepted from {actor} while {node} is at {current}")  # fmt: skip
        if kind.startswith("effect."):
            self._effect(node, kind, detail, actor)
        if kind in _HALTED:
            active = [h for h, scope in self.halts.items() if scope is None or scope == node]
            if active:
                self.fail("halt-honoured", f"{kind} of {node} while halt {active[0]} is in force")
        if kind == "respawn.counted" and node is not None:
            if self.breaker.get(node):
                self.fail("breaker-persists", f"respawn of {node} counted with its breaker open")
            stamps = self.respawns.setdefault(node, [])
            stamps.append(at)
            self._window(node, stamps)
        elif kind == "breaker.opened" and node is not None:
            self.breaker[node] = True
        elif kind == "breaker.closed" and node is not None:
            self.breaker[node] = False
        elif kind == "halt.raised":
            self.halts[int(detail["halt_id"])] = node
        elif kind == "halt.lifted":
            self.halts.pop(int(detail["halt_id"]), None)

    def _window(self, node: str, stamps: list[int]) -> None:
        limit = self.policy.limit
        window = int(self.policy.window.total_seconds() * 1_000_000)
        ordered = sorted(stamps)
        for i in range(len(ordered) - limit):
            # limit + 1 stamps inside one window (the governor's window is (t - W, t]).
            if ordered[i + limit] - ordered[i] < window:
                self.fail("births-bounded",
                          f"{node}: {limit + 1} respawns counted within one "
                          f"{self.policy.window} window")  # fmt: skip
                return

    def _effect(self, node: str | None, kind: str, detail: dict[str, Any], actor: str) -> None:
        eid = str(detail.get("effect_id"))
        state = self.effect_state.get(eid)
        if kind in _REENTRY and state == "AMBIGUOUS":
            self.fail("ambiguous-not-retried", f"{kind} of AMBIGUOUS {eid} by {actor}")
        if detail.get("via") == "reconcile" and detail.get("previous_state") == "DISPATCHED" and (
            kind != "effect.ambiguous"
        ):  # fmt: skip
            self.fail("dispatched-becomes-ambiguous",
                      f"reconcile moved DISPATCHED {eid} to {kind}")  # fmt: skip
        if kind == "effect.committed":
            self.commits[eid] = self.commits.get(eid, 0) + 1
            if self.commits[eid] > 1:
                self.fail("no-double-commit", f"{eid} of {node} COMMITTED twice")
        self.effect_state[eid] = kind.split(".", 1)[1].upper().replace("REINTENDED", "INTENDED")

    # -- checks the run asks for ------------------------------------------------------------

    def check_breakers(self, ledger: Ledger, why: str) -> None:
        """The ledger's breakers must match what the history says an operator did."""
        for node in ledger.list_nodes():
            expected = self.breaker.get(node.node, False)
            if node.breaker_open != expected:
                now = "open" if node.breaker_open else "closed"
                left = "open" if expected else "closed"
                text = f"{node.node} breaker is {now} {why}; the operator left it {left}"
                self.fail("breaker-persists", text)
