"""The team lead: a status table of the team, and the supervising loop that relieves bodies.

The loop watches the ledger, not the agents: a ``hull.tier`` event at Red or Critical for a
node's current generation, or a ``respawn_triggered`` message from a coordinator, starts a
relief (Critical skips the wait for a brief). A halt in force stops the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from onstation.core.errors import BlockedByPolicy, Conflict, OnstationError
from onstation.core.timefmt import human_time
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.relief_records import ReliefLedger


def team_rows(
    ledger: Ledger, nodes: list[str] | None = None, *, detail: bool = False
) -> list[dict[str, Any]]:
    """One row per identity: generation, tier, body, last heartbeat, open effects.

    ``detail`` adds what the console's team view shows beside (the reading, the lease, the
    birth's witnesses, the heartbeat's age, breaker and halt, the open effects themselves),
    from the same reads: each identity costs the same few indexed reads however long its
    history."""
    with ledger.reading():  # one read transaction for every identity's reads
        return _team_rows(ledger, nodes, detail)


def _team_rows(ledger: Ledger, nodes: list[str] | None, detail: bool) -> list[dict[str, Any]]:
    records = HarnessLedger(ledger)
    reliefs = ReliefLedger(ledger)
    now = ledger.now() if detail else None
    halts = ledger.halts() if detail else []
    rows = []
    for node in ledger.list_nodes():
        if nodes is not None and node.node not in nodes:
            continue
        lease = ledger.live_lease(node.node)
        fill = records.latest_fill(node.node)
        effects = ledger.open_effects(node.node)
        birth = reliefs.birth(node.node, node.generation)
        witness = None
        if birth is not None and birth.launch_witness is not None:
            seen = birth.launch_witness
            witness = f"pid {seen.get('pid')} on {seen.get('host')}"
        row: dict[str, Any] = {
            "node": node.node,
            "role": node.role,
            "generation": node.generation,
            "tier": None if fill is None else f"{fill['tier']} {float(fill['percent']):.0f}%",
            "body": None if lease is None else lease.holder,
            "witness": witness,
            "heartbeat": None if lease is None else lease.renewed_at.strftime("%H:%M:%S"),
            # The same moment in the one human format (what the team table shows).
            "heartbeat_at": None if lease is None else human_time(lease.renewed_at),
            "open_effects": len(effects),
            "ambiguous": sum(e.state.value == "AMBIGUOUS" for e in effects),
        }
        if detail:
            assert now is not None
            row.update({
                "tier_name": None if fill is None else fill["tier"],
                "percent": None if fill is None else float(fill["percent"]),
                "fill": fill,
                "lease": None if lease is None else lease.to_json(),
                "witnesses": None if birth is None else {
                    "launch_witness": birth.launch_witness,
                    "answer_witness": birth.answer_witness, "birth_state": birth.state,
                },
                "heartbeat_age_s": (None if lease is None
                                    else round((now - lease.renewed_at).total_seconds(), 3)),
                "breaker_open": node.breaker_open,
                "halted": any(h.node is None or h.node == node.node for h in halts),
                "effects": [e.to_json() for e in effects],
            })  # fmt: skip
        rows.append(row)
    return rows


class _TierWatch:
    """The newest supervised Red or Critical hull tier of each (node, generation), kept from
    the history as it grows: each poll reads only the events since the last one (the whole
    history per node and poll grew with it)."""

    def __init__(self) -> None:
        self.cursor: dict[str, int] = {}
        self.newest: dict[tuple[str, int], Any] = {}

    def alarm(self, ledger: Ledger, node: str, generation: int) -> Any:
        after = self.cursor.get(node, 0)
        # Every new event, not only hull.tier ones: the cursor then moves past whatever
        # happened (a kind filter would rescan everything since the last tier each poll).
        while page := ledger.events_of(node, after=after, limit=1000):
            for event in page:
                if (
                    event.kind == "hull.tier"
                    and event.generation is not None
                    and event.detail.get("tier") in ("red", "critical")
                    # A body that relieves itself (not supervised) is left to do so; the
                    # lead acts when it is told (respawn_triggered) or for a supervised body.
                    and event.detail.get("supervised", True)
                ):
                    self.newest[(node, event.generation)] = event
            after = page[-1].seq
        self.cursor[node] = after
        return self.newest.get((node, generation))


def _due(
    ledger: Ledger, node: str, handled: set[tuple[str, int]], watch: _TierWatch
) -> tuple[str, bool] | None:
    """(cause, emergency) when ``node`` needs a relief for its hull tier now."""
    current = ledger.get_node(node).generation
    if (node, current) in handled:
        return None
    event = watch.alarm(ledger, node, current)
    if event is None:
        return None
    return f"hull integrity {event.detail['tier']}", event.detail["tier"] == "critical"


def _dead(ledger: Ledger, node: str, handled: set[tuple[str, int]], witnesses: Any) -> str | None:
    """The incident class when ``node``'s current body is gone ("crash": its process witness
    says so) or silent ("hang": its heartbeat is older than its lease); else None."""
    current = ledger.get_node(node).generation
    if (node, current) in handled:
        return None
    lease = next((ls for ls in ledger.leases(node)
                  if ls.generation == current and ls.state.value == "LIVE"), None)  # fmt: skip
    if lease is None or (lease.holder or "").startswith("relief "):
        return None  # no body, or a relief holds the generation for its successor
    birth = ReliefLedger(ledger).birth(node, current)
    if birth is not None and birth.state == "PROVISIONAL":
        return None  # the relief that launched it judges its birth
    if birth is not None and birth.launch_witness is not None:
        seen = witnesses.check(witnesses.ProcessWitness.from_json(birth.launch_witness))
        if seen.gone:
            return "crash"
    if lease.expires_at <= ledger.now():
        return "hang"
    return None


def supervise(
    ledger: Ledger,
    *,
    nodes: list[str] | None,
    harness: str | None,
    poll: float,
    once: bool,
    max_seconds: float | None,
    db: str | None,
    say: Callable[[str], None],
    brief_wait: float = 30.0,
    challenge_wait: float = 60.0,
    shutdown_wait: float = 10.0,
    launch_args: tuple[str, ...] = (),
    launch_args_for: dict[str, tuple[str, ...]] | None = None,
    on_outcome: Callable[[Any], None] | None = None,
    stop: Callable[[], bool] | None = None,
    lead: str = "team-lead",
    witnesses: Any = None,
) -> list[str]:
    """Watch and relieve until halted (or once / for ``max_seconds``); returns what it did.

    ``harness`` None relieves each body with what it runs under (recorded at its admission
    or launch); a body with nothing recorded is not relieved, and the operator is told.
    """
    if witnesses is None:
        from onstation.harness import witness as witnesses
    actions: list[str] = []
    waits = (brief_wait, challenge_wait, shutdown_wait)
    handled: set[tuple[str, int]] = set()
    watch = _TierWatch()  # the hull tiers seen so far, read incrementally
    started = time.monotonic()
    records = HarnessLedger(ledger)

    def relieve(node: str, cause: str, emergency: bool, incident: str, kind: str) -> None:
        handled.add((node, ledger.get_node(node).generation))
        args = (launch_args_for or {}).get(node, launch_args)
        _relieve(ledger, node, cause, emergency, harness, db, say, actions, waits, args,
                 on_outcome, incident=incident, respawn_kind=kind, by=lead)  # fmt: skip

    while True:
        if any(h.node is None for h in ledger.halts()):
            actions.append("halt in force: supervision stopped")
            say(actions[-1])
            break
        watched = nodes if nodes is not None else [n.node for n in ledger.list_nodes()]
        for message in records.take_messages(lead, delivered_to="supervise"):
            request = _relief_request(ledger, message, watched)
            if request is None:
                if message.kind not in ("respawn_triggered", "relief_requested"):
                    say(f"lead: {message.kind} from {message.sender}: {message.body[:300]}")
                continue
            if isinstance(request, str):
                actions.append(request)
                say(actions[-1])
                continue
            cause, kind = request
            handled.discard((message.sender, ledger.get_node(message.sender).generation))
            what = "respawn" if kind == "coordinator" else "relief"
            actions.append(f"{message.sender}: {what} requested by itself")
            say(actions[-1])
            relieve(message.sender, cause, False, "context-pressure", kind)
        for node in watched:
            incident = _dead(ledger, node, handled, witnesses)
            if incident is not None:
                what = "its process is gone" if incident == "crash" else "its heartbeat stopped"
                actions.append(f"{node}: body lost ({incident}: {what})")
                say(actions[-1])
                relieve(node, f"body lost ({incident})", True, incident, "relief")
                continue
            due = _due(ledger, node, handled, watch)
            if due is None:
                continue
            cause, emergency = due
            relieve(node, cause, emergency, "context-pressure", "relief")
        if once or (max_seconds is not None and time.monotonic() - started >= max_seconds):
            break
        if stop is not None and stop():
            break
        time.sleep(poll)
    return actions


def _relief_request(ledger: Ledger, message: Any, watched: list[str]) -> Any:
    """(cause, respawn kind) when ``message`` asks the lead for a relief it should act on; a
    string saying why it is ignored; None when it is no relief request at all."""
    if message.kind == "respawn_triggered":
        cause, kind = "coordinator self-respawn", "coordinator"
    elif message.kind == "relief_requested":
        cause, kind = "relief requested by itself (turnover brief written)", "relief"
    else:
        return None
    if message.sender not in watched:
        return f"{message.sender}: {message.kind} ignored: not a watched identity"
    current = ledger.get_node(message.sender).generation
    if message.sender_generation != current:
        # Only the identity's live body may ask for its own relief.
        return (
            f"{message.sender}: {message.kind} ignored: sent as generation "
            f"{message.sender_generation}, current generation is {current}"
        )
    return cause, kind


def _relieve(ledger: Ledger, node: str, cause: str, emergency: bool, harness: str | None,
             db: str | None, say: Callable[[str], None], actions: list[str],
             waits: tuple[float, float, float], launch_args: tuple[str, ...],
             on_outcome: Callable[[Any], None] | None = None, *, incident: str,
             respawn_kind: str, by: str) -> None:  # fmt: skip
    from onstation.harness.launch import launcher_for
    from onstation.relief.relieve import Relief, ReliefOptions

    brief_wait, challenge_wait, shutdown_wait = waits
    options = ReliefOptions(
        launcher=None if harness is None else launcher_for(harness), by=by, cause=cause,
        incident=incident, respawn_kind=respawn_kind, emergency=emergency,
        brief_wait=brief_wait, challenge_wait=challenge_wait, shutdown_wait=shutdown_wait,
        db=db, launch_args=launch_args, progress=lambda t: say(f"  {node}: {t}"),
    )  # fmt: skip
    try:
        outcome = Relief(ledger, node, options).run()
    except (Conflict, BlockedByPolicy) as exc:
        actions.append(f"{node}: relief not started: {exc.message}")
    except OnstationError as exc:
        actions.append(f"{node}: relief failed: {exc.message}")
    else:
        if on_outcome is not None:
            on_outcome(outcome)
        actions.append(
            f"{node}: relieved ({cause}): {outcome.verdict}, {outcome.state}, generation "
            f"{outcome.from_generation} -> {outcome.to_generation}"
        )
    say(actions[-1])
