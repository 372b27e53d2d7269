"""The records of harness sessions as bodies: a session, the answer to its admission, and
the small rules about them (the lease holder of a session, when two process witnesses name one
process). Part of :mod:`onstation.ledger.bodies`, which re-exports every public name here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from onstation.core.errors import BadInput
from onstation.core.names import validate_free_text
from onstation.core.types import Record
from onstation.ledger.backends import Row
from onstation.ledger.base import _at, from_us

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
    #: The judgement acquired the session's lease itself, the first of its generation: the
    #: lease has its whole term ahead, and no relief's birth can be waiting on it.
    lease_acquired: bool = False


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


__all__ = [
    "CONTINUING_SOURCES",
    "INTERACTIVE_HOLDER",
    "SESSION_LEASE_TTL",
    "Admission",
    "BodySession",
    "holder_for",
    "same_process",
]
