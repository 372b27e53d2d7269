"""Reliefs, their reports, and the queue of what waits for a human.

One relief is shown whole: its record, its steps (the ``relief.*`` events of the history), the
brief or manifest it handed over, a summary of the sealed capsule, and the discontinuity
report with every loss. The brief and the report are the documents the ledger keeps; when a
ledger holds no copy (an older one), the file the relief wrote is read, bounded, as
``onstation report`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request

from onstation.api.app import iso, ledger_of
from onstation.api.auth import Caller
from onstation.core.effects import EffectState
from onstation.core.errors import BadInput
from onstation.core.names import validate_name
from onstation.ledger import Ledger
from onstation.ledger.bodies import Document, HarnessLedger
from onstation.ledger.relief_records import Relief, ReliefLedger

router = APIRouter(tags=["reliefs"])

#: Verdicts of a relief that ended without a successor and waits for an operator.
WAITING_VERDICTS = ("HIBERNATE", "QUARANTINED")
_PAGE = 1000


@router.get("/reliefs", summary="Reliefs (of one identity, in one state), oldest first")
def reliefs(
    request: Request, _caller: Caller, node: str | None = None, state: str | None = None
) -> dict[str, Any]:
    """Each relief's record, as in ``onstation report --json``."""
    if node is not None:
        validate_name(node, "node")
        ledger_of(request).get_node(node)
    rows = ReliefLedger(ledger_of(request)).reliefs(node)
    return {"reliefs": [r.to_json() for r in rows if state is None or r.state == state]}


def _relief(ledger: Ledger, relief_id: int) -> Relief:
    for relief in ReliefLedger(ledger).reliefs():
        if relief.relief_id == relief_id:
            return relief
    raise BadInput(f"no such relief {relief_id}", relief_id=relief_id)


def _steps(ledger: Ledger, relief: Relief) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    after = 0
    while page := ledger.events_of(relief.node, after=after, limit=_PAGE):
        for event in page:
            if (
                event.kind.startswith("relief.")
                and event.detail.get("relief_id") == relief.relief_id
            ):
                steps.append({
                    "step": event.kind.removeprefix("relief."), "seq": event.seq,
                    "at": iso(event.at), "generation": event.generation, "actor": event.actor,
                    "verdict": event.detail.get("verdict"),
                })  # fmt: skip
        after = page[-1].seq
    return steps


def _file_text(path: str | None) -> str | None:
    from onstation.harness.files import MAX_DOCUMENT_BYTES, read_bounded

    if not path or not Path(path).is_file():
        return None
    try:
        return read_bounded(path, MAX_DOCUMENT_BYTES, "document").decode("utf-8", "replace")
    except BadInput:
        return None


def _brief(records: HarnessLedger, relief: Relief) -> dict[str, Any] | None:
    for kind in ("brief", "manifest"):
        path = relief.detail.get(kind)
        if not isinstance(path, str):
            continue
        doc = records.latest_document(relief.node, kind)
        if doc is not None and doc.path == path:
            return {"kind": kind, "path": path, "generation": doc.generation,
                    "markdown": doc.content.get("markdown"),
                    "missing": doc.content.get("missing", []), "late": doc.late}  # fmt: skip
        return {"kind": kind, "path": path, "generation": relief.from_generation,
                "markdown": _file_text(path), "missing": None, "late": False}  # fmt: skip
    return None


def _capsule(records: HarnessLedger, relief: Relief) -> dict[str, Any] | None:
    digest = relief.detail.get("capsule_digest")
    if not isinstance(digest, str):
        return None
    try:
        stored = records.stored_object("capsule", digest)
    except BadInput:
        return {"digest": digest, "stored": False}
    payload = stored.body.get("payload", {})
    summary: dict[str, Any] = {}
    for key, value in sorted(payload.items()):
        if isinstance(value, list):
            summary[key] = len(value)
        elif isinstance(value, str | int | float | bool) or value is None:
            summary[key] = value
    artifacts = payload.get("artifacts", [])
    return {
        "digest": stored.digest, "stored": True, "node": stored.node,
        "created_at": iso(stored.at), "objective": payload.get("objective"),
        "artifacts": [{k: a.get(k) for k in ("id", "kind", "ref")} for a in artifacts
                      if isinstance(a, dict)],
        "receipts": len(stored.body.get("receipts", [])),
        "summary": summary,
    }  # fmt: skip


def losses_of(markdown: str) -> list[dict[str, str]]:
    """The losses listed in a discontinuity report's ``## Losses`` section."""
    found: list[dict[str, str]] = []
    inside = False
    for line in markdown.splitlines():
        if line.startswith("#"):
            inside = line.strip() == "## Losses"
            continue
        if inside and line.startswith("- "):
            kind, _, text = line[2:].partition(": ")
            found.append({"kind": kind.strip(), "text": text.strip()})
    return found


def _report(records: HarnessLedger, relief: Relief) -> dict[str, Any] | None:
    doc = records.latest_document(relief.node, "report")
    markdown: str | None
    if doc is not None and doc.content.get("relief_id") == relief.relief_id:
        markdown, outcome = doc.content.get("markdown"), doc.content.get("outcome")
        path: str | None = doc.path
        kept = doc.content.get("losses")
    else:
        path = relief.report_path
        markdown, outcome, kept = _file_text(path), None, None
    if markdown is None and path is None:
        return None
    losses = kept if isinstance(kept, list) else losses_of(markdown or "")
    return {"path": path, "markdown": markdown, "outcome": outcome, "losses": losses}


def _late(records: HarnessLedger, relief: Relief) -> list[Document]:
    return [
        d for d in records.late_documents(relief.node) if d.generation == relief.from_generation
    ]


@router.get("/reliefs/{relief_id}", summary="One relief: steps, verdict, brief, capsule, report")
def relief_show(request: Request, relief_id: int, _caller: Caller) -> dict[str, Any]:
    """Everything the page shows of one relief."""
    ledger = ledger_of(request)
    relief = _relief(ledger, relief_id)
    records = HarnessLedger(ledger)
    return {
        "relief": relief.to_json(), "steps": _steps(ledger, relief),
        "brief": _brief(records, relief), "capsule": _capsule(records, relief),
        "report": _report(records, relief),
        "late_evidence": [d.to_json() for d in _late(records, relief)],
    }  # fmt: skip


@router.get("/reports/{node}", summary="The discontinuity reports of the identity's reliefs")
def reports(request: Request, node: str, _caller: Caller) -> dict[str, Any]:
    """As ``onstation report NODE --json``, plus each report's text and losses."""
    validate_name(node, "node")
    ledger = ledger_of(request)
    ledger.get_node(node)
    records = HarnessLedger(ledger)
    rows = ReliefLedger(ledger).reliefs(node)
    if not rows:
        raise BadInput(f"{node} has no reliefs")
    texts = []
    for relief in rows:
        report = _report(records, relief) or {"path": None, "markdown": None, "losses": []}
        texts.append({"relief_id": relief.relief_id, "path": report["path"],
                      "markdown": report["markdown"], "losses": report["losses"]})  # fmt: skip
    return {"reliefs": [r.to_json() for r in rows],
            "late_evidence": [d.to_json() for d in records.late_documents(node)],
            "reports": texts}  # fmt: skip


@router.get("/queue", summary="What waits for a human")
def queue(request: Request, _caller: Caller) -> dict[str, Any]:
    """AMBIGUOUS effects, reliefs that ended HIBERNATE or QUARANTINED (the newest relief of
    their identity), open breakers and the halts in force."""
    ledger = ledger_of(request)
    nodes = ledger.list_nodes()
    ambiguous = [e.to_json() for n in nodes
                 for e in ledger.effects(n.node, state=EffectState.AMBIGUOUS)]  # fmt: skip
    newest: dict[str, Relief] = {}
    for relief in ReliefLedger(ledger).reliefs():
        newest[relief.node] = relief
    waiting = [r.to_json() for r in newest.values()
               if r.verdict in WAITING_VERDICTS or r.state in WAITING_VERDICTS]  # fmt: skip
    return {
        "ambiguous_effects": ambiguous,
        "reliefs": waiting,
        "breakers": [n.to_json() for n in nodes if n.breaker_open],
        "halts": [h.to_json() for h in ledger.halts()],
    }


__all__ = ["WAITING_VERDICTS", "losses_of", "router"]
