"""``onstation hook HARNESS EVENT`` and ``onstation statusline``: the hot-path entry points.

A hook never breaks the agent: malformed input, an unknown event, an unreachable ledger or
any other failure ends with exit 0, no decision on stdout, and a one-line note on stderr
(Claude Code shows it as a hook notice and carries on). Each ledger write is its own
transaction, so a failure records nothing half-done.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False  # typing costs import time on the hook hot path
if TYPE_CHECKING:
    from typing import Any

USAGE_HOOK = "usage: onstation hook claude-code|codex EVENT [--db URL]  (JSON payload on stdin)"
USAGE_STATUS = "usage: onstation statusline [--wrap COMMAND] [--db URL]  (JSON on stdin)"
MAX_PAYLOAD = 16 * 1024 * 1024


def _note(text: str) -> None:
    sys.stderr.write("onstation: " + text.replace("\n", " ")[:500] + "\n")


def _split_db(args: list[str]) -> tuple[list[str], str | None]:
    rest: list[str] = []
    db: str | None = None
    it = iter(args)
    for arg in it:
        if arg == "--db":
            db = next(it, None)
        elif arg.startswith("--db="):
            db = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return rest, db


def _read_payload() -> dict[str, Any] | None:
    raw = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
    if len(raw) > MAX_PAYLOAD:
        _note("hook payload larger than 16 MiB; ignored")
        return None
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        _note(f"hook payload is not JSON ({exc.__class__.__name__}); nothing recorded")
        return None
    if not isinstance(payload, dict):
        _note("hook payload is not a JSON object; nothing recorded")
        return None
    return payload


def _open(payload: dict[str, Any], db: str | None) -> tuple[Any, Any]:
    from onstation.harness.config import load_config
    from onstation.ledger import Ledger

    given = payload.get("cwd")
    cwd = given if isinstance(given, str) and os.path.isdir(given) else os.getcwd()
    config = load_config(cwd)
    url = db or config.db or os.environ.get("ONSTATION_DB") or None
    return Ledger.open(url), config


def hook_main(args: list[str]) -> int:
    """Run one hook call; always fail open."""
    args, db = _split_db(args)
    if len(args) != 2 or args[0] not in ("claude-code", "codex"):
        _note(USAGE_HOOK)
        return 1  # non-blocking in every harness: a broken install must not block the agent
    harness, event = args
    payload = _read_payload()
    if payload is None:
        return 0
    try:
        from onstation.relief.hotpath import NOT_HANDLED, try_fast

        if try_fast(harness, event, payload, db) is not NOT_HANDLED:
            return 0
    except Exception as exc:
        _note(f"hook fast path skipped: {getattr(exc, 'message', None) or exc}")
    try:
        from onstation.relief.hooks import HookRunner

        ledger, config = _open(payload, db)
        try:
            answer = HookRunner(ledger, harness, config).handle(event, payload)
        finally:
            ledger.close()
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        _note(f"hook {event} failed open: {message}")
        return 0
    for note in answer.notes:
        _note(note)
    if answer.output is not None:
        sys.stdout.write(json.dumps(answer.output) + "\n")
    return answer.exit_code


def _wrapped(command: str, raw: bytes) -> str:
    import subprocess

    try:
        done = subprocess.run(  # noqa: S602 - the user's own status line command, as configured
            command, shell=True, input=raw, capture_output=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _note(f"wrapped status line failed: {exc}")
        return ""
    return done.stdout.decode("utf-8", "replace").rstrip("\n")


def statusline_main(args: list[str]) -> int:
    """Record the status line's telemetry and print one line: tier, percent, generation."""
    args, db = _split_db(args)
    wrap: str | None = None
    if args[:1] == ["--wrap"] and len(args) == 2:
        wrap = args[1]
    elif args:
        _note(USAGE_STATUS)
        return 1
    raw = sys.stdin.buffer.read(MAX_PAYLOAD)
    before = _wrapped(wrap, raw) if wrap else ""
    line = "onstation: no telemetry"
    try:
        payload = json.loads(raw.decode("utf-8"))
        if isinstance(payload, dict):
            line = _status_line(payload, db)
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        _note(f"statusline failed open: {message}")
    sys.stdout.write((before + "\n" if before else "") + line + "\n")
    return 0


def _status_line(payload: dict[str, Any], db: str | None) -> str:
    from onstation.core.hull import fill_from_statusline
    from onstation.relief.hooks import HookRunner

    reading = fill_from_statusline(payload)
    session_id = payload.get("session_id")
    ledger, config = _open(payload, db)
    try:
        runner = HookRunner(ledger, "claude-code", config)
        cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else os.getcwd()
        found = runner.records.node_for_workspace(str(cwd))
        node = found[0] if found else config.node
        if node is None or not isinstance(session_id, str) or not session_id:
            pct = "?" if reading is None else f"{reading.percent:.0f}%"
            return f"onstation: unmanaged workspace · context {pct}"
        admission = runner.records.admit_session(
            session_id, harness="claude-code", node=node, workspace=found[1] if found else None
        )
        session = admission.session
        state = "body" if admission.admitted else ("FENCED" if admission.fenced else "NOT ADMITTED")
        if reading is None:
            return f"⚓ {node} gen {session.generation} {state} · context unknown"
        tier = runner.observe_fill(session, reading) if admission.admitted else "-"
        window = (
            f"{reading.window_tokens // 1000}k"
            if reading.window_tokens < 1_000_000
            else (f"{reading.window_tokens / 1_000_000:g}M")
        )
        return (
            f"⚓ {node} gen {session.generation} {state} · {tier.capitalize()} "
            f"{reading.percent:.1f}% of {window}"
        )
    finally:
        ledger.close()
