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
from collections.abc import Callable
from typing import Any

from onstation.core.errors import BadInput
from onstation.core.names import validate_free_text, validate_name
from onstation.ledger.backends import Tx
from onstation.ledger.base import _at
from onstation.ledger.body_admission import BodyAdmission
from onstation.ledger.body_records import (
    _POST_COMPACTION,
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
from onstation.ledger.correspondence import Document, Message, Note
from onstation.ledger.fastpath import WORKSPACE_BINDINGS, closest_binding, workspace_candidates
from onstation.ledger.generation_bases import GenerationBases
from onstation.ledger.tool_outcomes import ToolOutcomes


class HarnessLedger(BodyAdmission, GenerationBases, ToolOutcomes):
    """The harness-facing records, over one :class:`Ledger` (same database, same clock):
    workspaces, sessions as bodies, tool calls and telemetry here; messages, notes and
    documents from :class:`~onstation.ledger.correspondence.Correspondence`; generation bases
    from :class:`~onstation.ledger.generation_bases.GenerationBases`; admission of sessions as
    bodies from :class:`~onstation.ledger.body_admission.BodyAdmission`."""

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
        sql, candidates = _bindings_of(path)
        return self.ledger._read_single(lambda tx, _now: closest_binding(tx.all(sql, candidates)))

    def ask_node_for_workspace(self, path: str) -> Callable[[], tuple[str, str] | None]:
        """:meth:`node_for_workspace` asked now and read when the function returned is
        called: inside a unit of work on PostgreSQL the lookup then travels to the server
        with the statements asked after it, in their round trip."""
        sql, candidates = _bindings_of(path)
        asked = self.ledger._read(lambda tx, _now: tx.ask(sql, candidates))
        return lambda: closest_binding(asked.all())

    # -- sessions as bodies -------------------------------------------------------------------

    def workspace_of(self, node: str) -> str | None:
        """The workspace most recently bound to ``node`` (None when it has none)."""
        row = self.ledger._read_single(
            lambda tx, _now: tx.one(self._q("workspace_latest_of_node"), (node,))
        )
        return None if row is None else str(row[0])

    def sessions(self, node: str) -> list[BodySession]:
        """Every session seen for a node, oldest first."""
        validate_name(node, "node")
        return self.ledger._read_single(
            lambda tx, _now: [_session(r) for r in tx.all(self._q("sessions_of_node"), (node,))]
        )

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
        row = self.ledger._read_single(
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
        # Sent, not run: nothing waits for its row count (on PostgreSQL it travels with the
        # next statement or the COMMIT instead of a round trip of its own).
        self.ledger._write(
            lambda tx, _now: tx.send(self._q("session_transcript_set"), (path, session_id, path))
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
        row = self.ledger._read_single(
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
        row = self.ledger._read_single(
            lambda tx, _now: tx.one(self._q("telemetry_latest_of_node"), (node,))
        )
        if row is None:
            return None
        keys = ["session_id", "generation", "percent", "used_tokens", "window_tokens", "source",
                "model", "tier"]  # fmt: skip
        data = dict(zip(keys, row[:8], strict=True))
        data["reported_at"] = _at(row[8]).isoformat().replace("+00:00", "Z")
        return data


def _bindings_of(path: str) -> tuple[str, list[str]]:
    """The statement reading the bindings of ``path`` and its ancestors, and its parameters."""
    candidates = workspace_candidates(path)
    return WORKSPACE_BINDINGS.format(marks=", ".join("?" for _ in candidates)), candidates


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
