"""Admission of a harness session as a body: one transaction that judges a session
(admitted, refused, or fenced) for the identity its workspace works for.

Part of :class:`~onstation.ledger.bodies.HarnessLedger` (see :mod:`onstation.ledger.bodies` for
what a body is); split out because the judgement and its evidence (host processes, launch
witnesses) are one coherent piece.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from onstation.core.names import validate_name
from onstation.ledger.backends import Row, Tx
from onstation.ledger.body_records import (
    CONTINUING_SOURCES,
    INTERACTIVE_HOLDER,
    SESSION_LEASE_TTL,
    Admission,
    BodySession,
    _session,
    _validate_session_id,
    holder_for,
    same_process,
)
from onstation.ledger.correspondence import Correspondence


def _live(row: Any) -> tuple[int, int, str | None] | None:
    """(lease id, generation, holder) of a ``session_live_lease`` row."""
    return None if row is None else (int(row[0]), int(row[1]), row[2])


class BodyAdmission(Correspondence):
    """Sessions judged as bodies; part of :class:`~onstation.ledger.bodies.HarnessLedger`."""

    def session(self, session_id: str) -> BodySession | None:
        """The recorded body of a harness session, if it was ever seen."""
        return self.ledger._read_single(lambda tx, _now: self._load_session(tx, session_id))

    def _load_session(self, tx: Tx, session_id: str) -> BodySession | None:
        row = tx.one(self._q("session_by_id"), (session_id,))
        return None if row is None else _session(row)

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
        where: Callable[[], str | None] | None = None,
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

        ``where``, when given, says the workspace instead of ``workspace``. It is called once
        the judgement's first reads are back (on PostgreSQL, in their round trip), before
        anything is judged or written, and may raise to abandon the admission, which is then
        rolled back with its transaction: the hooks look up the workspace's binding with
        those reads on the node they expect (``relief.hooks.HookRunner.handle``).
        """
        _validate_session_id(session_id)
        validate_name(harness, "harness")
        validate_name(node, "node")
        holder = holder_for(harness, session_id)
        record = launcher or {"harness": harness}

        def body(tx: Tx, now: int) -> Admission:
            # The node's lock and the judgement's first reads, asked together: one round trip
            # on PostgreSQL, each read on a snapshot taken once the lock is held (whether the
            # generation ever had a lease is asked with the node's generation it reads).
            locked = tx.ask(self._q("node_lock"), (node,))
            asked_session = tx.ask(self._q("session_by_id"), (session_id,))
            asked_live = tx.ask(self._q("session_live_lease"), (node, now))
            asked_spent = tx.ask(self._q("session_generation_spent_now"), (node, node))
            node_row = locked.one()
            place = workspace if where is None else where()
            current = self.ledger._locked_node(node_row, node)
            row = asked_session.one()
            known = None if row is None else _session(row)
            if known is not None and known.node != node:
                return Admission(
                    known, False, False, None,
                    f"this session is bound to {known.node} for its whole life; a session for "
                    f"{node} must be started in {node}'s workspace",
                )  # fmt: skip
            live = _live(asked_live.one())
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
                tx.send(self._q("session_lease_holder_set"), (holder, live[0]))
                self.ledger._event(tx, now, node=node, kind="session.successor_bound",
                                   generation=live[1], actor=holder, session_id=session_id,
                                   lease_id=live[0])  # fmt: skip
                bound = self._bind_session_in(
                    tx, now, known, session_id, harness, node, live[1], live[0], "ADMITTED",
                    place, {"harness": "interactive"},
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
                bound = self._bind_session_in(
                    tx, now, known, session_id, harness, node, old_generation, old_lease,
                    "ADMITTED", place, record,
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
                    tx.send(self._q("session_lease_holder_set"), (holder, live[0]))
                    bound = self._bind_session_in(
                        tx, now, known, session_id, harness, node, live[1], live[0], "ADMITTED",
                        place, launched_record or record,
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
                    tx.send(self._q("session_lease_holder_set"), (holder, live[0]))
                    bound = self._bind_session_in(
                        tx, now, known, session_id, harness, node, live[1], live[0], "ADMITTED",
                        place, record,
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
                    _fence, lease = self.ledger._fence_and_acquire_in(
                        tx, now, node, live[1], holder,
                        "new session; the previous body's host process is gone", holder, ttl,
                    )  # fmt: skip
                    admitted = self._bind_session_in(
                        tx, now, known, session_id, harness, node, lease.generation, lease.lease_id,
                        "ADMITTED", place, record,
                    )  # fmt: skip
                    self._record_host(tx, now, session_id, node, lease.lease_id, seen, None,
                                      source)  # fmt: skip
                    return Admission(
                        admitted, True, False, holder,
                        "admitted: the previous body's host process is gone", lease_acquired=True,
                    )  # fmt: skip
                refused = self._bind_session_in(
                    tx, now, known, session_id, harness, node, current.generation, None, "REFUSED",
                    place, None,
                )  # fmt: skip
                return Admission(
                    refused, False, False, live[2],
                    f"{node} already has a live body ({live[2] or 'unnamed'}, generation "
                    f"{live[1]})",
                )  # fmt: skip
            generation = current.generation
            if live is None:
                spent = asked_spent.one()  # nothing was written since it was asked
                if spent is not None:
                    # The previous body is gone (its lease ended): one generation admits one
                    # body, so the new session gets the next, in this same transaction.
                    _fence, lease = self.ledger._fence_and_acquire_in(
                        tx, now, node, generation, holder,
                        "new session; the previous body is gone", holder, ttl,
                    )  # fmt: skip
                else:
                    lease = self.ledger._acquire_in(tx, now, node, holder, ttl, generation,
                                                    holder)  # fmt: skip
                lease_id, generation = lease.lease_id, lease.generation
            else:
                lease_id, generation = live[0], live[1]
            acquired = live is None
            admitted = self._bind_session_in(
                tx, now, known, session_id, harness, node, generation, lease_id, "ADMITTED",
                place, record,
            )  # fmt: skip
            self._record_host(tx, now, session_id, node, lease_id, seen, None, source)
            return Admission(admitted, True, False, holder, "admitted", lease_acquired=acquired)

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
        tx.send(self._q("body_host_insert"),
                (session_id, node, lease_id, json.dumps(seen, sort_keys=True), continued, source,
                 now))  # fmt: skip

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
        def body(tx: Tx, now: int) -> BodySession:
            existing = self._load_session(tx, session_id)
            if existing is not None and existing.state == "ADMITTED":
                return existing  # bound for good; never rebound
            if existing is not None and existing.node != node:
                return existing  # bound to its identity for good; never moved to another
            return self._bind_session_in(tx, now, existing, session_id, harness, node,
                                         generation, lease_id, state, workspace,
                                         launcher)  # fmt: skip

        return self.ledger._write(body)

    def _bind_session_in(
        self,
        tx: Tx,
        now: int,
        existing: BodySession | None,
        session_id: str,
        harness: str,
        node: str,
        generation: int,
        lease_id: int | None,
        state: str,
        workspace: str | None,
        launcher: dict[str, Any] | None,
    ) -> BodySession:
        """Record the session, or re-judge ``existing`` (its row as read in this
        transaction: none, or a refused session of ``node``), and return its row."""
        launcher_text = None if launcher is None else json.dumps(launcher, sort_keys=True)
        # A new session's row is the one it wrote, taken as written and not waited for (a
        # round trip on PostgreSQL; what follows travels with it: issue 14): nothing else
        # writes the session while the node's lock is held, and a failed insert fails the
        # transaction at its next read or its commit. A re-judged one returns its row.
        row: Row | None
        if existing is None:
            tx.send(
                self._q("session_insert"),
                (session_id, harness, node, generation, lease_id, state, workspace, now,
                 launcher_text),
            )  # fmt: skip
            row = (session_id, harness, node, generation, lease_id, state, workspace, now,
                   None, None, None, None, launcher_text, None, 0)  # fmt: skip
        else:
            row = tx.one(
                self._q("session_rejudge"),
                (generation, lease_id, state, now, launcher_text, session_id),
            )
        assert row is not None  # inserted, or updated under the node's lock
        if existing is None or existing.state != state:
            self.ledger._event(tx, now, node=node, kind=f"session.{state.lower()}",
                               generation=generation, actor=holder_for(harness, session_id),
                               session_id=session_id, lease_id=lease_id,
                               workspace=workspace)  # fmt: skip
        return _session(row)


__all__ = ["BodyAdmission"]
