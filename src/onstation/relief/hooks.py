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
from collections.abc import Callable
from typing import Any, TypeVar

from onstation.core.errors import Conflict, OnstationError
from onstation.harness.adapters import HOOK_HARNESSES, HookCall, adapter
from onstation.harness.config import WorkspaceConfig
from onstation.harness.git_head import ASK_GIT, head_commit
from onstation.ledger import Ledger
from onstation.ledger.bodies import (
    CONTINUING_SOURCES,
    SESSION_LEASE_TTL,
    Admission,
    BodySession,
    HarnessLedger,
)
from onstation.ledger.correspondence import MessageLook
from onstation.relief import hook_texts as texts
from onstation.relief.hook_answer import HookAnswer, _context
from onstation.relief.hook_effects import MAX_EFFECTS_PER_CALL, EffectHooks

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

#: How often a transaction of several writes is run again after a retryable conflict (as the
#: ledger runs a single write again).
_RETRIES = 10

T = TypeVar("T")


class HookRunner(EffectHooks):
    """Answers hook events for one harness over one ledger (the effect-journaling events:
    :class:`~onstation.relief.hook_effects.EffectHooks`)."""

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
        #: This call's answers already read: the generation's provisional birth (None: it has
        #: none), and whether its base commit was settled with the admission.
        self._births: dict[tuple[str, int], Any] = {}
        self._based = False
        #: Whether a message waits for the body, asked with a session start's admission.
        self._look: MessageLook | None = None

    # -- entry ------------------------------------------------------------------------------

    def handle(self, call: HookCall) -> HookAnswer:
        """Answer one event; unknown events and unmanaged workspaces get no answer."""
        event = call.event
        session_id = call.session_id
        if not session_id:
            return HookAnswer(notes=["payload has no session_id; nothing recorded"])
        workspace = call.cwd or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
        # The workspace's binding names the node, else the configuration does. With a node
        # configured, the binding is looked up with the admission's first reads, on that node
        # (on PostgreSQL one round trip less a call); a binding to another node abandons
        # that admission before it judges or writes anything, and the call is judged again
        # for the bound node.
        expected = self.config.node
        found = None if expected is not None else self.records.node_for_workspace(workspace)
        chosen = found[0] if found else expected
        if chosen is None:
            return self._no_decision(event, HookAnswer())
        bound_to = found[1] if found else workspace
        # A session start's base commit, read from the repository's files now (never git
        # under the ledger's writer lock), is recorded with the admission: one durable commit
        # instead of two. When git must be asked, on_session_start asks it after the commit.
        head = head_commit(bound_to) if event == "SessionStart" else ASK_GIT
        head_of = bound_to

        def judge(node: str, look_up: bool) -> Admission:
            # Anew on each attempt: what a rolled-back attempt read or wrote is not so.
            self._births, self._based, self._look = {}, False, None
            where: Callable[[], str] | None = None
            if look_up:
                lookup = self.records.ask_node_for_workspace(workspace)

                def bound_place() -> str:
                    binding = lookup()
                    if binding is not None and binding[0] != node:
                        raise _BoundElsewhere(binding)
                    return binding[1] if binding is not None else workspace

                where = bound_place
            admission = self.records.admit_session(
                session_id, harness=self.harness, node=node,
                workspace=bound_to, where=where,
                host=self._host_process, source=call.source if event == "SessionStart" else None,
                host_gone=_host_gone, launched_by=_launched_by,
            )  # fmt: skip
            if admission.admitted:
                if admission.lease_acquired:
                    # Acquired by this very judgement: a whole term ahead, and the first lease
                    # of its generation, which no relief's birth can be waiting on.
                    session = admission.session
                    self._births[(session.node, session.generation)] = None
                else:
                    self._renew_if_due(admission.session)
                path = call.transcript_path
                if (
                    path
                    and path != admission.session.transcript_path
                    and event in ("SessionStart", "UserPromptSubmit", "PostToolUse")
                ):
                    self.records.set_transcript(session_id, os.path.expanduser(path))
                if head is not ASK_GIT and admission.session.workspace == head_of:
                    self._record_base(admission.session, head)
            if event == "SessionStart" and (admission.admitted or admission.fenced):
                # Asked with the admission's statements and read by its take of messages
                # (_pending): on PostgreSQL the look costs no round trip of its own. Nothing
                # a session start does between writes a message (the take would ask again).
                session = admission.session
                self._look = self.records.look_for_messages(
                    session.node, generation=session.generation, fenced=admission.fenced
                )
            return admission

        # The admission, its lease's renewal and the transcript's path commit together: a
        # session's first start wrote them in two synchronous commits.
        try:
            admission = self.together(lambda: judge(chosen, found is None))
        except _BoundElsewhere as moved:
            bound_node, bound_to = moved.binding
            head = head_commit(bound_to) if event == "SessionStart" else ASK_GIT
            head_of = bound_to
            admission = self.together(lambda: judge(bound_node, False))
        # A body whose lease this very call acquired has made no call before it: nothing of
        # its own can be waiting for an answer.
        if admission.admitted and not admission.fenced and not admission.lease_acquired:
            self._settle_unanswered(admission.session, call)
        method = _HANDLERS.get(event)
        handler = getattr(self, method) if method is not None else None
        answer = handler(admission, call) if handler is not None else HookAnswer()
        answer = self._no_decision(event, answer)
        if admission.fenced:  # stopped, not only told: continue false where the host has it
            self._stopped(event, answer, admission.session)
        return answer

    def together(self, work: Callable[[], T]) -> T:
        """Run ``work``, whose ledger writes then commit as one transaction: one commit (one
        synchronous=FULL sync on SQLite) instead of one each, and all of them or none.

        A concurrent-writer conflict the backend calls retryable (PostgreSQL's serialization
        failures) runs ``work`` again, as a single write would be run again."""
        attempt = 0
        while True:
            try:
                with self.ledger.transaction():
                    return work()
            except Conflict as exc:
                backend, cause = self.ledger.backend, exc.__cause__
                if attempt >= _RETRIES or cause is None or not backend.is_retryable(cause):
                    raise
                attempt += 1
                backend.retry_pause(attempt)

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
        key = (session.node, session.generation)
        if key not in self._births:  # read once a call: only a relief's settling changes it
            from onstation.ledger.relief_records import ReliefLedger

            birth = ReliefLedger(self.ledger).birth(session.node, session.generation)
            self._births[key] = (
                birth if birth is not None and birth.state == "PROVISIONAL" else None
            )
        return self._births[key]

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

    def _record_base(self, session: BodySession, head: Any = ASK_GIT) -> None:
        """The commit this generation started from, the first time one of its sessions starts
        in a git workspace (the capsule's diff of this body's work is taken against it).
        ``head``: what the repository's files said of the session's workspace (read before
        the admission's transaction), else read here."""
        if self._based:
            return
        self._based = True
        if session.workspace is None or head is None:  # None: no repository holds it
            return
        # Known already, the head is offered as it is: record_base keeps the first base and
        # asks one statement either way. Asked for, it is only read when none is recorded.
        if head is ASK_GIT and self.records.base_of(session.node, session.generation):
            return
        # Read from the repository's files where they settle it: a git process is most of
        # a session start's cost otherwise.
        if head is ASK_GIT:
            head = head_commit(session.workspace)
        if head is ASK_GIT:
            from onstation.harness.evidence import git

            head = git(session.workspace, "rev-parse", "--verify", "--quiet", "HEAD^{commit}",
                       timeout=2)  # fmt: skip
        if isinstance(head, str) and head:
            self.records.offer_base(session.node, session.generation, head,
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

    def _policy(self) -> Any:
        from onstation.core.hull import workspace_policy

        return workspace_policy(self.config.tiers)

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

        def record() -> None:
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

        # What one reading found (the cursor, the window, an epoch, the fill and its tier) is
        # one commit: a first reading made three synchronous ones. The transcript was read
        # before, outside the write lock.
        self.together(record)

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
            generation=session.generation, fenced=fenced, look=self._look,
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


class _BoundElsewhere(Exception):
    """The workspace is bound to another node than the configured one the admission was
    begun for: that admission is abandoned (rolled back) and the call judged for ``binding``."""

    def __init__(self, binding: tuple[str, str]) -> None:
        super().__init__(binding)
        self.binding = binding


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


__all__ = ["HARNESSES", "MAX_EFFECTS_PER_CALL", "RENEW_WHEN_LEFT", "HookAnswer", "HookRunner"]
