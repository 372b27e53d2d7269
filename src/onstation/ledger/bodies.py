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

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from onstation.core.errors import BadInput
from onstation.core.names import validate_free_text, validate_name
from onstation.core.types import Record
from onstation.ledger.backends import Row, Tx
from onstation.ledger.ledger import Ledger, _at, _CommitThenRaise, from_us

#: Harness sessions sit idle for hours between prompts; a long lease renewed by every hook.
SESSION_LEASE_TTL = timedelta(hours=12)

#: The holder of a successor lease that waits for the next interactive session to take it.
INTERACTIVE_HOLDER = "interactive successor (waiting for a session)"

_SESSION_COLUMNS = (
    "session_id, harness, node, generation, lease_id, state, workspace, bound_at, "
    "relief_requested_at, stop_blocked_at, telemetry_cursor, transcript_path, launcher"
)


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


@dataclass(frozen=True)
class Message(Record):
    """A message between actors, or to a body."""

    message_id: int
    sender: str
    recipient: str
    kind: str
    body: str
    reply_to: int | None
    created_at: datetime
    delivered_at: datetime | None
    #: The recipient's generation this message concerns (None: whoever holds the identity).
    generation: int | None = None
    #: The generation a node sender wrote it under (None: an actor or operator).
    sender_generation: int | None = None


_MESSAGE_COLUMNS = (
    "message_id, sender, recipient, kind, body, reply_to, created_at, delivered_at, generation, "
    "sender_generation"
)


def _message(r: Row) -> Message:
    return Message(int(r[0]), r[1], r[2], r[3], r[4], None if r[5] is None else int(r[5]),
                   _at(r[6]), from_us(r[7]), None if r[8] is None else int(r[8]),
                   None if r[9] is None else int(r[9]))  # fmt: skip


@dataclass(frozen=True)
class Note(Record):
    """A decision (with its rationale) or a note an agent recorded for its successor."""

    note_id: int
    node: str
    generation: int
    kind: str
    text: str
    rationale: str | None
    at: datetime


@dataclass(frozen=True)
class Document(Record):
    """A turnover brief or continuation manifest, kept exactly as given to a successor."""

    document_id: int
    node: str
    generation: int
    kind: str
    path: str
    content: dict[str, Any]
    digest: str
    at: datetime
    #: Written by a body after its generation was fenced: late, untrusted evidence only.
    late: bool = False


@dataclass(frozen=True)
class Admission(Record):
    """The answer to "may this session act for the identity?"."""

    session: BodySession
    admitted: bool
    fenced: bool
    holder: str | None
    reason: str


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
    )


def _validate_session_id(session_id: str) -> str:
    validate_free_text(session_id, "session_id", 256)
    if not session_id.strip():
        raise BadInput("session_id: must not be empty", field="session_id")
    return session_id


class HarnessLedger:
    """The harness-facing records, over one :class:`Ledger` (same database, same clock)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    # -- workspaces ---------------------------------------------------------------------------

    def bind_workspace(self, path: str, node: str, *, harness: str, by: str) -> None:
        """Declare that the workspace at ``path`` (and below) works for ``node``."""
        validate_name(node, "node")
        validate_name(harness, "harness")
        real = os.path.realpath(path)

        def body(tx: Tx, now: int) -> None:
            self.ledger._get_node(tx, node)
            tx.run("DELETE FROM workspace_binding WHERE path = ?", (real,))
            tx.run(
                "INSERT INTO workspace_binding (path, node, harness, bound_at) VALUES (?, ?, ?, ?)",
                (real, node, harness, now),
            )
            self.ledger._event(tx, now, node=node, kind="workspace.bound", generation=None,
                               actor=by, path=real, harness=harness)  # fmt: skip

        self.ledger._write(body)

    def unbind_workspace(self, path: str, *, by: str) -> str | None:
        """Forget the binding of exactly ``path``; returns the node it was bound to."""
        real = os.path.realpath(path)

        def body(tx: Tx, now: int) -> str | None:
            row = tx.one("SELECT node FROM workspace_binding WHERE path = ?", (real,))
            if row is None:
                return None
            tx.run("DELETE FROM workspace_binding WHERE path = ?", (real,))
            self.ledger._event(tx, now, node=row[0], kind="workspace.unbound", generation=None,
                               actor=by, path=real)  # fmt: skip
            return str(row[0])

        return self.ledger._write(body)

    def node_for_workspace(self, path: str) -> tuple[str, str] | None:
        """(node, bound path) of the closest bound ancestor of ``path``, if any."""
        real = os.path.realpath(path)
        candidates = [real]
        parent = os.path.dirname(real)
        while parent and parent != candidates[-1]:
            candidates.append(parent)
            parent = os.path.dirname(parent)
        marks = ", ".join("?" for _ in candidates)

        def body(tx: Tx, _now: int) -> tuple[str, str] | None:
            rows = tx.all(
                f"SELECT path, node FROM workspace_binding WHERE path IN ({marks})", candidates
            )
            if not rows:
                return None
            path_, node = max(rows, key=lambda r: len(r[0]))
            return str(node), str(path_)

        return self.ledger._read(body)

    # -- sessions as bodies -------------------------------------------------------------------

    def session(self, session_id: str) -> BodySession | None:
        """The recorded body of a harness session, if it was ever seen."""
        return self.ledger._read(lambda tx, _now: self._load_session(tx, session_id))

    @staticmethod
    def _load_session(tx: Tx, session_id: str) -> BodySession | None:
        row = tx.one(
            f"SELECT {_SESSION_COLUMNS} FROM body_session WHERE session_id = ?", (session_id,)
        )
        return None if row is None else _session(row)

    def sessions(self, node: str) -> list[BodySession]:
        """Every session seen for a node, oldest first."""
        validate_name(node, "node")
        return self.ledger._read(
            lambda tx, _now: [
                _session(r)
                for r in tx.all(
                    f"SELECT {_SESSION_COLUMNS} FROM body_session WHERE node = ? "
                    "ORDER BY bound_at, session_id",
                    (node,),
                )
            ]
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
    ) -> Admission:
        """Admit the session as the node's body if it has no live body; else refuse it.

        The whole judgement is one transaction (the node row locked first), so of any number
        of sessions starting at once exactly one is admitted and none is told it is the body
        and then fenced by a racing newcomer. A session is bound to one identity for its whole
        life: in another identity's workspace it is refused, never admitted there. Once
        admitted it is bound to its generation forever: after a fence it is a stale body and
        is never admitted again. A refused session is re-judged on each call, so it is
        admitted once the live body is gone (fenced, released or expired).
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
                reason = "admitted" if not fenced else "fenced: generation superseded"
                return Admission(known, not fenced, fenced, None, reason)
            if live is not None and live[2] == INTERACTIVE_HOLDER:
                # The next new session takes a relief's pending interactive successor lease.
                tx.run("UPDATE body_lease SET holder = ? WHERE lease_id = ?", (holder, live[0]))
                self.ledger._event(tx, now, node=node, kind="session.successor_bound",
                                   generation=live[1], actor=holder, session_id=session_id,
                                   lease_id=live[0])  # fmt: skip
                bound = self._record_session_in(
                    tx, now, session_id, harness, node, live[1], live[0], "ADMITTED", workspace,
                    {"harness": "interactive"},
                )  # fmt: skip
                return Admission(bound, True, False, holder, "admitted as the successor")
            if live is not None and live[2] != holder:
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
                spent = tx.one(
                    "SELECT 1 FROM body_lease WHERE node = ? AND generation = ?",
                    (node, generation),
                )
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
            return Admission(admitted, True, False, holder, "admitted")

        return self.ledger._write(body)

    @staticmethod
    def _live_lease_in(tx: Tx, now: int, node: str) -> tuple[int, int, str | None] | None:
        """(lease id, generation, holder) of the node's live, unexpired lease."""
        row = tx.one(
            "SELECT lease_id, generation, holder FROM body_lease WHERE node = ? "
            "AND state = 'LIVE' AND expires_at > ?",
            (node, now),
        )
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
                f"INSERT INTO body_session ({_SESSION_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, NULL, ?)",
                (session_id, harness, node, generation, lease_id, state, workspace, now,
                 launcher_text),
            )  # fmt: skip
        else:
            tx.run(
                "UPDATE body_session SET generation = ?, lease_id = ?, state = ?, "
                "bound_at = ?, launcher = COALESCE(?, launcher) WHERE session_id = ?",
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
            lambda tx, _now: tx.one(
                "SELECT launcher FROM body_session WHERE node = ? AND state = 'ADMITTED' "
                "AND launcher IS NOT NULL ORDER BY generation DESC, bound_at DESC LIMIT 1",
                (node,),
            )
        )
        return None if row is None else dict(json.loads(row[0]))

    def set_session_flag(self, session_id: str, flag: str) -> None:
        """Stamp ``relief_requested_at`` or ``stop_blocked_at`` on a session (once)."""
        if flag not in ("relief_requested_at", "stop_blocked_at"):
            raise BadInput(f"unknown session flag {flag!r}")

        def body(tx: Tx, now: int) -> None:
            tx.run(
                f"UPDATE body_session SET {flag} = ? WHERE session_id = ? AND {flag} IS NULL",
                (now, session_id),
            )

        self.ledger._write(body)

    def set_transcript(self, session_id: str, path: str) -> None:
        """Remember where the session's transcript lives (evidence for a native resume)."""
        validate_free_text(path, "transcript_path", 4096)
        self.ledger._write(
            lambda tx, _now: tx.run(
                "UPDATE body_session SET transcript_path = ? WHERE session_id = ? "
                "AND (transcript_path IS NULL OR transcript_path <> ?)",
                (path, session_id, path),
            )
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
            tx.run(
                "UPDATE body_session SET generation = ?, lease_id = ?, state = 'ADMITTED', "
                "relief_requested_at = NULL, stop_blocked_at = NULL, bound_at = ? "
                "WHERE session_id = ?",
                (generation, lease_id, now, session_id),
            )
            tx.run(
                "UPDATE body_lease SET holder = ? WHERE lease_id = ?",
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
            lambda tx, _now: tx.run(
                "UPDATE body_session SET telemetry_cursor = ? WHERE session_id = ?",
                (text, session_id),
            )
        )

    # -- effect-capable tool calls ------------------------------------------------------------

    def record_tool_call(self, tool_use_id: str, session_id: str, effect_id: str) -> None:
        """Remember which effect a tool call dispatched, for its PostToolUse."""
        validate_free_text(tool_use_id, "tool_use_id", 256)

        def body(tx: Tx, now: int) -> None:
            tx.run("DELETE FROM tool_call WHERE tool_use_id = ?", (tool_use_id,))
            tx.run(
                "INSERT INTO tool_call (tool_use_id, session_id, effect_id, at) "
                "VALUES (?, ?, ?, ?)",
                (tool_use_id, session_id, effect_id, now),
            )

        self.ledger._write(body)

    def effect_for_tool_call(self, tool_use_id: str) -> str | None:
        """The effect a PreToolUse dispatched for this tool call, if any."""
        row = self.ledger._read(
            lambda tx, _now: tx.one(
                "SELECT effect_id FROM tool_call WHERE tool_use_id = ?", (tool_use_id,)
            )
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
        """Store the body's latest fill; True when this tier is new for this body.

        A tier is recorded once per body: the first time the body reports it, as an event
        carrying the generation that reported it. ``tier_message`` (kind, text) is what the
        body must hear on a new tier; it is queued for this body's generation in the same
        transaction as the tier, so a crash cannot keep the tier and lose the request.
        """

        def body(tx: Tx, now: int) -> bool:
            tx.run("DELETE FROM telemetry WHERE session_id = ?", (session.session_id,))
            tx.run(
                "INSERT INTO telemetry (session_id, node, generation, percent, used_tokens, "
                "window_tokens, source, model, tier, reported_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session.session_id, session.node, session.generation, percent, used_tokens,
                 window_tokens, source, model, tier, now),
            )  # fmt: skip
            seen = tx.one(
                "SELECT 1 FROM tier_mark WHERE session_id = ? AND tier = ?",
                (session.session_id, tier),
            )
            if seen is not None:
                return False
            tx.run(
                "INSERT INTO tier_mark (session_id, tier, generation, percent, at) "
                "VALUES (?, ?, ?, ?, ?)",
                (session.session_id, tier, session.generation, percent, now),
            )
            self.ledger._event(tx, now, node=session.node, kind="hull.tier",
                               generation=session.generation,
                               actor=holder_for(session.harness, session.session_id),
                               tier=tier, percent=round(percent, 2), source=source,
                               session_id=session.session_id,
                               supervised=supervised)  # fmt: skip
            if tier_message is not None:
                kind, text = tier_message
                self._insert_message(tx, now, sender="onstation", recipient=session.node,
                                     kind=kind, body=text, reply_to=None,
                                     generation=session.generation,
                                     sender_generation=None)  # fmt: skip
                if kind.startswith("relief."):
                    tx.run(
                        "UPDATE body_session SET relief_requested_at = ? WHERE session_id = ? "
                        "AND relief_requested_at IS NULL",
                        (now, session.session_id),
                    )
            return True

        return self.ledger._write(body)

    def latest_fill(self, node: str) -> dict[str, Any] | None:
        """The most recent fill reading of any body of ``node``."""
        row = self.ledger._read(
            lambda tx, _now: tx.one(
                "SELECT session_id, generation, percent, used_tokens, window_tokens, source, "
                "model, tier, reported_at FROM telemetry WHERE node = ? "
                "ORDER BY reported_at DESC LIMIT 1",
                (node,),
            )
        )
        if row is None:
            return None
        keys = ["session_id", "generation", "percent", "used_tokens", "window_tokens", "source",
                "model", "tier"]  # fmt: skip
        data = dict(zip(keys, row[:8], strict=True))
        data["reported_at"] = _at(row[8]).isoformat().replace("+00:00", "Z")
        return data

    # -- messages -----------------------------------------------------------------------------

    def post_message(
        self,
        *,
        sender: str,
        recipient: str,
        kind: str,
        body: str,
        reply_to: int | None = None,
        generation: int | None = None,
        sender_generation: int | None = None,
    ) -> Message:
        """Queue a message for an actor or a node.

        ``generation`` addresses one body of the recipient: the message is delivered to that
        generation only, never to a later one. ``sender_generation`` is the generation a node
        writes under: it is checked like every other write of a body (a stale sender is denied
        with a receipt), except for the one thing a relieved body may still say: its answer to
        the shutdown request addressed to its own generation.
        """
        validate_name(sender, "from")
        validate_name(recipient, "to")
        validate_name(kind, "kind")
        validate_free_text(body, "body", 20_000)
        for value, label in ((generation, "generation"), (sender_generation, "sender generation")):
            if value is not None and not 1 <= value <= 2**63 - 1:
                raise BadInput(f"{label}: must be a positive integer", field=label)

        def run(tx: Tx, now: int) -> Message:
            replied = None
            if reply_to is not None:
                replied = tx.one(
                    "SELECT recipient, kind, generation FROM message WHERE message_id = ?",
                    (reply_to,),
                )
                if replied is None:
                    raise BadInput(f"--reply-to: no such message {reply_to}")
            if sender_generation is not None:
                own_shutdown = (
                    replied is not None
                    and replied[0] == sender
                    and replied[1] == "shutdown_request"
                    and replied[2] == sender_generation
                )
                if not own_shutdown:
                    self.ledger._guard(tx, now, sender, sender_generation, f"message {kind}")
            return self._insert_message(tx, now, sender=sender, recipient=recipient, kind=kind,
                                        body=body, reply_to=reply_to, generation=generation,
                                        sender_generation=sender_generation)  # fmt: skip

        return self.ledger._write(run)

    def _insert_message(
        self, tx: Tx, now: int, *, sender: str, recipient: str, kind: str, body: str,
        reply_to: int | None, generation: int | None, sender_generation: int | None,
    ) -> Message:  # fmt: skip
        row = tx.one(
            "INSERT INTO message (sender, recipient, kind, body, reply_to, created_at, "
            "generation, sender_generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING message_id",
            (sender, recipient, kind, body, reply_to, now, generation, sender_generation),
        )
        assert row is not None
        node = tx.one("SELECT name FROM agent_node WHERE name = ?", (recipient,))
        self.ledger._event(tx, now, node=None if node is None else recipient,
                           kind="message.sent", generation=generation, actor=sender,
                           message_id=int(row[0]), to=recipient, message_kind=kind,
                           reply_to=reply_to, sender_generation=sender_generation)  # fmt: skip
        return Message(int(row[0]), sender, recipient, kind, body, reply_to, _at(now), None,
                       generation, sender_generation)  # fmt: skip

    def take_messages(
        self, recipient: str, *, delivered_to: str, generation: int | None = None,
        fenced: bool = False,
    ) -> list[Message]:  # fmt: skip
        """Every undelivered message for ``recipient``, marked delivered in the same step.

        With ``generation`` (a body taking its messages): the messages addressed to that
        generation, and, unless the body is ``fenced``, those addressed to the identity at
        large. A message for another generation is never handed to this body.
        """
        validate_name(recipient, "to")

        def run(tx: Tx, now: int) -> list[Message]:
            args: tuple[int, ...] = ()
            if generation is None:
                scope = ""
            elif fenced:
                scope, args = " AND generation = ?", (generation,)
            else:
                scope, args = " AND (generation IS NULL OR generation = ?)", (generation,)
            rows = tx.all(
                "UPDATE message SET delivered_at = ?, delivered_to = ? "
                f"WHERE recipient = ? AND delivered_at IS NULL{scope} "
                f"RETURNING {_MESSAGE_COLUMNS}",
                (now, delivered_to, recipient, *args),
            )
            return sorted((_message(r) for r in rows), key=lambda m: m.message_id)

        return self.ledger._write(run)

    def expire_messages(self, recipient: str, *, reason: str, generation: int | None = None) -> int:
        """Mark undelivered messages for ``recipient`` as expired (never delivered): those
        addressed to ``generation`` or an earlier one, or all of them.

        What was addressed to the identity at large (an executor's APPROACH, a task note) is
        work of the identity and waits for its next body."""
        validate_name(recipient, "to")

        def run(tx: Tx, now: int) -> int:
            scope = "" if generation is None else " AND generation <= ?"
            return tx.run(
                "UPDATE message SET delivered_at = ?, delivered_to = ? "
                f"WHERE recipient = ? AND delivered_at IS NULL{scope}",
                (now, f"expired: {reason}", recipient,
                 *(() if generation is None else (generation,))),
            )  # fmt: skip

        return self.ledger._write(run)

    def messages(self, recipient: str) -> list[Message]:
        """Every message for ``recipient``, delivered or not."""
        validate_name(recipient, "to")
        return self.ledger._read(
            lambda tx, _now: [
                _message(r)
                for r in tx.all(
                    f"SELECT {_MESSAGE_COLUMNS} FROM message WHERE recipient = ? "
                    "ORDER BY message_id",
                    (recipient,),
                )
            ]
        )

    def open_exchanges(self, node: str) -> list[Message]:
        """APPROACH or CHECKPOINT messages to ``node`` that have no reply yet."""
        validate_name(node, "node")
        return self.ledger._read(
            lambda tx, _now: [
                _message(r)
                for r in tx.all(
                    "SELECT m.message_id, m.sender, m.recipient, m.kind, m.body, m.reply_to, "
                    "m.created_at, m.delivered_at, m.generation, m.sender_generation "
                    "FROM message m WHERE m.recipient = ? "
                    "AND m.kind IN ('APPROACH', 'CHECKPOINT') AND NOT EXISTS "
                    "(SELECT 1 FROM message r WHERE r.reply_to = m.message_id) "
                    "ORDER BY m.message_id",
                    (node,),
                )
            ]
        )

    # -- notes and documents ------------------------------------------------------------------

    def add_note(
        self, node: str, *, kind: str, text: str, rationale: str | None = None, by: str,
        generation: int | None = None,
    ) -> Note:  # fmt: skip
        """Record a decision (with its rationale) or a note.

        ``generation`` is the writing body's: a stale one is denied with a receipt. Without
        it (an operator's note) the note is filed under the current generation.
        """
        validate_name(node, "node")
        if kind not in ("decision", "note"):
            raise BadInput(f"note kind must be decision or note, not {kind!r}")
        validate_free_text(text, "text")
        if not text.strip():
            raise BadInput("note: text must not be empty", field="text")
        if rationale is not None:
            validate_free_text(rationale, "why")

        def body(tx: Tx, now: int) -> Note:
            if generation is not None:
                self.ledger._guard(tx, now, node, generation, f"note {kind}")
            current = self.ledger._lock_node(tx, node)
            row = tx.one(
                "INSERT INTO note (node, generation, kind, text, rationale, at) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING note_id",
                (node, current.generation, kind, text, rationale, now),
            )
            assert row is not None
            self.ledger._event(tx, now, node=node, kind=f"note.{kind}",
                               generation=current.generation, actor=by,
                               note_id=int(row[0]))  # fmt: skip
            return Note(int(row[0]), node, current.generation, kind, text, rationale, _at(now))

        return self.ledger._write(body)

    def notes(self, node: str) -> list[Note]:
        """The node's decisions and notes, oldest first."""
        validate_name(node, "node")
        return self.ledger._read(
            lambda tx, _now: [
                Note(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5], _at(r[6]))
                for r in tx.all(
                    "SELECT note_id, node, generation, kind, text, rationale, at FROM note "
                    "WHERE node = ? ORDER BY note_id",
                    (node,),
                )
            ]
        )

    def record_document(
        self, node: str, *, kind: str, path: str, content: dict[str, Any], by: str,
        generation: int | None = None,
    ) -> Document:  # fmt: skip
        """Keep the JSON form of a brief or manifest, exactly as a successor will get it.

        ``generation`` is the writing body's; without it (the relief's own emergency brief,
        a report) the document is filed under the current generation. A body whose generation
        is stale is denied with a receipt (:class:`StaleGeneration`); a brief it wrote is
        still kept, as late, untrusted evidence (``late``), never as a relief's hand-over.
        """
        validate_name(node, "node")
        text = json.dumps(content, sort_keys=True, ensure_ascii=False)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()

        def insert(tx: Tx, now: int, stamped: int, late: bool) -> Document:
            row = tx.one(
                "INSERT INTO document (node, generation, kind, path, content, digest, at, late) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING document_id",
                (node, stamped, kind, path, text, digest, now, 1 if late else 0),
            )
            assert row is not None
            self.ledger._event(tx, now, node=node,
                               kind=f"{kind}.{'late' if late else 'written'}",
                               generation=stamped, actor=by, path=path,
                               document_id=int(row[0]), digest=digest)  # fmt: skip
            return Document(int(row[0]), node, stamped, kind, path, content, digest, _at(now),
                            late)  # fmt: skip

        def body(tx: Tx, now: int) -> Document:
            if generation is not None:
                try:
                    self.ledger._guard(tx, now, node, generation, f"{kind} write")
                except _CommitThenRaise:
                    # The denial receipt is written; a brief is kept as late evidence beside
                    # it, committed together, and the writer is still told it was denied.
                    if kind == "brief":
                        insert(tx, now, generation, True)
                    raise
                return insert(tx, now, generation, False)
            current = self.ledger._lock_node(tx, node)
            return insert(tx, now, current.generation, False)

        return self.ledger._write(body)

    _DOCUMENT_COLUMNS = "document_id, node, generation, kind, path, content, digest, at, late"

    @staticmethod
    def _document(row: Row) -> Document:
        return Document(int(row[0]), row[1], int(row[2]), row[3], row[4], json.loads(row[5]),
                        row[6], _at(row[7]), bool(row[8]))  # fmt: skip

    def latest_document(self, node: str, kind: str) -> Document | None:
        """The newest brief or manifest of ``node`` (late briefs are not hand-overs)."""
        validate_name(node, "node")
        row = self.ledger._read(
            lambda tx, _now: tx.one(
                f"SELECT {self._DOCUMENT_COLUMNS} FROM document WHERE node = ? AND kind = ? "
                "AND late = 0 ORDER BY document_id DESC LIMIT 1",
                (node, kind),
            )
        )
        return None if row is None else self._document(row)

    def late_documents(self, node: str, *, since_id: int = 0) -> list[Document]:
        """Briefs written by fenced bodies after their fence: late, untrusted evidence."""
        validate_name(node, "node")
        return [
            self._document(r)
            for r in self.ledger._read(
                lambda tx, _now: tx.all(
                    f"SELECT {self._DOCUMENT_COLUMNS} FROM document WHERE node = ? AND late = 1 "
                    "AND document_id > ? ORDER BY document_id",
                    (node, since_id),
                )
            )
        ]


__all__ = [
    "SESSION_LEASE_TTL",
    "Admission",
    "BodySession",
    "Document",
    "HarnessLedger",
    "Message",
    "Note",
    "holder_for",
]
