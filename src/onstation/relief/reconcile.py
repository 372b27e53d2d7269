"""The RECONCILE step, with evidence: settle what can be proven before marking the rest.

``Ledger.reconcile`` (ledger/effect_journal.py) knows only the ledger: a DISPATCHED effect of
a fenced generation becomes AMBIGUOUS, and an operator must settle it. Before that, this step
looks for evidence of what became of each dispatched call (harness/effects/outcomes.py):
the destination asked (a ``git push`` whose remote shows the intended commit is COMMITTED;
one whose remote shows every ref as before is NOT_EXECUTED) and the host's transcript (the
call's rejection: NOT_EXECUTED). What stays unproven is AMBIGUOUS as before.

The hooks use :func:`settle_call` for the live body too (relief/hooks.py): a later hook call
finds an earlier call's rejection in the transcript.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any

from onstation.core.errors import OnstationError

if TYPE_CHECKING:
    from onstation.core.types import ReconcileReport
    from onstation.ledger import Ledger
    from onstation.ledger.effect_journal import DispatchedCall


def settle_call(
    ledger: Ledger,
    call: DispatchedCall,
    *,
    by: str,
    generation: int | None = None,
    require_transcript: bool = False,
    timeout: float | None = None,
) -> str | None:
    """Settle one DISPATCHED call on the evidence there is; returns the outcome taken
    (``observed``, ``not-executed``, ``uncertain``) or None (left as it is).

    ``generation`` is the live body's own (None: a reconciler settling a fenced generation).
    With ``require_transcript`` the call is looked at only once the transcript holds its end
    (a result or a rejection): a call still running is never asked about.
    """
    from onstation.harness.effects import outcomes

    seen = outcomes.find_call_outcome(call.transcript_path, call.transcript_offset,
                                      call.tool_use_id)  # fmt: skip
    if require_transcript and (seen is None or seen.kind == "completed"):
        return None
    found: tuple[str, dict[str, Any]] | None = None
    if call.observe is not None:
        asked = outcomes.observe(
            call.observe, outcomes.OBSERVE_TIMEOUT if timeout is None else timeout
        )
        if asked is not None:
            evidence = dict(asked[1])
            if seen is not None:
                evidence["transcript"] = seen.to_json()
            found = (asked[0], evidence)
    if found is None and seen is not None and seen.kind == "declined":
        found = ("not-executed", {"transcript": seen.to_json()})
    if found is None:
        return None
    with suppress(OnstationError):  # settled meanwhile, or no longer this body's
        settled = ledger.settle_dispatched(call.effect_id, outcome=found[0], evidence=found[1],
                                           by=by, generation=generation)  # fmt: skip
        return found[0] if settled is not None else None
    return None


def observe_and_reconcile(ledger: Ledger, node: str, *, by: str) -> ReconcileReport:
    """Settle the fenced generations' dispatched calls on evidence, then reconcile the rest."""
    for call in ledger.dispatched_calls(node):
        settle_call(ledger, call, by=by)
    return ledger.reconcile(node, by=by)


__all__ = ["observe_and_reconcile", "settle_call"]
