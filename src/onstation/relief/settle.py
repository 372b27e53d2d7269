"""The second half of a relief: launch the successor, challenge it, shut the predecessor
down, settle the reservation and write the discontinuity report.

:class:`LaunchAndSettle` is a part of :class:`onstation.relief.relieve.Relief`; it reads the
relief's state (declared below) and never runs on its own.
"""

from __future__ import annotations

import contextlib
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onstation.core.effects import EffectState
from onstation.core.errors import BadInput, BlockedByPolicy, Conflict, OnstationError
from onstation.harness.adapters import CLAUDE_CODE, find
from onstation.harness.launch import LaunchedBody, Launcher, LaunchSpec, onstation_argv
from onstation.ledger import Ledger
from onstation.ledger.bodies import INTERACTIVE_HOLDER, HarnessLedger
from onstation.ledger.ledger import Reread
from onstation.ledger.relief_records import ReliefLedger, new_nonce
from onstation.relief.hook_texts import shutdown_request
from onstation.relief.losses import Ambiguous, Loss, ReliefFacts, gather
from onstation.relief.options import Progress, ReliefOptions, ReliefOutcome, _iso
from onstation.relief.successor import (
    _descends,
    _exchange_loss,
    _launcher_name,
    _launcher_record,
    successor_prompt,
)

if TYPE_CHECKING:
    from onstation.harness.evidence import EvidenceCache


def _granted_tools(capsule: dict[str, Any]) -> tuple[str, ...]:
    """The tool names the capsule's capability requirements grant the successor."""
    requirements = capsule["payload"].get("capabilityRequirements") or []
    return tuple(
        str(r["name"]) for r in requirements
        if isinstance(r, dict) and r.get("kind") == "tool" and isinstance(r.get("name"), str)
    )  # fmt: skip


def held_reservation(capacity: dict[str, Any] | None) -> str | None:
    """The reservation id the capacity evidence holds (the one id of the attempt: the ledger
    reserves under it, the challenge binds it, the report names it), or None."""
    evidence = capacity.get("evidence") if capacity is not None else None
    held = evidence.get("reservation") if isinstance(evidence, dict) else None
    named = held.get("reservationId") if isinstance(held, dict) else None
    return named if isinstance(named, str) else None


class LaunchAndSettle:
    """Launch, challenge, shutdown and settlement, for :class:`~onstation.relief.relieve.Relief`."""

    ledger: Ledger
    node: str
    opts: ReliefOptions
    records: HarnessLedger
    relief: ReliefLedger
    say: Progress
    handover: Any
    evidence: EvidenceCache
    native: dict[str, Any] | None
    native_lease: Any
    hold: Any
    launcher: Launcher | None
    expired_exchanges: list[Any]
    scratch_removed: str | None
    emergency_brief: bool
    reservation: str | None
    capacity: dict[str, Any] | None
    witnesses: Any

    def _hold_holder(self, rid: int) -> str:
        return f"relief {rid} of {self.node}: successor pending"

    def _notify(self, verdict: str, reasons: list[str], *, fix: list[str]) -> None:
        """Tell the spawner and the operator why a relief did not launch a successor."""
        if verdict not in ("BLOCKED", "QUARANTINED", "HIBERNATE", "INVALID"):
            return
        node = self.ledger.get_node(self.node)
        text = (
            f"Relief of {self.node} ended {verdict}: {'; '.join(reasons) or 'no reason given'}."
            + (f" To fix: {'; '.join(fix)}." if fix else "")
        )
        recipients = ["operator"]
        if node.spawner is not None and node.spawner not in recipients:
            recipients.insert(0, node.spawner)
        if self.opts.by not in recipients and self.opts.by != node.spawner:
            recipients.append(self.opts.by)
        # One write transaction for every copy (issue 14). A copy refused (BadInput: only
        # the arguments' checks, made before its statements) leaves the others posted.
        with self.ledger.transaction():
            for recipient in recipients:
                with contextlib.suppress(BadInput):
                    self.records.post_message(
                        sender="onstation",
                        recipient=recipient,
                        kind="relief_not_launched",
                        body=text[:20_000],
                    )

    def _release_hold(self, why: str) -> None:
        """Nothing launches: the generation the fence made is fenced in turn (never reused)."""
        if self.hold is not None:
            with contextlib.suppress(Conflict):
                self.ledger.fence(
                    self.node,
                    expect_generation=self.hold.generation,
                    by=self.opts.by,
                    reason=f"held lease released: {why}",
                )
            self.hold = None
            self.native_lease = None

    # -- launch, challenge, shutdown, settlement --------------------------------------------

    def _launch_and_settle(
        self, rid: int, predecessor: int, generation: int, workspace: str, plan: Any,
        capsule: dict[str, Any], disposition: str, reasons: list[str],
    ) -> ReliefOutcome:  # fmt: skip
        launcher = self.launcher
        assert launcher is not None and self.hold is not None
        execution_class = getattr(launcher, "execution_class", "real-provider")
        try:
            # The one reservation of this attempt (the id its capacity evidence holds): the
            # challenge binds it, the report names it.
            reservation = self.relief.reserve(self.node, generation=generation,
                                              execution_class=execution_class,
                                              evidence_digest=capsule["digest"],
                                              reservation_id=held_reservation(
                                                  self.capacity))  # fmt: skip
            self.reservation = reservation
            try:
                self.ledger.request_respawn(self.node, by=self.opts.by,
                                            kind=self.opts.respawn_kind)  # fmt: skip
            except BlockedByPolicy:
                self.relief.settle_reservation(reservation, used=False)
                raise
        except BlockedByPolicy as exc:
            self._release_hold("respawn blocked")
            path = self._report(rid, plan, predecessor, None, f"not launched: {exc.message}")
            self.relief.update_relief(
                rid, state="BLOCKED", verdict="BLOCKED", finished=True, report_path=path,
                detail={"blocked": exc.message},
            )  # fmt: skip
            self._notify("BLOCKED", [*reasons, exc.message], fix=[])
            return ReliefOutcome(rid, self.node, "BLOCKED", "BLOCKED", predecessor, None, path,
                                 [*reasons, exc.message])  # fmt: skip
        interactive = getattr(launcher, "interactive", False)
        # The hook harness the successor's sessions speak (Claude Code for any other launcher).
        session_harness = (find(launcher.harness) or CLAUDE_CODE).session_harness
        session_id = str(uuid.uuid4())
        holder = INTERACTIVE_HOLDER if interactive else f"{session_harness} session {session_id}"
        native = disposition == "NATIVE_RESUME_ELIGIBLE" and self.native is not None
        # The lease the fence took for this generation: nobody else could take it meanwhile.
        lease = self.hold
        if native:
            assert self.native is not None
            session_id = self.native["session"].session_id
        self._remove_scratch(workspace)
        episodes = self.ledger.episodes(self.node, open_only=True)
        challenge = {
            "node": self.node,
            "episode": str(episodes[-1].episode_id) if episodes else "none",
            "generation": generation,
            "capsule_digest": capsule["digest"],
            "worktree_head": self.evidence.head(workspace) or "none",
            "plan_revision": capsule["payload"]["subject"].get("planRevision") or "r1",
            "capability_set": sorted(
                g for r in capsule["payload"]["capabilityRequirements"] for g in r["grants"]
            ),
            "reservation": reservation,
            "transcript_sink": f"{workspace}/.bridge/transcripts/{session_id}.jsonl",
            "nonce": new_nonce(),
        }
        self.evidence.close()  # the workspace's last question in this relief was its HEAD
        brief = self.handover
        # Written before the records below, which it does not read (it reads the settled
        # effects, which they do not change).
        prompt = successor_prompt(
            self.node, generation, challenge, brief.content if brief else None, capsule,
            onstation=onstation_argv(),
            settled=[e for e in self.ledger.effects(self.node)
                     if e.resolved_by is not None and e.generation < generation],
        )  # fmt: skip
        from onstation.relief.grants import issue_successor_grants

        # The birth, the successor's base, its lease and session, its grants and the relief's
        # LAUNCHING commit together, before anything launches (issue 14: one transaction
        # instead of six); if one fails, none is on record and the held lease is released.
        with self.ledger.transaction():
            self.relief.start_birth(self.node, generation=generation, lease_id=lease.lease_id,
                                    challenge=challenge, by=self.opts.by)  # fmt: skip
            if challenge["worktree_head"] != "none":
                # The successor's work begins at the head it is challenged with.
                self.records.record_base(self.node, generation, challenge["worktree_head"],
                                         source="launch")  # fmt: skip
            if native:
                self.records.rebind_session(session_id, generation=generation,
                                            lease_id=lease.lease_id, by=self.opts.by)  # fmt: skip
            else:
                self.ledger.hand_over_lease(self.node, lease_id=lease.lease_id,
                                            holder=self._hold_holder(rid), to=holder,
                                            by=self.opts.by)  # fmt: skip
                if not interactive:
                    self.records.bind_launched_session(
                        session_id, harness=session_harness, node=self.node,
                        generation=generation, lease_id=lease.lease_id, workspace=workspace,
                        launcher=_launcher_record(launcher),
                    )  # fmt: skip
            # Fresh grants for the new generation from the plan's translation (never wider);
            # the hooks refuse its tool calls outside them.
            granted = issue_successor_grants(self.ledger, self.node, generation, plan)
            self.relief.update_relief(rid, state="LAUNCHING", to_generation=generation)
        self.hold = None  # the successor holds it now: never released as a held lease
        if native:
            self.say(f"native resume of session {session_id}")
        self.say(f"granted generation {generation}: {', '.join(granted) or 'nothing'}")
        if interactive:
            self.records.record_document(self.node, kind="prompt", path="(successor prompt)",
                                         content={"markdown": prompt}, by=self.opts.by)  # fmt: skip
            self.say(
                f"waiting for a Claude Code session in {workspace} to take generation "
                f"{generation} (start one, or /clear the one you have)"
            )
            running, why = self._challenge(generation, None, challenge["nonce"])
            return self._after_challenge(rid, predecessor, generation, plan, disposition, reasons,
                                         reservation, running, why, None)  # fmt: skip
        spec = LaunchSpec(node=self.node, generation=generation, session_id=session_id,
                          workspace=workspace, prompt=prompt, challenge=challenge,
                          db=self.opts.db, log_dir=str(Path(workspace) / ".bridge" / "bodies"),
                          extra_args=self.opts.launch_args,
                          resume_transcript=str(self.native["session"].transcript_path)
                          if native and self.native is not None else None,
                          tools=_granted_tools(capsule),
                          ledger=getattr(self.ledger.backend, "url", None))  # fmt: skip
        self.say(f"launch generation {generation} ({_launcher_name(launcher)})")
        try:
            body = launcher.launch(spec)
        except OnstationError as exc:
            self.relief.decide_birth(self.node, generation=generation, running=False,
                                     reason=f"body never started: {exc.message}",
                                     by=self.opts.by)  # fmt: skip
            self.relief.settle_reservation(reservation, used=False)
            path = self._report(rid, plan, predecessor, generation, "BIRTH_FAILED: never started")
            self.relief.update_relief(rid, state="BIRTH_FAILED", finished=True, report_path=path)
            return ReliefOutcome(rid, self.node, disposition, "BIRTH_FAILED", predecessor,
                                 generation, path, [*reasons, "body never started"])  # fmt: skip
        running, why = self._challenge(generation, body, challenge["nonce"])
        return self._after_challenge(rid, predecessor, generation, plan, disposition, reasons,
                                     reservation, running, why, body)  # fmt: skip

    def _after_challenge(
        self, rid: int, predecessor: int, generation: int, plan: Any, disposition: str,
        reasons: list[str], reservation: str, running: bool, why: str,
        body: LaunchedBody | None,
    ) -> ReliefOutcome:  # fmt: skip
        pid = body.pid if body is not None else None
        if not running:
            self.relief.settle_reservation(reservation, used=False)
            if body is not None:
                self._stop_process(body)
            path = self._report(rid, plan, predecessor, generation, f"BIRTH_FAILED: {why}")
            self.relief.update_relief(rid, state="BIRTH_FAILED", finished=True,
                                      report_path=path, detail={"birth": why})  # fmt: skip
            return ReliefOutcome(rid, self.node, disposition, "BIRTH_FAILED", predecessor,
                                 generation, path, [*reasons, why], pid)  # fmt: skip
        self.say(f"generation {generation} is RUNNING ({why})")
        brief = self.handover
        self._create_successor_task(brief.path if brief else None, generation)
        shutdown = self._shut_down_predecessor(predecessor)
        self.relief.settle_reservation(reservation, used=True)
        path = self._report(rid, plan, predecessor, generation, f"RUNNING; {shutdown}")
        self.relief.update_relief(
            rid, state="SETTLED", finished=True, report_path=path,
            detail={"shutdown": shutdown, "successor_pid": pid},
        )  # fmt: skip
        self.say(f"settled: report {path}")
        return ReliefOutcome(rid, self.node, disposition, "SETTLED", predecessor, generation,
                             path, reasons, pid)  # fmt: skip

    def _challenge(
        self, generation: int, body: LaunchedBody | None, nonce: str
    ) -> tuple[bool, str]:
        """RUNNING only when the echo, the process witness and a heartbeat all agree.

        ``body`` is the process onstation launched; None for an interactive successor, whose
        process witness is taken by its SessionStart hook when a session takes the lease.
        """
        witnesses = self.witnesses

        launched = None
        if body is not None:
            # The marker the launcher gave it is the second fact a later signal must match.
            marker = getattr(body, "marker", None)
            extra = {} if marker is None else {"marker": marker}
            launched = witnesses.observe(
                body.pid, nonce=nonce, observed_at=_iso(self.ledger.now()), **extra
            )
            if launched is not None:
                self.relief.set_launch_witness(self.node, generation, launched.to_json())
        missing = "no heartbeat in time"
        # A poll reads again only after something was committed since its last read (issue 14).
        poll = Reread(self.ledger, lambda: self._birth_and_lease(generation))
        for _ in self._wait("the successor's challenge echo", self.opts.challenge_wait):
            birth, lease = poll()
            if body is None and birth.launch_witness is not None and launched is None:
                launched = witnesses.ProcessWitness.from_json(birth.launch_witness)
                self.say(f"a session took the lease (pid {launched.pid}); waiting for its echo")
            root = launched.pid if launched is not None else None
            if birth.answered_at is not None and launched is not None:
                assert lease is not None  # handed over before the launch
                heartbeat = lease.renewed_at > lease.acquired_at
                check = witnesses.check(launched)
                followed = witnesses.follow_exec(launched, check)
                if followed is not launched:
                    # Same process (pid, start time, marker), another program: a wrapper or a
                    # version-manager shim exec'd the host. Later checks compare against it.
                    self.relief.set_launch_witness(self.node, generation, followed.to_json())
                    self.say(f"the successor process exec'd: {check.reason}")
                    launched = followed
                answer = birth.answer_witness or {}
                answer_pid = answer.get("pid")
                answered_by_body = (
                    answer_pid in (root, None)
                    or _descends(answer_pid, launched.pid)
                    # A sandbox in its own PID namespace (Codex's, on Linux) shows the answer
                    # under other pids; the launch marker, inherited only by the launched
                    # process's descendants, still names it.
                    or (launched.marker is not None and answer.get("marker") == launched.marker)
                )
                # What still disagrees, for the reason given if the wait runs out.
                problems = []
                if not answered_by_body:
                    problems.append(f"the challenge was answered from process {answer_pid}, "
                                    f"which is not the successor (pid {launched.pid}) or its "
                                    "descendant")  # fmt: skip
                if not heartbeat:
                    # Hooks renew a launched body's lease: none did, so none of its hooks ran.
                    problems.append("no heartbeat in time: no hook of the successor renewed its "
                                    "lease (are onstation's hooks installed and trusted there? "
                                    "onstation doctor)")  # fmt: skip
                if check.state != "MATCH":
                    problems.append(f"the successor's process does not match: {check.reason}")
                missing = "; ".join(problems) or missing
                if check.state == "MATCH" and heartbeat and answered_by_body:
                    self.relief.decide_birth(self.node, generation=generation, running=True,
                                             reason="echo, process and heartbeat witnesses agree",
                                             by=self.opts.by)  # fmt: skip
                    return True, "echo, process and heartbeat witnesses agree"
            exited = body.process.poll() if body is not None else None
            if exited is not None and (birth.answered_at is None or launched is None):
                reason = f"exited before the challenge (exit {exited})"
                self.relief.decide_birth(self.node, generation=generation, running=False,
                                         reason=reason, by=self.opts.by)  # fmt: skip
                return False, reason
        birth = self.relief.birth(self.node, generation)
        state = "unknown" if launched is None else witnesses.check(launched).state
        if body is None and launched is None:
            reason = "no session took the successor's lease in time"
        elif birth is None or birth.answered_at is None:
            reason = "no challenge answer in time"
        else:
            reason = missing
        reason += f" (process {state.lower()}; effects revoked, never assumed dead)"
        self.relief.decide_birth(self.node, generation=generation, running=False, reason=reason,
                                 by=self.opts.by)  # fmt: skip
        return False, reason

    def _birth_and_lease(self, generation: int) -> tuple[Any, Any]:
        """The successor's birth and, once answered, its lease, as of one moment (one read
        transaction: issue 14)."""
        with self.ledger.reading():
            birth = self.relief.birth(self.node, generation)
            assert birth is not None
            lease = (None if birth.answered_at is None
                     else self.ledger.lease(self.node, generation))  # fmt: skip
        return birth, lease

    def _wait(self, what: str, total: float) -> Iterator[None]:
        """Yield once per poll until ``total`` seconds have passed, showing the wait."""
        began = self.opts.monotonic()
        while (elapsed := self.opts.monotonic() - began) < total:
            self.opts.waiting(what, elapsed, total)
            yield
            self.opts.sleep(self.opts.poll)

    def _stop_process(self, body: LaunchedBody) -> None:
        witnesses = self.witnesses

        birth_nonce = "stop"
        seen = witnesses.observe(body.pid, nonce=birth_nonce,
                                 observed_at=_iso(self.ledger.now()))  # fmt: skip
        if seen is not None:
            witnesses.signal_if_match(seen, signal.SIGTERM)
        deadline = self.opts.monotonic() + 5.0
        while body.process.poll() is None and self.opts.monotonic() < deadline:
            self.opts.sleep(self.opts.poll)

    def _shut_down_predecessor(self, predecessor: int) -> str:
        """Ask, wait for approval or time out, then terminate only by a matching witness."""
        witnesses = self.witnesses

        birth = self.relief.birth(self.node, predecessor)
        if birth is not None and birth.launch_witness is not None:
            seen = witnesses.check(witnesses.ProcessWitness.from_json(birth.launch_witness))
            if seen.gone:
                return f"predecessor process already gone ({seen.reason}); nothing to shut down"
        # Addressed to the fenced generation alone: its successor never receives it.
        request = self.records.post_message(
            sender=self.opts.by, recipient=self.node, kind="shutdown_request",
            body=shutdown_request(predecessor),
            generation=predecessor,
        )  # fmt: skip
        approved = False
        # Read again only after something was committed since the last read (issue 14).
        replies = Reread(self.ledger, lambda: [m for m in self.records.messages(self.opts.by)
                                               if m.reply_to == request.message_id])  # fmt: skip
        for _ in self._wait("the predecessor's shutdown approval", self.opts.shutdown_wait):
            if replies():
                approved = True
                break
        if birth is None or birth.launch_witness is None:
            return ("shutdown approved" if approved else "shutdown not acknowledged") + (
                "; no process witness for the predecessor, no signal sent"
            )
        expected = witnesses.ProcessWitness.from_json(birth.launch_witness)
        result = witnesses.signal_if_match(expected, signal.SIGTERM)
        return (
            "shutdown approved" if approved else "shutdown timed out"
        ) + f"; predecessor process {result.state.lower()}: {result.reason}"

    def _create_successor_task(self, brief_path: str | None, generation: int) -> None:
        for task in self.relief.tasks(self.node):
            if task.status == "in_progress":
                self.relief.update_task(task.task_id, note=f"handed off to generation {generation}"
                                        f" (brief {brief_path})", by=self.opts.by)  # fmt: skip
        self.relief.create_task(
            f"continue the work of {self.node} (generation {generation})", owner=self.node,
            status="in_progress", brief_path=brief_path, by=self.opts.by,
        )  # fmt: skip

    def _report(
        self, rid: int, plan: Any, predecessor: int, successor: int | None, outcome: str, *,
        reasons: list[str] | None = None, fix: list[str] | None = None, fenced: bool = True,
    ) -> str:  # fmt: skip
        from onstation.harness.files import write_inside
        from onstation.plan.review import render_review
        from onstation.relief.documents import workspace_of
        from onstation.relief.losses import render as render_losses

        workspace = workspace_of(self.records, self.node, self.opts.workspace)
        state = "fenced for good" if fenced else "not fenced: still the live body"
        lines = [
            f"# Discontinuity report — {self.node}, relief {rid}",
            "",
            f"- predecessor generation: {predecessor} ({state})",
            f"- successor generation: {successor if successor is not None else 'none'}",
            f"- outcome: {outcome}",
        ]
        cause = getattr(self, "cause", None)
        if cause is not None:
            lines.append(f"- incident: {cause.incident} ({cause.why})")
        reservation = getattr(self, "reservation", None)
        if reservation is not None:
            lines.append(f"- reservation: {self._reservation_text(reservation, successor)}")
        capsule_digest = (plan or {}).get("capsule", {}).get("digest")
        if capsule_digest:
            lines.append(f"- capsule: {capsule_digest} (onstation capsule show {capsule_digest})")
        plan_digest = getattr(self, "plan_digest", None)
        if plan_digest:
            lines.append(f"- plan: {plan_digest} (onstation plan show {plan_digest})")
        if reasons:
            lines += ["", "## Why it stopped", "", *(f"- {r}" for r in reasons)]
        if fix:
            lines += ["", "## To fix", "", *(f"- `{f}`" for f in fix)]
        # The predecessor's late briefs, read once for the losses and the report (issue 14).
        late = [d for d in self.records.late_documents(self.node) if d.generation == predecessor]
        losses = self._losses(plan, predecessor, late, fenced=fenced)
        lines += ["", *render_losses(losses)]
        lines += ["", "## Secrets", "", *self._redaction_lines(plan)]
        expired = [_exchange_loss(m, predecessor) for m in self.expired_exchanges]
        if expired:
            lines += ["", "## Lost at this relief", "", *(f"- {loss}" for loss in expired)]
        if self.scratch_removed is not None:
            lines += ["", f"- coordinator scratch file removed: {self.scratch_removed} (its "
                          "state is in the manifest's Scratch State)"]  # fmt: skip
        if late:
            lines += ["", "## Late evidence (untrusted)", ""]
            lines += [
                f"- a brief written by generation {d.generation} after its fence: "
                f"{d.path} (kept as evidence, never as the hand-over)"
                for d in late
            ]
        review = render_review(plan, losses=losses, reservation=reservation) if plan else ""
        lines += ["", review]
        text = "\n".join(lines)
        path = write_inside(workspace, [".bridge", "reports", f"{self.node}-relief-{rid}.md"], text)
        self.records.record_document(self.node, kind="report", path=str(path),
                                     content={"markdown": text, "relief_id": rid,
                                              "outcome": outcome}, by=self.opts.by)  # fmt: skip
        return str(path)

    def _reservation_text(self, reservation: str, successor: int | None) -> str:
        """The reservation this attempt made, and whether the successor echoed that one."""
        birth = self.relief.birth(self.node, successor) if successor is not None else None
        if birth is None or birth.challenge.get("reservation") != reservation:
            return f"{reservation} (made for this attempt; no challenge bound it)"
        echoed = "echoed by the successor" if birth.answered_at is not None else "never echoed"
        return f"{reservation} (made for this attempt, bound in its challenge, {echoed})"

    def _losses(self, plan: Any, predecessor: int, late: list[Any], *,
                fenced: bool) -> list[Loss]:  # fmt: skip
        """Every loss of this relief, from what it knew (relief/losses.py gathers them);
        ``late`` is the predecessor's briefs recorded after its fence."""
        from onstation.relief.reconcile import unobserved_why

        handover = self.handover
        facts = ReliefFacts(
            fenced=fenced,
            handover_kind=handover.kind if handover is not None else None,
            handover_path=str(handover.path) if handover is not None else None,
            handover=dict(handover.content) if handover is not None else None,
            emergency_brief=getattr(self, "emergency_brief", False),
            late_briefs=[(d.generation, str(d.path)) for d in late],
            expired_exchanges=[
                (
                    f"{m.kind} from {m.sender} (message {m.message_id})",
                    _exchange_loss(m, predecessor),
                )
                for m in self.expired_exchanges
            ],
            ambiguous=[
                Ambiguous(
                    e.effect_id, str(e.operation), str(e.destination), unobserved_why(e.result)
                )
                # Only the AMBIGUOUS rows are read and decoded (issue 14), in the same order.
                for e in self.ledger.effects(self.node, state=EffectState.AMBIGUOUS)
            ]
            if fenced
            else [],
            scratch_removed=self.scratch_removed,
            plan=plan,
        )
        return gather(facts)

    def _redaction_lines(self, plan: Any) -> list[str]:
        """How many secrets each hand-over document had redacted, by kind."""
        from onstation.core.redact import describe, recorded_redactions

        documents: list[tuple[str, Any]] = []
        handover = self.handover
        if handover is not None:
            documents.append((handover.kind, handover.content))
        capsule = (plan or {}).get("capsule") or {}
        if isinstance(capsule.get("payload"), dict):
            documents.append(("capsule", capsule["payload"]))
        if not documents:
            return ["- no hand-over document was written"]
        return [f"- {name}: {describe(recorded_redactions(content))}"
                for name, content in documents]  # fmt: skip

    def _remove_scratch(self, workspace: str) -> None:
        """A coordinator's scratch file goes once its respawn is decided (the coordinator
        procedure's last step); its state was copied into the manifest."""
        handover = self.handover
        if handover is None or handover.kind != "manifest":
            return
        coordinator = str(handover.content.get("coordinator") or "")
        if not coordinator.startswith("coord-") or "/" in coordinator or ".." in coordinator:
            return
        scratch = Path(workspace) / "memory" / "agents" / "coords" / f"{coordinator}-scratch.md"
        if scratch.is_file() and not scratch.is_symlink():
            scratch.unlink()
            self.scratch_removed = str(scratch)
            self.say(f"coordinator scratch file removed: {scratch}")
