"""Harness records in the ledger: workspaces, harness sessions as bodies, tool calls,
telemetry and tier marks, messages, notes and hand-over documents.

A harness session (a Claude Code session id, a Codex thread) is a body. It is admitted for
the identity its workspace works for when that identity has no live body, and bound to that
identity and the generation it was admitted for; any other session meanwhile is refused.
Admission is one transaction with the identity's row locked first (fence the dead generation,
admit the new one), so sessions racing for one identity end with exactly one admitted, and
none is told it is the body and then fenced by a racing newcomer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from onstation.core.errors import BadInput
from onstation.core.names import validate_free_text, validate_name
from onstation.core.types import Record
from onstation.ledger.backends import Row, Tx
from onstation.ledger.base import _at, from_us
from onstation.ledger.correspondence import Document, Message, Note
from onstation.ledger.fastpath import WORKSPACE_BINDINGS, closest_binding, workspace_candidates
from onstation.ledger.generation_bases import GenerationBases
from onstation.ledger.tool_outcomes import ToolOutcomes

#: Harness sessions sit idle for hours between prompts; a long lease renewed by every hook.
SESSION_LEASE_TTL = timedelta(hours=12)

#: Reading sources that describe a context right after a compaction (no usage yet).
_POST_COMPACTION = ("transcript.post_compaction",)

#: The holder of a successor lease that waits for the next interactive session to take it.
INTERACTIVE_HOLDER = "interactive successor (waiting for a session)"


@dataclass(frozen=True)
class BodySession(Record):
    """One harness session and the body it is (or was refused as)."""

    session_id: str
    harness: str
    node: str
    generation: int
    lease_id: int | None
    state: str
    workspace: str | None
    bound_at: datetime
    relief_requested_at: datetime | None
    stop_blocked_at: datetime | None
    telemetry_cursor: dict[str, Any] | None
    transcript_path: str | None = None
    #: What the body runs under: {"harness": ...} and, for a launched body, its launch options.
    launcher: dict[str, Any] | None = None
    #: The context window the host declared for this body (tokens), once it has.
    context_window: int | None = None
    #: The body's context epoch: 0, then one more at each compaction.
    context_epoch: int = 0


@dataclass(frozen=True)
class Admission(Record):
    """The answer to "may this session act for the identity?"."""

    session: BodySession
    admitted: bool
    fenced: bool
    holder: str | None
    reason: str


#: SessionStart sources with which a host says a new session id continues the conversation of
#: the same process (Claude Code: ``resume``, ``clear``, ``compact``, ``fork``; Codex:
#: ``resume``, ``clear``, ``compact``): see docs/hosts.md.
CONTINUING_SOURCES = frozenset({"resume", "clear", "compact", "fork"})

#: The facts that make two process witnesses the same process (see onstation.harness.witness).
_PROCESS_IDENTITY = ("host", "boot_id", "pid", "start_ticks", "start_clock")


def same_process(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two process witnesses (as JSON) name one process: host, boot, pid and start
    time agree (the executable may differ after an exec; the nonce is per observation)."""
    return all(a.get(k) == b.get(k) for k in _PROCESS_IDENTITY) and a.get("pid") is not None


def holder_for(harness: str, session_id: str) -> str:
    """The lease holder string of a harness session (how admission stays idempotent)."""
    return f"{harness} session {session_id}"


def _session(row: Row) -> BodySession:
    return BodySession(
        session_id=row[0],
        harness=row[1],
        node=row[2],
        generation=int(row[3]),
        lease_id=None if row[4] is None else int(row[4]),
        state=row[5],
        workspace=row[6],
        bound_at=_at(row[7]),
        relief_requested_at=from_us(row[8]),
        stop_blocked_at=from_us(row[9]),
        telemetry_cursor=None if row[10] is None else json.loads(row[10]),
        transcript_path=row[11],
        launcher=None if row[12] is None else json.loads(row[12]),
        context_window=None if row[13] is None else int(row[13]),
        context_epoch=int(row[14] or 0),
    )


def _validate_session_id(session_id: str) -> str:
    validate_free_text(session_id, "session_id", 256)
    if not session_id.strip():
        raise BadInput("session_id: must not be empty", field="session_id")
    return session_id


class HarnessLedger(GenerationBases, ToolOutcomes):
    """The harness-facing records, over one :class:`Ledger` (same database, same clock):
    workspaces, sessions as bodies, tool calls and telemetry here; messages, notes and
    documents from :class:`~onstation.ledger.correspondence.Correspondence`; generation bases
    from :class:`~onstation.ledger.generation_bases.GenerationBases`."""

    # -- workspaces ---------------------------------------------------------------------------

    def bind_workspace(self, path: str, node: str, *, harness: str, by: str) -> None:
        """Declare that the workspace at ``path`` (and below) works for ``node``."""
        validate_name(node, "node")
        validate_name(harness, "harness")
        real = os.path.realpath(path)

        def body(tx: Tx, now: int) -> None:
            self.ledger._get_node(tx, node)
            tx.run(self._q("workspace_binding_delete"), (real,))
            tx.run(self._q("workspace_binding_insert"), (real, node, harness, now))
            self.ledger._event(tx, now, node=node, kind="workspace.bound", generation=None,
                               actor=by, path=real, harness=harness)  # fmt: skip

        self.ledger._write(body)

    def unbind_workspace(self, path: str, *, by: str) -> str | None:
        """Forget the binding of exactly ``path``; returns the node it was bound to."""
        real = os.path.realpath(path)

        def body(tx: Tx, now: int) -> str | None:
            row = tx.one(self._q("workspace_binding_node"), (real,))
            if row is None:
                return None
            tx.run(self._q("workspace_binding_delete"), (real,))
            self.ledger._event(tx, now, node=row[0], kind="workspace.unbound", generation=None,
                               actor=by, path=real)  # fmt: skip
            return str(row[0])

        return self.ledger._write(body)

    def node_for_workspace(self, path: str) -> tuple[str, str] | None:
        """(node, bound path) of the closest bound ancestor of ``path``, if any."""
        candidates = workspace_candidates(path)
        sql = WORKSPACE_BINDINGS.format(marks=", ".join("?" for _ in candidates))
        return self.ledger._read(lambda tx, _now: closest_binding(tx.all(sql, candidates)))

    # -- sessions as bodies -------------------------------------------------------------------

    def workspace_of(self, node: str) -> str | None:
        """The workspace most recently bound to ``node`` (None when it has none)."""
        row = self.ledger._read(
            lambda tx, _now: tx.one(self._q("workspace_latest_of_node"), (node,))
        )
        return None if row is None else str(row[0])

    def session(self, session_id: str) -> BodySession | None:
        """The recorded body of a harness session, if it was ever seen."""
        return self.ledger._read(lambda tx, _now: self._load_session(tx, session_id))

    def _load_session(self, tx: Tx, session_id: str) -> BodySession | None:
        row = tx.one(self._q("session_by_id"), (session_id,))
        return None if row is None else _session(row)

    def sessions(self, node: str) -> list[BodySession]:
        """Every session seen for a node, oldest first."""
        validate_name(node, "node")
        return self.ledger._read(
            lambda tx, _now: [_session(r) for r in tx.all(self._q("sessions_of_node"), (node,))]
        )

    def admit_session(
        self,
        session_id: str,
        *,
        harness: str,
        node: str,
        workspace: str | None,
        ttl: timedelta = SESSION_LEASE_TTL,
        launcher: dict[str, Any] | None = None,
        host: Callable[[], dict[str, Any] | None] | None = None,
        source: str | None = None,
        host_gone: Callable[[dict[str, Any]], str | None] | None = None,
        launched_by: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
    ) -> Admission:
        """Admit the session as the node's body if it has no live body; else refuse it.

        The whole judgement is one transaction (the node row locked first), so of any number
        of sessions starting at once exactly one is admitted and none is told it is the body
        and then fenced by a racing newcomer. A session is bound to one identity for its whole
        life: in another identity's workspace it is refused, never admitted there. Once
        admitted it is bound to its generation forever: after a fence it is a stale body and
        is never admitted again. A refused session is re-judged on each call, so it is
        admitted once the live body is gone (fenced, released or expired).

        A body is a host process, not a session id: ``host`` (called at most once, only for
        a session the ledger has not seen) gives a witness of the host process the hook runs
        for (:func:`onstation.harness.witness.host_process`, as JSON; None when it cannot be
        seen), recorded with each admitted session. A new session whose ``source`` says it
        continues a conversation (:data:`CONTINUING_SOURCES`: the host's SessionStart after
        /clear, /resume, a compaction or a fork) in the same host process as a session of
        the live lease continues that body: same lease, same generation, recorded as
        ``session.continued``. Anything else with another session id is a second body and
        is refused while the live one lasts, unless ``host_gone`` (asked of each host witness
        of the live lease's sessions) says every one of those processes is gone: then the
        previous body cannot act again (a crash, or a host that exits without a SessionEnd),
        its generation is fenced and the newcomer admitted under the next, in this same
        transaction, recorded as ``session.previous_body_gone``. A witness that cannot be
        checked (another host, another boot) never counts as gone.

        A successor onstation launched is the process it launched, whatever session id its
        host chooses (``codex exec`` has no flag to set one): while its birth is provisional,
        a new session whose host process ``launched_by(launch witness, seen)`` says is that
        process or a descendant of it (Codex's npm wrapper runs the native program as its
        child) takes the launched lease, recorded as ``session.launch_bound``. Its hooks then
        renew the lease, which is the successor's heartbeat. A refused session is asked for
        its host again on each call, so a hook that ran before the launch was witnessed is
        admitted on its next call. A known admitted session with no host recorded yet (one
        bound at launch) records its host at its SessionStart, so that /clear and a dead host
        are judged for it as for any other.
        """
        _validate_session_id(session_id)
        validate_name(harness, "harness")
        validate_name(node, "node")
        holder = holder_for(harness, session_id)
        record = launcher or {"harness": harness}

        def body(tx: Tx, now: int) -> Admission:
            current = self.ledger._lock_node(tx, node)
            known = self._load_session(tx, session_id)
            if known is not None and known.node != node:
                return Admission(
                    known, False, False, None,
                    f"this session is bound to {known.node} for its whole life; a session for "
                    f"{node} must be started in {node}'s workspace",
                )  # fmt: skip
            live = self._live_lease_in(tx, now, node)
            if known is not None and known.state == "ADMITTED":
                fenced = known.generation != current.generation
                alive = live is not None and live[0] == known.lease_id
                if not fenced and not alive:
                    # Its lease ran out (or was released) while it was idle: the generation is
                    # unchanged and no other body took it, so nothing can have acted between.
                    return Admission(
                        known, False, False, None,
                        "lease expired while idle: start a new session (it will be admitted)",
                    )  # fmt: skip
                if not fenced and source is not None and host is not None:
                    self._record_first_host(tx, now, known, host, source)
                reason = "admitted" if not fenced else "fenced: generation superseded"
                return Admission(known, not fenced, fenced, None, reason)
            if live is not None and live[2] == INTERACTIVE_HOLDER:
                # The next new session takes a relief's pending interactive successor lease.
                tx.run(self._q("session_lease_holder_set"), (holder, live[0]))
                self.ledger._event(tx, now, node=node, kind="session.successor_bound",
                                   generation=live[1], actor=holder, session_id=session_id,
                                   lease_id=live[0])  # fmt: skip
                bound = self._record_session_in(
                    tx, now, session_id, harness, node, live[1], live[0], "ADMITTED", workspace,
                    {"harness": "interactive"},
                )  # fmt: skip
                return Admission(bound, True, False, holder, "admitted as the successor")
            seen: dict[str, Any] | None = None
            if host is not None and (known is None or known.state == "REFUSED"):
                seen = host()
            stale = self._fenced_host_session(tx, node, current.generation, seen, source)
            if stale is not None:
                # The process of a fenced body started a new session id (/clear, /resume):
                # it is still that body, and that body never acts again.
                old_id, old_generation, old_lease = stale
                bound = self._record_session_in(
                    tx, now, session_id, harness, node, old_generation, old_lease, "ADMITTED",
                    workspace, record,
                )  # fmt: skip
                self._record_host(tx, now, session_id, node, old_lease, seen, old_id, source)
                self.ledger._event(tx, now, node=node, kind="session.continued",
                                   generation=old_generation, actor=holder,
                                   session_id=session_id, continues=old_id, source=source,
                                   fenced=True)  # fmt: skip
                return Admission(bound, False, True, None, "fenced: generation superseded")
            if live is not None and live[2] != holder:
                launched = self._launched_session(tx, node, live, seen, launched_by)
                if launched is not None:
                    launched_id, launched_record = launched
                    tx.run(self._q("session_lease_holder_set"), (holder, live[0]))
                    bound = self._record_session_in(
                        tx, now, session_id, harness, node, live[1], live[0], "ADMITTED",
                        workspace, launched_record or record,
                    )  # fmt: skip
                    self._record_host(tx, now, session_id, node, live[0], seen, None, source)
                    self.ledger._event(tx, now, node=node, kind="session.launch_bound",
                                       generation=live[1], actor=holder, session_id=session_id,
                                       launched_session=launched_id, lease_id=live[0])  # fmt: skip
                    return Admission(
                        bound, True, False, holder,
                        "admitted: its host process is the successor onstation launched",
                    )  # fmt: skip
                continued = self._same_host_session(tx, live[0], seen, source)
                if continued is not None:
                    tx.run(self._q("session_lease_holder_set"), (holder, live[0]))
                    bound = self._record_session_in(
                        tx, now, session_id, harness, node, live[1], live[0], "ADMITTED",
                        workspace, record,
                    )  # fmt: skip
                    self._record_host(tx, now, session_id, node, live[0], seen, continued, source)
                    self.ledger._event(tx, now, node=node, kind="session.continued",
                                       generation=live[1], actor=holder, session_id=session_id,
                                       continues=continued, source=source,
                                       lease_id=live[0])  # fmt: skip
                    return Admission(
                        bound, True, False, holder,
                        f"admitted: continues the body of session {continued} in the same "
                        f"host process ({source})",
                    )  # fmt: skip
                gone = self._previous_body_gone(tx, live[0], host_gone)
                if gone is not None:
                    self.ledger._event(tx, now, node=node, kind="session.previous_body_gone",
                                       generation=live[1], actor=holder, session_id=session_id,
                                       previous_holder=live[2], lease_id=live[0],
                                       evidence=gone)  # fmt: skip
                    generation = self.ledger._fence_in(
                        tx, now, node, live[1], holder,
                        "new session; the previous body's host process is gone",
                    ).generation  # fmt: skip
                    lease = self.ledger._acquire_in(tx, now, node, holder, ttl, generation, holder)
                    admitted = self._record_session_in(
                        tx, now, session_id, harness, node, lease.generation, lease.lease_id,
                        "ADMITTED", workspace, record,
                    )  # fmt: skip
                    self._record_host(tx, now, session_id, node, lease.lease_id, seen, None,
                                      source)  # fmt: skip
                    return Admission(
                        admitted, True, False, holder,
                        "admitted: the previous body's host process is gone",
                    )  # fmt: skip
                refused = self._record_session_in(
                    tx, now, session_id, harness, node, current.generation, None, "REFUSED",
                    workspace, None,
                )  # fmt: skip
                return Admission(
                    refused, False, False, live[2],
                    f"{node} already has a live body ({live[2] or 'unnamed'}, generation "
                    f"{live[1]})",
                )  # fmt: skip
            generation = current.generation
            if live is None:
                spent = tx.one(self._q("session_generation_spent"), (node, generation))
                if spent is not None:
                    # The previous body is gone (its lease ended): one generation admits one
                    # body, so the new session gets the next, in this same transaction.
                    generation = self.ledger._fence_in(
                        tx, now, node, generation, holder,
                        "new session; the previous body is gone",
                    ).generation  # fmt: skip
                lease = self.ledger._acquire_in(tx, now, node, holder, ttl, generation, holder)
                lease_id, generation = lease.lease_id, lease.generation
            else:
                lease_id, generation = live[0], live[1]
            admitted = self._record_session_in(
                tx, now, session_id, harness, node, generation, lease_id, "ADMITTED", workspace,
                record,
            )  # fmt: skip
            self._record_host(tx, now, session_id, node, lease_id, seen, None, source)
            return Admission(admitted, True, False, holder, "admitted")

        return self.ledger._write(body)

    def _launched_session(
        self,
        tx: Tx,
        node: str,
        live: tuple[int, int, str | None],
        seen: dict[str, Any] | None,
        launched_by: Callable[[dict[str, Any], dict[str, Any]], bool] | None,
    ) -> tuple[str | None, dict[str, Any] | None] | None:
        """(the session bound at launch, its launcher record) when ``seen`` is the process
        launched for the live lease's provisional birth; None otherwise."""
        if seen is None or launched_by is None:
            return None
        row = tx.one(self._q("body_provisional_launch"), (node, live[1], live[0]))
        if row is None or not launched_by(json.loads(row[0]), seen):
            return None
        return (None if row[1] is None else str(row[1]),
                None if row[2] is None else json.loads(row[2]))  # fmt: skip

    def _record_first_host(
        self,
        tx: Tx,
        now: int,
        session: BodySession,
        host: Callable[[], dict[str, Any] | None],
        source: str,
    ) -> None:
        """Record the host of an admitted session that has none yet (bound at launch)."""
        if session.lease_id is None or tx.one(self._q("body_host_of_session"),
                                              (session.session_id,)) is not None:  # fmt: skip
            return
        seen = host()
        if seen is not None:
            self._record_host(tx, now, session.session_id, session.node, session.lease_id,
                              seen, None, source)  # fmt: skip

    def _same_host_session(
        self, tx: Tx, lease_id: int, seen: dict[str, Any] | None, source: str | None
    ) -> str | None:
        """The session of lease ``lease_id`` whose host process is ``seen``, when ``source``
        says the new session continues a conversation; None otherwise."""
        if seen is None or source not in CONTINUING_SOURCES:
            return None
        for session_id, witness in tx.all(self._q("body_hosts_of_lease"), (lease_id,)):
            if same_process(json.loads(witness), seen):
                return str(session_id)
        return None

    def _fenced_host_session(
        self,
        tx: Tx,
        node: str,
        generation: int,
        seen: dict[str, Any] | None,
        source: str | None,
    ) -> tuple[str, int, int | None] | None:
        """(session, generation, lease) of a fenced body whose host process is ``seen``, when
        ``source`` says the new session continues a conversation of that process."""
        if seen is None or source not in CONTINUING_SOURCES:
            return None
        for session_id, witness, old_generation, lease_id in tx.all(
            self._q("body_hosts_of_node"), (node,)
        ):
            if same_process(json.loads(witness), seen):
                if int(old_generation) == generation:
                    return None  # the current generation's process: a continuation, or refused
                return (str(session_id), int(old_generation),
                        None if lease_id is None else int(lease_id))  # fmt: skip
        return None

    def _previous_body_gone(
        self,
        tx: Tx,
        lease_id: int,
        host_gone: Callable[[dict[str, Any]], str | None] | None,
    ) -> list[dict[str, Any]] | None:
        """Evidence that every host process of lease ``lease_id`` is gone (one entry per
        session: its id and why), or None when any may live or none was witnessed."""
        if host_gone is None:
            return None
        rows = tx.all(self._q("body_hosts_of_lease"), (lease_id,))
        evidence: list[dict[str, Any]] = []
        for session_id, witness in rows:
            why = host_gone(json.loads(witness))
            if why is None:
                return None
            evidence.append({"session_id": str(session_id), "why": why})
        return evidence or None

    def _record_host(
        self,
        tx: Tx,
        now: int,
        session_id: str,
        node: str,
        lease_id: int | None,
        seen: dict[str, Any] | None,
        continued: str | None,
        source: str | None,
    ) -> None:
        if seen is None:
            return
        tx.run(self._q("body_host_insert"),
               (session_id, node, lease_id, json.dumps(seen, sort_keys=True), continued, source,
                now))  # fmt: skip

    def _live_lease_in(self, tx: Tx, now: int, node: str) -> tuple[int, int, str | None] | None:
        """(lease id, generation, holder) of the node's live, unexpired lease."""
        row = tx.one(self._q("session_live_lease"), (node, now))
        return None if row is None else (int(row[0]), int(row[1]), row[2])

    def _record_session(
        self,
        session_id: str,
        harness: str,
        node: str,
        generation: int,
        lease_id: int | None,
        state: str,
        workspace: str | None,
        launcher: dict[str, Any] | None = None,
    ) -> BodySession:
        return self.ledger._write(
            lambda tx, now: self._record_session_in(
                tx, now, session_id, harness, node, generation, lease_id, state, workspace,
                launcher,
            )
        )  # fmt: skip

    def _record_session_in(
        self,
        tx: Tx,
        now: int,
        session_id: str,
        harness: str,
        node: str,
        generation: int,
        lease_id: int | None,
        state: str,
        workspace: str | None,
        launcher: dict[str, Any] | None,
    ) -> BodySession:
        launcher_text = None if launcher is None else json.dumps(launcher, sort_keys=True)
        existing = self._load_session(tx, session_id)
        if existing is not None and existing.state == "ADMITTED":
            return existing  # bound for good; never rebound
        if existing is not None and existing.node != node:
            return existing  # bound to its identity for good; never moved to another
        if existing is None:
            tx.run(
                self._q("session_insert"),
                (session_id, harness, node, generation, lease_id, state, workspace, now,
                 launcher_text),
            )  # fmt: skip
        else:
            tx.run(
                self._q("session_rejudge"),
                (generation, lease_id, state, now, launcher_text, session_id),
            )
        if existing is None or existing.state != state:
            self.ledger._event(tx, now, node=node, kind=f"session.{state.lower()}",
                               generation=generation, actor=holder_for(harness, session_id),
                               session_id=session_id, lease_id=lease_id,
                               workspace=workspace)  # fmt: skip
        loaded = self._load_session(tx, session_id)
        assert loaded is not None
        return loaded

    def bind_launched_session(
        self, session_id: str, *, harness: str, node: str, generation: int, lease_id: int,
        workspace: str | None, launcher: dict[str, Any] | None = None,
    ) -> BodySession:  # fmt: skip
        """Bind a session onstation launched itself to the lease it was launched under."""
        _validate_session_id(session_id)
        return self._record_session(
            session_id, harness, node, generation, lease_id, "ADMITTED", workspace, launcher
        )

    def recorded_launcher(self, node: str) -> dict[str, Any] | None:
        """What the identity's newest admitted body runs under (None: no body recorded one)."""
        validate_name(node, "node")
        row = self.ledger._read(
            lambda tx, _now: tx.one(self._q("session_recorded_launcher"), (node,))
        )
        return None if row is None else dict(json.loads(row[0]))

    def set_session_flag(self, session_id: str, flag: str) -> None:
        """Stamp ``relief_requested_at`` or ``stop_blocked_at`` on a session (once)."""
        if flag not in ("relief_requested_at", "stop_blocked_at"):
            raise BadInput(f"unknown session flag {flag!r}")

        sql = (
            self._q("session_flag_relief_requested")
            if flag == "relief_requested_at"
            else self._q("session_flag_stop_blocked")
        )
        self.ledger._write(lambda tx, now: tx.run(sql, (now, session_id)))

    def set_transcript(self, session_id: str, path: str) -> None:
        """Remember where the session's transcript lives (evidence for a native resume)."""
        validate_free_text(path, "transcript_path", 4096)
        self.ledger._write(
            lambda tx, _now: tx.run(self._q("session_transcript_set"), (path, session_id, path))
        )

    def rebind_session(
        self, session_id: str, *, generation: int, lease_id: int, by: str
    ) -> BodySession:
        """A native resume: the relief gives a proven-dead body's session to a new generation."""

        def body(tx: Tx, now: int) -> BodySession:
            existing = self._load_session(tx, session_id)
            if existing is None:
                raise BadInput(f"no such session {session_id!r}")
            self.ledger._lock_node(tx, existing.node)
            tx.run(self._q("session_native_resume"), (generation, lease_id, now, session_id))
            tx.run(
                self._q("session_lease_holder_set"),
                (holder_for(existing.harness, session_id), lease_id),
            )
            self.ledger._event(tx, now, node=existing.node, kind="session.native_resumed",
                               generation=generation, actor=by, session_id=session_id,
                               previous_generation=existing.generation,
                               lease_id=lease_id)  # fmt: skip
            loaded = self._load_session(tx, session_id)
            assert loaded is not None
            return loaded

        return self.ledger._write(body)

    def set_cursor(self, session_id: str, cursor: dict[str, Any]) -> None:
        """Remember where the session's transcript was read up to."""
        text = json.dumps(cursor, sort_keys=True)
        self.ledger._write(
            lambda tx, _now: tx.run(self._q("session_cursor_set"), (text, session_id))
        )

    # -- effect-capable tool calls ------------------------------------------------------------

    def record_tool_call(self, tool_use_id: str, session_id: str, effect_id: str) -> None:
        """Remember which effect a tool call dispatched, for its PostToolUse."""
        validate_free_text(tool_use_id, "tool_use_id", 256)

        def body(tx: Tx, now: int) -> None:
            tx.run(self._q("tool_call_delete"), (tool_use_id,))
            tx.run(self._q("tool_call_insert"), (tool_use_id, session_id, effect_id, now))

        self.ledger._write(body)

    def effect_for_tool_call(self, tool_use_id: str) -> str | None:
        """The effect a PreToolUse dispatched for this tool call, if any."""
        row = self.ledger._read(
            lambda tx, _now: tx.one(self._q("tool_call_effect"), (tool_use_id,))
        )
        return None if row is None else str(row[0])

    # -- telemetry ----------------------------------------------------------------------------

    def record_fill(
        self,
        session: BodySession,
        *,
        percent: float,
        used_tokens: int | None,
        window_tokens: int,
        source: str,
        model: str | None,
        tier: str,
        supervised: bool = True,
        tier_message: tuple[str, str] | None = None,
    ) -> bool:
        """Store the body's latest fill; True when this tier is new for this body's context.

        A tier is recorded once per body and context epoch: the first time the body reports
        it since its last compaction, as an event carrying the generation that reported it.
        ``tier_message`` (kind, text) is what the body must hear on a new tier; it is queued
        for this body's generation in the same transaction as the tier, so a crash cannot
        keep the tier and lose the request.
        """

        def body(tx: Tx, now: int) -> bool:
            epoch = self._epoch_in(tx, session.session_id)
            tx.run(self._q("telemetry_delete"), (session.session_id,))
            tx.run(
                self._q("telemetry_insert"),
                (session.session_id, session.node, session.generation, percent, used_tokens,
                 window_tokens, source, model, tier, now, epoch),
            )  # fmt: skip
            seen = tx.one(self._q("tier_mark_seen"), (session.session_id, epoch, tier))
            if seen is not None:
                return False
            tx.run(
                self._q("tier_mark_insert"),
                (session.session_id, tier, session.generation, percent, now, epoch),
            )
            self.ledger._event(tx, now, node=session.node, kind="hull.tier",
                               generation=session.generation,
                               actor=holder_for(session.harness, session.session_id),
                               tier=tier, percent=round(percent, 2), source=source,
                               session_id=session.session_id, epoch=epoch,
                               supervised=supervised)  # fmt: skip
            if tier_message is not None:
                kind, text = tier_message
                self._insert_message(tx, now, sender="onstation", recipient=session.node,
                                     kind=kind, body=text, reply_to=None,
                                     generation=session.generation,
                                     sender_generation=None)  # fmt: skip
                if kind.startswith("relief."):
                    tx.run(self._q("session_flag_relief_requested"), (now, session.session_id))
            return True

        return self.ledger._write(body)

    def _epoch_in(self, tx: Tx, session_id: str) -> int:
        row = tx.one(self._q("session_context_epoch"), (session_id,))
        return 0 if row is None else int(row[0] or 0)

    def set_context_window(self, session_id: str, window: int) -> None:
        """Remember the context window the host declared for a body (status line
        ``context_window_size``, Codex ``model_context_window``); every later reading of the
        body is taken against it."""
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise BadInput(f"context_window: must be a positive integer, got {window!r}")
        self.ledger._write(
            lambda tx, _now: tx.run(
                self._q("session_context_window_set"), (window, session_id, window)
            )
        )

    def start_epoch(self, session: BodySession, *, signal: str) -> int | None:
        """A compaction of the body's context: start its next context epoch and return it.

        The reading resets (the latest one is dropped: unknown until the next usage, or the
        post-compaction figure the caller records next) and the tier marks re-arm. Hosts
        report one compaction through several signals (PreCompact/PostCompact hooks, a
        SessionStart with source ``compact``, the transcript's boundary, the status line's
        null usage): only a signal that comes after a usage in the current epoch starts a new
        one, so one compaction is one epoch. None when no new epoch was started.
        """

        def body(tx: Tx, now: int) -> int | None:
            epoch = self._epoch_in(tx, session.session_id)
            latest = tx.one(self._q("telemetry_of_session"), (session.session_id,))
            if latest is None or int(latest[0]) != epoch or latest[1] in _POST_COMPACTION:
                return None
            tx.run(self._q("session_context_epoch_set"), (epoch + 1, session.session_id, epoch))
            tx.run(self._q("telemetry_delete"), (session.session_id,))
            self.ledger._event(tx, now, node=session.node, kind="hull.compacted",
                               generation=session.generation,
                               actor=holder_for(session.harness, session.session_id),
                               session_id=session.session_id, epoch=epoch + 1,
                               signal=signal)  # fmt: skip
            return epoch + 1

        return self.ledger._write(body)

    def record_hull_notice(
        self, session: BodySession, *, kind: str, detail: str, body_wide: bool = False,
        **fields: Any,
    ) -> bool:  # fmt: skip
        """Tell the history once about a body's readings: ``hull.<kind>`` with ``detail``.

        Kinds: ``rejected`` (an impossible reading, never acted on; once per figure and
        context epoch) and ``past_compaction`` (a configured tier lies past the host's
        compaction point; ``body_wide``: once per body). True when recorded now.
        """
        validate_free_text(detail, "detail", 1024)

        def body(tx: Tx, now: int) -> bool:
            epoch = 0 if body_wide else self._epoch_in(tx, session.session_id)
            key = (session.session_id, epoch, kind, detail)
            if tx.one(self._q("hull_notice_seen"), key) is not None:
                return False
            tx.run(self._q("hull_notice_insert"), (*key, now))
            self.ledger._event(tx, now, node=session.node, kind=f"hull.{kind}",
                               generation=session.generation,
                               actor=holder_for(session.harness, session.session_id),
                               session_id=session.session_id, epoch=epoch, detail=detail,
                               **fields)  # fmt: skip
            return True

        return self.ledger._write(body)

    def latest_fill(self, node: str) -> dict[str, Any] | None:
        """The most recent fill reading of any body of ``node``."""
        row = self.ledger._read(
            lambda tx, _now: tx.one(self._q("telemetry_latest_of_node"), (node,))
        )
        if row is None:
            return None
        keys = ["session_id", "generation", "percent", "used_tokens", "window_tokens", "source",
                "model", "tier"]  # fmt: skip
        data = dict(zip(keys, row[:8], strict=True))
        data["reported_at"] = _at(row[8]).isoformat().replace("+00:00", "Z")
        return data


__all__ = [
    "CONTINUING_SOURCES",
    "INTERACTIVE_HOLDER",
    "SESSION_LEASE_TTL",
    "Admission",
    "BodySession",
    "Document",
    "HarnessLedger",
    "Message",
    "Note",
    "holder_for",
    "same_process",
]
