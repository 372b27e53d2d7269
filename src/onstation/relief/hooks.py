"""What onstation answers to each harness hook event, for one body.

The flow of one call: parse the payload, find the identity the workspace works for (an
unmanaged workspace gets no answer at all), judge the session as a body (admitted, refused,
or fenced), then act for the event:

- PreToolUse: a fenced body is denied every tool call; a refused body is denied its
  effect-capable calls; an admitted body's effect-capable call is journaled (every effect
  INTENDED, then every one DISPATCHED) before it runs, and a repeat of a dispatched logical
  effect is denied, as is a call of more than :data:`MAX_EFFECTS_PER_CALL` effects. Every
  deny is kept as a denial receipt in the ledger.
- PostToolUse: the journaled effect is OBSERVED and COMMITTED; telemetry is read from the
  transcript (incrementally); pending messages are delivered as additional context.
- UserPromptSubmit: telemetry, then pending messages.
- Stop: blocks once, with a reason, when a relief was requested and no brief was written.
- SessionStart: admission; with source compact or resume, the latest brief is re-injected.
- PreCompact: recorded.
- SessionEnd: a clean end (not /clear or /resume) releases the body's lease.

Every answer is built as data here; the CLI prints it. The caller turns any exception into
a fail-open note: a hook never breaks the agent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from onstation.core.errors import BlockedByPolicy, Conflict, OnstationError, StaleGeneration
from onstation.harness.adapters import HOOK_HARNESSES, HookCall, adapter
from onstation.harness.config import WorkspaceConfig
from onstation.ledger import Ledger
from onstation.ledger.bodies import (
    CONTINUING_SOURCES,
    SESSION_LEASE_TTL,
    Admission,
    BodySession,
    HarnessLedger,
)
from onstation.relief import hook_texts as texts
from onstation.relief import tool_journal
from onstation.relief.grants import grant_refusal

#: The harnesses whose hooks onstation answers (their adapters: harness/adapters.py).
HARNESSES = HOOK_HARNESSES

#: Hook event name -> the method answering it; any other event gets no answer.
_HANDLERS = {
    "SessionStart": "on_session_start",
    "UserPromptSubmit": "on_user_prompt_submit",
    "PreToolUse": "on_pre_tool_use",
    "PostToolUse": "on_post_tool_use",
    "PostToolUseFailure": "on_post_tool_use_failure",
    "PermissionDenied": "on_permission_denied",
    "Stop": "on_stop",
    "PreCompact": "on_pre_compact",
    "PostCompact": "on_post_compact",
    "SessionEnd": "on_session_end",
}

#: SessionEnd reasons after which the host process goes on with a new session id (Claude Code
#: hooks reference: clear, resume, logout, prompt_input_exit, other): not the body's end.
_CONTINUING_END_REASONS = ("clear", "resume")

#: Renew a body's lease when less than this much of it is left (not on every call).
RENEW_WHEN_LEFT = SESSION_LEASE_TTL / 2

#: A tool call holding more effects than this is denied whole, nothing journaled: each effect
#: costs the resolution of its identity (git commands) and two ledger transactions, and a
#: hook must answer within a fixed time whatever the command.
MAX_EFFECTS_PER_CALL = 8

#: Reasons a successor is refused effect rights while its generation stays current.
_RIGHTS_REASONS = ("successor not yet challenged", "birth failed")


@dataclass
class HookAnswer:
    """What to print and how to exit: ``output`` becomes the JSON on stdout."""

    output: dict[str, Any] | None = None
    exit_code: int = 0
    notes: list[str] = field(default_factory=list)


def _context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _deny(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


class HookRunner:
    """Answers hook events for one harness over one ledger."""

    def __init__(self, ledger: Ledger, harness: str, config: WorkspaceConfig) -> None:
        self.ledger = ledger
        self.records = HarnessLedger(ledger)
        self.harness = harness
        self.adapter = adapter(harness)
        self.config = config
        #: ``time.monotonic()`` by which effect classification must stop (None: no bound).
        self.deadline: float | None = None
        #: How far a PreToolUse got, for the caller's time budget: "standing" (fenced,
        #: refused, admitted), "effect_capable" and "dispatched" (every effect of the call
        #: dispatched).
        self.progress: dict[str, Any] = {}

    # -- entry ------------------------------------------------------------------------------

    def handle(self, call: HookCall) -> HookAnswer:
        """Answer one event; unknown events and unmanaged workspaces get no answer."""
        event = call.event
        session_id = call.session_id
        if not session_id:
            return HookAnswer(notes=["payload has no session_id; nothing recorded"])
        workspace = call.cwd or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
        found = self.records.node_for_workspace(workspace)
        node = found[0] if found else self.config.node
        if node is None:
            return self._no_decision(event, HookAnswer())
        admission = self.records.admit_session(
            session_id, harness=self.harness, node=node,
            workspace=found[1] if found else workspace,
            host=self._host_process, source=call.source if event == "SessionStart" else None,
            host_gone=_host_gone, launched_by=_launched_by,
        )  # fmt: skip
        if admission.admitted:
            self._renew_if_due(admission.session)
            path = call.transcript_path
            if (
                path
                and path != admission.session.transcript_path
                and event in ("SessionStart", "UserPromptSubmit", "PostToolUse")
            ):
                self.records.set_transcript(session_id, os.path.expanduser(path))
            if not admission.fenced:
                self._settle_unanswered(admission.session, call)
        method = _HANDLERS.get(event)
        handler = getattr(self, method) if method is not None else None
        answer = handler(admission, call) if handler is not None else HookAnswer()
        answer = self._no_decision(event, answer)
        if admission.fenced:  # stopped, not only told: continue false where the host has it
            self._stopped(event, answer, admission.session)
        return answer

    def _stopped(self, event: str, answer: HookAnswer, session: BodySession) -> None:
        current = self.ledger.get_node(session.node).generation
        notice = texts.fenced_notice(session.node, session.generation, current)
        answer.output = self.adapter.with_stop(event, answer.output, notice)
        answer.output = self.adapter.with_notice(event, answer.output, notice)

    def _host_process(self) -> dict[str, Any] | None:
        """A witness of the host process this hook runs for (the body), as JSON."""
        from onstation.harness import witness as witnesses

        seen = witnesses.host_process(nonce="hook-host",
                                      observed_at=self.ledger.now().isoformat())  # fmt: skip
        return None if seen is None else seen.to_json()

    def _no_decision(self, event: str, answer: HookAnswer) -> HookAnswer:
        # Some hosts need JSON on stdout even when nothing is decided (Codex, for Stop).
        if answer.output is None:
            answer.output = self.adapter.no_decision(event)
        return answer

    def _provisional_birth(self, session: BodySession) -> Any:
        from onstation.ledger.relief_records import ReliefLedger

        birth = ReliefLedger(self.ledger).birth(session.node, session.generation)
        return birth if birth is not None and birth.state == "PROVISIONAL" else None

    def _renew_if_due(self, session: BodySession) -> None:
        lease = self.ledger.live_lease(session.node)
        if lease is None or lease.lease_id != session.lease_id:
            return
        left = lease.expires_at - self.ledger.now()
        # A successor being challenged heartbeats on every hook call: that is its heartbeat
        # witness. Otherwise renew only when the lease runs low.
        if left < RENEW_WHEN_LEFT or self._provisional_birth(session) is not None:
            self.ledger.renew_lease(session.node, generation=session.generation,
                                    ttl=SESSION_LEASE_TTL)  # fmt: skip

    # -- events -----------------------------------------------------------------------------

    def on_session_start(self, admission: Admission, call: HookCall) -> HookAnswer:
        session = admission.session
        if admission.fenced:
            return HookAnswer(_context("SessionStart", self._fenced_text(session)))
        if not admission.admitted:
            notice = texts.refused_notice(session.node, str(admission.reason))
            told = _context("SessionStart", self._refused_text(admission))
            return HookAnswer(self.adapter.with_notice("SessionStart", told, notice))
        self._record_base(session)
        birth = self._provisional_birth(session)
        if birth is not None:
            return HookAnswer(_context("SessionStart", self._successor_start(session, birth)))
        if call.source == "compact":  # the host compacted this context: a new epoch
            self.records.start_epoch(session, signal=f"{self.harness} SessionStart compact")
        parts: list[str] = []
        if call.source in CONTINUING_SOURCES:
            parts.append(texts.body_continues(session.node, session.generation, call.source))
            brief = self.records.latest_document(session.node, "brief")
            if brief is not None:
                parts.append(
                    texts.BRIEF_PREAMBLE.format(node=session.node, generation=brief.generation)
                    + str(brief.content.get("markdown", ""))
                )
        else:
            parts.append(texts.body_start(session.node, session.generation))
        parts.extend(self._pending(session))
        return HookAnswer(_context("SessionStart", "\n\n".join(parts)))

    def _record_base(self, session: BodySession) -> None:
        """The commit this generation started from, the first time one of its sessions starts
        in a git workspace (the capsule's diff of this body's work is taken against it)."""
        if session.workspace is None or self.records.base_of(session.node, session.generation):
            return
        from onstation.harness.evidence import git

        head = git(session.workspace, "rev-parse", "--verify", "--quiet", "HEAD^{commit}",
                   timeout=2)  # fmt: skip
        if head:
            self.records.record_base(session.node, session.generation, head,
                                     source="session-start")  # fmt: skip

    def _successor_start(self, session: BodySession, birth: Any) -> str:
        """An interactive successor: record its process witness, hand it its prompt."""
        from onstation.harness import witness as witnesses
        from onstation.ledger.relief_records import ReliefLedger

        if birth.launch_witness is None:
            # Hooks are run by the harness process (through a shell, maybe through wrappers):
            # that process, not the short-lived shell between, is the body.
            seen = witnesses.host_process(nonce=str(birth.challenge.get("nonce")),
                                          observed_at=self.ledger.now().isoformat())  # fmt: skip
            if seen is not None:
                ReliefLedger(self.ledger).set_launch_witness(
                    session.node, session.generation, seen.to_json()
                )
        prompt = self.records.latest_document(session.node, "prompt")
        if prompt is not None and prompt.generation == session.generation:
            return str(prompt.content.get("markdown", ""))
        return texts.successor_start(session.node, session.generation)

    def on_user_prompt_submit(self, admission: Admission, call: HookCall) -> HookAnswer:
        if admission.fenced:
            return HookAnswer(_context("UserPromptSubmit", self._fenced_text(admission.session)))
        if not admission.admitted:
            return HookAnswer()
        self._telemetry(admission.session, call)
        pending = self._pending(admission.session)
        return HookAnswer(_context("UserPromptSubmit", "\n\n".join(pending)) if pending else None)

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

    def on_stop(self, admission: Admission, call: HookCall) -> HookAnswer:
        session = admission.session
        if not admission.admitted or admission.fenced:  # a fenced body is stopped (handle)
            return HookAnswer()
        current = self.records.session(session.session_id) or session
        if current.relief_requested_at is None or current.stop_blocked_at is not None:
            return HookAnswer()
        brief = self.records.latest_document(session.node, "brief")
        if brief is not None and brief.at >= current.relief_requested_at:
            return HookAnswer()
        self.records.set_session_flag(session.session_id, "stop_blocked_at")
        reason = texts.stop_block(session.node, session.generation)
        return HookAnswer({"decision": "block", "reason": reason})

    def on_pre_compact(self, admission: Admission, call: HookCall) -> HookAnswer:
        session = admission.session
        trigger = call.trigger

        with self.ledger.transaction() as unit:
            unit.event(node=session.node, kind="hull.precompact", generation=session.generation,
                       actor=f"{self.harness} session {session.session_id}", trigger=trigger,
                       admitted=admission.admitted)  # fmt: skip
        return HookAnswer()

    def on_session_end(self, admission: Admission, call: HookCall) -> HookAnswer:
        """A clean end releases the body's lease: the lead does not take it for a crash, and
        the next session is admitted at once. A /clear or /resume is not an end."""
        session = admission.session
        reason = call.reason if call.reason is not None else "other"
        if not admission.admitted or reason in _CONTINUING_END_REASONS:
            return HookAnswer()
        lease = self.ledger.live_lease(session.node)
        if lease is not None and lease.lease_id == session.lease_id:
            self.ledger.release_lease(
                session.node,
                generation=session.generation,
                by=f"{self.harness} session {session.session_id}",
            )
        return HookAnswer()

    # -- helpers ----------------------------------------------------------------------------

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

    def _policy(self) -> Any:
        from onstation.core.hull import PRESETS, policy_from_mapping

        tiers = self.config.tiers
        if isinstance(tiers, str):
            return PRESETS[tiers] if tiers in PRESETS else PRESETS["relief"]
        if isinstance(tiers, dict):
            return policy_from_mapping(tiers)
        return PRESETS["relief"]

    def _telemetry(self, session: BodySession, call: HookCall) -> None:
        path = call.transcript_path
        if not path:
            return
        path = os.path.expanduser(path)
        if not os.path.isfile(path):
            return
        from onstation.harness.transcript import TranscriptCursor, compaction_seen, rejection_seen

        cursor = None
        if session.telemetry_cursor is not None:
            cursor = TranscriptCursor.from_json(session.telemetry_cursor)
        reading, new_cursor = self.adapter.read_fill(
            path, cursor, model=call.model, declared_window=session.context_window
        )
        self.records.set_cursor(session.session_id, new_cursor.to_json())
        declared = new_cursor.usage_window  # Codex: the rollout's model_context_window
        if declared and declared != session.context_window:
            self.records.set_context_window(session.session_id, declared)
        if compaction_seen(cursor, new_cursor):
            self.records.start_epoch(session, signal=f"{self.harness} transcript")
        rejected = rejection_seen(cursor, new_cursor)
        if rejected is not None:
            self.records.record_hull_notice(session, kind="rejected", detail=rejected,
                                            source=self.harness)  # fmt: skip
        if reading is not None:
            self.observe_fill(session, reading)

    def on_post_compact(self, admission: Admission, call: HookCall) -> HookAnswer:
        """The host compacted the body's context: a new context epoch."""
        if admission.admitted:
            self.records.start_epoch(admission.session, signal=f"{self.harness} PostCompact")
        return HookAnswer()

    def observe_fill(self, session: BodySession, reading: Any) -> str:
        """Record a fill reading; on a new tier, queue what the body must hear.

        An impossible reading (over 100 %, more tokens than the window) is not acted on: it
        is recorded in the history as rejected, and the answer is "unknown".
        """
        from onstation.core.compaction import reject_reason
        from onstation.core.hull import classify

        reason = reject_reason(reading)
        if reason is not None:
            self.records.record_hull_notice(session, kind="rejected", detail=reason,
                                            source=reading.source)  # fmt: skip
            return "unknown"
        tier = classify(reading.percent, self._policy())
        new = self.records.record_fill(
            session,
            percent=reading.percent,
            used_tokens=reading.used_tokens,
            window_tokens=reading.window_tokens,
            source=reading.source,
            model=reading.model,
            tier=tier.value,
            supervised=self.config.supervised,
            tier_message=self._tier_message(session, tier, reading.percent),
        )
        if new:
            self.compaction_notice(session, reading.window_tokens)
        return str(tier.value)

    def compaction_notice(self, session: BodySession, window: int) -> str | None:
        """The warning when a configured tier lies past the host's compaction point (recorded
        in the history once per body), or None."""
        from onstation.core.compaction import compaction_warning
        from onstation.harness.compaction import host_point

        point = host_point(self.harness, window, project=session.workspace)
        warning = compaction_warning(self._policy(), point)
        if warning is not None:
            self.records.record_hull_notice(session, kind="past_compaction", detail=warning,
                                            body_wide=True, point=point)  # fmt: skip
        return warning

    def _tier_message(self, session: BodySession, tier: Any, percent: float) -> Any:
        """What a body must hear on reaching ``tier``: (kind, text), or None.

        Amber advice reaches every body; a supervised body's Red and Critical are its lead's
        to act on (the lead asks for the brief), a lone body is told itself.
        """
        tier_name = str(tier.value)
        if tier_name == "green" or (self.config.supervised and tier_name != "amber"):
            return None
        return texts.tier(tier_name, session.node, session.generation, percent)

    def _pending(self, session: BodySession, *, fenced: bool = False) -> list[str]:
        messages = self.records.take_messages(
            session.node, delivered_to=f"{self.harness} session {session.session_id}",
            generation=session.generation, fenced=fenced,
        )  # fmt: skip
        return [f"[{m.kind} from {m.sender} (message {m.message_id})] {m.body}" for m in messages]

    def _fenced_text(self, session: BodySession) -> str:
        current = self.ledger.get_node(session.node)
        text = texts.fenced(session.node, session.generation, current.generation)
        # Only what was addressed to this very generation (its shutdown request) reaches it.
        return "\n\n".join([text, *self._pending(session, fenced=True)])

    def _refused_text(self, admission: Admission) -> str:
        session = admission.session
        current = self.ledger.get_node(session.node)
        return texts.refused(session.node, str(admission.reason), current.generation)


def _host_gone(recorded: dict[str, Any]) -> str | None:
    """Why the host process a session recorded is gone (its check's reason), or None when it
    may still run (alive, or it cannot be checked from here)."""
    from onstation.harness import witness as witnesses

    try:
        result = witnesses.check(witnesses.ProcessWitness.from_json(recorded))
    except (OnstationError, ValueError, TypeError):
        return None  # an unreadable record proves nothing
    return f"{result.state}: {result.reason}" if result.gone else None


def _launched_by(launched: dict[str, Any], seen: dict[str, Any]) -> bool:
    """Whether the host process ``seen`` is the process a relief launched (``launched``, its
    launch witness) or a descendant of it."""
    from onstation.harness import witness as witnesses
    from onstation.ledger.bodies import same_process

    if same_process(launched, seen):
        return True
    try:
        expected = witnesses.ProcessWitness.from_json(launched)
    except (OnstationError, ValueError, TypeError):
        return False  # an unreadable record proves nothing
    pid = seen.get("pid")
    return isinstance(pid, int) and witnesses.descends_from(pid, expected)


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
