"""Why a body is relieved, from what can be proven: the incident class of the relief's plan.

The cause decides what the plan says of the predecessor (its process dead or alive, its
heartbeat lost, its context under pressure), so it is read from evidence, before the fence
changes what the ledger shows:

- **crash**: every host process the body recorded (its launch witness, the host of each of
  its sessions) is gone;
- **hang**: its lease is past its expiry with no heartbeat renewing it;
- **context-pressure**: its last fill reading is at Red or Critical;
- **operator**: none of these; somebody asked for the relief.

An operator may state the class (``onstation relieve --incident``); the stated class is
used and the observed one is kept beside it, so the report shows where the two differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onstation.core.errors import OnstationError
from onstation.core.timefmt import human_time
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.body_hosts import hosts_of_lease
from onstation.ledger.relief_records import ReliefLedger

#: The incident classes a relief's plan knows (the ``--incident`` choices).
INCIDENT_CLASSES = ("context-pressure", "crash", "hang", "operator")
#: Hull tiers at which the body is relieved for its context.
_PRESSURE_TIERS = frozenset({"red", "critical"})


@dataclass(frozen=True)
class Cause:
    """The incident class, why (one line of evidence), and the predecessor's process state
    as the plan's observations name it (alive, dead or unknown)."""

    incident: str
    why: str
    process_state: str
    #: Whether any body of the generation was ever seen (a lease held by a session or launch).
    witnessed: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"incident": self.incident, "why": self.why, "processState": self.process_state}


def observed_cause(ledger: Ledger, node: str, witnesses: Any) -> Cause:
    """The cause the evidence shows for relieving ``node``'s current generation."""
    records = HarnessLedger(ledger)
    generation = ledger.get_node(node).generation
    leases = [ls for ls in ledger.leases(node) if ls.generation == generation]
    if not leases:
        return Cause("operator", f"no body ever held generation {generation}", "unknown",
                     witnessed=False)  # fmt: skip
    lease = leases[-1]
    recorded: list[dict[str, Any]] = [
        witness for _s, witness in hosts_of_lease(records, lease.lease_id)
    ]
    birth = ReliefLedger(ledger).birth(node, generation)
    if birth is not None and birth.launch_witness is not None:
        recorded.append(birth.launch_witness)
    seen = [_check(witnesses, w) for w in recorded]
    known = [s for s in seen if s is not None]
    if known and all(s.gone for s in known) and len(known) == len(seen):
        return Cause("crash", f"its host process is gone ({known[-1].reason})", "dead")
    alive = any(s.alive for s in known)
    if lease.state.value == "LIVE" and lease.expires_at <= ledger.now():
        return Cause(
            "hang",
            f"its lease expired at {human_time(lease.expires_at)} with no heartbeat renewing it",
            "alive" if alive else "unknown",
        )
    fill = records.latest_fill(node)
    if fill is not None and fill.get("generation") == generation:
        tier = str(fill.get("tier") or "").lower()
        if tier in _PRESSURE_TIERS:
            return Cause("context-pressure",
                         f"hull integrity {tier.capitalize()} at {fill['percent']:.1f} % of its "
                         "context window", "alive" if alive else "unknown")  # fmt: skip
    return Cause(
        "operator",
        "relieved on request: no crash, hang or context pressure observed",
        "alive" if alive else "unknown",
    )


def stated_cause(stated: str, observed: Cause) -> Cause:
    """The cause an operator stated, with the process state the evidence supports."""
    if stated == observed.incident:
        return observed
    state = {"crash": "dead", "hang": "unknown"}.get(stated, observed.process_state)
    if observed.process_state == "dead":
        state = "dead"  # a dead process stays dead, whatever the stated class
    return Cause(stated, f"stated by the operator (the evidence shows {observed.incident}: "
                         f"{observed.why})", state, observed.witnessed)  # fmt: skip


def _check(witnesses: Any, recorded: dict[str, Any]) -> Any:
    """The witness check of one recorded process, or None when the record is unreadable."""
    try:
        return witnesses.check(witnesses.ProcessWitness.from_json(recorded))
    except (OnstationError, ValueError, TypeError, KeyError):
        return None


__all__ = ["INCIDENT_CLASSES", "Cause", "observed_cause", "stated_cause"]
