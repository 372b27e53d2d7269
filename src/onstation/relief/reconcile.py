"""The RECONCILE step, with evidence: settle what can be proven before marking the rest.

``Ledger.reconcile`` (ledger/effect_journal.py) knows only the ledger: a DISPATCHED effect of
a fenced generation becomes AMBIGUOUS, and an operator must settle it. Before that, this step
looks for evidence of what became of each dispatched call (harness/effects/outcomes.py):
the destination asked (a ``git push`` whose remote shows the intended commit is COMMITTED;
one whose remote shows every ref as before is NOT_EXECUTED) and the host's transcript (the
call's rejection: NOT_EXECUTED). What stays unproven is AMBIGUOUS as before; for a push, the
effect's result then says why its remote proved nothing (``unobserved``) and keeps how to ask
it again, so a later reconcile that finds the push on the remote settles it by itself.

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

#: The key, inside an AMBIGUOUS effect's ``uncertain`` result, under which this step keeps why
#: the destination proved nothing (``why``) and how to ask it again (``observe``).
UNOBSERVED = "unobserved"


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
    return _settle(ledger, call, by=by, generation=generation,
                   require_transcript=require_transcript, timeout=timeout)[0]  # fmt: skip


def _settle(
    ledger: Ledger,
    call: DispatchedCall,
    *,
    by: str,
    generation: int | None,
    require_transcript: bool,
    timeout: float | None,
) -> tuple[str | None, dict[str, Any] | None]:
    """:func:`settle_call`, and, when the call was left as it is, what the destination said
    (its ``why``; None when it was not asked)."""
    from onstation.harness.effects import outcomes

    seen = outcomes.find_call_outcome(call.transcript_path, call.transcript_offset,
                                      call.tool_use_id)  # fmt: skip
    if require_transcript and (seen is None or seen.kind == "completed"):
        return None, None
    found: tuple[str, dict[str, Any]] | None = None
    unproven: dict[str, Any] | None = None
    if call.observe is not None:
        outcome, asked = outcomes.ask(
            call.observe, outcomes.OBSERVE_TIMEOUT if timeout is None else timeout
        )
        evidence = dict(asked)
        if seen is not None:
            evidence["transcript"] = seen.to_json()
        if outcome is not None:
            found = (outcome, evidence)
        else:
            unproven = evidence
    if found is None and seen is not None and seen.kind == "declined":
        found = ("not-executed", {"transcript": seen.to_json()})
    if found is None:
        return None, unproven
    with suppress(OnstationError):  # settled meanwhile, or no longer this body's
        settled = ledger.settle_dispatched(call.effect_id, outcome=found[0], evidence=found[1],
                                           by=by, generation=generation)  # fmt: skip
        return (found[0] if settled is not None else None), None
    return None, None


def observe_and_reconcile(ledger: Ledger, node: str, *, by: str) -> ReconcileReport:
    """Settle the fenced generations' effects on evidence, then reconcile the rest.

    First the AMBIGUOUS pushes this step could not observe before are asked again: one whose
    remote now shows the intended commit is COMMITTED, no operator needed. Then each
    dispatched call is settled on evidence; a push whose remote proves nothing becomes
    AMBIGUOUS here, its result saying why and keeping how to ask again. The ledger's reconcile
    does the rest (a call with no way to be asked: AMBIGUOUS, as before).
    """
    reobserve_ambiguous(ledger, node, by=by)
    for call in ledger.dispatched_calls(node):
        taken, unproven = _settle(ledger, call, by=by, generation=None,
                                  require_transcript=False, timeout=None)  # fmt: skip
        if taken is None and unproven is not None:
            unobserved = {**unproven, "observe": call.observe}
            with suppress(OnstationError):  # settled meanwhile: the reconcile sees the rest
                ledger.settle_dispatched(call.effect_id, outcome="uncertain",
                                         evidence={UNOBSERVED: unobserved}, by=by)  # fmt: skip
    return ledger.reconcile(node, by=by)


def reobserve_ambiguous(ledger: Ledger, node: str, *, by: str) -> list[str]:
    """Ask again the destination of each AMBIGUOUS effect of a fenced generation whose result
    keeps how (:data:`UNOBSERVED`) and whose remote still leads to the effect's destination:
    COMMITTED when it shows the effect done, recorded as observed by ``"<by> (reconcile)"``
    with what the remote showed. Returns the ids settled; anything else stays AMBIGUOUS, for
    an operator."""
    from onstation.core.effects import EffectState
    from onstation.harness.effects import outcomes

    current = ledger.get_node(node).generation
    settled: list[str] = []
    for effect in ledger.effects(node, state=EffectState.AMBIGUOUS):
        plan = unobserved_plan(effect.result)
        if plan is None or effect.generation >= current:
            continue
        # The remote is asked by name; the name must still lead where the push went (a remote
        # re-pointed since, at a mirror say, proves nothing about this effect).
        where = outcomes.remote_destination(plan["directory"], plan["remote"], 5.0)
        if where != effect.destination:
            continue
        outcome, evidence = outcomes.ask(plan, outcomes.OBSERVE_TIMEOUT)
        if outcome != "observed":
            continue
        refs = evidence.get("refs") or {}
        shown = ", ".join(f"{ref} at {entry.get('now')}" for ref, entry in sorted(refs.items()))
        why = (f"observed at its destination by reconcile: git ls-remote "
               f"{evidence.get('remote')} shows {shown}")  # fmt: skip
        with suppress(OnstationError):  # resolved meanwhile by an operator
            ledger.resolve_effect(effect.effect_id, outcome="observed",
                                  by=f"{by[:240]} (reconcile)", why=why[:4000])  # fmt: skip
            settled.append(effect.effect_id)
    return settled


def unobserved_plan(result: Any) -> dict[str, Any] | None:
    """How to ask the destination again, as this step kept it in an AMBIGUOUS effect's
    result; None for any other result (an operator's, a hook's ``uncertain``)."""
    if not isinstance(result, dict):
        return None
    uncertain = result.get("uncertain")
    unobserved = uncertain.get(UNOBSERVED) if isinstance(uncertain, dict) else None
    plan = unobserved.get("observe") if isinstance(unobserved, dict) else None
    if not isinstance(plan, dict) or plan.get("kind") != "git.push":
        return None
    if not isinstance(plan.get("directory"), str) or not isinstance(plan.get("remote"), str):
        return None
    return plan


def unobserved_why(result: Any) -> str | None:
    """Why this step could not observe an AMBIGUOUS effect's destination (one line, as kept
    in its result), or None."""
    if not isinstance(result, dict) or not isinstance(result.get("uncertain"), dict):
        return None
    unobserved = result["uncertain"].get(UNOBSERVED)
    why = unobserved.get("why") if isinstance(unobserved, dict) else None
    return why if isinstance(why, str) else None


__all__ = [
    "UNOBSERVED",
    "observe_and_reconcile",
    "reobserve_ambiguous",
    "settle_call",
    "unobserved_plan",
    "unobserved_why",
]
