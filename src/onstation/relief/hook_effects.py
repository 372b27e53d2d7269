"""The hook events that journal effects: PreToolUse (classify, then every effect INTENDED
and DISPATCHED before the tool runs, or the call denied with a receipt), PostToolUse,
PostToolUseFailure and PermissionDenied (each settles what its call dispatched).

Part of :class:`~onstation.relief.hooks.HookRunner` (see :mod:`onstation.relief.hooks` for the
flow of one call): the runner's judgement of the session and its telemetry stay there.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from onstation.core.errors import BlockedByPolicy, Conflict, OnstationError, StaleGeneration
from onstation.relief import hook_texts as texts
from onstation.relief import tool_journal
from onstation.relief.grants import grant_refusal
from onstation.relief.hook_answer import HookAnswer, _context, _deny

if TYPE_CHECKING:
    from onstation.harness.adapters import HarnessAdapter, HookCall
    from onstation.harness.config import WorkspaceConfig
    from onstation.ledger import Ledger
    from onstation.ledger.bodies import Admission, BodySession, HarnessLedger

#: A tool call holding more effects than this is denied whole, nothing journaled: each effect
#: costs the resolution of its identity (git commands) and two ledger transactions, and a
#: hook must answer within a fixed time whatever the command.
MAX_EFFECTS_PER_CALL = 8

#: Reasons a successor is refused effect rights while its generation stays current.
_RIGHTS_REASONS = ("successor not yet challenged", "birth failed")


class EffectHooks:
    """The effect-journaling events; a mixin of :class:`~onstation.relief.hooks.HookRunner`,
    which provides the attributes and the session helpers declared here."""

    ledger: Ledger
    records: HarnessLedger
    harness: str
    adapter: HarnessAdapter
    config: WorkspaceConfig
    deadline: float | None
    progress: dict[str, Any]

    if TYPE_CHECKING:

        def _fenced_text(self, session: BodySession) -> str: ...
        def _refused_text(self, admission: Admission) -> str: ...
        def _stopped(self, event: str, answer: HookAnswer, session: BodySession) -> None: ...
        def _pending(self, session: BodySession, *, fenced: bool = False) -> list[str]: ...
        def _telemetry(self, session: BodySession, call: HookCall) -> None: ...

    def on_pre_tool_use(self, admission: Admission, call: HookCall) -> HookAnswer:
        session = admission.session
        progress = self.progress
        tool = call.tool_name
        if admission.fenced:
            progress["standing"] = "fenced"
            return self._denied(session, tool, "fenced", self._fenced_text(session))
        progress["standing"] = "admitted" if admission.admitted else "refused"
        if admission.admitted:  # a generation issued grants acts within them (relief/grants.py)
            refusal = grant_refusal(self.ledger, session.node, session.generation, tool)
            if refusal is not None:
                return self._denied(session, tool, "outside its grants", refusal)
        calls, stopped = self._classify_bounded(call)
        progress["effect_capable"] = bool(calls) or stopped is not None
        if not progress["effect_capable"]:
            return HookAnswer()
        if not admission.admitted:
            answer = self._denied(session, tool, "not admitted", self._refused_text(admission),
                                  calls)  # fmt: skip
            notice = texts.refused_notice(session.node, str(admission.reason))
            answer.output = self.adapter.with_notice("PreToolUse", answer.output, notice)
            return answer
        from onstation.harness.effects import TOO_MANY

        if stopped == TOO_MANY:
            return self._denied(session, tool, "too many effects",
                                texts.too_many_effects(MAX_EFFECTS_PER_CALL), calls)  # fmt: skip
        if stopped is not None:
            return self._denied(session, tool, "over time budget", texts.over_budget(), calls)
        return self._journal(session, call, calls)

    def _journal(self, session: BodySession, call: HookCall, calls: list[Any]) -> HookAnswer:
        """Every effect of the call INTENDED, then every one DISPATCHED; or the call denied."""
        generation = session.generation
        # The caller reference is the payload's id whatever its type (str() of it): as given.
        tool_use_id = call.raw.get("tool_use_id")
        created: list[str] = []  # ours alone to fail again if the call is denied
        effects: list[str] = []
        found: dict[str, Any] = {}  # effect id -> the classified effect, for its call record
        try:
            for each in calls:
                effect, new = self.ledger.intend_effect(
                    session.node,
                    generation=generation,
                    operation=each.operation,
                    destination=each.destination,
                    arguments=each.arguments,
                    caller_ref=str(tool_use_id or "") or None,
                )
                if new:
                    created.append(effect.effect_id)
                if effect.effect_id not in effects:
                    effects.append(effect.effect_id)
                    found[effect.effect_id] = each
            _kill_point("pre-tool-use:intended")
            for effect_id in effects:
                self.ledger.dispatch_effect(effect_id, generation=generation)
        except Conflict as exc:
            self._abandon(session, created)
            return self._denied(session, call.tool_name, "repeat", texts.repeat(exc.message),
                                calls)  # fmt: skip
        except StaleGeneration as exc:
            # The ledger kept the receipt of this refusal itself.
            if exc.details.get("reason") in _RIGHTS_REASONS:
                self._abandon(session, created)
            return HookAnswer(_deny(texts.may_not_act(exc.message)))
        except BlockedByPolicy as exc:
            self._abandon(session, created)
            return self._denied(
                session, call.tool_name, "halted", f"onstation: {exc.message}", calls
            )
        self.progress["dispatched"] = True
        if call.tool_use_id:
            self.records.record_tool_call(call.tool_use_id, session.session_id, effects[0])
        self._record_calls(session, call, found)
        return HookAnswer()

    def _record_calls(self, session: BodySession, call: HookCall, found: dict[str, Any]) -> None:
        """Keep each dispatched effect's call: its result pairs by digest when the host gives
        no tool_use_id, its rejection is looked for in the transcript from here, and a push's
        remote refs are recorded as they are before it runs (harness/effects/outcomes.py)."""
        import time

        from onstation.harness.effects import outcomes

        digest = outcomes.input_digest(call.tool_name, call.tool_input)
        path = os.path.expanduser(call.transcript_path) if call.transcript_path else None
        offset = outcomes.transcript_offset(path)
        for effect_id, each in found.items():
            budget = outcomes.BEFORE_TIMEOUT
            if self.deadline is not None:
                budget = min(budget, self.deadline - time.monotonic())
            plan = outcomes.push_plan(each.operation, each.arguments, each.evidence, budget)
            try:
                self.ledger.record_effect_call(
                    effect_id, generation=session.generation, session_id=session.session_id,
                    tool_name=call.tool_name or "", input_digest=digest,
                    tool_use_id=call.tool_use_id, transcript_path=path,
                    transcript_offset=offset, observe=plan,
                )  # fmt: skip
            except OnstationError:  # the call is allowed all the same; reconcile still works
                continue

    def _paired_calls(self, session: BodySession, call: HookCall) -> list[Any]:
        """The DISPATCHED effects of this body that ``call`` reports on: by its tool_use_id,
        or (none given, or none recorded) by session, tool name and input digest."""
        dispatched = self.ledger.dispatched_calls(session.node, generation=session.generation)
        if not dispatched:
            return []
        tool_use_id = call.tool_use_id
        if tool_use_id:
            by_id = [d for d in dispatched if d.tool_use_id == tool_use_id]
            if by_id:
                return by_id
        from onstation.harness.effects.outcomes import input_digest

        digest = input_digest(call.tool_name, call.tool_input)
        return [
            d for d in dispatched
            if d.session_id == session.session_id and d.tool_name == call.tool_name
            and d.input_digest == digest
            and (not tool_use_id or d.tool_use_id in (None, tool_use_id))
        ]  # fmt: skip

    def _settle_unanswered(self, session: BodySession, call: HookCall) -> None:
        """An earlier call of this body dispatched an effect and no result came: when the
        transcript holds that call's end (its rejection, its result), settle it on the
        evidence, so that a declined push can be retried (relief/reconcile.py)."""
        dispatched = self.ledger.dispatched_calls(session.node, generation=session.generation)
        if not dispatched:
            return
        from onstation.relief.reconcile import settle_call

        by = f"{self.harness} session {session.session_id}"
        for each in dispatched:
            if call.tool_use_id is not None and each.tool_use_id == call.tool_use_id:
                continue  # this very call: its own event settles it
            if each.tool_use_id is None or each.transcript_path is None:
                continue
            settle_call(self.ledger, each, by=by, generation=session.generation,
                        require_transcript=True, timeout=5.0)  # fmt: skip

    def _abandon(self, session: BodySession, effect_ids: list[str]) -> None:
        """Fail the intents a denied call recorded: the ledger's proof its tool did not run."""
        from contextlib import suppress

        for effect_id in effect_ids:
            # Dispatched by a concurrent call, or no longer ours: then left as it is.
            with suppress(OnstationError):
                self.ledger.fail_effect(effect_id, generation=session.generation,
                                        reason="the PreToolUse hook denied the call")  # fmt: skip

    def _denied(
        self,
        session: BodySession,
        tool: str | None,
        reason: str,
        text: str,
        calls: list[Any] | None = None,
    ) -> HookAnswer:
        """Deny a PreToolUse and keep the receipt (the session and the tool) in the ledger."""
        action = f"{self.harness} session {session.session_id}: PreToolUse "
        action += tool if tool is not None else "(no tool name)"
        if calls:
            action += f": {calls[0].summary}"
            if len(calls) > 1:
                action += f" (+{len(calls) - 1} more)"
        action = "".join(ch if ch.isprintable() else "?" for ch in action)[:1024]
        answer = HookAnswer(_deny(text))
        try:
            self.ledger.record_denial(session.node, presented_generation=session.generation,
                                      action=action, reason=reason)  # fmt: skip
        except OnstationError as exc:  # the call is denied all the same
            answer.notes.append(f"denial receipt not recorded: {exc.message}")
        return answer

    def deny_unjudged(self, session_id: str, tool_name: Any, problem: str) -> HookAnswer | None:
        """A PreToolUse whose payload could not be read or answered: deny it when its session
        is known and is not the live body (fenced or refused); None (no decision) otherwise."""
        session = self.records.session(session_id)
        if session is None:
            return None
        current = self.ledger.get_node(session.node).generation
        tool = tool_name if isinstance(tool_name, str) else None
        if session.state == "ADMITTED" and session.generation != current:
            text = self._fenced_text(session)
            answer = self._denied(session, tool, "fenced", f"{text} ({problem})")
            self._stopped("PreToolUse", answer, session)
            return answer
        if session.state == "ADMITTED":
            lease = self.ledger.live_lease(session.node)
            if lease is not None and lease.lease_id == session.lease_id:
                return None
        answer = self._denied(session, tool, "not admitted", texts.unchecked(session.node, problem))
        notice = texts.refused_notice(session.node, "its call could not be checked")
        answer.output = self.adapter.with_notice("PreToolUse", answer.output, notice)
        return answer

    def on_post_tool_use(self, admission: Admission, call: HookCall) -> HookAnswer:
        session = admission.session
        if admission.fenced:
            return HookAnswer(_context("PostToolUse", self._fenced_text(session)))
        if not admission.admitted:
            return HookAnswer()
        tool_use_id = call.tool_use_id
        effect_id = self.records.effect_for_tool_call(tool_use_id) if tool_use_id else None
        if effect_id is None:
            # No tool_use_id (or none journaled under it): the call that dispatched the effect
            # is found by session, tool name and input digest.
            paired = [d.effect_id for d in self._paired_calls(session, call)]
            if paired:
                result = _result_summary(call.tool_response)
                for each in paired:
                    self.ledger.observe_effect(each, generation=session.generation,
                                               result=result)  # fmt: skip
                    self.ledger.commit_effect(each, generation=session.generation)
        if tool_use_id and effect_id is not None:
            from onstation.core.effects import EffectState

            result = _result_summary(call.tool_response)
            # One call may carry several effects (`git push a; git push b`): each was
            # journaled under this call's id, and the tool's result settles every one.
            dispatched = [
                e.effect_id
                for e in self.ledger.effects(session.node, state=EffectState.DISPATCHED)
                if e.generation == session.generation
                and (e.caller_ref == tool_use_id or e.effect_id == effect_id)
            ]
            for each in dispatched:
                self.ledger.observe_effect(each, generation=session.generation,
                                           result=result)  # fmt: skip
                self.ledger.commit_effect(each, generation=session.generation)
        notes = tool_journal.record(self.records, session, call)  # every call's outcome
        self._telemetry(session, call)
        pending = self._pending(session)
        text = "\n\n".join(pending)
        return HookAnswer(_context("PostToolUse", text) if pending else None, notes=notes)

    def on_post_tool_use_failure(self, admission: Admission, call: HookCall) -> HookAnswer:
        """The tool failed (or was interrupted): each effect of the call is settled on what
        its destination shows when it can be asked; else the host's rejection text (not an
        interrupt) is NOT_EXECUTED and anything else, which may have reached its
        destination, is AMBIGUOUS. The error is kept with the effect."""
        session = admission.session
        if admission.fenced:
            return HookAnswer(_context("PostToolUseFailure", self._fenced_text(session)))
        if not admission.admitted:
            return HookAnswer()
        from onstation.harness.effects import outcomes

        raw = call.raw
        error = str(raw["error"]) if isinstance(raw.get("error"), str) else ""
        interrupt = raw.get("is_interrupt") is True
        failure: dict[str, Any] = {"host": "PostToolUseFailure", "error": error[:400],
                                   "is_interrupt": interrupt}  # fmt: skip
        for key in ("error_type", "is_timeout"):
            if isinstance(raw.get(key), (str, bool)):
                failure[key] = raw[key]
        by = f"{self.harness} session {session.session_id}"
        notes: list[str] = []
        for each in self._paired_calls(session, call):
            asked = outcomes.observe(each.observe, 5.0) if each.observe is not None else None
            if asked is not None:
                outcome, evidence = asked[0], {**asked[1], "failure": failure}
            elif outcomes.is_declined_text(error) and not interrupt:
                outcome, evidence = "not-executed", failure
            else:
                outcome, evidence = "uncertain", failure
            try:
                self.ledger.settle_dispatched(each.effect_id, outcome=outcome, evidence=evidence,
                                              by=by, generation=session.generation)  # fmt: skip
            except OnstationError as exc:
                notes.append(f"effect {each.effect_id} not settled: {exc.message}")
        notes += tool_journal.record(self.records, session, call)
        self._telemetry(session, call)
        pending = self._pending(session)
        text = "\n\n".join(pending)
        return HookAnswer(_context("PostToolUseFailure", text) if pending else None, notes=notes)

    def on_permission_denied(self, admission: Admission, call: HookCall) -> HookAnswer:
        """The host denied the call (Claude Code's auto-mode classifier): the tool never ran,
        so each effect dispatched for it is NOT_EXECUTED and may be intended again."""
        session = admission.session
        if not admission.admitted or admission.fenced:
            return HookAnswer()
        reason = call.raw.get("reason")
        evidence = {"host": "PermissionDenied",
                    "reason": reason[:400] if isinstance(reason, str) else None}  # fmt: skip
        by = f"{self.harness} session {session.session_id}"
        answer = HookAnswer()
        for each in self._paired_calls(session, call):
            try:
                self.ledger.settle_dispatched(each.effect_id, outcome="not-executed",
                                              evidence=evidence, by=by,
                                              generation=session.generation)  # fmt: skip
            except OnstationError as exc:
                answer.notes.append(f"effect {each.effect_id} not settled: {exc.message}")
        answer.notes += tool_journal.record(self.records, session, call)
        return answer

    def _classify_bounded(self, call: HookCall) -> tuple[list[Any], str | None]:
        from onstation.harness.effects import (
            DEFAULT_PATTERNS,
            classify_bounded,
            patterns_from_mapping,
        )

        tool_name = call.tool_name
        tool_input = call.tool_input
        if tool_name is None or tool_input is None:
            return [], None
        patterns = (
            patterns_from_mapping(self.config.effects) if self.config.effects else DEFAULT_PATTERNS
        )
        cwd = call.cwd if call.cwd is not None else os.getcwd()
        return classify_bounded(
            tool_name, tool_input, str(cwd), patterns,
            max_effects=MAX_EFFECTS_PER_CALL, deadline=self.deadline,
        )  # fmt: skip


def _kill_point(name: str) -> None:
    # Tests only: die here by SIGKILL, as a host's hook timeout or the OOM killer would.
    if os.environ.get("ONSTATION_TEST_KILL_AT") == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def _result_summary(response: Any) -> dict[str, Any]:
    """A small, JSON-safe summary of a tool's response, kept as the effect's result."""
    if not isinstance(response, dict):
        return {"response": "present" if response is not None else "absent"}
    summary: dict[str, Any] = {}
    for key in ("success", "exit_code", "exitCode", "interrupted", "returnCodeInterpretation"):
        value = response.get(key)
        if isinstance(value, (bool, int, str)) and not isinstance(value, float):
            summary[key] = value
    for key in ("stdout", "stderr", "output"):
        value = response.get(key)
        if isinstance(value, str) and value:
            summary[key] = value[-400:]
    return summary or {"response": "present"}


__all__ = ["MAX_EFFECTS_PER_CALL", "EffectHooks"]
