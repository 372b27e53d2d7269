"""One relief, end to end: the flow of DESIGN.md for one identity.

request the brief -> (wait, bounded; else an emergency brief from evidence) -> FENCE ->
RECONCILE -> CAPSULE (build, seal, verify) -> the incident and its verdict (translation,
capacity, governor, halt) -> only on a ready verdict: RESERVE, admit the successor's
generation provisionally, LAUNCH with its challenge, wait for the echo and the witnesses
(RUNNING, or BIRTH_FAILED and fenced) -> shut the predecessor down (request, approval or
timeout, then a signal only through a matching witness) -> SETTLE (reservation, the
discontinuity report, the relief closed).

Every step is recorded on the relief row and in the history; a verdict is not permission: the
launch also needs the governor's count and an open halt gate at the moment of admission.
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
from datetime import timedelta
from pathlib import Path
from typing import Any

from onstation.core.errors import BadInput, OnstationError
from onstation.core.timefmt import human_time
from onstation.harness.adapters import CLAUDE_CODE, find
from onstation.harness.evidence import EvidenceCache
from onstation.harness.launch import Launcher
from onstation.ledger import Ledger
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.relief_records import ReliefLedger
from onstation.relief.hook_texts import relief_request
from onstation.relief.options import Progress, ReliefOptions, ReliefOutcome, _iso
from onstation.relief.settle import LaunchAndSettle, held_reservation
from onstation.relief.successor import (
    _exchange_loss,
    _launcher_from_record,
    _missing_executable,
    _tail_digest,
    _unsafe_workspace,
    successor_prompt,
)


class Relief(LaunchAndSettle):
    """Runs one relief of one identity over one ledger."""

    def __init__(self, ledger: Ledger, node: str, options: ReliefOptions) -> None:
        self.ledger = ledger
        self.node = node
        self.opts = options
        self.records = HarnessLedger(ledger)
        self.relief = ReliefLedger(ledger)
        self.say = options.progress
        self.handover: Any = None  # the brief or manifest the successor is given
        self.native: dict[str, Any] | None = None  # a native resume candidate and its proof
        self.native_lease: Any = None  # the held lease, when it is a native resume's receipt
        self.hold: Any = None  # the new generation's lease, taken by the fence itself
        self.expired_exchanges: list[Any] = []  # exchanges open at an emergency fence
        self.scratch_removed: str | None = None
        self.emergency_brief = False  # no brief came before the fence: built from evidence
        self.reservation: str | None = None  # the attempt's reservation, once made
        self.capacity: dict[str, Any] | None = None  # the capacity evidence the verdict gets
        self.plan_digest: str | None = None  # the stored plan (onstation plan show DIGEST)
        self.cause: Any = None  # why the body is relieved (relief/incident_cause.py)
        self.launcher: Launcher | None = options.launcher
        # One workspace read for the whole relief: the capsule reuses what the brief's
        # collection proved while git status shows the same work tree, and one git cat-file
        # answers every name the relief resolves (harness/evidence.py); closed by run(), unless
        # the controller shares its kept processes among its reliefs (options.git_batches).
        self.evidence = EvidenceCache(keep_open=True, batches=options.git_batches)
        # --facts and --capacity are read once, before the fence: a file changed or removed
        # afterwards cannot turn a relief that passed its checks into one that stops midway.
        self.facts: dict[str, Any] | None = None
        self.capacity_evidence: Any = None
        if options.witnesses is None:
            from onstation.harness import witness

            options.witnesses = witness
        self.witnesses = options.witnesses

    # -- the flow ---------------------------------------------------------------------------

    def run(self) -> ReliefOutcome:
        """Relieve the identity; returns the outcome (never launches without READY)."""
        from onstation.relief.documents import workspace_of

        node = self.ledger.get_node(self.node)
        workspace = workspace_of(self.records, self.node, self.opts.workspace)
        record = self.relief.open_relief(self.node, cause=self.opts.cause, by=self.opts.by,
                                         stale_after=self.opts.stale_after)  # fmt: skip
        rid = record.relief_id
        predecessor = node.generation
        try:
            # What would stop the relief after the fence is checked before it: the working
            # body stays live, and the operator is told why and what to run.
            # Its reads share one read transaction (issue 14: one BEGIN and ROLLBACK for
            # all of them), as do the other groups of reads below with no write or wait.
            with self.ledger.reading():
                stop = _unsafe_workspace(workspace, self.node) or self._preflight(predecessor)
            if stop is not None:
                return self._not_started(rid, predecessor, *stop)
            stop = self._await_exchanges()
            if stop is not None:
                return self._not_started(rid, predecessor, *stop)
            # Why the body is relieved, read before the fence changes what the ledger shows.
            from onstation.relief.incident_cause import observed_cause, stated_cause

            with self.ledger.reading():
                observed = observed_cause(self.ledger, self.node, self.witnesses)
            self.cause = (observed if self.opts.incident is None
                          else stated_cause(self.opts.incident, observed))  # fmt: skip
            self.say(f"incident: {self.cause.incident} ({self.cause.why})")
            self._request_brief(rid)
            self.native = self._native_candidate(predecessor) if self.opts.native else None
            self.say(f"fence generation {predecessor}")
            # The fence, the relief's record of it and the fenced body's expired messages
            # commit together (issue 14: three transactions before): the compare-and-swap is
            # the same, and nobody sees a fence the relief has not recorded. A refused fence
            # writes nothing else (Ledger.transaction).
            with self.ledger.transaction():
                fence, hold = self.ledger.fence_and_hold(
                    self.node, expect_generation=predecessor, holder=self._hold_holder(rid),
                    ttl=timedelta(hours=12), by=self.opts.by, reason=f"relief {rid}",
                )  # fmt: skip
                successor = fence.generation
                self.relief.update_relief(rid, state="FENCED", to_generation=successor,
                                          detail={"held_lease": hold.lease_id,
                                                  "incident": self.cause.to_json()})  # fmt: skip
                # What was queued for the fenced body (relief requests, tier warnings) must
                # not reach its successor as if meant for it.
                self.records.expire_messages(self.node,
                                             reason=f"generation {predecessor} fenced",
                                             generation=predecessor)  # fmt: skip
            self.hold = hold
            # Evidence first (a push observed on its remote, a call the host rejected), then
            # the ledger's reconcile of what stays unproven (relief/reconcile.py).
            from onstation.relief.reconcile import observe_and_reconcile, unobserved_why

            report = observe_and_reconcile(self.ledger, self.node, by=self.opts.by)
            ambiguous = report.unresolved_ambiguous
            unobserved = {
                e: why for e in ambiguous
                if (why := unobserved_why(self.ledger.get_effect(e).result)) is not None
            }  # fmt: skip
            detail = {"ambiguous": ambiguous, "unobserved": unobserved}
            self.relief.update_relief(rid, state="RECONCILED", detail=detail)
            self.say(f"reconciled: {len(report.unresolved_ambiguous)} ambiguous effect(s)")
            for effect_id, why in unobserved.items():
                self.say(f"  {effect_id}: its destination could not be observed: {why}")
            plan, verdict, capsule = self._decide(rid, predecessor, workspace)
            disposition = str(verdict.disposition.value)
            reasons = [f"{r.code}: {r.detail}" for r in verdict.reasons]
            self.relief.update_relief(rid, state="DECIDED", verdict=disposition,
                                      detail={"reasons": reasons})  # fmt: skip
            self.say(f"verdict {disposition}")
            if disposition not in ("REBODIMENT_READY", "NATIVE_RESUME_ELIGIBLE"):
                self._release_hold("no successor launched")
                reasons += [f"UNOBSERVED: {e}: {w}" for e, w in unobserved.items()]
                path = self._report(rid, plan, predecessor, None, "no successor launched")
                self.relief.update_relief(rid, state="NOT_LAUNCHED", finished=True,
                                          report_path=path)  # fmt: skip
                self._notify(disposition, reasons, fix=[])
                return ReliefOutcome(rid, self.node, disposition, "NOT_LAUNCHED", predecessor,
                                     None, path, reasons)  # fmt: skip
            return self._launch_and_settle(rid, predecessor, successor, workspace, plan,
                                           capsule, disposition, reasons)  # fmt: skip
        except BaseException as exc:
            message = exc.message if isinstance(exc, OnstationError) else repr(exc)
            # A generation held for a successor that will never come is not left blocking the
            # identity for the hold's whole lease.
            with contextlib.suppress(Exception):
                self._release_hold("relief aborted")
            self.relief.update_relief(rid, state="ABORTED", finished=True,
                                      detail={"error": message})  # fmt: skip
            raise
        finally:
            self.evidence.close()

    def _preflight(self, predecessor: int) -> tuple[str, list[str], list[str]] | None:
        """(verdict, reasons, fix commands) when the relief cannot go on; else None.

        Everything here is known before the fence: a relief that stops on it must not leave
        the working body fenced with nothing launched.
        """
        from onstation.core.canonical import loads_strict

        node = self.ledger.get_node(self.node)
        if node.state != "ACTIVE":
            return ("INVALID", [f"IDENTITY_RETIRED: {self.node} is retired; reviving a retired "
                                "identity is out of scope"], [])  # fmt: skip
        halts = [h for h in self.ledger.halts() if h.node in (None, self.node)]
        if halts:
            halt = halts[0]
            scope = "global halt" if halt.node is None else f"halt on {halt.node}"
            lift = "onstation unhalt" + ("" if halt.node is None else f" --node {halt.node}")
            return ("BLOCKED", [f"HALTED: {scope} by {halt.by} ({halt.why})"], [lift])
        status = self.ledger.respawn_status(self.node, kind=self.opts.respawn_kind)
        if status.breaker_open:
            return ("BLOCKED", [f"BREAKER_OPEN: {status.reason}"],
                    [f"onstation breaker close {self.node} --why REASON"])  # fmt: skip
        if not status.allowed:
            reopens = human_time(status.reopens_at) if status.reopens_at else "never"
            what = "coordinator self-respawns" if self.opts.respawn_kind == "coordinator" else (
                "reliefs (births per window)")  # fmt: skip
            return (
                "BLOCKED",
                [
                    f"RESPAWN_REFUSED: {self.node} has used its {what}: "
                    f"{status.count_in_window}/{status.limit} in the window; "
                    f"reopens at {reopens}"
                ],
                [f"onstation respawn status {self.node} --kind {self.opts.respawn_kind}"],
            )
        episodes = self.ledger.episodes(self.node, open_only=True)
        stated = None
        from onstation.harness.files import MAX_SMALL_JSON_BYTES, read_bounded

        if self.opts.facts_file is not None:
            facts = loads_strict(read_bounded(self.opts.facts_file, MAX_SMALL_JSON_BYTES,
                                              "--facts"), "--facts")  # fmt: skip
            if not isinstance(facts, dict):
                raise BadInput("--facts: must hold a JSON object of capsule parts")
            self.facts = facts
            stated = facts.get("objective")
        if self.opts.capacity_file is not None:
            self.capacity_evidence = loads_strict(
                read_bounded(self.opts.capacity_file, MAX_SMALL_JSON_BYTES, "--capacity"),
                "--capacity",
            )
        if not episodes and not stated:
            return ("QUARANTINED", [f"NO_OBJECTIVE: {self.node} has no open work episode, so "
                                    "the successor would not know its objective"],
                    [f"onstation episode open {self.node} 'OBJECTIVE'"])  # fmt: skip
        if not episodes:
            # The episode is part of the successor's identity tuple: a stated objective alone
            # would leave it unknown (IDENTITY_UNKNOWN after the fence), so stop before it.
            return ("QUARANTINED", [f"IDENTITY_UNKNOWN: {self.node} has no open work episode "
                                    "(an objective stated in --facts does not name one)"],
                    [f"onstation episode open {self.node} {shlex.quote(str(stated))}"])  # fmt: skip
        if self.launcher is None:
            recorded = self.records.recorded_launcher(self.node)
            if recorded is None:
                return ("BLOCKED", [f"NO_HARNESS: no body of {self.node} recorded what it runs "
                                    "under, so nothing is known to launch"],
                        [f"onstation relieve {self.node} --harness HARNESS (one of "
                         "claude-code, codex, command, interactive)"])  # fmt: skip
            try:
                self.launcher = _launcher_from_record(recorded)
            except BadInput as exc:
                return ("BLOCKED", [f"NO_HARNESS: the recorded harness {recorded.get('harness')!r} "
                                    f"cannot be launched: {exc.message}"],
                        [f"onstation relieve {self.node} --harness HARNESS"])  # fmt: skip
        missing = _missing_executable(self.launcher)
        if missing is not None:
            return ("BLOCKED", [f"NO_HARNESS: {missing}"],
                    [f"onstation relieve {self.node} --harness HARNESS"])  # fmt: skip
        execution_class = getattr(self.launcher, "execution_class", "real-provider")
        interactive = getattr(self.launcher, "interactive", False)
        if interactive and self.opts.by == self.node:
            return ("HIBERNATE", [f"CAPACITY_UNKNOWN: an interactive successor's capacity is "
                                  f"vouched for by a person; {self.node} cannot vouch for its "
                                  "own successor"],
                    [f"onstation relieve {self.node} --harness interactive --by NAME"])  # fmt: skip
        if (
            execution_class not in ("fake",) and not interactive
            and self.opts.capacity_file is None
        ):  # fmt: skip
            return ("HIBERNATE", ["CAPACITY_UNKNOWN: a real-provider successor needs capacity "
                                  "evidence, and none was given"],
                    [f"onstation relieve {self.node} --capacity FILE"])  # fmt: skip
        return None

    def _await_exchanges(self) -> tuple[str, list[str], list[str]] | None:
        """A coordinator is not fenced in the middle of an APPROACH or CHECKPOINT exchange.

        Wait (bounded) for it to close; at an emergency the fence goes ahead and each exchange
        still open is named as a loss in the brief and the report.
        """
        open_ = self.records.open_exchanges(self.node)
        if not open_:
            return None
        if self.opts.emergency:
            self.expired_exchanges = open_
            self.say(f"emergency: {len(open_)} open exchange(s) will expire at the fence")
            return None
        self.say(f"waiting for {len(open_)} open exchange(s) to close")
        for _ in self._wait("an open APPROACH/CHECKPOINT exchange", self.opts.exchange_wait):
            open_ = self.records.open_exchanges(self.node)
            if not open_:
                return None
        names = ", ".join(f"{m.kind} from {m.sender} (message {m.message_id})" for m in open_)
        return (
            "BLOCKED",
            [f"EXCHANGE_OPEN: {names} awaits a reply; a coordinator is not relieved mid-exchange"],
            [f"onstation relieve {self.node} --emergency (the exchange is then lost)"],
        )

    def _not_started(
        self, rid: int, predecessor: int, verdict: str, reasons: list[str], fix: list[str]
    ) -> ReliefOutcome:
        """End a relief that stopped before its fence: nothing fenced, nothing launched."""
        self.say(f"not started: {'; '.join(reasons)}")
        unsafe = any(r.startswith("WORKSPACE_UNSAFE") for r in reasons)
        # Where the workspace is unsafe to write, the reasons stay in the ledger alone.
        path = None if unsafe else self._report(rid, None, predecessor, None,
                            f"{verdict}: not started; generation {predecessor} was not fenced "
                            "and is still the live body", reasons=reasons, fix=fix,
                            fenced=False)  # fmt: skip
        self.relief.update_relief(rid, state="NOT_STARTED", verdict=verdict, finished=True,
                                  report_path=path, detail={"reasons": reasons, "fix": fix,
                                                            "fenced": False})  # fmt: skip
        self._notify(verdict, reasons, fix=fix)
        return ReliefOutcome(rid, self.node, verdict, "NOT_STARTED", predecessor, None, path,
                             reasons, fenced=False, fix=fix)  # fmt: skip

    def _request_brief(self, rid: int) -> None:
        from onstation.relief.documents import Supplied, write_brief

        requested = self.ledger.now()
        with self.ledger.reading():
            before = self.records.latest_document(self.node, "brief")
            generation = self.ledger.get_node(self.node).generation
            written = [
                doc for doc in (before, self.records.latest_document(self.node, "manifest"))
                if doc is not None and doc.generation == generation
            ]  # fmt: skip
        if written:
            # The body already handed over (a brief at Red, a coordinator's manifest).
            latest = max(written, key=lambda d: d.at)
            self.handover = latest
            self.relief.update_relief(rid, state="BRIEFED", detail={latest.kind: latest.path})
            self.say(f"{latest.kind} already written: {latest.path}")
            return
        if not self.opts.emergency:
            self.records.post_message(
                sender=self.opts.by, recipient=self.node, kind="relief_requested",
                body=relief_request(self.node, generation),
                generation=generation,
            )  # fmt: skip
            for session in self.records.sessions(self.node):
                if session.state == "ADMITTED":
                    self.records.set_session_flag(session.session_id, "relief_requested_at")
            self.say(f"requested a turnover brief (waiting up to {self.opts.brief_wait:.0f} s)")
            for _ in self._wait("the turnover brief", self.opts.brief_wait):
                fresh = self.records.latest_document(self.node, "brief")
                if fresh is not None and fresh.at >= requested and fresh != before:
                    latest = fresh
                    self.handover = latest
                    self.relief.update_relief(rid, state="BRIEFED",
                                              detail={"brief": latest.path})  # fmt: skip
                    self.say(f"brief received: {latest.path}")
                    return
        path, _content = write_brief(
            self.ledger, self.node,
            Supplied({"reason": "emergency brief built from evidence alone"}),
            workspace=self.opts.workspace, by=self.opts.by,
            losses=[_exchange_loss(m, generation) for m in self.expired_exchanges],
            notify_spawner=False, evidence_cache=self.evidence,
        )  # fmt: skip
        self.handover = self.records.latest_document(self.node, "brief")
        self.emergency_brief = True
        self.relief.update_relief(rid, state="BRIEFED",
                                  detail={"brief": str(path), "emergency": True})  # fmt: skip
        self.say(f"emergency brief from evidence: {path}")

    def _decide(self, rid: int, predecessor: int, workspace: str) -> tuple[Any, Any, Any]:
        import dataclasses

        from onstation.core.verdict import Disposition, Reason
        from onstation.ledger.correspondence import Correspondence
        from onstation.plan.build import build_digested_payload
        from onstation.plan.capsule import seal
        from onstation.plan.embedded import digest_of_canonical, spliced_canonical
        from onstation.plan.incident import resurrect
        from onstation.plan.keys import KeyStore
        from onstation.plan.validator import check_capsule, validate_plan

        store = KeyStore()
        keys = store.list()
        own = [k for k in keys if k.has_private]
        key = own[0] if own else store.generate(label="relief")
        # The keys trusted for this decision: read once, for the verdict and the validator.
        trusted = {k.key_id: bytes.fromhex(k.public_hex) for k in keys} if own else store.trusted()
        now = self.ledger.now()
        launcher = self.launcher
        assert launcher is not None
        # Made once: the capsule cites the very evidence the verdict then checks, so the
        # capsule never says "capacity unknown" beside evidence the verdict used.
        self.capacity = self._capacity(
            getattr(launcher, "execution_class", "real-provider"), launcher.harness, now
        )
        # The body's work is what it changed since its generation began (its recorded base),
        # not only what is uncommitted; a base rewritten away since is not passed (the
        # capsule then says no base is known).
        base = self.records.base_of(self.node, predecessor)
        if base is not None and self.evidence.commit_of(workspace, base) is None:
            base = None
        evidence = self.evidence.collect(workspace, base)
        with self.ledger.reading():
            # The body the capsule is about, read once: its parts and the incident's
            # sourceHarness come from the same session record.
            session = self._body_session(predecessor)
            agent = self._agent_parts(predecessor, workspace, evidence, session)
        stated = _capacity_state(self.capacity)
        if stated is not None:
            agent.setdefault("capacityState", stated)
        # The payload is canonicalized once, as it is built: this relief seals, verifies and
        # validates that very object and lets no one else change it meanwhile, and the
        # incident's and the plan's digests splice in its bytes. The signature and the stated
        # digest are still checked at each step.
        built = build_digested_payload(self.ledger, self.node, evidence=evidence, agent=agent,
                                       now=now, generation=predecessor)  # fmt: skip
        sealed_digest = built.digest
        capsule = seal(built.payload, store.private(key.key_id), issued_at=_iso(now),
                       payload_digest=sealed_digest)  # fmt: skip
        sealed_bytes = spliced_canonical(capsule, "payload", built.canonical)
        objects = Correspondence(self.ledger)
        objects.store_object("capsule", self.node, capsule["digest"], capsule,
                             canonical=sealed_bytes)  # fmt: skip
        with self.ledger.reading():
            incident = self._incident(predecessor, capsule, now, session)
        # The sealed capsule is checked once (its defects, fingerprints and signatures) for
        # the verdict and the validator both: each reuses the check only for this very
        # document, under the same keys (plan/validator.py CapsuleCheck).
        capsule_check = check_capsule(capsule, trusted, sealed_digest)
        plan, verdict = resurrect(incident, now=now, trusted=trusted,
                                  capsule_digest=sealed_digest,
                                  capsule_canonical=sealed_bytes,
                                  capsule_check=capsule_check)  # fmt: skip
        # The plan goes through the schema and the semantic validator before any verdict
        # that permits a launch; an invalid plan launches nothing.
        checked = validate_plan(plan, trusted=trusted, capsule_digest=sealed_digest,
                                capsule_check=capsule_check)  # fmt: skip
        if not checked.valid and verdict.disposition.value in _LAUNCHING:
            verdict = dataclasses.replace(
                verdict, disposition=Disposition.QUARANTINED,
                reasons=(*verdict.reasons, *(
                    Reason("PLAN_INVALID", f"{v.rule} {v.pointer}: {v.message}")
                    for v in checked.violations)),
            )  # fmt: skip
        plan_bytes = spliced_canonical(plan, "capsule", sealed_bytes)
        plan_digest = digest_of_canonical(PLAN_SCOPE, plan_bytes)
        with self.ledger.transaction():  # the stored plan and the record citing it, together
            objects.store_object("plan", self.node, plan_digest, plan, canonical=plan_bytes)
            self.relief.update_relief(rid, state="SEALED", detail={
                "capsule_digest": capsule["digest"], "plan_digest": plan_digest,
                "plan_violations": [v.to_json() for v in checked.violations]})  # fmt: skip
        self.plan_digest = plan_digest
        return plan, verdict, capsule

    def _agent_parts(
        self, predecessor: int, workspace: str, evidence: Any, session: Any
    ) -> dict[str, Any]:
        """The capsule parts from the predecessor's body (its capabilities, hook journal and
        transcript tail) and from what its agent stated (claims, each with its trust class;
        ``--facts`` wins where it states a part). ``session``: the body's newest session
        (:meth:`_body_session`), the one the incident's sourceHarness also comes from."""
        from onstation.harness.transcript_tail import tail_for_session
        from onstation.relief.handover_parts import (
            brief_claims,
            capability_requirements,
            configured_mcp_servers,
            ledger_parts,
            work_artifacts,
        )
        from onstation.relief.tool_journal import journal_parts

        source = self._source_harness(session)
        parts: dict[str, Any] = dict(journal_parts(self.records, self.node, predecessor))
        used = [str(p["tool"]) for p in parts.get("toolPairs", [])]
        granted = [g.capability for g in self.ledger.grants(self.node)
                   if g.generation == predecessor]  # fmt: skip
        parts["capabilityRequirements"] = capability_requirements(
            source_harness=source, used=used, granted=granted,
            configured_mcp=configured_mcp_servers(workspace, source),
        )  # fmt: skip
        if session is not None:
            try:
                tail = tail_for_session(session.transcript_path, session.telemetry_cursor, source)
            except BadInput as exc:  # not a regular file, a corrupt cursor: noted, not fatal
                self.say(f"transcript tail not read: {exc.message}")
                tail = None
            if tail is not None and tail.entries:
                parts["transcript"] = {"cursor": tail.cursor, "tail": tail.entries,
                                       "truncated": tail.truncated}  # fmt: skip
        from onstation.ledger.relief_records import ReliefLedger

        notes = [n for n in self.records.notes(self.node) if n.kind == "decision"]
        tasks = [t for t in ReliefLedger(self.ledger).tasks(self.node) if t.status != "completed"]
        brief = self.handover
        if brief is not None and not self.emergency_brief:
            # What the capsule's git-diff artifact holds (none without a patch: nothing cited).
            diff = evidence.diff
            changed = [] if diff is None or diff.patch_sha256 is None else [
                *(f.path for f in diff.files), *evidence.untracked_files]  # fmt: skip
            claims = brief_claims(brief.content, path=str(brief.path), changed_files=changed,
                                  recorded_decisions=[n.text for n in notes],
                                  open_tasks=[t.title for t in tasks])  # fmt: skip
            parts["artifacts"] = [*parts.get("artifacts", []), *claims.pop("artifacts")]
            parts.update(claims)
        parts = ledger_parts(parts, decisions=[(n.text, n.rationale) for n in notes],
                             tasks=[(t.task_id, t.title, t.status) for t in tasks])  # fmt: skip
        base = evidence.requested_base_commit
        log = self.evidence.commits_since(workspace, base, head=evidence.head) if base else None
        parts["artifacts"] = [*parts.get("artifacts", []), *work_artifacts(
            [] if log is None else [(c.commit, c.subject) for c in log.commits],
            None if log is None else log.total, evidence.untracked_files)]  # fmt: skip
        if self.facts is not None:
            ours = parts.get("artifacts", [])
            parts.update(self.facts)  # what the agent states explicitly wins over the brief
            # ... but the artifacts the parts kept (the journal's, the ledger's) stay cited.
            stated = {a.get("id") for a in parts.get("artifacts", []) if isinstance(a, dict)}
            parts["artifacts"] = [*parts.get("artifacts", []),
                                  *(a for a in ours if a["id"] not in stated)]  # fmt: skip
        return parts

    def _body_session(self, generation: int) -> Any:
        """The newest session of ``generation`` (the body the capsule is about), if any."""
        sessions = [s for s in self.records.sessions(self.node) if s.generation == generation]
        return sessions[-1] if sessions else None

    def _source_harness(self, session: Any) -> str:
        """The ``sourceHarness`` of the body: the host its sessions spoke, else the harness
        its launcher recorded, else Claude Code (the hooks' default)."""
        harness = session.harness if session is not None else None
        if harness is None:
            harness = (self.records.recorded_launcher(self.node) or {}).get("harness")
        return (find(harness, aliases=False) or CLAUDE_CODE).source_harness

    def _incident(
        self, predecessor: int, capsule: dict[str, Any], now: Any, session: Any
    ) -> dict[str, Any]:
        node = self.ledger.get_node(self.node)
        held = self.ledger.leases(self.node)
        leases = {ls.generation: ls for ls in held}
        before = leases.get(predecessor)
        # The run whose work this is: the predecessor's, or (a generation vacated when an
        # earlier relief launched nothing) the newest body before it.
        run = next((ls for ls in reversed(held) if ls.generation <= predecessor), None)
        episodes = self.ledger.episodes(self.node, open_only=True)
        episode = str(episodes[-1].episode_id) if episodes else "none"
        respawn = self.ledger.respawn_status(self.node, kind=self.opts.respawn_kind)
        launcher = self.launcher
        assert launcher is not None
        execution_class = getattr(launcher, "execution_class", "real-provider")
        capacity = self.capacity
        subject = capsule["payload"]["subject"]
        # A halt on another identity does not stop this one.
        halted = [h for h in self.ledger.halts() if h.node in (None, self.node)]
        allowed = respawn.allowed and not halted
        detail = respawn.reason if not halted else f"halted: {halted[0].why}"
        cause = self.cause
        assert cause is not None
        incident = cause.incident
        source_harness = self._source_harness(session)
        # The identity tuple comes from records; a part none holds is a gap the verdict
        # names (IDENTITY_UNKNOWN), never a placeholder that looks like a record.
        gaps = []
        intent = subject.get("workIntent")
        if not intent:
            gaps.append("the work intent (no open episode's objective, none stated)")
        if not episodes:
            gaps.append("the work episode (no open episode)")
        if run is None:
            gaps.append(f"the predecessor's run (no generation up to {predecessor} ever held "
                        "a lease)")  # fmt: skip
        revision = subject.get("planRevision") or (
            f"{episode}@g{predecessor}" if episodes else None)  # fmt: skip
        return {
            "schema": "onstation.incident/v1",
            "asOf": _iso(now),
            "request": {"operation": "rebodiment", "requestedBy": self.opts.by,
                        "reason": f"relief of {self.node} ({self.opts.cause})"},
            "observations": {
                "observedAt": _iso(now),
                "summary": f"relief of {self.node}: {incident}: {cause.why}"[:1000],
                "bodyEverWitnessed": before is not None,
                "processState": "unknown" if before is None else cause.process_state,
                "heartbeatLost": incident == "hang", "providerStreamLost": False,
                "sessionRecordLost": False, "contextPressure": incident == "context-pressure",
                "hostRebooted": False, "deliberatePause": False,
            },
            "subject": {"principal": self.opts.by,
                        "workIntent": intent or "unknown",
                        "planRevision": revision or "unknown",
                        "node": self.node, "episode": episode if episodes else "unknown",
                        "predecessorRun": str(run.run_id) if run else "unknown",
                        "latestGeneration": node.generation},
            **({"identityGaps": gaps} if gaps else {}),
            "identitySources": [{"source": "ledger", "node": self.node,
                                 "generation": node.generation,
                                 **({"episode": episode} if episodes else {})},
                                {"source": "capsule", "node": self.node}],
            "predecessor": {"generation": predecessor, "fenced": True,
                            "leaseState": "FENCED" if before is not None else "NONE",
                            "effectsRevoked": True},
            "capsule": capsule,
            "sourceHarness": source_harness,
            "proposal": {"harness": launcher.harness, "executionClass": execution_class,
                         "model": launcher.model},
            "nativeSession": self._session_proof(now=now),
            "leaseReceipt": self._lease_receipt(),
            "capacity": capacity,
            "respawn": {"allowed": allowed, "detail": detail[:1000],
                        "retryOwner": self.opts.by,
                        "reservation": held_reservation(self.capacity) or f"relief-{self.node}"},
        }  # fmt: skip

    def _native_candidate(self, predecessor: int) -> dict[str, Any] | None:
        """The predecessor's provider session, with its transcript tail as of the fence."""
        sessions = [
            s for s in self.records.sessions(self.node)
            if s.state == "ADMITTED" and s.generation == predecessor and s.transcript_path
        ]  # fmt: skip
        if not sessions or not Path(str(sessions[-1].transcript_path)).is_file():
            self.say("no native resume: the predecessor's session or transcript is unknown")
            return None
        session = sessions[-1]
        return {"session": session, "expected": _tail_digest(str(session.transcript_path))}

    def _session_proof(self, *, now: Any) -> dict[str, Any] | None:
        """Proof for a native resume, or None: only when the predecessor's process is proven
        gone (no two processes may ever share one provider session), the workspace is the
        bound one, and the transcript's tail is unchanged since the fence."""
        if self.native is None:
            return None
        session = self.native["session"]
        birth = self.relief.birth(self.node, session.generation)
        if birth is None or birth.launch_witness is None:
            self.say("no native resume: the predecessor's process was never witnessed")
            return None
        seen = self.witnesses.check(self.witnesses.ProcessWitness.from_json(birth.launch_witness))
        if not seen.gone:
            self.say(
                f"no native resume: the predecessor's process is not proven gone ({seen.reason})"
            )
            return None
        path = str(session.transcript_path)
        observed = _tail_digest(path) if Path(path).is_file() else "0" * 64
        # The lease the fence took for the new generation is the exclusive lease receipt.
        self.native_lease = self.hold
        return {
            "harness": session.harness, "sessionId": session.session_id,
            "workspaceBound": session.workspace is not None,
            "transcriptRetained": Path(path).is_file(),
            "expectedTailDigest": self.native["expected"], "observedTailDigest": observed,
            "checkedAt": _iso(now),
        }  # fmt: skip

    def _lease_receipt(self) -> dict[str, Any] | None:
        lease = self.native_lease
        if lease is None:
            return None
        return {
            "node": self.node, "generation": lease.generation, "leaseId": lease.lease_id,
            "exclusive": True, "state": lease.state.value,
            "issuedAt": _iso(lease.acquired_at), "expiresAt": _iso(lease.expires_at),
        }  # fmt: skip

    def _capacity(self, execution_class: str, harness: str, now: Any) -> dict[str, Any] | None:
        """The capacity evidence the verdict uses; its reservation id is the one the ledger
        reserves under, the challenge binds and the report names (one id per attempt)."""
        if self.opts.capacity_file is not None:
            return {"evidence": self.capacity_evidence}
        interactive = getattr(self.launcher, "interactive", False)
        if execution_class != "fake" and not interactive:
            return None  # real providers need real evidence: the verdict will HIBERNATE
        # (An interactive successor's voucher is never the body relieved: _preflight.)
        until = now + timedelta(minutes=30)
        units = [{"unit": "context-tokens", "available": 200000, "required": 60000,
                  "uncertaintyReserve": 20000},
                 {"unit": "concurrency", "available": 1, "required": 1,
                  "uncertaintyReserve": 0}]  # fmt: skip
        return {"evidence": {
            "schema": "onstation.capacity-evidence/v1",
            "evidenceId": f"cap-{secrets.token_hex(4)}",
            "node": self.node,
            # An interactive successor is a session the person at the terminal starts: the
            # capacity is theirs, and choosing to relieve is their evidence of it, so the
            # evidence names who vouched.
            "producer": (f"operator {self.opts.by}, vouching for the interactive successor"
                         if interactive else "onstation-fake-harness")[:256],
            "executionClass": execution_class, "harness": harness,
            "provider": "operator" if interactive else "fake",
            "billing": "none", "observedAt": _iso(now), "validUntil": _iso(until),
            "freshness": "fresh", "units": units,
            "reservation": {"reservationId": f"res-{secrets.token_hex(8)}",
                            "heldBy": self.opts.by, "expiresAt": _iso(until),
                            "units": [{"unit": "context-tokens", "amount": 80000},
                                      {"unit": "concurrency", "amount": 1}]},
            "marginalCostUsd": 0,
        }}  # fmt: skip


#: Dispositions that permit a launch: only these are held back by an invalid plan.
_LAUNCHING = ("REBODIMENT_READY", "NATIVE_RESUME_ELIGIBLE")
#: The scope of a stored plan's digest.
PLAN_SCOPE = "onstation-resurrection-plan-v1"


def _capacity_state(capacity: dict[str, Any] | None) -> dict[str, Any] | None:
    """The capsule's capacityState citing ``capacity``'s evidence, or None when it cannot."""
    from onstation.plan.validator import capacity_digest

    evidence = capacity.get("evidence") if capacity is not None else None
    if not isinstance(evidence, dict):
        return None
    try:
        digest = capacity_digest(evidence)
    except BadInput:
        return None  # no canonical form: the verdict says so; the capsule stays "unknown"
    execution_class = evidence.get("executionClass")
    producer = str(evidence.get("producer") or "unknown producer")[:200]
    return {
        "evidenceDigest": digest,
        "executionClass": execution_class
        if execution_class in ("real-provider", "fake", "replay") else None,
        "note": f"capacity evidence from {producer}, valid until {evidence.get('validUntil')}",
    }  # fmt: skip


__all__ = ["Progress", "Relief", "ReliefOptions", "ReliefOutcome", "successor_prompt"]
