"""Reading routes: nodes, the team view, bodies and leases, effects, messages, halts, the
hull series of one identity, the history, tokens.

Each answer uses the keys of the CLI's ``--json`` for the same noun (the records'
``to_json()``); the team view is ``onstation team status --json``'s rows with what the page
needs besides (the tier's name and percent, the lease, the witnesses, the heartbeat's age,
the open effects themselves, whether a halt blocks the identity).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from onstation.api.app import iso, ledger_of
from onstation.api.auth import Caller, operator_name
from onstation.core.effects import EffectState
from onstation.core.hull import PRESETS, TierPolicy, classify
from onstation.core.names import validate_name
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.relief_records import ReliefLedger

router = APIRouter(tags=["read"])

MAX_PAGE = 1000
_STATES = "|".join(s.value for s in EffectState)


@router.get("/nodes", summary="Every identity")
def nodes(request: Request, _caller: Caller) -> dict[str, Any]:
    """As ``onstation node list --json``."""
    return {"nodes": [n.to_json() for n in ledger_of(request).list_nodes()]}


@router.get("/nodes/{node}", summary="One identity, its live body and its effects in flight")
def node_show(request: Request, node: str, _caller: Caller) -> dict[str, Any]:
    """As ``onstation node show --json``."""
    validate_name(node, "node")
    ledger = ledger_of(request)
    current = ledger.get_node(node)
    lease = ledger.live_lease(node)
    effects = ledger.effects(node)
    return current.to_json() | {
        "live_lease": None if lease is None else lease.to_json(),
        "open_effects": [e.to_json() for e in effects if e.state is not EffectState.COMMITTED],
        "respawn": ledger.respawn_status(node).to_json(),
    }


@router.get("/team", summary="The team: each identity's generation, tier, body, heartbeat")
def team(request: Request, _caller: Caller) -> Response:
    """``onstation team status --json``'s rows, each with the page's extra keys."""
    from onstation.relief.team import team_rows

    ledger = ledger_of(request)
    rows = team_rows(ledger, detail=True)
    # Already JSON-ready (the records' to_json): encoded as it is, not walked again by
    # FastAPI's encoder, which cost more than the ledger's reads for a team of 100.
    body = json.dumps({"now": iso(ledger.now()), "team": rows}, default=str)
    return Response(body, media_type="application/json")


@router.get("/nodes/{node}/leases", summary="Every lease (body) the identity ever had")
def leases(request: Request, node: str, _caller: Caller) -> dict[str, Any]:
    """As ``onstation lease list --json``."""
    validate_name(node, "node")
    ledger = ledger_of(request)
    ledger.get_node(node)
    return {"leases": [ls.to_json() for ls in ledger.leases(node)]}


@router.get("/nodes/{node}/bodies", summary="The harness sessions bound as the identity's bodies")
def bodies(request: Request, node: str, _caller: Caller) -> dict[str, Any]:
    """Each harness session (a Claude Code session, a Codex thread) bound to the identity."""
    validate_name(node, "node")
    ledger = ledger_of(request)
    ledger.get_node(node)
    return {"bodies": [s.to_json() for s in HarnessLedger(ledger).sessions(node)]}


@router.get("/nodes/{node}/denials", summary="The identity's durable denial receipts")
def denials(request: Request, node: str, _caller: Caller) -> dict[str, Any]:
    """As ``onstation denials NODE --json``."""
    validate_name(node, "node")
    ledger = ledger_of(request)
    ledger.get_node(node)
    return {"denials": [d.to_json() for d in ledger.denials(node)]}


@router.get("/nodes/{node}/notes", summary="Decisions and notes recorded for the successor")
def notes(request: Request, node: str, _caller: Caller) -> dict[str, Any]:
    """Every decision and note of the identity."""
    validate_name(node, "node")
    ledger = ledger_of(request)
    ledger.get_node(node)
    return {"notes": [n.to_json() for n in HarnessLedger(ledger).notes(node)]}


def _bands(policy: TierPolicy) -> dict[str, Any]:
    return {"name": policy.name, "amber": policy.amber, "red": policy.red,
            "critical": policy.critical}  # fmt: skip


@router.get("/nodes/{node}/hull", summary="Context fill over time, with reliefs and generations")
def hull(request: Request, node: str, _caller: Caller) -> dict[str, Any]:
    """The identity's hull tier events (time, percent, tier), its reliefs' times and its
    generations' spans, for the page's plot. ``policy`` is the preset every point fits."""
    validate_name(node, "node")
    ledger = ledger_of(request)
    current = ledger.get_node(node)
    series: list[dict[str, Any]] = []
    after = 0
    while page := ledger.events_of(node, after=after, kind="hull.tier", limit=MAX_PAGE):
        for event in page:
            percent = event.detail.get("percent")
            if isinstance(percent, int | float):
                series.append({
                    "seq": event.seq, "at": iso(event.at), "generation": event.generation,
                    "percent": float(percent), "tier": event.detail.get("tier"),
                })  # fmt: skip
        after = page[-1].seq
    fits = [p for p in PRESETS.values()
            if all(classify(s["percent"], p).value == s["tier"] for s in series)]  # fmt: skip
    spans: dict[int, dict[str, Any]] = {}
    for lease in ledger.leases(node):
        span = spans.setdefault(lease.generation,
                                {"generation": lease.generation, "from": lease.acquired_at,
                                 "to": lease.ended_at, "open": False})  # fmt: skip
        span["from"] = min(span["from"], lease.acquired_at)
        if lease.ended_at is None:
            span["open"] = True
        elif span["to"] is None or lease.ended_at > span["to"]:
            span["to"] = lease.ended_at
    generations = []
    for span in sorted(spans.values(), key=lambda s: s["generation"]):
        generations.append({"generation": span["generation"], "from": iso(span["from"]),
                            "to": None if span["open"] else iso(span["to"])})  # fmt: skip
    relief_rows = [
        {key: r.to_json()[key] for key in ("relief_id", "started_at", "finished_at",
                                           "from_generation", "to_generation", "state",
                                           "verdict")}
        for r in ReliefLedger(ledger).reliefs(node)
    ]  # fmt: skip
    return {
        "node": node, "generation": current.generation, "series": series,
        "reliefs": relief_rows, "generations": generations,
        "policy": _bands(fits[0]) if series and len(fits) == 1 else None,
        "presets": {name: _bands(p) for name, p in PRESETS.items()},
    }  # fmt: skip


@router.get("/effects", summary="Effects, of one identity or all, optionally in one state")
def effects(
    request: Request, _caller: Caller,
    state: Annotated[str | None, Query(pattern=f"^({_STATES})$")] = None,
    node: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """As ``onstation effect list --json`` (every identity's when ``node`` is not given)."""
    ledger = ledger_of(request)
    wanted = None if state is None else EffectState(state)
    if node is not None:
        validate_name(node, "node")
        names = [node]
    else:
        names = [n.node for n in ledger.list_nodes()]
    rows = [e.to_json() for name in names for e in ledger.effects(name, state=wanted)]
    return {"effects": rows}


@router.get("/effects/{effect_id}", summary="One effect, whole")
def effect_show(request: Request, effect_id: str, _caller: Caller) -> dict[str, Any]:
    """As ``onstation effect show --json``."""
    validate_name(effect_id, "effect id")
    return ledger_of(request).get_effect(effect_id).to_json()


@router.get("/messages", summary="Every message to one actor or identity")
def messages(request: Request, recipient: str, _caller: Caller) -> dict[str, Any]:
    """As ``onstation message list RECIPIENT --json``."""
    validate_name(recipient, "recipient")
    rows = HarnessLedger(ledger_of(request)).messages(recipient)
    return {"messages": [m.to_json() for m in rows]}


@router.get("/halts", summary="Halts in force (all=true: lifted ones too)")
def halts(request: Request, _caller: Caller, all: bool = False) -> dict[str, Any]:
    """As ``onstation halts --json``."""
    return {"halts": [h.to_json() for h in ledger_of(request).halts(active_only=not all)]}


@router.get("/history", summary="The history's events after a sequence number")
def history(
    request: Request, _caller: Caller,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 500,
    node: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Oldest first; ask again from ``last_seq`` for more."""
    ledger = ledger_of(request)
    if node is None:
        rows = ledger.events_after(after, limit=limit)
    else:
        validate_name(node, "node")
        rows = ledger.events_of(node, after=after, limit=limit)
    return {"events": [e.to_json() for e in rows],
            "last_seq": rows[-1].seq if rows else after}  # fmt: skip


@router.get("/tokens", summary="Every access token, revoked ones too (operators only)")
def tokens(request: Request, caller: Caller) -> dict[str, Any]:
    """As ``onstation token list --json`` (never a token's text)."""
    operator_name(caller, "list tokens")
    return {"tokens": [t.to_json() for t in ledger_of(request).tokens()]}


__all__ = ["router"]
