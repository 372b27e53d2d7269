"""``onstation statusline`` on the fast path: the common line answered without the ledger.

The status line runs after every assistant message. Its common call is an admitted, current
body whose tier is unchanged and whose host declares the window it declared before: then the
full path (``cli/hooks.py`` ``_status_line``) writes only the new reading, and prints one
line. That call is answered here, in one write transaction that re-checks the body (``BEGIN
IMMEDIATE`` on SQLite; on PostgreSQL the node's row locked first, as every guarded write
locks it), with the line the full path prints, byte for byte. Anything else (an unknown,
refused or fenced session, a new tier, a new window, a rejected reading, a cleared usage, a
malformed configuration) goes to the full path, having written nothing. The status line
never renews a lease and never delivers a message on either path.
"""

from __future__ import annotations

import time

from onstation.ledger import fastpath as queries
from onstation.relief.hotpath import NOT_HANDLED, open_store, workspace_ledger

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    from typing import Any


def try_status(payload: dict[str, Any], db: str | None, *, keep: list[Any] | None = None) -> object:
    """The status line to print, or NOT_HANDLED. ``keep``: as for ``hotpath.try_fast``."""
    session_id = payload.get("session_id")
    cwd = payload.get("cwd")
    if not isinstance(session_id, str) or not session_id or not isinstance(cwd, str):
        return NOT_HANDLED
    found = workspace_ledger(cwd, db)
    if found is None:
        return NOT_HANDLED
    config, kind, where = found
    from onstation.core.hull import statusline_declared_window, statusline_usage_cleared

    if statusline_usage_cleared(payload):
        return NOT_HANDLED  # maybe a new context epoch: the full path records it
    declared = statusline_declared_window(payload)
    store = open_store(kind, where)
    if store is None:
        return NOT_HANDLED
    answered: object = NOT_HANDLED
    try:
        answered = _line(store, payload, session_id, cwd, config, declared)
        if answered is not NOT_HANDLED:
            store.settle()
    except Exception:
        store.failed()
        answered = NOT_HANDLED  # the full path decides, and reports what went wrong
    finally:
        # Kept open even when the full path is to answer (as ``hotpath.try_fast`` keeps it).
        store.keep(keep)
    return answered


def _line(
    store: Any,
    payload: dict[str, Any],
    session_id: str,
    cwd: str,
    config: dict[str, Any],
    declared: int | None,
) -> object:
    from onstation.core.hull import fill_from_statusline, tier_value, workspace_policy

    try:
        row, bound = store.gather_status(session_id, cwd)
        now = time.time_ns() // 1000
        node = bound or config.get("node")
        if (
            row is None
            or row[0] != node  # another identity's workspace: refused there
            or row[2] != "ADMITTED"
            or row[1] != row[3]  # fenced
            or row[4] != "LIVE"
            or row[5] <= now
            or (declared and declared != row[6])  # a new window: remembered there
        ):
            store.rollback()
            return NOT_HANDLED
        generation, window = row[1], row[6]
        reading = fill_from_statusline(payload)
        if reading is not None and declared is None and window:
            reading = fill_from_statusline(payload, declared_window=window)
        if reading is None:
            store.rollback()
            return f"⚓ {node} gen {generation} body · context unknown"
        from onstation.core.compaction import reject_reason

        policy = workspace_policy(config.get("tiers"))
        tier = tier_value(reading.percent, policy)
        stored = tier == row[7] and row[8] == row[9] and row[11] == generation
        if reject_reason(reading) is not None or not stored:
            store.rollback()
            return NOT_HANDLED  # a rejected reading, a new tier: recorded (once) there
        store.commit([(
            queries.UPDATE_TELEMETRY,
            (reading.percent, reading.used_tokens, reading.window_tokens, reading.source,
             reading.model, now, session_id),
        )])  # fmt: skip
    except BaseException:
        store.abort()
        raise
    return _format(node, generation, str(tier), reading, policy, row[10])


def _format(
    node: str, generation: int, tier: str, reading: Any, policy: Any, workspace: str | None
) -> str:
    """The full path's line for an admitted body (``cli/hooks.py`` ``_status_line``)."""
    window = (
        f"{reading.window_tokens // 1000}k"
        if reading.window_tokens < 1_000_000
        else (f"{reading.window_tokens / 1_000_000:g}M")
    )
    line = (
        f"⚓ {node} gen {generation} body · {tier.capitalize()} {reading.percent:.1f}% of {window}"
    )
    from onstation.core.compaction import compaction_warning
    from onstation.harness.compaction import claude_point

    point = claude_point(reading.window_tokens, project=workspace)
    warning = compaction_warning(policy, point)
    if warning is not None:
        line += f"\n⚠ onstation: {warning}"
    return line


__all__ = ["try_status"]
